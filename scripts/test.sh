#!/usr/bin/env bash
# The test suite: installs into .venv/ if needed, lints, then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/kwave_python_env.sh  # k-wave-python venv for tests/test_kwave_python.py (kwave drop-in)

# Open MPI's mpirun for tests/test_multiprocess.py (skipped without it); only where apt-get exists
if ! command -v mpirun >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    { apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq --no-install-recommends openmpi-bin; }; } \
        || echo "test.sh: could not install openmpi-bin; the mpirun test will be skipped" >&2
fi
.venv/bin/ruff check src tests
.venv/bin/mypy  # the lower layers' types (pyproject.toml [tool.mypy])
.venv/bin/python -m pytest -q "$@"
