"""Shared test set-up: the helper modules in tests/helpers are importable by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))
