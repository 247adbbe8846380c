#!/usr/bin/env bash
# The test suite: installs into .venv/ if needed, lints, then runs pytest (arguments go to pytest).
#
# Besides .venv/ it sets up two optional things, each of which a user may skip:
#   SONOTILE_TEST_MPI=0            do not install mpi4jax (and Open MPI's wheel where the system
#                                  has no MPI: scripts/setup.sh's MPI transport); the mpirun
#                                  tests are then skipped when MPI is missing
#   SONOTILE_TEST_KWAVE_PYTHON=0   do not build .venv-kwave-python/ (k-wave-python from PyPI, ~300 MB);
#                                  tests/kwave/test_kwave_python.py is then skipped
#   SONOTILE_TEST_DOCS=0           do not install the docs extra (MkDocs); the test that builds
#                                  the documentation site is then skipped
# SONOTILE_REQUIRE_FFTW=1 (set by .ci/run) turns the FFTW tests' skips into failures and installs
# pyFFTW too, so that both FFTW library sources (system libfftw3f and pyFFTW's copy) are tested.
set -euo pipefail
cd "$(dirname "$0")/.."
SONOTILE_MPI="${SONOTILE_TEST_MPI:-${SONOTILE_MPI:-1}}" bash scripts/setup.sh
if [ "${SONOTILE_TEST_KWAVE_PYTHON:-1}" != 0 ]; then
    bash scripts/kwave_python_env.sh  # k-wave-python venv for tests/kwave/test_kwave_python.py
fi
PIP=(.venv/bin/python -m pip install -q -c requirements/lock.txt)  # the tested versions
.venv/bin/python -c "import sys; sys.exit(sys.version_info < (3, 11))" || PIP=("${PIP[@]:0:5}")
if [ "${SONOTILE_TEST_DOCS:-1}" != 0 ] && ! .venv/bin/python -c "import mkdocs" 2>/dev/null; then
    "${PIP[@]}" -e ".[docs]"  # tests/unit/test_docs.py builds the site
fi
if [ "${SONOTILE_REQUIRE_FFTW:-0}" = 1 ]; then
    "${PIP[@]}" pyfftw  # the second FFTW source, beside the system's
fi

export PATH="$PWD/.venv/bin:$PATH"  # as in an activated .venv: Open MPI's wheel's mpirun
.venv/bin/ruff check src tests benchmarks
.venv/bin/ruff format --check src tests benchmarks
.venv/bin/mypy  # every function typed (pyproject.toml [tool.mypy]); ruff's ANN rules too
.venv/bin/python -m pytest -q "$@"
