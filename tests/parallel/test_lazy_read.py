"""Distributed runs read the input file hyperslab by hyperslab (``read_input(lazy=True)``):
each device's shard of every medium field and of p0 is read and checked on its own, no read
covers the whole grid, and the results equal an eagerly read run. In a subprocess with 8
virtual CPU devices (the device count is fixed when JAX starts)."""

from __future__ import annotations

import json
import os

import h5py
import numpy as np
from devices import run_python
from paths import REFERENCE

CASE = REFERENCE / "3d_het_absorb15_nonlin_hetbona_p0_index" / "input.h5"

SCRIPT = r"""
import json, sys
import numpy as np
from sonotile import parallel
from sonotile.kwave import layout, reader

reads = []
orig = layout.XyzView.__getitem__
def counting(self, index):
    out = orig(self, index)
    reads.append((self.dset.name, int(out.size)))
    return out
layout.XyzView.__getitem__ = counting

path, dec, mesh = sys.argv[1], sys.argv[2], tuple(int(v) for v in sys.argv[3].split("x"))
lazy, _ = reader.read_input(path, record=("p", "p_final"), lazy=True)
assert not reads, reads  # nothing grid-sized read yet
raw_l, fin_l = parallel.run_decomposed(lazy, dec, mesh)
eager, _ = reader.read_input(path, record=("p", "p_final"))
raw_e, fin_e = parallel.run_decomposed(eager, dec, mesh)
err = max(float(np.abs(raw_l["p"] - raw_e["p"]).max() / np.abs(raw_e["p"]).max()),
          float(np.abs(fin_l["p_final"] - fin_e["p_final"]).max()))
print(json.dumps({"reads": reads, "err": err}))
"""


def run(path, dec, mesh):
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    return run_python(["-c", SCRIPT, str(path), dec, mesh], env, timeout=600)


def test_each_shard_read_on_its_own_and_results_equal(tmp_path):
    r = run(CASE, "pencil", "2x4")
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    n = 48 * 40 * 36
    sizes = {}
    for name, size in out["reads"]:
        assert size <= n // 8, (name, size)  # never more than one device's shard
        sizes[name] = sizes.get(name, 0) + size
    for name in ("/c0", "/rho0", "/BonA", "/p0_source_input"):
        # every shard read, once per constant made from it (c0 -> c0^2, tau, eta)
        assert sizes.get(name, 0) > 0 and sizes[name] % n == 0, (name, sizes.get(name))
    assert out["err"] == 0.0


def test_bad_value_in_one_shard_is_reported_before_stepping(tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_bytes(CASE.read_bytes())
    with h5py.File(bad, "r+") as f:
        c0 = f["c0"][()]
        c0[30, 35, 45] = np.nan  # lies in one shard only
        f["c0"][...] = c0
    r = run(bad, "lfb", "2x2x2")
    assert r.returncode != 0
    assert "dataset 'c0': contains NaN or Inf" in r.stderr
