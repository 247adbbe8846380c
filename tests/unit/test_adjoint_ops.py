"""The adjoint test <A x, y> = <x, A^T y> for every spectral operator, on the FFTW backend
(custom transpose rules, :mod:`sonotile.spectral.linear`) and on XLA's FFT (JAX's own rules), on
odd and even grids; and the FFTW primitive's JVP and batching rules."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sonotile.fft import fftw
from sonotile.spectral.linear import AdjointOps
from sonotile.spectral.operators import FourierOps

SHAPES = [(16,), (15,), (16, 12), (15, 11), (12, 10, 8), (11, 9, 7)]
OPERATORS = ["grad", "div", "fractional1", "fractional2", "filter", "unstagger"]


def _ops(shape, fft):
    inner = FourierOps.build(
        shape, (1e-4,) * len(shape), 1540.0, 2e-8, "float32", alpha_power=1.4,
        source_filter=True, unstagger=True, fft=fft,
    )  # fmt: skip
    if inner.fft != fft:
        pytest.skip(f"{fft} backend unavailable ({fftw.reason()})")
    return AdjointOps(inner)


def _apply(ops, name, xs):
    if name == "grad":
        return list(ops.grad(xs[0]))
    if name == "div":
        return list(ops.div(tuple(xs)))
    if name.startswith("fractional"):
        return [ops.fractional(xs[0], int(name[-1]))]
    if name == "filter":
        return [ops.filter_source(xs[0])]
    return [ops.unstagger(x, a) for a, x in enumerate(xs)]


@pytest.mark.parametrize("fft", ["fftw", "xla"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", OPERATORS)
def test_adjoint_identity(name, shape, fft):
    ops = _ops(shape, fft)
    rng = np.random.default_rng(len(shape) + shape[0])
    d = len(shape)
    n_in = d if name in ("div", "unstagger") else 1
    n_out = d if name in ("grad", "div", "unstagger") else 1
    xs = [jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(n_in)]
    ys = [jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(n_out)]
    out, vjp = jax.vjp(lambda *a: _apply(ops, name, list(a)), *xs)
    xt = vjp(ys)
    lhs = sum(jnp.vdot(a, b) for a, b in zip(out, ys))
    rhs = sum(jnp.vdot(a, b) for a, b in zip(xs, xt))
    scale = sum(jnp.linalg.norm(a) * jnp.linalg.norm(b) for a, b in zip(out, ys))
    assert abs(float(lhs - rhs)) <= 1e-5 * float(scale), (float(lhs), float(rhs))


def test_fftw_primitive_matches_its_operator_and_has_jvp_and_vmap():
    ops = _ops((12, 10, 8), "fftw")
    rng = np.random.default_rng(0)
    x, t = (jnp.asarray(rng.standard_normal((12, 10, 8)), jnp.float32) for _ in range(2))
    direct = ops.inner.grad(x)
    wrapped = ops.grad(x)
    assert all(jnp.array_equal(a, b) for a, b in zip(direct, wrapped))
    _, tangent = jax.jvp(ops.grad, (x,), (t,))
    assert all(jnp.array_equal(a, b) for a, b in zip(tangent, ops.inner.grad(t)))
    batched = jax.vmap(ops.grad)(jnp.stack([x, t]))
    assert all(jnp.array_equal(b[1], a) for a, b in zip(ops.inner.grad(t), batched))
    # the transpose of the transpose is the operator again
    lin = jax.linear_transpose(ops.filter_source, x)
    twice = jax.linear_transpose(lambda y: lin(y)[0], x)(t)[0]
    assert jnp.allclose(twice, ops.filter_source(t), rtol=1e-5, atol=1e-5 * jnp.abs(t).max())
