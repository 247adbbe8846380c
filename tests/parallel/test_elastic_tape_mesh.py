"""The elastic simulator's taped gradient on a device mesh (2 virtual CPU devices, a
subprocess, float64): on a pencil mesh (host tape) and on LFB blocks (disk tape) each shard
stores and reads its own block of every split field, and the gradient with respect to both
speeds, the density and a velocity signal equals the one kept on the device (the same
decomposition) to round-off; the disk tape holds one file per field and shard and stored state.
"""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

SCRIPT = r"""
import json, os
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import sonotile as st

assert len(jax.devices()) == 2, jax.devices()
rng = np.random.default_rng(0)
N, DX, NT = 24, 1e-4, 24
cp = 2500 + 200 * rng.random((N, N))
cs = 1000 + 200 * rng.random((N, N))
cs[:, :6] = 0.0
rho = 1800 + 100 * rng.random((N, N))
medium = st.KWaveElasticMedium(cp, cs, rho)
dt = 0.2 * DX / 2700
t = np.arange(NT) * dt
u_mask = np.zeros((N, N), bool)
u_mask[4:20:5, 14] = True  # points on both blocks
source = st.ElasticSource(ux=1e-3 * np.sin(2 * np.pi * 1.5e6 * t) * np.hanning(NT), u_mask=u_mask)
sensor = st.KSensor(points=np.array([[3, 4], [18, 7], [12, 19]]), record=("p", "u", "s"))
case = (st.KWaveGrid((N, N), DX, dt=dt, nt=NT), medium, source, sensor)
names = ("sound_speed_compression", "sound_speed_shear", "density", "ux")


def grad(**kw):
    sim = st.make_simulator(*case, pml_size=4, dtype="float64", mesh=(2,), overlap=6, **kw)
    def loss(p):
        o = sim(p)
        return jnp.sum(o["p"] ** 2) + 1e12 * jnp.sum(o["uy"] ** 2) + jnp.sum(o["sxy"] ** 2)
    return jax.grad(loss)({k: sim.params[k] for k in names})


out = {}
for dec, where in (("pencil", "host"), ("lfb", "disk")):
    ref = grad(decomposition=dec, chunk=5)
    tape = st.Tape(where)
    got = grad(decomposition=dec, chunk=5, tape=tape)
    out[dec] = {k: float(jnp.max(jnp.abs(got[k] - ref[k])) / jnp.max(jnp.abs(ref[k])))
                for k in names}
    out[dec + "_scale"] = min(float(jnp.max(jnp.abs(ref[k]))) for k in names)
    if where == "disk":
        files = os.listdir(tape.directory)
        out["disk_files"] = len(files)
        out["disk_shards"] = sorted({int(f.split("-")[1]) for f in files})
        tape.close()
        out["disk_removed"] = not os.path.exists(tape.directory)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results():
    return run_on_cpu_devices(SCRIPT, 2)


@pytest.mark.parametrize("dec", ["pencil", "lfb"])
def test_taped_gradient_on_a_mesh_equals_device_checkpoints(results, dec):
    assert results[dec + "_scale"] > 0
    assert max(results[dec].values()) < 1e-10, results[dec]


def test_disk_tape_on_a_mesh_keeps_each_shards_block(results):
    # 24 steps in chunks of 5: the first 4 untaped, then 4 states of 10 split fields per shard
    assert results["disk_shards"] == [0, 1]
    assert results["disk_files"] == 2 * 4 * 10
    assert results["disk_removed"]
