"""``sonotile validate`` on one k-Wave reference case, and on a copy whose k-Wave output was
altered by 1 % (which it must report as a failure)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import h5py
from paths import REFERENCE

CASE = "2d_homog_lossless_p0_index"  # 96 x 80 points, 220 steps: a few seconds


def validate(folder) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sonotile.commands.cli", "validate", str(folder)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_validate_passes_a_reference_case_and_fails_an_altered_one(tmp_path):
    good = tmp_path / "good"
    shutil.copytree(REFERENCE / CASE, good / CASE)
    r = validate(good)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ok   {CASE}" in r.stdout and "1/1 cases within tolerance" in r.stdout

    bad = tmp_path / "bad"
    shutil.copytree(REFERENCE / CASE, bad / CASE)
    with h5py.File(bad / CASE / "output.h5", "r+") as f:
        f["p"][...] = f["p"][()] * 1.01  # far outside the case's 1e-4 tolerance
    r = validate(bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"FAIL {CASE}" in r.stdout and "0/1 cases within tolerance" in r.stdout
