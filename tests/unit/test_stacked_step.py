"""The stacked GPU step (sonotile.physics.acoustic.stacked_step) on the CPU stand-in FFT (jnp.fft,
unnormalised inverse): equal to the unstacked step to float32 round-off."""

import dataclasses

import jax
import numpy as np
import pytest

from sonotile.bench import stacked_run as sr
from sonotile.bench.inprocess import bench_problem
from sonotile.fft import batched
from sonotile.model.problem import MaskSource, Sources, TransducerSource
from sonotile.physics.acoustic import stacked_step as ss

N, STEPS = 16, 10


def _p0(problem):
    ax = np.arange(N) - N / 2
    p0 = 1e3 * np.exp(
        -(ax[:, None, None] ** 2 + ax[None, :, None] ** 2 + ax[None, None, :] ** 2) / 4
    )
    return dataclasses.replace(problem, sources=Sources(p0=p0.astype(np.float32)))


def _two_points(problem, mode):
    """Two source points with signals of their own (additive: filtered in every step)."""
    t = np.arange(STEPS)
    sig = 1e-3 * np.stack([np.sin(0.7 * t), np.cos(0.4 * t)], axis=1)  # [kg/m^3]
    src = MaskSource(np.array([[4, 8, 8], [9, 6, 7]]), sig, mode)
    return dataclasses.replace(problem, sources=Sources(p=src))


def _both(problem):
    s = sr.setup(problem, STEPS)
    ref = sr.run_unstacked(jax.tree.map(lambda a: a + 0, s.start), s.xs, s.c, s.ops, s.phys)
    c, ops, start = s.stacked("xla")
    return ref, ss.unstack_state(sr.run_stacked(start, s.xs, c, ops, s.phys))


def _assert_close(ref, got):
    """Every field within 5e-6 of its peak (float32 round-off of different sums)."""
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(got), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        assert np.abs(a).max() > 0
        assert np.abs(a - b).max() <= 5e-6 * np.abs(a).max()


@pytest.mark.parametrize(
    "case,mode,ivp",
    [
        ("lossless", "additive_no_correction", False),
        ("absorbing_nonlinear", "additive", False),
        ("absorbing_nonlinear", "additive_no_correction", True),
    ],
)
def test_stacked_step_equals_the_step(case, mode, ivp):
    problem = bench_problem(case, N, STEPS, mode)
    ref, got = _both(_p0(problem) if ivp else problem)
    _assert_close(ref, got)


@pytest.mark.parametrize("mode", ["additive", "dirichlet"])
def test_stacked_step_with_per_point_signals(mode):
    ref, got = _both(_two_points(bench_problem("absorbing_nonlinear", N, STEPS), mode))
    _assert_close(ref, got)


def test_inverse_is_unnormalised():
    x = np.random.default_rng(0).standard_normal((2, 6, 5, 4)).astype(np.float32)
    X = batched.XLA.forward(x, 3)
    assert X.shape == (2, 6, 5, 3)
    back = np.asarray(batched.XLA.inverse(X, (6, 5, 4)))
    np.testing.assert_allclose(back, x * 120, rtol=1e-5, atol=1e-4)


def _velocity_sources(problem, mode):
    """A source on each velocity component: two points with signals of their own on ``ux``,
    one signal shared by two points on ``uy`` (additive: its filtered mask made once), one
    point on ``uz``; all in ``mode``."""
    t = np.arange(STEPS)
    own = 1e-2 * np.stack([np.sin(0.7 * t), np.cos(0.4 * t)], axis=1)  # [m/s]
    shared = 1e-2 * np.sin(0.5 * t)
    sources = (
        MaskSource(np.array([[4, 8, 8], [9, 6, 7]]), own, mode),
        MaskSource(np.array([[7, 7, 9], [7, 8, 9]]), shared, mode),
        MaskSource(np.array([[10, 5, 6]]), shared[:6], mode),  # stops after 6 steps
    )
    return dataclasses.replace(problem, sources=Sources(u=sources))


@pytest.mark.parametrize("mode", ["additive", "additive_no_correction", "dirichlet"])
def test_stacked_step_with_velocity_sources(mode):
    ref, got = _both(_velocity_sources(bench_problem("absorbing_nonlinear", N, STEPS), mode))
    _assert_close(ref, got)


def test_stacked_step_with_a_transducer():
    """k-Wave's transducer: one signal, delayed per point, added to ``ux``."""
    t = np.arange(STEPS + 4)
    points = np.array([[5, y, z] for y in range(6, 10) for z in (7, 8)])
    tr = TransducerSource(points, 1e-2 * np.sin(0.6 * t), np.arange(len(points)) % 4)
    problem = bench_problem("lossless", N, STEPS)
    ref, got = _both(dataclasses.replace(problem, sources=Sources(transducer=tr)))
    _assert_close(ref, got)


def test_cufft_refused_without_a_gpu():
    with pytest.raises(RuntimeError, match="cufft"):
        batched.get("cufft")
