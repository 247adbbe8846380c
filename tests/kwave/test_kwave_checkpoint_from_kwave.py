"""Resuming a checkpoint written by k-Wave's own binary (tests/data/kwave-checkpoint): the
second leg run by sonotile-kwave gives k-Wave's uninterrupted output, with a warning that such a
checkpoint cannot be verified against the input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import h5py
import numpy as np
from paths import DATA, REFERENCE


def test_resume_kwave_checkpoint(tmp_path):
    case = REFERENCE / "2d_homog_lossless_p0_index"
    flags = json.loads((case / "case.json").read_text())["flags"]
    ckpt, out = tmp_path / "checkpoint.h5", tmp_path / "output.h5"
    shutil.copy(DATA / "kwave-checkpoint" / "checkpoint.h5", ckpt)
    shutil.copy(DATA / "kwave-checkpoint" / "partial_output.h5", out)
    r = subprocess.run(
        [sys.executable, "-m", "sonotile.kwave.cli", "-i", str(case / "input.h5"), "-o", str(out),
         *flags, "--checkpoint_file", str(ckpt)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "CANNOT BE VERIFIED" in r.stderr and "Traceback" not in r.stderr  # said, loudly
    with h5py.File(out) as f, h5py.File(case / "output.h5") as g:
        assert int(f["Nt"][()].reshape(-1)[0]) == 220
        names = [k for k in g if g[k].dtype.kind == "f" and g[k].size > 1]
        assert {"p", "p_max", "p_rms", "ux", "p_final"} <= set(names)
        for k in names:
            a, b = f[k][()].astype(np.float64), g[k][()].astype(np.float64)
            tol = 1e-3 if k.endswith("_final") else 1e-4  # the reference cases' rule
            assert np.abs(a - b).max() / np.abs(b).max() < tol, k
