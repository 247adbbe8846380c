#!/usr/bin/env bash
# The test suite: installs into .venv/ if needed, lints, then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests
.venv/bin/python -m pytest -q "$@"
