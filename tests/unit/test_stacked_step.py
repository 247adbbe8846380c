"""The stacked GPU step (sonotile.physics.acoustic.stacked_step) on the CPU stand-in FFT (jnp.fft,
unnormalised inverse): equal to the unstacked step to float32 round-off."""

import dataclasses

import jax
import numpy as np
import pytest

from sonotile.bench import stacked_run as sr
from sonotile.bench.inprocess import bench_problem
from sonotile.fft import batched
from sonotile.model.problem import MaskSource, Sources
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


def test_velocity_sources_are_refused():
    phys = dataclasses.replace(sr.setup(bench_problem("lossless", 8, 2), 2).phys,
                               u_modes=("additive", None, None))  # fmt: skip
    with pytest.raises(ValueError, match="velocity source"):
        ss.check(phys)


def test_cufft_refused_without_a_gpu():
    with pytest.raises(RuntimeError, match="cufft"):
        batched.get("cufft")
