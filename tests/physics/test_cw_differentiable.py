"""CW amplitude and phase out of the differentiable simulator: the same numbers as
``simulate``, and gradients through the amplitude (the heat source of a plan ~ A^2) that agree
with finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st

F0, C0, RHO, N, DX = 1e6, 1500.0, 1000.0, 24, 0.25e-3


def _case() -> tuple:
    grid = st.KWaveGrid((N, N), DX)
    grid.dt = 0.3 * DX / C0
    grid.nt = 90
    medium = st.KWaveMedium(sound_speed=C0, density=RHO, alpha_coeff=0.75, alpha_power=1.5)
    mask = np.zeros((N, N), bool)
    mask[4, N // 2 - 4 : N // 2 + 5] = True
    signal = st.create_cw_signals(grid.t, F0, np.array([1e5]), np.array([0.0]))[0]
    points = np.zeros((N, N), bool)
    points[N // 2, 6:18:3] = True
    sensor = st.KSensor(mask=np.ones((N, N), bool), record=("p_cw_all",), cw_frequency=F0,
                        cw_periods=2)  # fmt: skip
    few = st.KSensor(mask=points, record=("p_cw",), cw_frequency=F0, cw_periods=2)
    return grid, medium, st.KSource(p_mask=mask, p=signal), sensor, few, signal


@pytest.mark.parametrize("which", ["whole", "points"])
def test_cw_records_equal_simulate(jax_float64: None, which: str) -> None:
    grid, medium, source, whole, few, _ = _case()
    sensor = whole if which == "whole" else few
    suffix = "_all" if which == "whole" else ""
    ref = st.simulate(
        grid, medium, source, sensor, dtype="float64", pml_size=6, pml_inside=False, quiet=True
    )
    got = st.make_simulator(
        grid, medium, source, sensor, dtype="float64", pml_size=6, pml_inside=False
    )()
    for q in ("p_cw_amp", "p_cw_phase"):
        want = np.asarray(ref[q + suffix])
        assert np.asarray(got[q + suffix]).shape == want.shape
        np.testing.assert_allclose(np.asarray(got[q + suffix]), want, rtol=1e-10, atol=1e-9 *
                                   np.abs(want).max())  # fmt: skip
    assert f"p_cw_re{suffix}" not in got  # the DFT sums are internal


def test_gradient_of_squared_amplitude(jax_float64: None) -> None:
    """d/d(sound speed, source amplitude) of sum(A^2) over the grid (finite: amplitude 0 has
    derivative 0, not NaN) against central differences."""
    import jax
    import jax.numpy as jnp

    grid, medium, source, sensor, _, signal = _case()
    sim = st.make_simulator(
        grid, medium, source, sensor, dtype="float64", pml_size=6, pml_inside=False
    )

    def power(x: dict) -> jax.Array:
        out = sim({"p": x["amp"] * jnp.asarray(signal), "sound_speed": x["c"]})
        return jnp.sum(out["p_cw_amp_all"] ** 2)

    x0 = {"amp": jnp.asarray(1.0), "c": jnp.asarray(C0)}
    g = jax.grad(power)(x0)
    assert all(np.isfinite(float(v)) for v in g.values())
    assert float(g["amp"]) == pytest.approx(2 * float(power(x0)), rel=1e-9)  # ~ amp^2
    h = 1e-3
    fd = (float(power({**x0, "c": x0["c"] + h})) - float(power({**x0, "c": x0["c"] - h}))) / (2 * h)
    assert float(g["c"]) == pytest.approx(fd, rel=1e-5)
