"""Additive sources whose points share one signal: the filtered mask, made once per chunk.

k-Wave filters an additive source's grid in k-space (``cos(c_ref |k| dt / 2)``) in every step,
one FFT pair per source. Filtering is linear, so when every point carries the same signal the
filtered grid is that signal's value times the filtered mask: the step adds it instead
(``step.with_source_patterns``). The results must be those of filtering every step.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from require import require_fftw

from sonotile.bench.cases import heterogeneous_absorbing
from sonotile.fft import fftw
from sonotile.model.problem import MaskSource, Problem
from sonotile.physics.acoustic import AcousticModel
from sonotile.physics.acoustic import constants as plan
from sonotile.solver import runner


def with_additive_velocity(problem: Problem) -> Problem:
    """``problem`` with its two-point ux source additive (k-space filtered) too."""
    ux = problem.sources.u[0]
    assert ux is not None
    u = (MaskSource(ux.index, ux.signal, "additive", "source.ux"), *problem.sources.u[1:])
    return replace(problem, sources=replace(problem.sources, u=u), extras={})


def filtering_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every additive source count as one with a signal per point."""
    monkeypatch.setattr(plan, "shared_signal", lambda src: None)


def test_shared_signal_is_found_only_where_every_point_has_it():
    idx = np.array([[1, 2, 3], [4, 5, 6]])
    s = np.sin(np.arange(30) * 0.2)
    assert plan.shared_signal(None) is None
    np.testing.assert_array_equal(plan.shared_signal(MaskSource(idx, s, "additive")), s)
    same = np.stack([s, s], axis=1)
    np.testing.assert_array_equal(plan.shared_signal(MaskSource(idx, same, "additive")), s)
    differ = np.stack([s, 1.0001 * s], axis=1)
    assert plan.shared_signal(MaskSource(idx, differ, "additive")) is None
    # only the k-space filtered mode filters a grid
    assert plan.shared_signal(MaskSource(idx, s, "additive_no_correction")) is None
    assert plan.shared_signal(MaskSource(idx, s, "dirichlet")) is None


def test_filtered_mask_gives_the_results_of_filtering_every_step(monkeypatch, jax_float64):
    # float64 (XLA's FFT): the two ways differ by the order of a few roundings only
    problem = with_additive_velocity(heterogeneous_absorbing(24, 50, dtype="float64"))
    phys = AcousticModel.of(problem)
    assert phys.p_shared and phys.u_shared == (True, False, False)
    raw, final = runner.run(problem, chunk=16)
    filtering_every_step(monkeypatch)
    assert not AcousticModel.of(problem).p_shared
    raw_ref, final_ref = runner.run(problem, chunk=16)
    for name, ref in {**raw_ref, **final_ref}.items():
        got = {**raw, **final}[name]
        scale = np.abs(ref).max()
        assert scale > 0, name
        assert np.asarray(got).dtype == np.float64, name
        err = np.abs(np.asarray(got) - np.asarray(ref)).max() / scale
        assert err < 1e-10, (name, err)


def test_source_is_filtered_once_per_chunk_not_per_step(monkeypatch):
    """The chunk's loop runs one FFTW operator call fewer per step (the source filter)."""
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    problem = heterogeneous_absorbing(24, 20)

    def conv_calls() -> tuple[int, int]:
        """FFTW operator calls outside the program's entry (in the loop and its branches),
        and in the whole program."""
        eng = runner.single_engine(problem)
        text = eng.lower(eng.start()[0].carry, runner.step_inputs(problem, 0, 8)).compile()
        text = text.as_text()
        call = 'custom_call_target="sonotile_fftw_conv"'
        inner = [c for c in re.split(r"\n(?=\S)", text) if not c.startswith("ENTRY")]
        return sum(c.count(call) for c in inner), text.count(call)

    loop, total = conv_calls()
    filtering_every_step(monkeypatch)
    loop_ref, total_ref = conv_calls()
    assert loop == loop_ref - 1, (loop, loop_ref)
    assert total == total_ref, (total, total_ref)  # the filter moved out of the loop


def test_differentiable_signals_per_point_are_not_taken_as_one(jax_float64):
    """A simulator built with one shared signal, called with a signal per point: its signals are
    parameters, so it must not use the one-signal mask (it gave 35 % errors when it did)."""
    import sonotile as st

    n = 32
    grid = st.KWaveGrid((n, n), 1e-4, dt=2e-8, nt=40)
    medium = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    mask = np.zeros((n, n), bool)
    mask[8, 12:20] = True
    sig = 1e4 * np.sin(np.arange(30) * 0.3)
    ring = np.zeros((n, n), bool)
    ring[24, 8:24] = True
    sensor = st.KSensor(mask=ring, record=("p",))
    sim = st.make_simulator(
        grid, medium, st.KSource(p=sig, p_mask=mask), sensor, pml_size=6, dtype="float64"
    )
    per_point = np.stack([sig * (1 + 0.1 * k) for k in range(8)])
    got = np.asarray(sim({**sim.params, "p": per_point})["p"])
    ref = st.simulate(grid, medium, st.KSource(p=per_point, p_mask=mask), sensor, pml_size=6,
                      dtype="float64", quiet=True)["p"]  # fmt: skip
    ref = np.asarray(ref)
    assert np.abs(got - ref).max() <= 1e-10 * np.abs(ref).max()
