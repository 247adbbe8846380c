"""``step.shared_cotangent``: a fusion boundary on the tangent only, which makes the backward
pass materialise a cotangent that several fusions read (the density sum's), must leave every
value and derivative as JAX's own rules give them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sonotile.fft import fftw
from sonotile.physics.acoustic.step import shared_cotangent
from sonotile.spectral.linear import Barrier


@pytest.fixture(autouse=True, scope="module")
def _float64(jax_float64):
    """64-bit JAX types for these tests only."""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shared_cotangent_is_the_identity_with_the_same_derivatives(dtype):
    """``step.shared_cotangent`` (a fusion boundary on the tangent only) changes neither the
    value nor any derivative of a nonlinear function of several fields that read it: the same
    function without it, JAX's own rules, on random inputs (float32 through FFTW's boundary,
    float64 through the identity)."""

    if dtype == "float32" and not fftw.available():
        pytest.skip(f"FFTW backend unavailable ({fftw.reason()})")
    keep = Barrier("fftw")
    rng = np.random.default_rng(3)
    xs = [jnp.asarray(rng.uniform(0.5, 1.5, (6, 5, 4)), dtype) for _ in range(4)]

    def f(boundary, a, b, c, d):
        s = a + b + c
        s = shared_cotangent(s, keep) if boundary else s
        return (d * s * (1 + 0.3 * s), jnp.sqrt(d) * s, s * a)

    plain, shared = (jax.jit(lambda *x, b=b: f(b, *x)) for b in (False, True))
    assert all(np.array_equal(p, q) for p, q in zip(plain(*xs), shared(*xs)))
    gs = [jnp.asarray(rng.standard_normal((6, 5, 4)), dtype) for _ in range(3)]
    vjps = [jax.jit(lambda *x, fn=fn: jax.vjp(fn, *x)[1](tuple(gs)))(*xs) for fn in (plain, shared)]
    tol = 1e-12 if dtype == "float64" else 1e-6
    for p, q in zip(*vjps):
        np.testing.assert_allclose(q, p, rtol=tol, atol=0)
        assert float(jnp.max(jnp.abs(p))) > 0.1  # a real cotangent, not zeros
    ts = tuple(jnp.asarray(rng.standard_normal((6, 5, 4)), dtype) for _ in range(4))
    jvps = [jax.jvp(fn, tuple(xs), ts)[1] for fn in (plain, shared)]
    for p, q in zip(*jvps):
        np.testing.assert_allclose(q, p, rtol=tol, atol=0)
