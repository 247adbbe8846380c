#!/usr/bin/env bash
# Build the documentation site into site/ (open site/index.html): the guides (docs/*.md), the
# gallery with its figures, and the API reference generated from the docstrings (mkdocs.yml).
# Installs the `docs` extra (MkDocs, Material, mkdocstrings) into .venv/ the first time, at the
# versions of requirements/lock.txt; arguments go to `mkdocs build` (e.g. -d /tmp/site).
# `.venv/bin/mkdocs serve` serves it with live reload instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import mkdocs, material, mkdocstrings_handlers.python" 2>/dev/null; then
  PIP=(.venv/bin/python -m pip install -q)
  if .venv/bin/python -c "import sys; sys.exit(sys.version_info < (3, 11))"; then
    PIP+=(-c requirements/lock.txt)
  fi
  "${PIP[@]}" -e ".[docs]"
fi
# --strict without -q: -q hides warnings from strict mode's count, so a warning would pass.
NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict "$@"
echo "docs: built; open $(pwd)/site/index.html"
