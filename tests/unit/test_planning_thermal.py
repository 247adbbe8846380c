"""A plan's thermal properties per tissue class (IT'IS database): the fields follow the classes,
bone (lower heat capacity) warms faster than brain for the same absorbed power, and the heat
balance of the heterogeneous head holds to round-off."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.api.heating.sonication import Tissue, sonicate
from sonotile.model.problem import ProblemError
from sonotile.planning.chain import PlanSettings
from sonotile.planning.phantom import head_phantom
from sonotile.planning.thermal import THERMAL_PROPERTIES, thermal_properties
from sonotile.planning.tissue import BRAIN, CORTICAL, TRABECULAR, WATER, tissue_properties

DX = 4e-3  # [m]


@pytest.fixture(scope="module")
def maps():
    ct = head_phantom((40, 48, 42), DX * 1e3, seed=0)
    return tissue_properties(ct.hu, frequency=500e3)


def _tissue(th) -> Tissue:
    return Tissue(
        th.specific_heat, th.conductivity, perfusion_rate=th.perfusion_rate,
        blood_density=th.blood_density, blood_specific_heat=th.blood_specific_heat,
    )  # fmt: skip


def test_fields_follow_the_tissue_classes(maps):
    th = thermal_properties(maps)
    for cls, (c, k, perf) in THERMAL_PROPERTIES.items():
        m = maps.labels == cls
        assert m.any()
        assert np.all(th.specific_heat[m] == c) and np.all(th.conductivity[m] == k)
        np.testing.assert_allclose(th.perfusion_rate[m], perf * maps.density[m] * 1e-6 / 60)
    brain = th.perfusion_rate[maps.labels == BRAIN]
    assert 0.009 < brain.mean() < 0.011  # 559 mL/(min kg) of brain: about 0.01 /s
    over = thermal_properties(maps, conductivity=0.5, perfusion=0.0)
    assert np.all(over.conductivity == 0.5) and np.all(over.perfusion_rate == 0.0)
    assert np.array_equal(over.specific_heat, th.specific_heat)
    assert over.provenance["overrides"] == {"conductivity": 0.5, "perfusion_rate": 0.0}
    with pytest.raises(ProblemError, match="conductivity must be positive"):
        PlanSettings(conductivity=-1.0).check()


def test_bone_heats_faster_than_brain_per_absorbed_power(maps):
    """One short step from body temperature under the same Q everywhere: the rise is
    ``Q dt / (rho C)`` voxel by voxel, so skull (rho C 2.7e6 cortical) warms about 1.4x faster
    than brain (3.8e6); one property set for all tissue would give only the density ratio."""
    th = thermal_properties(maps)
    q, dt = np.full(maps.labels.shape, 1e6), 0.01
    run = sonicate(q, (DX,) * 3, th.density, dt, dt=dt, tissue=_tissue(th))
    rise = run.data["T"] - 37.0
    per_power = rise / q
    P = th.blood_density * th.blood_specific_heat * th.perfusion_rate / th.heat_capacity
    a = P.max() * dt
    expected = dt * (1 - np.exp(-a)) / a / th.heat_capacity  # k-space factor at k = 0
    np.testing.assert_allclose(per_power, expected, rtol=1e-10)
    bone = per_power[maps.labels == CORTICAL].mean()
    brain = per_power[maps.labels == BRAIN].mean()
    assert bone > 1.3 * brain
    uniform = thermal_properties(maps, specific_heat=3600.0, conductivity=0.5, perfusion=0.0)
    one = sonicate(q, (DX,) * 3, uniform.density, dt, dt=dt, tissue=_tissue(uniform))
    ratio_one = (one.data["T"][maps.labels == CORTICAL] - 37).mean() / (
        one.data["T"][maps.labels == BRAIN] - 37).mean()  # fmt: skip
    assert ratio_one < bone / brain - 0.1


def test_heat_balance_of_the_heterogeneous_head(maps):
    """Per-tissue k and rho C (no perfusion), a focal source, periodic grid: the heat stored
    equals the heat put in, to round-off, though bone, brain and water conduct differently."""
    th = thermal_properties(maps, perfusion=0.0)
    z = int(np.flatnonzero(maps.labels[20, 24] == CORTICAL).max())  # the skull's top
    x = np.moveaxis(np.indices(maps.labels.shape), 0, -1) - np.array([20, 24, z])
    q = 5e5 * np.exp(-np.sum(x**2, axis=-1) / 9.0)
    assert {WATER, TRABECULAR, CORTICAL, BRAIN} <= set(np.unique(maps.labels[q > 1e3]))
    run = sonicate(q, (DX,) * 3, th.density, 20.0, dt=0.5, tissue=_tissue(th))
    stored = np.sum(th.heat_capacity * (run.data["T"] - 37.0)) * DX**3
    heat_in = np.sum(q) * DX**3 * 20.0
    assert abs(stored - heat_in) <= 1e-10 * heat_in
    # the heat spread beyond the source: conduction worked across the classes
    assert np.count_nonzero(run.data["T"] - 37.0 > 1e-3) > np.count_nonzero(q > 1e-3 * q.max())
