"""The growth monitor (sonotile.solver.growth): a run whose energy rises with no source on
stops with SimulationGrowing, naming the model, the steps, the factor and the likely causes,
before it overflows; sources on and legitimate runs are not judged as growth; the setting
``growth_check`` turns it off."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import numpy as np
import pytest

import sonotile as st
from sonotile.api import Options, build_problem
from sonotile.base import config
from sonotile.physics.base import GrowthProxy
from sonotile.solver import runner
from sonotile.solver.finite import NonFiniteError
from sonotile.solver.growth import GROWTH_FACTOR, GrowthMonitor, SimulationGrowing, reduce


class _Model:
    describe = "test model"

    def growth_proxy(self, problem: object) -> GrowthProxy:
        return GrowthProxy((1.0,), 2.0, sources_end=50)

    def instability_hint(self, problem: object) -> str:
        return "CFL number 0.3"


def test_the_rule_on_a_series_of_energies() -> None:
    """Not judged while a source is on; then the smallest energy since, times the factor
    (10) and the spread (2): 20-fold passes, 21-fold stops the run."""
    problem = SimpleNamespace(grid=SimpleNamespace(nt=1000), dtype="float64")
    mon = GrowthMonitor(_Model(), problem, _Model().growth_proxy(problem))
    assert mon.limit == GROWTH_FACTOR * 2
    mon.check(1e-3, 10)
    mon.check(1e3, 40)  # a source on: rising is no growth
    for step, e in ((100, 5.0), (150, 1.0), (200, 3.0), (249, 30.0), (250, 20.0)):
        mon.check(e, step)  # 30 within 100 steps of the smallest (step 150): not judged
    with pytest.raises(SimulationGrowing) as err:
        mon.check(21.0, 300)
    e = err.value
    assert isinstance(e, NonFiniteError)  # the front ends' exit for a blown-up run
    assert (e.step, e.since, e.limit) == (300, 150, 20.0) and e.factor == pytest.approx(21)
    msg = str(e)
    assert msg.startswith("test model: the energy grew 21-fold from time step 150 to time step")
    assert "300 of 1000 with no source on" in msg and "CFL number 0.3" in msg
    assert "pml_alpha" in msg and "SONOTILE_GROWTH_CHECK=0" in msg
    assert str(pickle.loads(pickle.dumps(e))) == msg


def test_one_pass_finds_non_finite_values_and_the_energy() -> None:
    state = ([np.array([1.0, 2.0]), np.array([3.0])], np.array([4, 5]))  # ints: not judged
    ok, e = reduce(state, (2.0, 0.0, 1.0))
    assert bool(ok) and float(e) == pytest.approx(2 * 5 + 16 + 25)
    ok, e = reduce(([np.array([1.0, np.inf])], np.array([1.0])), ())
    assert not bool(ok) and float(e) == 0


def test_round_off_after_the_wave_left_is_not_growth() -> None:
    """A wave absorbed down to round-off: the smallest energy is floored at (1000 eps)^2 of the
    largest, so noise at eps^2 does not count as growth; growth above the floor does."""
    problem = SimpleNamespace(grid=SimpleNamespace(nt=1000), dtype="float32")
    mon = GrowthMonitor(_Model(), problem, _Model().growth_proxy(problem))
    mon.check(1.0, 60)
    mon.check(1e-30, 200)
    mon.check(1e-14, 400)  # float32 round-off of a unit energy: not judged
    with pytest.raises(SimulationGrowing):
        mon.check(1e-4, 600)


def _edge_solid(nt: int) -> dict:
    """k-Wave's elastic scheme with a solid against the PML'd last plane along x and a PML
    alpha of 1 (as k-Wave's own pstdElastic2D, unstable there), every mode excited."""
    n, m = 64, 4
    cp, cs, rho = np.full((n, m), 1500.0), np.zeros((n, m)), np.full((n, m), 1000.0)
    cp[32:], cs[32:], rho[32:] = 3000.0, 1800.0, 1900.0
    p0 = np.random.default_rng(0).standard_normal((n, m))
    return st.pstd_elastic_2d(
        st.KWaveGrid((n, m), 1e-4, dt=1e-8, nt=nt), st.KWaveElasticMedium(cp, cs, rho),
        st.ElasticSource(p0=p0), st.KSensor(mask=np.ones((n, m), bool), record=("p_final",)),
        pml_size=(20, 0), pml_alpha=1.0, smooth_p0=False,
    )  # fmt: skip


def test_unstable_elastic_pml_stops_before_overflow() -> None:
    with pytest.raises(SimulationGrowing) as err:
        _edge_solid(3000)
    e = err.value
    assert e.model == "elastic model" and e.factor > e.limit and e.step < 3000
    assert "CFL number max(c_p) dt / dx = 0.3" in str(e)
    before = config.current()
    try:
        config.configure(growth_check=False)  # the setting: the run goes on
        out = _edge_solid(e.step + 200)
    finally:
        config.configure(before)
    assert np.all(np.isfinite(out["p_final"]))


def test_stable_lossless_run_with_a_source_is_not_stopped() -> None:
    """A tone burst into a lossless layered medium (water, a 2.5x stiffer layer), judged every
    20 steps for 1200 steps after it ends: no stop."""
    n = 64
    c = np.full((n, n), 1500.0)
    rho = np.full((n, n), 1000.0)
    c[36:44], rho[36:44] = 2400.0, 1600.0
    mask = np.zeros((n, n), bool)
    mask[20, 28:36] = True
    t = np.arange(200) * 2e-8
    burst = 1e3 * np.sin(2 * np.pi * 1e6 * t) * np.hanning(200)
    problem, _ = build_problem(
        st.KWaveGrid((n, n), 1e-4, dt=2e-8, nt=1400), st.KWaveMedium(sound_speed=c, density=rho),
        st.KSource(p_mask=mask, p=burst), st.KSensor(mask=mask, record=("p",)),
        Options(pml_size=10),
    )  # fmt: skip
    mon = GrowthMonitor.of(runner.model_for(problem), problem)
    assert mon is not None and mon.proxy.sources_end == 200  # judged from step 200 on
    raw, _ = runner.run(problem, chunk=20)
    assert np.all(np.isfinite(raw["p"]))


def test_a_growing_run_of_a_vmapped_batch_is_named() -> None:
    """``simulate_many(vectorize="vmap")`` watches each run of its batch: of water and the
    solid against the PML'd last plane (PML alpha 1, as above), the second run stops growing
    before it overflows, named by its index."""
    n, m = 64, 4
    cp, cs, rho = np.full((n, m), 1500.0), np.zeros((n, m)), np.full((n, m), 1000.0)
    water = st.KWaveElasticMedium(cp.copy(), cs.copy(), rho.copy())
    cp[32:], cs[32:], rho[32:] = 3000.0, 1800.0, 1900.0
    edge = st.KWaveElasticMedium(cp, cs, rho)
    p0 = np.random.default_rng(0).standard_normal((n, m))
    with pytest.raises(SimulationGrowing, match=r"simulate_many run 1: elastic model") as err:
        st.simulate_many(
            st.KWaveGrid((n, m), 1e-4, dt=1e-8, nt=3000), [water, edge], st.ElasticSource(p0=p0),
            st.KSensor(mask=np.ones((n, m), bool), record=("p_final",)), vectorize="vmap",
            pml_size=(20, 0), pml_alpha=1.0, smooth_p0=False,
        )  # fmt: skip
    assert err.value.factor > err.value.limit and err.value.step < 3000
