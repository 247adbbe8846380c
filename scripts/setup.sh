#!/usr/bin/env bash
# Install sonotile and its test tools into .venv/ at the repository root (idempotent, no root).
#
# Needs python3 (>= 3.10) and a C/C++ compiler. With Python >= 3.11 every package gets the exact
# version of requirements/lock.txt (the tested set-up; scripts/lock.sh writes it); with 3.10 pip
# picks versions within pyproject.toml's ranges.
# Env: PYTHON (default python3); SONOTILE_MPI: 1 (default) MPI from the system where it has one
# (mpicc on PATH), else Open MPI's wheel from PyPI; wheel: Open MPI's wheel even so; 0: no MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q)
if .venv/bin/python -c "import sys; sys.exit(sys.version_info < (3, 11))"; then
  PIP+=(-c requirements/lock.txt)
else
  echo "setup.sh: Python < 3.11: versions from pyproject.toml's ranges, not the tested lock" >&2
fi
.venv/bin/python -m pip install -q --upgrade pip
"${PIP[@]}" -e ".[dev,planning]"  # planning: NIfTI and DICOM readers
# sonotile's bytecode, written once here: a process that may not write it (a read-only tree,
# or PYTHONDONTWRITEBYTECODE=1 as in many containers) would otherwise compile some 70 modules
# at every start (0.16 s of each run's start on a 2-core Zen 4).
.venv/bin/python -m compileall -q src >/dev/null
# FFTW custom calls for the CPU FFT (compiled once into ~/.cache/sonotile; without a compiler
# or libfftw3f sonotile uses XLA's FFT). pyFFTW's wheel carries libfftw3f where the system has none.
if ! .venv/bin/python -c "import sys, sonotile.fft.fftw as f; sys.exit(f.find_library() is None)"; then
  "${PIP[@]}" pyfftw || echo "setup.sh: no pyfftw wheel; XLA's FFT will be used" >&2
fi
.venv/bin/python -m sonotile.fft.fftw || true
# MPI as the transport between processes (mpirun; docs/scaling.md): mpi4jax built against the
# system's MPI, or against Open MPI's wheel (mpirun, mpicc and libmpi in .venv/); mpi4py's wheel
# loads the same libmpi at run time. Without them multi-process runs use XLA's gloo collectives.
MPI=${SONOTILE_MPI:-1}
if [ "$MPI" != 0 ]; then
  MPICC=$(command -v mpicc || true)
  if [ "$MPI" = wheel ] || [ -z "$MPICC" ]; then
    MPICC=
    "${PIP[@]}" -e ".[mpi-wheel]" && MPICC=$PWD/.venv/bin/mpicc \
      || echo "setup.sh: could not install Open MPI's wheel; multi-process runs will use gloo" >&2
  fi
  if [ -n "$MPICC" ]; then
    MPI4JAX_BUILD_MPICC=$MPICC "${PIP[@]}" -e ".[mpi]" \
      || echo "setup.sh: could not install mpi4jax; multi-process runs will use gloo" >&2
  fi
fi
