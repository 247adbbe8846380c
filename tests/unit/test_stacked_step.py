"""The stacked GPU step (sonotile.physics.acoustic.stacked_step) on the CPU stand-in FFT (jnp.fft,
unnormalised inverse): equal to the unstacked step to float32 round-off."""

import dataclasses

import jax
import numpy as np
import pytest

from sonotile.bench.inprocess import bench_problem
from sonotile.fft import batched
from sonotile.model.problem import Sources
from sonotile.physics.acoustic import stacked_run as sr
from sonotile.physics.acoustic import stacked_step as ss

N, STEPS = 16, 10


def _p0(problem):
    ax = np.arange(N) - N / 2
    p0 = 1e3 * np.exp(
        -(ax[:, None, None] ** 2 + ax[None, :, None] ** 2 + ax[None, None, :] ** 2) / 4
    )
    return dataclasses.replace(problem, sources=Sources(p0=p0.astype(np.float32)))


def _both(problem):
    s = sr.setup(problem, STEPS)
    ref = sr.run_unstacked(jax.tree.map(lambda a: a + 0, s.start), s.xs, s.c, s.ops, s.phys)
    c, ops, start = s.stacked("xla")
    return ref, ss.unstack_state(sr.run_stacked(start, s.xs, c, ops, s.phys))


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
    for a, b in zip(jax.tree.leaves(ref), jax.tree.leaves(got)):
        a, b = np.asarray(a), np.asarray(b)
        assert np.abs(a).max() > 0
        assert np.abs(a - b).max() <= 5e-6 * np.abs(a).max()


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
