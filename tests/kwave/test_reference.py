"""Every k-Wave reference case in ``tests/data/kwave-reference`` through ``sonotile-kwave``,
compared with k-Wave's own output using the tolerances of that folder's README (applied by
:mod:`sonotile.kwave.compare`). Fails, not skips, when the reference folder is missing."""

from __future__ import annotations

import json

import pytest
from paths import REFERENCE

from sonotile.kwave.cli import main as kwave_main
from sonotile.kwave.compare import compare

CASES = sorted(p.name for p in REFERENCE.glob("*/")) if REFERENCE.is_dir() else []


def test_reference_folder_present():
    assert REFERENCE.is_dir(), f"k-Wave reference cases missing: {REFERENCE}"
    assert len(CASES) >= 10, f"expected >= 10 reference cases, found {CASES}"


@pytest.mark.parametrize("case", CASES)
def test_reference_case(case, tmp_path):
    folder = REFERENCE / case
    meta = json.loads((folder / "case.json").read_text())
    out = tmp_path / "out.h5"
    status = kwave_main(["-i", str(folder / "input.h5"), "-o", str(out), *meta["flags"]])
    assert status == 0
    rows = compare(folder / "output.h5", out, meta)
    assert len(rows) >= 5
    assert all(r.ok for r in rows), "\n".join(r.line() for r in rows)


def test_compare_catches_a_wrong_dataset(tmp_path):
    """The rule is not vacuous: a reference output with p off by 1e-3 of its peak fails (and only
    p), a missing dataset fails, and the reference against itself passes."""
    import h5py
    import numpy as np

    folder = REFERENCE / "2d_homog_lossless_p0_index"
    meta = json.loads((folder / "case.json").read_text())
    assert all(r.ok and r.error == 0 for r in compare(folder / "output.h5", folder / "output.h5"))
    bad = tmp_path / "bad.h5"
    bad.write_bytes((folder / "output.h5").read_bytes())
    with h5py.File(bad, "r+") as f:
        p = f["p"][()]
        f["p"][0, 5, 3] = p[0, 5, 3] + 1e-3 * np.abs(p).max()
        del f["p_min"]
    rows = {r.name: r for r in compare(folder / "output.h5", bad, meta)}
    assert not rows["p"].ok and 9e-4 < rows["p"].error < 1.1e-3
    assert not rows["p_min"].ok and rows["p_min"].problem == "missing"
    assert sum(not r.ok for r in rows.values()) == 2


def test_validate_runs_a_case_folder(tmp_path, capsys):
    """``sonotile validate FOLDER``: one case within tolerance prints ok and exits 0; the default
    folder is the repository's own reference cases."""
    from sonotile.commands import validate

    assert validate.DEFAULT == REFERENCE
    case = tmp_path / "cases" / "2d_homog_lossless_p0_index"
    case.mkdir(parents=True)
    for name in ("input.h5", "output.h5", "case.json"):
        (case / name).write_bytes((REFERENCE / case.name / name).read_bytes())
    assert validate.main([str(tmp_path / "cases")]) == 0
    out = capsys.readouterr().out
    assert "ok   2d_homog_lossless_p0_index" in out and "1/1 cases within tolerance" in out
    assert validate.main([str(tmp_path / "empty")]) == 1
    assert "no cases" in capsys.readouterr().err
