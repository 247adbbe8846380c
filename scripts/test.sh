#!/usr/bin/env bash
# The test suite: installs into .venv/ if needed, lints, then runs pytest (arguments go to pytest).
#
# Besides .venv/ it sets up two optional things, each of which a user may skip:
#   SONOTILE_TEST_MPI=0            do not apt-get install Open MPI (openmpi-bin) for the mpirun test
#                                  (the test is then skipped when mpirun is missing)
#   SONOTILE_TEST_KWAVE_PYTHON=0   do not build .venv-kwave-python/ (k-wave-python from PyPI, ~300 MB);
#                                  tests/kwave/test_kwave_python.py is then skipped
# SONOTILE_REQUIRE_FFTW=1 (set by .ci/run) turns the FFTW tests' skips into failures and installs
# pyFFTW too, so that both FFTW library sources (system libfftw3f and pyFFTW's copy) are tested.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${SONOTILE_TEST_KWAVE_PYTHON:-1}" != 0 ]; then
    bash scripts/kwave_python_env.sh  # k-wave-python venv for tests/kwave/test_kwave_python.py
fi
if [ "${SONOTILE_REQUIRE_FFTW:-0}" = 1 ]; then
    .venv/bin/python -m pip install -q pyfftw  # the second FFTW source, beside the system's
fi

# Open MPI's mpirun for tests/parallel/test_multiprocess.py (skipped without it); where apt-get exists
if [ "${SONOTILE_TEST_MPI:-1}" != 0 ] && ! command -v mpirun >/dev/null 2>&1 \
    && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq --no-install-recommends openmpi-bin; }; } \
        || echo "test.sh: could not install openmpi-bin; the mpirun test will be skipped" >&2
fi
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy  # every function typed (pyproject.toml [tool.mypy]); ruff's ANN rules too
.venv/bin/python -m pytest -q "$@"
