#!/usr/bin/env bash
# Write requirements/lock.txt: the exact versions of the tested set-up (scripts/setup.sh installs
# with it as pip's constraints), resolved from pyproject.toml's ranges for Python >= 3.11 on every
# platform. Versions already in the lock are kept; `bash scripts/lock.sh --upgrade` moves them
# to the newest in the ranges (then run the test suite before committing the new lock).
# Needs uv (pip install uv).
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-uv}
"$UV" pip compile pyproject.toml --universal --python-version 3.11 \
  --extra dev --extra planning --extra fftw --extra mpi --extra mpi-wheel --extra docs \
  --custom-compile-command "bash scripts/lock.sh" -o requirements/lock.txt "$@"
