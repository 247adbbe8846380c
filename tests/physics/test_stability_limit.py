"""k-Wave's stability limit of the absorbing k-space scheme (``checkStability``): a homogeneous
run just below the limit stays bounded, one just above it blows up, and only the latter warns."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.api import Options, build_problem
from sonotile.physics.acoustic import checks

N, DX, C = 128, 1e-4, 1500.0


def run(medium: st.KWaveMedium, dt: float, nt: int = 1000):
    """The largest final pressure [Pa] and the run's warnings; the run goes on when it grows
    (``check_finite=False``: the growth and NaN checks would stop it, as they should)."""
    x = np.arange(N)
    src = st.KSource(p0=1e3 * np.exp(-(((x - N / 2) / 3) ** 2)))  # [Pa]
    sensor = st.KSensor(mask=np.ones(N, bool), record=("p_final",))
    grid = st.KWaveGrid((N,), DX, dt=dt, nt=nt)
    res = st.simulate(grid, medium, src, sensor, smooth_p0=False, pml_size=10,
                      dtype="float64", quiet=True, check_finite=False)  # fmt: skip
    return np.nan_to_num(np.abs(res["p_final"]).max(), nan=np.inf), list(res.warnings)


def limit(medium: st.KWaveMedium) -> float:
    grid = st.KWaveGrid((N,), DX, dt=1e-9, nt=2)
    sensor = st.KSensor(mask=np.ones(N, bool), record=("p_final",))
    problem, _ = build_problem(grid, medium, st.KSource(p0=np.ones(N)), sensor, Options())
    return checks.stability_limit(problem)


@pytest.mark.parametrize(
    "alpha_mode, y, alpha_coeff",
    [("stokes", 2.0, 50.0), (None, 1.5, 20.0), (None, 1.5, 2.0)],
)
def test_absorbing_stability_limit_is_sharp(alpha_mode, y, alpha_coeff):
    medium = st.KWaveMedium(sound_speed=C, density=1000.0, alpha_coeff=alpha_coeff,
                            alpha_power=y, alpha_mode=alpha_mode)  # fmt: skip
    dt = limit(medium)
    assert 0.1 < dt * C / DX < 1.0  # a finite limit in the range of usual CFL numbers
    below, notes_below = run(medium, 0.95 * dt)
    above, notes_above = run(medium, 1.05 * dt)
    assert below <= 1e3  # bounded by the initial pressure
    assert above > 1e9  # grown by more than six orders of magnitude (or overflowed)
    assert not any("stability limit" in m for m in notes_below)
    assert any("stability limit" in m for m in notes_above)


def test_lossless_with_c_ref_at_max_has_no_limit():
    assert limit(st.KWaveMedium(sound_speed=C, density=1000.0)) == np.inf
