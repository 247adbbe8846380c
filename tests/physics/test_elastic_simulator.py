"""``st.make_simulator`` with an elastic medium: the records of ``pstd_elastic_2d`` as a traced
function, and ``jax.grad`` with respect to both speeds, density and the source signals against
central finite differences (float64)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError

N, DX, NT = 20, 1e-4, 30


def _inputs():
    rng = np.random.default_rng(0)
    cp = 2500 + 200 * rng.random((N, N))
    cs = 1000 + 200 * rng.random((N, N))
    cs[:, :6] = 0.0  # a fluid strip
    rho = 1800 + 100 * rng.random((N, N))
    medium = st.KWaveElasticMedium(cp, cs, rho, 2.0, 4.0)
    u_mask, s_mask = np.zeros((N, N), bool), np.zeros((N, N), bool)
    u_mask[10, 8:11] = True
    s_mask[6, 12] = True
    t = np.arange(NT) * 0.2 * DX / 2700
    sig = np.sin(2 * np.pi * 1.5e6 * t) * np.hanning(NT)
    source = st.ElasticSource(ux=1e-3 * sig, uy=np.stack([1e-3 * sig] * 3), u_mask=u_mask,
                              sxy=1e4 * sig, s_mask=s_mask)  # fmt: skip
    sensor = st.KSensor(points=np.array([[4, 4], [15, 7], [10, 16]]), record=("p", "u", "s"))
    grid = st.KWaveGrid((N, N), DX, dt=0.2 * DX / 2700, nt=NT)
    return grid, medium, source, sensor


def test_simulator_gives_pstd_elastic_records():
    grid, medium, source, sensor = _inputs()
    ref = st.pstd_elastic_2d(grid, medium, source, sensor, pml_size=4, dtype="float64")
    sim = st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64")
    assert set(sim.params) == {"sound_speed_compression", "sound_speed_shear", "density",
                               "alpha_coeff_compression", "alpha_coeff_shear", "ux", "uy",
                               "sxy"}  # fmt: skip
    out = sim()
    assert set(out) == set(ref)
    for k, v in ref.items():
        np.testing.assert_allclose(np.asarray(out[k]), v, rtol=1e-9, atol=1e-12 * np.abs(v).max(),
                                   err_msg=k)  # fmt: skip
    assert np.abs(ref["sxy"]).max() > 0
    with pytest.raises(ProblemError, match=r"params: \['sound_speed'\] not parameters"):
        sim({"sound_speed": 1500.0})
    with pytest.raises(ProblemError, match="remat_step: not available for the elastic simulator"):
        st.make_simulator(grid, medium, source, sensor, pml_size=4, remat_step=True)


def test_gradients_match_finite_differences():
    grid, medium, source, sensor = _inputs()
    sim = st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64", chunk=8)

    def loss(params: dict) -> jax.Array:
        out = sim(params)
        return jnp.sum(out["p"] ** 2) + 1e12 * jnp.sum(out["uy"] ** 2) + jnp.sum(out["sxy"] ** 2)

    with jax.enable_x64(True):
        names = ("sound_speed_compression", "sound_speed_shear", "density", "ux", "uy", "sxy")
        base = {k: sim.params[k] for k in names}
        grads = jax.grad(loss)(base)
        rng = np.random.default_rng(1)
        for name in names:
            v = np.asarray(base[name])
            direction = rng.standard_normal(v.shape)
            if name == "sound_speed_shear":
                direction[:, :6] = 0.0  # the fluid strip stays fluid
            h = 1e-5 * float(np.abs(v).max())
            f = [float(loss({**base, name: base[name] + s * h * direction})) for s in (1, -1)]
            fd = (f[0] - f[1]) / (2 * h)
            ad = float(jnp.sum(grads[name] * direction))
            assert abs(ad) > 0, name
            assert abs(ad - fd) <= 1e-6 * abs(fd), (name, ad, fd)


def test_p0_is_smoothed_in_the_traced_function_and_differentiable():
    grid, medium, _, sensor = _inputs()
    x = np.arange(N)
    p0 = 1e3 * np.exp(-((x[:, None] - 10.2) ** 2 + (x[None, :] - 11.4) ** 2) / 3)  # one peak
    source = st.ElasticSource(p0=p0)
    ref = st.pstd_elastic_2d(grid, medium, source, sensor, pml_size=4, dtype="float64")
    sim = st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64")
    np.testing.assert_allclose(np.asarray(sim()["p"]), ref["p"], rtol=1e-9,
                               atol=1e-12 * np.abs(ref["p"]).max())  # fmt: skip

    def loss(p: jax.Array) -> jax.Array:
        return jnp.sum(sim({"p0": p})["sxy"] ** 2)

    with jax.enable_x64(True):
        base = sim.params["p0"]
        direction = np.random.default_rng(2).standard_normal((N, N))
        ad = float(jnp.sum(jax.grad(loss)(base) * direction))
        h = 1e-5 * 1e3
        fd = (float(loss(base + h * direction)) - float(loss(base - h * direction))) / (2 * h)
        assert abs(ad) > 0 and abs(ad - fd) <= 1e-6 * abs(fd), (ad, fd)
