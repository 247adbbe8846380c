#!/usr/bin/env bash
# Install sonotile and its test tools into .venv/ at the repository root (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,planning]"  # planning: NIfTI and DICOM readers
# FFTW custom calls for the CPU FFT (compiled once into ~/.cache/sonotile; without a compiler
# or libfftw3f sonotile uses XLA's FFT). pyFFTW's wheel carries libfftw3f where the system has none.
if ! .venv/bin/python -c "import sys, sonotile.fft.fftw as f; sys.exit(f.find_library() is None)"; then
  .venv/bin/python -m pip install -q pyfftw || echo "setup.sh: no pyfftw wheel; XLA's FFT will be used" >&2
fi
.venv/bin/python -m sonotile.fft.fftw || true
# MPI as the transport between processes (mpirun; docs/scaling.md): Open MPI from the system
# (installed here from Debian's packages when run as root), mpi4py and mpi4jax from PyPI. Without
# them multi-process runs use XLA's gloo collectives. SONOTILE_MPI=0 skips this.
if [ "${SONOTILE_MPI:-1}" = 0 ]; then
  :
elif ! command -v mpicc > /dev/null && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q openmpi-bin libopenmpi-dev \
    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openmpi-bin \
    libopenmpi-dev; }; } > /dev/null || echo "setup.sh: could not install Open MPI; multi-process runs will use gloo" >&2
fi
if [ "${SONOTILE_MPI:-1}" != 0 ] && command -v mpicc > /dev/null; then
  .venv/bin/python -m pip install -q -e ".[mpi]" \
    || echo "setup.sh: could not install mpi4jax; multi-process runs will use gloo" >&2
fi
