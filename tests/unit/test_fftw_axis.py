"""FFTW's single-axis kernels on 3-D float32 grids (``fftw.axis_diff``, ``fftw.axis_update``: the
elastic model's derivatives and split-field updates): the same values as XLA's 1-D transforms
followed by the update in JAX, on every axis, for even and odd lengths, and the derivative's
reverse-mode rule is its adjoint."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from require import require_fftw

from sonotile.fft import fftw, xla
from sonotile.model.staggering import staggered_mean
from sonotile.spectral.operators import FourierOps

SHAPES = [(16, 12, 8), (15, 11, 10)]  # 15 and 11: vector kernel and FFTW plans along x, y


@pytest.fixture(autouse=True)
def fftw_ok():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")


def rel(a: jax.Array, b: jax.Array) -> float:
    return float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))


@pytest.mark.parametrize("shape", SHAPES)
def test_axis_diff_equals_1d_transforms_and_its_adjoint(shape):
    rng = np.random.default_rng(0)
    ops = FourierOps.build(shape, (1e-3, 2e-3, 1.5e-3), 1500.0, 1e-7, fft="fftw")
    x, y = (jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(2))
    for a in range(3):
        for vecs in (ops.shift_pos, ops.shift_neg):
            got = fftw.axis_diff([x, y], [(0, a, vecs[a]), (1, a, vecs[a])])
            ref = xla.BACKEND.along_axis([x, y], a, [vecs[a]])
            assert max(rel(g, r) for g, r in zip(got, ref)) < 2e-6, a
        # <D x, y> = <x, D^T y>: the custom rule against XLA's own transpose
        v = ops.shift_pos[a]

        def ours(z: jax.Array, a=a, v=v) -> jax.Array:
            return jnp.vdot(fftw.BACKEND.axis_operators([z], [(0, a, v)])[0], y)

        def xlas(z: jax.Array, a=a, v=v) -> jax.Array:
            return jnp.vdot(xla.BACKEND.along_axis([z], a, [v])[0], y)

        g1, g2 = jax.grad(ours)(x), jax.grad(xlas)(x)
        assert rel(g1, g2) < 2e-6, a


@pytest.mark.parametrize("shape", SHAPES)
def test_axis_update_equals_derivative_then_update(shape):
    rng = np.random.default_rng(1)
    ops = FourierOps.build(shape, (1e-3, 2e-3, 1.5e-3), 1500.0, 1e-7, fft="fftw")

    def grid() -> jax.Array:
        return jnp.asarray(rng.standard_normal(shape), jnp.float32)

    u, w, old1, old2, g1, g2, p = (grid() for _ in range(7))
    rho = jnp.asarray(rng.uniform(800, 2000, shape), jnp.float32)
    for a in range(3):
        v = ops.shift_neg[a]
        d = xla.BACKEND.along_axis([u, w], a, [v])
        ms = [jnp.asarray(rng.uniform(0.5, 1, n), jnp.float32) for n in shape]
        mb = [jnp.reshape(m, [-1 if b == k else 1 for b in range(3)]) for k, m in enumerate(ms)]
        M = mb[a] * mb[[b for b in range(3) if b != a][0]] * mb[[b for b in range(3) if b != a][1]]
        gi = (a + 1) % 3
        refs = [
            M * (M * old1 + (g1 * d[0] + g2 * d[1])) + 0.5 * p,
            old2 + (1e-7 / staggered_mean(rho, gi)) * d[1],
            2.5 * d[0],
        ]
        got = fftw.axis_update([u, w], a, v, [
            (old1, ms, [(0, g1), (1, g2)], (p, 0.5)),
            (old2, None, [(1, ("mean", rho, gi, 1e-7))]),
            (None, None, [(0, 2.5)]),
        ])  # fmt: skip
        for g, r, o in zip(got, refs, (0, old2, 0)):
            assert rel(g - o, r - o) < 3e-6, a

        # written over the old field's buffer (donated): the same values
        def one(u: jax.Array, o: jax.Array, a=a, v=v, ms=ms) -> jax.Array:
            return fftw.axis_update([u], a, v, [(o, ms, [(0, g1)])])[0]

        f = jax.jit(one, donate_argnums=1)
        assert rel(f(u, old1 + 0), M * (M * old1 + g1 * d[0])) < 3e-6, a
