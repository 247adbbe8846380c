#!/usr/bin/env bash
# Install sonotile and its test tools into .venv/ at the repository root (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev]"
# FFTW custom calls for the CPU FFT (compiled once into ~/.cache/sonotile; without a compiler
# or libfftw3f sonotile uses XLA's FFT). pyFFTW's wheel carries libfftw3f where the system has none.
if ! .venv/bin/python -c "import sys, sonotile.fft.fftw as f; sys.exit(f.find_library() is None)"; then
  .venv/bin/python -m pip install -q pyfftw || echo "setup.sh: no pyfftw wheel; XLA's FFT will be used" >&2
fi
.venv/bin/python -m sonotile.fft.fftw || true
