"""A thermal-dose goal at the target (:mod:`sonotile.planning.dose_goal`): the heat model is
linear in its source, so one recorded rise history gives the dose of any drive scale; the
scale found for a dose is the one a second heat run confirms; goals out of reach are refused
in words."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.api.heating.sonication import Tissue, sonicate
from sonotile.model.problem import ProblemError
from sonotile.physics.heat.dose import cem43_of_history
from sonotile.planning.dose_goal import dose_of, power_scale, target_rise

SHAPE, DX, T0 = (20, 18, 16), 1e-3, 37.0


def _heat(q_scale: float, points=((10, 9, 8), (13, 9, 8))):
    x = np.meshgrid(*[(np.arange(n) - n // 2) * DX for n in SHAPE], indexing="ij")
    q = q_scale * 1e7 * np.exp(-sum(v**2 for v in x) / 2e-3**2)
    tissue = Tissue(3600.0, 0.5, perfusion_rate=0.01)
    return sonicate(q, (DX,) * 3, 1050.0, 6.0, 4.0, 0.1, tissue=tissue, T0=T0, points=points)


def test_rise_history_at_points_is_the_runs_own():
    """``T_points`` holds the histories at the points asked: at the focus the same as
    ``T_focus``, and its dose is the run's dose map there."""
    run = _heat(1.0)
    t = np.asarray(run.data["T_points"])
    assert t.shape == (60, 2) and np.array_equal(run.data["points"], [[10, 9, 8], [13, 9, 8]])
    np.testing.assert_allclose(t[:, 0], run.data["T_focus"], rtol=1e-12)
    assert t[:, 0].max() > 44 and t[:, 1].max() < t[:, 0].max()  # a peak, and off it
    for j, ijk in enumerate(run.data["points"]):
        dose = float(cem43_of_history(t[:, j], run.dt, np))
        np.testing.assert_allclose(dose, run.data["cem43"][tuple(ijk)], rtol=1e-9)


def test_scale_from_one_history_is_confirmed_by_a_second_run():
    """The dose of the source four times stronger, predicted from the weaker run's history
    (``k = 4``), and ``power_scale`` finding 4 back from that run's dose at the point."""
    weak, strong = _heat(1.0), _heat(4.0)
    for j in range(2):
        rise = target_rise(weak, T0, j)
        np.testing.assert_allclose(target_rise(strong, T0, j), 4 * rise, rtol=1e-9, atol=1e-12)
        dose = float(strong.data["cem43"][tuple(strong.data["points"][j])])
        np.testing.assert_allclose(dose_of(rise, T0, weak.dt, 4.0), dose, rtol=1e-9)
        np.testing.assert_allclose(power_scale(rise, T0, weak.dt, dose), 4.0, rtol=1e-9)


@pytest.mark.parametrize("dose", [1e-3, 1.0, 240.0, 1e5])
def test_power_scale_reaches_the_dose(dose):
    t = np.arange(1, 201) * 0.1
    rise = 8.0 * (1 - np.exp(-t / 3.0)) * (t <= 15) + 8.0 * (1 - np.exp(-5)) * np.exp(
        -(t - 15) / 4.0
    ) * (t > 15)
    k = power_scale(rise, T0, 0.1, dose)
    np.testing.assert_allclose(dose_of(rise, T0, 0.1, k), dose, rtol=1e-9)
    assert dose_of(rise, T0, 0.1, 0.99 * k) < dose < dose_of(rise, T0, 0.1, 1.01 * k)


@pytest.mark.parametrize(
    ("rise", "dose", "message"),
    [
        (np.zeros(50), 10.0, "does not heat"),
        (np.full(50, 1.0), 1e-5, "below that of 37 degC alone"),
        (np.full(50, 1e-6), 1e300, "out of reach: it needs more than 100 degC"),
        (np.full(50, 1.0), 1e20, "out of reach: it needs more than 100 degC"),
        (np.full(50, 1.0), -1.0, "positive number of minutes"),
        (np.full(50, 1.0), float("nan"), "positive number of minutes"),
    ],
)
def test_goals_out_of_reach_are_refused(rise, dose, message):
    with pytest.raises(ProblemError, match=message):
        power_scale(rise, T0, 0.1, dose)


@pytest.mark.parametrize("points", [[(1, 2)], [(20, 0, 0)], [(-1, 0, 0)], [("a", 0, 0)]])
def test_points_outside_the_grid_are_refused(points):
    with pytest.raises(ProblemError, match="points"):
        _heat(1.0, points=points)
