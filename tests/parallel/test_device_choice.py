"""``simulate(device=...)`` runs on that device and ``devices=`` spreads a decomposition over the
given ones (two virtual CPU devices in a subprocess; the run's state is inspected where it is)."""

from __future__ import annotations

import json
import os

from devices import run_python

SCRIPT = r"""
import json
import jax
import numpy as np
import sonotile as st
from sonotile.solver import runner

seen, advance = [], runner.advance

def spy(engine, rs, *a, **k):  # where the run's state lives after the steps
    out = advance(engine, rs, *a, **k)
    leaves = jax.tree_util.tree_leaves(out.carry)
    seen.append(sorted({str(d) for leaf in leaves for d in leaf.devices()}))
    return out

runner.advance = spy
shape = (64, 56)
x, y = np.meshgrid(*(np.arange(n) - n // 2 for n in shape), indexing="ij")
mask = np.zeros(shape, bool)
mask[32, 24:32] = True
args = (st.KWaveGrid(shape, 1e-4), st.KWaveMedium(1500.0),
        st.KSource(p0=1e5 * (x**2 + y**2 <= 9)), st.KSensor(mask=mask))
d0, d1 = jax.devices()
one = st.simulate(*args, device=d1, quiet=True)
both = st.simulate(*args, devices=[d0, d1], decomposition="pencil", quiet=True)
default = st.simulate(*args, quiet=True)
peak = float(np.abs(default["p"]).max())
print(json.dumps({"seen": seen, "one": float(np.abs(one["p"] - default["p"]).max()) / peak,
                  "both": float(np.abs(both["p"] - default["p"]).max()) / peak}))
"""


def test_device_and_devices_choose_where_the_run_happens():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    r = run_python(["-c", SCRIPT], env, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["seen"] == [["cpu:1"], ["cpu:0", "cpu:1"], ["cpu:0"]]
    assert out["one"] == 0.0  # same program, another device: bit-identical
    assert out["both"] < 1e-5  # pencil decomposition: equal to round-off
