"""Cartesian sensor points of the elastic model on a pencil mesh and on LFB blocks, against
the single-device run (virtual CPU devices, one subprocess): points whose stencils cross the
blocks' boundaries, so each is gathered from several shards; series and statistics of the
pressure, velocity and stresses, a gradient and a time reversal through the pencil mesh
(float64)."""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

pytestmark = pytest.mark.slow  # one subprocess of about a minute

SCRIPT = r"""
import json
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import sonotile as st

assert len(jax.devices()) == 4, jax.devices()
shape, dx, nt = (32, 32), 1e-4, 40
rng = np.random.default_rng(3)
cp = 2500 + 200 * rng.random(shape)
cs = 1200 + 100 * rng.random(shape)
cs[:, :8] = 0.0  # a fluid strip
medium = st.KWaveElasticMedium(cp, cs, 1800.0)
x = np.meshgrid(*[np.arange(n) - n // 2 for n in shape], indexing="ij")
source = st.ElasticSource(p0=1e3 * np.exp(-((x[0] - 3) ** 2 + (x[1] + 2) ** 2) / 8.0))
grid = st.KWaveGrid(shape, dx, dt=0.2 * dx / 2700, nt=nt)
# stencils across the boundaries x = 8, 16, 24 of 4 slabs of 8 points, grid coordinates
coords = np.array([[15.6, 16.3], [16.4, 15.5], [7.5, 16.2], [24.3, 8.9], [15.9, 27.1]])
pts = ((coords - 16) * dx).T
record = ("p", "u", "s", "p_max", "u_rms")
out = {}
for interp in ("linear", "bli"):
    sensor = st.KSensor(mask=pts, record=record, cart_interp=interp, bli_tolerance=0.02)
    def run(**kw):
        return st.pstd_elastic_2d(grid, medium, source, sensor, pml_size=4, dtype="float64", **kw)
    ref = run()
    cases = [("pencil", dict(decomposition="pencil", mesh_shape=(4,))),
             ("lfb_2x2", dict(decomposition="lfb", mesh_shape=(2, 2), overlap=8)),
             ("lfb_slabs", dict(decomposition="lfb", mesh_shape=(4,), overlap=8))]
    for name, kw in cases[: 3 if interp == "linear" else 2]:
        res = run(**kw)
        assert set(res) == set(ref), set(res) ^ set(ref)
        out[f"{name}_{interp}"] = {k: float(np.abs(res[k] - v).max() / np.abs(v).max())
                                   for k, v in ref.items()}

sensor = st.KSensor(mask=pts, record=("p", "s"), cart_interp="linear")
sims = {d: st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64",
                             decomposition=d, mesh=(4,) if d == "pencil" else None)
        for d in ("single", "pencil")}

def loss(c, d):
    o = sims[d]({"sound_speed_compression": c})
    return jnp.sum(o["p"] ** 2) + jnp.sum(o["sxy"] ** 2)

g = {d: jax.grad(loss)(jnp.asarray(cp), d) for d in sims}
out["grad"] = float(jnp.abs(g["pencil"] - g["single"]).max() / jnp.abs(g["single"]).max())
# time reversal (the reversed data as Dirichlet normal stresses) on the pencil mesh
ring = np.abs(np.hypot(x[0], x[1]) - 10) < 0.5
ring_sensor = st.KSensor(mask=ring, record=("p",))
fwd = st.pstd_elastic_2d(grid, medium, source, ring_sensor, pml_size=4, dtype="float64")
rec = {d: st.time_reversal(grid, medium, ring_sensor, fwd["p"], pml_size=4, dtype="float64",
                           quiet=True, decomposition=d, mesh=(4,) if d == "pencil" else None)
       for d in ("single", "pencil")}
out["tr"] = float(np.abs(rec["pencil"] - rec["single"]).max() / np.abs(rec["single"]).max())
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    return run_on_cpu_devices(SCRIPT, 4)


@pytest.mark.parametrize("interp", ["linear", "bli"])
def test_pencil_cartesian_equals_single_device(results: dict, interp: str) -> None:
    err = results[f"pencil_{interp}"]
    assert len(err) == 9, err  # p, ux, uy, sxx, syy, sxy, p_max, ux_rms, uy_rms
    assert max(err.values()) <= 1e-10, err


@pytest.mark.parametrize("interp", ["linear", "bli"])
def test_lfb_whole_axes_cartesian_equals_single_device(results: dict, interp: str) -> None:
    # 2 x 2 blocks of 16 with overlap 8 reach each axis whole: LFB's derivatives are exact
    # there, so what is left is the sensor's gather from four blocks
    err = results[f"lfb_2x2_{interp}"]
    assert max(err.values()) <= 1e-10, err


def test_lfb_slabs_cartesian_within_its_error(results: dict) -> None:
    # slabs of 8 with overlap 8: the run's own LFB error (the elastic model's on such slabs:
    # 0.6-4.6e-3 in docs/elastic.md's gradient table)
    err = results["lfb_slabs_linear"]
    assert max(err.values()) <= 2e-3, err


def test_gradient_through_the_pencil_mesh(results: dict) -> None:
    assert results["grad"] <= 1e-10, results["grad"]


def test_time_reversal_on_the_pencil_mesh(results: dict) -> None:
    assert results["tr"] <= 1e-10, results["tr"]
