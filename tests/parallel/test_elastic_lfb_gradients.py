"""Gradients of the elastic model through local Fourier bases (``make_simulator(...,
decomposition="lfb")``, 4 virtual CPU devices, a subprocess, float64).

2-D: a heterogeneous absorbing solid with a fluid strip, an initial pressure (smoothed in the
traced function) and an additive velocity source on several blocks. On 4 slabs with a real
overlap (8 points) the gradients with respect to both speeds, the density, the velocity
signal and p0 match central differences of the same LFB run to 1e-6, and differ from the
one-device gradients by LFB's overlap error; the simulator's records equal the forward LFB
engine's (``pstd_elastic_2d(..., decomposition="lfb")``) to round-off. On 2x2 blocks whose
boxes reach both axes whole (no bell: exact) the gradients equal the one-device ones to
round-off. 3-D (slow): 2x2 blocks, overlap 4, the same checks for the speeds and density."""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

COMMON = r"""
import json
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import sonotile as st

assert len(jax.devices()) == 4, jax.devices()
rng = np.random.default_rng(0)
DX = 1e-4


def case(shape, nt):
    # (grid, medium, source, sensor): fluid along the last axis' first quarter
    cp = 2500 + 200 * rng.random(shape)
    cs = 1000 + 200 * rng.random(shape)
    cs[..., : shape[-1] // 4] = 0.0
    rho = 1800 + 100 * rng.random(shape)
    medium = st.KWaveElasticMedium(cp, cs, rho, 2.0, 4.0)
    x = np.meshgrid(*[np.arange(n) - n // 2 for n in shape], indexing="ij")
    p0 = 1e3 * np.exp(-sum(c ** 2 for c in x) / 4.0)
    dt = 0.2 * DX / 2700
    t = np.arange(nt) * dt
    u_mask = np.zeros(shape, bool)
    u_mask[(slice(3, shape[0] - 3, 7),) + tuple(n // 2 + 3 for n in shape[1:])] = True
    source = st.ElasticSource(p0=p0, ux=1e-3 * np.sin(2 * np.pi * 1.5e6 * t) * np.hanning(nt),
                              u_mask=u_mask)
    pts = np.array([[3, 4, 5], [shape[0] - 6, 7, 2], [shape[0] // 2, shape[1] - 5, 8]])
    sensor = st.KSensor(points=pts[:, : len(shape)], record=("p", "u", "s"))
    return st.KWaveGrid(shape, DX, dt=dt, nt=nt), medium, source, sensor


def loss_of(sim):
    def loss(p):
        o = sim(p)
        return jnp.sum(o["p"] ** 2) + 1e12 * jnp.sum(o["uy"] ** 2) + jnp.sum(o["sxy"] ** 2)
    return loss


def checks(sims, names, lfb, fluid):
    # per parameter: the LFB gradient against central differences of the LFB run along a random
    # direction, and against the one-device gradient (largest difference / largest value)
    base = {k: sims["single"].params[k] for k in names}
    grads = {d: jax.jit(jax.grad(loss_of(s)))(base) for d, s in sims.items()}
    loss = loss_of(sims[lfb])
    out = {}
    for name in names:
        v = np.asarray(base[name])
        d = rng.standard_normal(v.shape)
        if name == "sound_speed_shear":
            d[fluid] = 0.0  # the fluid stays fluid
        h = 1e-5 * float(np.abs(v).max())
        f = [float(loss({**base, name: base[name] + s * h * d})) for s in (1, -1)]
        fd = (f[0] - f[1]) / (2 * h)
        ad = float(jnp.sum(grads[lfb][name] * d))
        one = grads["single"][name]
        out[name] = {"fd": abs(ad - fd) / abs(fd), "ad": abs(ad)} | {
            k: float(jnp.abs(g[name] - one).max() / jnp.abs(one).max())
            for k, g in grads.items() if k != "single"}
    return out
"""

TWO_D = (
    COMMON
    + r"""
grid, medium, source, sensor = case((32, 24), 24)
where = {"single": {}, "slabs": {"mesh": (4,), "overlap": 8}}
sims = {k: st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64", chunk=8,
                             decomposition="lfb" if w else "single", **w) for k, w in where.items()}
out = {"grad": checks(sims, ("sound_speed_compression", "sound_speed_shear", "density", "ux", "p0"),
                      "slabs", (slice(None), slice(0, 6)))}
ref = st.pstd_elastic_2d(grid, medium, source, sensor, pml_size=4, dtype="float64",
                         decomposition="lfb", mesh_shape=(4,), overlap=8)
got = sims["slabs"]()
out["forward"] = max(float(np.abs(np.asarray(got[k]) - v).max() / np.abs(v).max())
                     for k, v in ref.items())
out["describe"] = sims["slabs"].describe
print("RESULT" + json.dumps(out))
"""
)

SLOW = (
    COMMON
    + r"""
out = {}
# 2-D, 2x2 blocks of 16x12 at overlap 8: every box reaches its axis whole (exact)
grid, medium, source, sensor = case((32, 24), 24)
sims = {k: st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64", chunk=8,
                             decomposition=k, mesh=(2, 2), overlap=8) for k in ("single", "lfb")}
names = ("sound_speed_compression", "sound_speed_shear", "density", "ux", "p0")
out["whole"] = checks(sims, names, "lfb", (slice(None), slice(0, 6)))
# 3-D, 2x2 blocks of 12x10 (x 12) at overlap 4
grid, medium, source, sensor = case((24, 20, 12), 16)
sims = {d: st.make_simulator(grid, medium, source, sensor, pml_size=3, dtype="float64", chunk=4,
                             decomposition=d, mesh=(2, 2), overlap=4) for d in ("single", "lfb")}
out["3d"] = checks(sims, names[:3], "lfb", (Ellipsis, slice(0, 3)))
print("RESULT" + json.dumps(out))
"""
)

PARAMS = ["sound_speed_compression", "sound_speed_shear", "density", "ux", "p0"]


@pytest.fixture(scope="module")
def two_d() -> dict:
    return run_on_cpu_devices(TWO_D, 4)


@pytest.fixture(scope="module")
def slow() -> dict:
    return run_on_cpu_devices(SLOW, 4)


@pytest.mark.parametrize("name", PARAMS)
def test_lfb_gradient_matches_finite_differences(two_d: dict, name: str) -> None:
    g = two_d["grad"][name]
    assert g["ad"] > 0, g
    assert g["fd"] <= 1e-6, g


@pytest.mark.parametrize("name", PARAMS)
def test_lfb_gradient_close_to_single_device(two_d: dict, name: str) -> None:
    g = two_d["grad"][name]
    # 4 slabs of 8 points, overlap 8: LFB's overlap error (measured 0.6e-3 to 4.6e-3)
    assert 1e-5 < g["slabs"] <= 1e-2, g


def test_lfb_simulator_records_equal_the_lfb_run(two_d: dict) -> None:
    assert two_d["forward"] <= 1e-10, two_d["forward"]
    assert two_d["describe"] == "lfb mesh"


@pytest.mark.slow
@pytest.mark.parametrize("name", PARAMS)
def test_lfb_gradient_with_whole_axes_equals_single_device(slow: dict, name: str) -> None:
    g = slow["whole"][name]
    assert g["fd"] <= 1e-6, g
    assert g["lfb"] <= 1e-10, g


@pytest.mark.slow
@pytest.mark.parametrize("name", PARAMS[:3])
def test_lfb_gradient_3d(slow: dict, name: str) -> None:
    g = slow["3d"][name]
    assert g["ad"] > 0, g
    assert g["fd"] <= 1e-6, g
    assert 1e-5 < g["lfb"] <= 3e-2, g  # overlap 4 on 2x2 blocks (measured 1.7e-3 to 8.1e-3)
