"""Differentiable simulation (``sonotile.make_simulator``) on one device.

The simulator must reproduce ``simulate``; its gradients must agree with central finite
differences in float64 for every parameter (sound speed, density, absorption, B/A, p0, p and
u signals); forward and reverse mode must agree; float32 on FFTW (custom derivative rules) must
agree with float64 on XLA's FFT; checkpointing must not change the gradient; vmap over params.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from grad_case import fd_errors, make_case

import sonotile as st


@pytest.fixture(autouse=True, scope="module")
def _float64(jax_float64):
    """64-bit JAX types for these tests only."""


@pytest.fixture(scope="module")
def case(_float64):
    return make_case(32, 40)


@pytest.fixture(scope="module")
def sim64(case, _float64):
    return st.make_simulator(*case, pml_size=6, dtype="float64", chunk=7)


def test_matches_simulate(case):
    grid, medium, source, sensor = case
    sensor = st.KSensor(mask=sensor.mask, record=("p", "p_max", "p_rms", "u", "p_final"))
    ref = st.simulate(grid, medium, source, sensor, pml_size=6, dtype="float64", quiet=True)
    out = st.make_simulator(grid, medium, source, sensor, pml_size=6, dtype="float64")()
    assert set(out) == set(ref.keys())
    for k in ref.keys():
        a, b = np.asarray(out[k]), np.asarray(ref[k])
        assert a.shape == b.shape, k
        assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max(), k


def test_gradient_matches_finite_differences(sim64):
    errs = fd_errors(sim64)
    assert set(errs) == {"sound_speed", "density", "alpha_coeff", "BonA", "p0", "p", "ux"}
    assert max(errs.values()) < 1e-6, errs


def test_forward_and_reverse_mode_agree(sim64):
    rng = np.random.default_rng(1)
    p0 = sim64.params
    v = {k: jnp.asarray(rng.standard_normal(a.shape)) for k, a in p0.items()}
    out, jv = jax.jvp(lambda p: sim64(p)["p"], (p0,), (v,))
    w = jnp.asarray(rng.standard_normal(out.shape))
    (ct,) = jax.vjp(lambda p: sim64(p)["p"], p0)[1](w)
    lhs, rhs = jnp.vdot(w, jv), sum(jnp.vdot(ct[k], v[k]) for k in p0)
    assert abs(lhs - rhs) <= 1e-11 * abs(lhs)


def test_checkpointing_does_not_change_the_gradient(case):
    def grad(**kw):
        sim = st.make_simulator(*case, pml_size=6, dtype="float64", **kw)
        return jax.grad(lambda p: jnp.sum(sim(p)["p"] ** 2))(sim.params)["sound_speed"]

    a, b = grad(chunk=None), grad(chunk=9, remat_step=True)
    assert jnp.max(jnp.abs(a - b)) <= 1e-10 * jnp.max(jnp.abs(a))


def test_float32_fftw_gradient_agrees_with_float64(case, sim64):
    sim32 = st.make_simulator(*case, pml_size=6, dtype="float32", chunk=7)

    def g(sim):
        return jax.grad(lambda p: jnp.sum(sim(p)["p"] ** 2) / 1e8)(sim.params)

    g32, g64 = g(sim32), g(sim64)
    for k in g64:
        err = jnp.max(jnp.abs(g32[k] - g64[k])) / jnp.max(jnp.abs(g64[k]))
        assert err < 2e-3, (k, float(err))


def test_vmap_over_sound_speed(sim64):
    cs = jnp.stack([sim64.params["sound_speed"] * s for s in (0.98, 1.02)])
    batched = jax.vmap(lambda c: sim64({"sound_speed": c})["p"])(cs)
    one = sim64({"sound_speed": cs[1]})["p"]
    assert jnp.max(jnp.abs(batched[1] - one)) <= 1e-12 * jnp.max(jnp.abs(one))


def test_unknown_parameter_is_refused(sim64):
    with pytest.raises(ValueError, match="uz"):
        sim64({"uz": jnp.ones(3)})


@pytest.fixture
def stacked_step():
    """``Settings.step`` = stacked (``SONOTILE_STEP``) while a test runs."""
    from sonotile.base import config

    saved = config.current()
    config.configure(saved, step="stacked")
    yield
    config.configure(saved)


def test_stacked_step_gradients(case, sim64, stacked_step, monkeypatch):
    """The stacked step in the differentiable run: the same outputs as the plain step's to
    float64 round-off, gradients equal to central finite differences for every parameter
    (sources on p and ux included), and a taped run refused by the setting's name."""
    from sonotile.solver import runner

    traced = []
    real = runner.stacked_body
    monkeypatch.setattr(runner, "stacked_body", lambda *a, **k: traced.append(1) or real(*a, **k))
    sim = st.make_simulator(*case, pml_size=6, dtype="float64", chunk=7)
    out, ref = sim()["p"], sim64()["p"]
    assert traced  # the stacked step ran
    assert jnp.max(jnp.abs(out - ref)) <= 1e-11 * jnp.max(jnp.abs(ref))
    errs = fd_errors(sim)
    assert set(errs) == {"sound_speed", "density", "alpha_coeff", "BonA", "p0", "p", "ux"}
    assert max(errs.values()) < 1e-6, errs
    with pytest.raises(ValueError, match="SONOTILE_STEP=stacked: .*tape"):
        st.make_simulator(*case, pml_size=6, dtype="float64", tape="host")
