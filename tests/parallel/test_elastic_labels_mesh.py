"""Labelled source masks and cuboid sensors of the elastic model on a pencil mesh and on 2 x 2
LFB blocks, against the single-device run (4 virtual CPU devices, one subprocess): labels and
cuboids spanning the blocks' boundaries; every record per cuboid, and a gradient with respect
to a labelled signal through the pencil mesh (float64)."""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

pytestmark = pytest.mark.slow  # one subprocess of 15-30 s

SCRIPT = r"""
import json
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import sonotile as st

assert len(jax.devices()) == 4, jax.devices()
shape, dx, nt = (32, 32), 1e-4, 30
cp = np.full(shape, 2500.0); cs = np.full(shape, 1200.0); cs[:, :8] = 0.0
medium = st.KWaveElasticMedium(cp, cs, 1800.0)
lab = np.zeros(shape, int)
lab[6:10, 12], lab[15:18, 20], lab[22:26, 5:7] = 1, 2, 3      # across x = 8, 16, 24
t = np.arange(24)
sig = np.stack([np.sin(0.3 * (k + 1) * t) * np.hanning(24) for k in range(3)])
source = st.ElasticSource(u_mask=lab, ux=sig, uy=-sig, s_mask=lab.T, sxy=1e3 * sig)
grid = st.KWaveGrid(shape, dx, dt=0.2 * dx / 2500, nt=nt)
corners = [((5, 10), (18, 14)), ((14, 2), (17, 30))]
sensor = st.KSensor(corners=corners, record=("p", "u", "s", "p_max", "u_rms", "p_final"))

def run(**kw):
    return st.pstd_elastic_2d(grid, medium, source, sensor, pml_size=4, dtype="float64", **kw)

def err(res, ref):
    out = {}
    for k, v in ref.items():
        parts = zip(res[k], v) if isinstance(v, list) else [(res[k], v)]
        out[k] = max(float(np.abs(a - b).max() / np.abs(b).max()) for a, b in parts)
    return out

ref = run()
out = {"pencil": err(run(decomposition="pencil", mesh_shape=(4,)), ref),
       "lfb_2x2": err(run(decomposition="lfb", mesh_shape=(2, 2), overlap=8), ref)}
sims = {d: st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64",
                             decomposition=d, mesh=(4,) if d == "pencil" else None)
        for d in ("single", "pencil")}

def loss(ux, d):
    o = sims[d]({"ux": ux})
    return sum(jnp.sum(c ** 2) for c in o["p"]) + sum(jnp.sum(c ** 2) for c in o["sxy"])

g = {d: jax.grad(loss)(jnp.asarray(sig), d) for d in sims}
out["grad"] = float(jnp.abs(g["pencil"] - g["single"]).max() / jnp.abs(g["single"]).max())
out["grad_shape"] = list(g["pencil"].shape)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    return run_on_cpu_devices(SCRIPT, 4)


@pytest.mark.parametrize("where", ["pencil", "lfb_2x2"])
def test_labels_and_cuboids_equal_single_device(results: dict, where: str) -> None:
    # 2 x 2 blocks of 16 with overlap 8 reach each axis whole: LFB's derivatives are exact
    err = results[where]
    assert len(err) == 10, err  # p, ux, uy, sxx, syy, sxy, p_max, ux_rms, uy_rms, p_final
    assert max(err.values()) <= 1e-10, err


def test_gradient_of_a_labelled_signal_through_the_pencil_mesh(results: dict) -> None:
    assert results["grad_shape"] == [3, 24]
    assert results["grad"] <= 1e-10, results["grad"]
