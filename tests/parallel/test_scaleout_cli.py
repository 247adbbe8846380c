"""Decompositions through the k-Wave command line: ``--decomposition``, ``--mesh``,
``--cpu_devices``, ``auto``, and a checkpoint written on 8 devices resumed on 1 (and back).

Each run is a ``sonotile-kwave`` subprocess (the virtual device count is fixed when JAX starts).
Reference: k-Wave's own output for the 3-D heterogeneous absorbing nonlinear reference case,
compared with :mod:`sonotile.kwave.compare` (pencil must meet the case's tolerance; LFB
its documented sensor error)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from paths import REFERENCE, REPO

ROOT = REPO
CASE = REFERENCE / "3d_het_absorb15_nonlin_hetbona_p0_index"
KWAVE = [sys.executable, "-m", "sonotile.kwave.cli"]


def kwave(*args, check=True):
    r = subprocess.run([*KWAVE, *map(str, args)], capture_output=True, text=True, timeout=600)
    if check:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r


def flags():
    return json.loads((CASE / "case.json").read_text())["flags"]


def rel_err(a: Path, b: Path) -> dict:
    out = {}
    with h5py.File(a) as fa, h5py.File(b) as fb:
        for name in ("p", "p_final"):
            x, y = fa[name][()].astype(np.float64), fb[name][()].astype(np.float64)
            out[name] = float(np.abs(x - y).max() / np.abs(y).max())
    return out


@pytest.mark.parametrize("decomposition, mesh", [("pencil", "2x4"), ("pencil", "8")])
def test_pencil_cli_matches_kwave_reference(tmp_path, decomposition, mesh):
    out = tmp_path / "out.h5"
    kwave("-i", CASE / "input.h5", "-o", out, *flags(), "--cpu_devices", 8,
          "--decomposition", decomposition, "--mesh", mesh)  # fmt: skip
    cmd = [sys.executable, "-m", "sonotile.kwave.compare", str(CASE / "output.h5"), str(out),
           "--case", str(CASE / "case.json")]  # fmt: skip
    cmp = subprocess.run(cmd, capture_output=True, text=True)
    assert cmp.returncode == 0, cmp.stdout


def test_lfb_cli_within_documented_error(tmp_path):
    """LFB on 2x2x2, overlap 16: sensor time series within 1e-3 of k-Wave's."""
    out = tmp_path / "out.h5"
    kwave("-i", CASE / "input.h5", "-o", out, *flags(), "--cpu_devices", 8,
          "--decomposition", "lfb", "--mesh", "2x2x2", "--overlap", 16)  # fmt: skip
    assert rel_err(out, CASE / "output.h5")["p"] < 1e-3


def test_auto_says_what_it_picked(tmp_path):
    r = kwave("-i", CASE / "input.h5", "-o", tmp_path / "o.h5", *flags(), "--cpu_devices", 4,
              "--decomposition", "auto", "--benchmark", 5)  # fmt: skip
    assert "sonotile-kwave: running" in r.stderr and "mesh of 4 cpu devices" in r.stderr


def test_bad_mesh_fails_before_stepping(tmp_path):
    out = tmp_path / "o.h5"
    # any grid runs on any mesh now (5x1 cuts 48 points into 10,10,10,9,9): a bad mesh is one
    # that needs more devices than there are
    r = kwave("-i", CASE / "input.h5", "-o", out, "--cpu_devices", 8,
              "--decomposition", "lfb", "--mesh", "3x3", check=False)  # fmt: skip
    assert r.returncode == 1 and "needs 9 devices" in r.stderr and "error" in r.stderr
    assert not out.exists()
    r = kwave("-i", CASE / "input.h5", "-o", out, "--mesh", "2xq", check=False)
    assert r.returncode == 1 and "2xq" in r.stderr


@pytest.mark.parametrize("first, second", [("pencil", "single"), ("single", "lfb")])
def test_checkpoint_resumes_on_another_device_count(tmp_path, first, second):
    """A checkpoint leg on one decomposition, the rest on another: equal to an uninterrupted
    single-device run (pencil: round-off; with an LFB leg: its documented error)."""
    base = ["-i", CASE / "input.h5", *flags()]
    ref = tmp_path / "ref.h5"
    kwave(*base, "-o", ref)
    out, ck = tmp_path / "out.h5", tmp_path / "ck.h5"

    def leg(dec):
        extra = (
            []
            if dec == "single"
            else [
                "--cpu_devices",
                8,
                "--decomposition",
                dec,
                "--mesh",
                "2x4" if dec == "pencil" else "2x2x2",
            ]
        )
        return kwave(*base, "-o", out, "--checkpoint_file", ck, "--checkpoint_timesteps", 90,
                     *extra)  # fmt: skip

    leg(first)
    assert ck.exists()
    with h5py.File(out) as f:
        assert int(f["t_index"][()].reshape(-1)[0]) == 90
    for _ in range(2):  # Nt = 200: two more legs of at most 90 steps
        leg(second)
    assert not ck.exists()
    err = rel_err(out, ref)
    tol = 1e-5 if "lfb" not in (first, second) else 1e-3
    assert err["p"] < tol, err
