#!/usr/bin/env bash
# The test suite: installs into .venv/ if needed, lints, then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/kwave_python_env.sh  # k-wave-python venv for tests/test_kwave_python.py (kwave drop-in)
.venv/bin/ruff check src tests
.venv/bin/python -m pytest -q "$@"
