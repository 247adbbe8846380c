"""Whole runs with the velocity / density updates inside the FFTW calls (the default on one
CPU device) against the same runs with XLA doing them after the calls
(``Settings.fftw_updates`` off): the same physics, float32 round-off apart."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from require import require_fftw

from sonotile.base import config
from sonotile.bench.cases import heterogeneous_absorbing
from sonotile.fft import fftw
from sonotile.model.grid import Grid
from sonotile.model.problem import MaskSource, Medium, Pml, Problem, Sensor, Sources
from sonotile.physics.acoustic import step
from sonotile.solver import runner


@pytest.fixture(autouse=True)
def fftw_ok():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")


def lossless_3d(nonlinear: bool) -> Problem:
    """The heterogeneous case made lossless (density updated inside the divergence's calls
    too); ``nonlinear``: B/A kept (the update's factor is a field, else rho0's field)."""
    p = heterogeneous_absorbing(24, 40)
    m = p.medium
    med = Medium(m.c0, m.rho0, p.grid, bona=m.bona if nonlinear else None)
    return replace(p, medium=med)


def homogeneous_2d() -> Problem:
    """2-D, homogeneous (scalar coefficients), an additive source and a velocity sensor."""
    n, dx = 40, 1e-4
    g = Grid((n, n + 6), (dx, dx), 0.3 * dx / 1500, 60)
    t = np.arange(60) * g.dt
    sig = 1e3 * np.sin(2 * np.pi * 1e6 * t) * np.exp(-(((t - 2e-6) * 1e6) ** 2))
    idx = np.array([(12, k) for k in range(16, 28)])
    src = Sources(p=MaskSource(idx, sig, "additive", "source.p"), u=(None, None))
    sensor = Sensor(index=np.array([(28, 20), (20, 30), (30, 12)]), record=("p", "u", "p_final"))
    return Problem(g, Medium(1500.0, 1000.0, g), src, sensor, Pml((6, 6), (2.0, 2.0)), "float32")


def run_both(problem: Problem, monkeypatch) -> tuple[dict, dict, dict]:
    """Results fused and separate, and how often each fused update was traced."""
    counts = {"grad": 0, "div": 0}
    for name in counts:
        real = getattr(step, f"{name}_update")

        def counted(*a, _real=real, _name=name):
            counts[_name] += 1
            return _real(*a)

        monkeypatch.setattr(step, f"{name}_update", counted)
    raw, final = runner.run(problem, chunk=16)
    fused = {**raw, **final}
    saved = config.current()
    config.configure(fftw_updates=False)
    try:
        traced = dict(counts)
        raw, final = runner.run(problem, chunk=16)
        assert counts == traced  # the separate run never calls them
    finally:
        config.configure(saved)
    return fused, {**raw, **final}, counts


@pytest.mark.parametrize(
    "make, density",
    [
        (lambda: heterogeneous_absorbing(24, 40), False),  # rho0_sg derived: staggered mean
        (lambda: lossless_3d(nonlinear=True), True),
        (lambda: lossless_3d(nonlinear=False), True),
        (homogeneous_2d, True),  # scalar coefficients, 2-D planes
    ],
    ids=["absorbing-3d", "lossless-nonlinear-3d", "lossless-3d", "homogeneous-2d"],
)
@pytest.mark.usefixtures("no_program_cache")  # counts traces
def test_fused_updates_give_the_separate_updates_results(make, density, monkeypatch):
    problem = make()
    fused, separate, counts = run_both(problem, monkeypatch)
    assert counts["grad"] > 0
    assert (counts["div"] > 0) == density  # absorbing: du is needed for the absorption term
    assert fused.keys() == separate.keys()
    for name, ref in separate.items():
        ref = np.asarray(ref, np.float64)
        got = np.asarray(fused[name], np.float64)
        scale = np.abs(ref).max()
        assert scale > 0, name
        err = np.abs(got - ref).max() / scale
        assert err < 1e-5, (name, err)  # seen: 1.5e-6
