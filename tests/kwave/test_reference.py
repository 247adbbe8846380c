"""Every k-Wave reference case in ``shared/reference`` through ``sonotile-kwave``, compared with
k-Wave's own output using the tolerances of ``shared/reference/README.md`` (applied by
``shared/tools/kwave_compare.py``). Fails, not skips, when the reference folder is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from paths import REFERENCE

from sonotile.kwave.cli import main as kwave_main

SHARED = REFERENCE.parent
REFERENCE = SHARED / "reference"
COMPARE = SHARED / "tools" / "kwave_compare.py"
CASES = sorted(p.name for p in REFERENCE.glob("*/")) if REFERENCE.is_dir() else []


def test_reference_folder_present():
    assert REFERENCE.is_dir(), f"k-Wave reference cases missing: {REFERENCE}"
    assert COMPARE.is_file(), f"comparison tool missing: {COMPARE}"
    assert len(CASES) >= 10, f"expected >= 10 reference cases, found {CASES}"


@pytest.mark.parametrize("case", CASES)
def test_reference_case(case, tmp_path):
    folder = REFERENCE / case
    meta = json.loads((folder / "case.json").read_text())
    out = tmp_path / "out.h5"
    status = kwave_main(["-i", str(folder / "input.h5"), "-o", str(out), *meta["flags"]])
    assert status == 0
    cmp = subprocess.run(
        [sys.executable, str(COMPARE), str(folder / "output.h5"), str(out),
         "--case", str(folder / "case.json")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert cmp.returncode == 0, cmp.stdout + cmp.stderr
    assert "FAIL" not in cmp.stdout
