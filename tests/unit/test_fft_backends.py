"""The FFT backends behind one interface (:mod:`sonotile.fft.backend`): FFTW's and XLA's give
the same operators, the choice is made by name, and the operators ask only the interface."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from require import require_fftw

from sonotile.fft import backend, fftw
from sonotile.spectral.operators import FourierOps


def _ops(shape: tuple[int, ...], fft: str) -> FourierOps:
    spacing = (1e-3,) * len(shape)
    return FourierOps.build(shape, spacing, 1500.0, 1e-7, "float32", alpha_power=1.5,
                            source_filter=True, fft=fft)  # fmt: skip


def _close(a: jax.Array, b: jax.Array, tol: float = 2e-5) -> None:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert np.abs(a - b).max() <= tol * np.abs(b).max(), np.abs(a - b).max() / np.abs(b).max()


def test_choice_by_name():
    assert backend.get("xla").name == "xla"
    assert backend.portable() is backend.get("xla")
    assert backend.resolve("xla", "float32") == "xla"
    assert backend.resolve("auto", "float64") == "xla"  # FFTW binds single precision only
    with pytest.raises(ValueError, match="unknown FFT backend 'cufftmp'"):
        backend.get("cufftmp")
    x64 = jnp.zeros((4, 4), jnp.float32)
    assert not backend.get("xla").fused(x64)
    assert "xla_fft" in backend.get("xla").describe()


@pytest.mark.parametrize("shape", [(16, 12, 10), (9, 8, 7), (12, 18), (20,)])
def test_operators_agree_between_backends(shape):
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    a, b = _ops(shape, "fftw"), _ops(shape, "xla")
    assert a.backend.name == "fftw" and b.backend.name == "xla"
    rng = np.random.default_rng(sum(shape))
    f = [jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in shape]
    for x, y in zip(a.grad(f[0]), b.grad(f[0])):
        _close(x, y)
    for x, y in zip(a.div(f), b.div(f)):
        _close(x, y)
    _close(a.fractional(f[0], 1), b.fractional(f[0], 1))
    _close(a.filter_source(f[0]), b.filter_source(f[0]))
    if len(shape) >= 2:
        _close(a.div_sum(f), b.div_sum(f))
    which = [(ax, 1 if ax % 2 else -1) for ax in range(len(shape))] + [(0, 1)]
    for xs, ys in zip(a.diffs_many(f[:2], which), b.diffs_many(f[:2], which)):
        for x, y in zip(xs, ys):
            _close(x, y)


@pytest.mark.parametrize("kind", ["dct1", "dst1"])
@pytest.mark.parametrize("shape", [(17,), (16, 21), (9, 12, 10)])
def test_trig_operators_agree_between_backends(shape, kind):
    """An operator on the DCT-I / DST-I coefficients (the heat model's insulating and
    conducting boundaries): FFTW's in-place real-to-real call equals XLA's real FFTs of the
    implied periods, and both give back the field for a unit operator."""
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    rng = np.random.default_rng(len(shape))
    f = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    op = jnp.asarray(rng.random(shape), jnp.float32)
    got = {n: jax.jit(backend.get(n).trig_operator, static_argnums=2)(f, op, kind)
           for n in ("fftw", "xla")}  # fmt: skip
    _close(got["fftw"], got["xla"], 1e-6)
    _close(backend.get("fftw").trig_operator(f, jnp.ones_like(f), kind), f, 1e-6)


def test_single_axis_derivatives_are_differentiable_on_fftw():
    """The fused single-axis derivatives (one FFTW call for several fields) have a reverse-mode
    rule: gradients equal XLA's."""
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    shape = (12, 10, 8)
    a, b = _ops(shape, "fftw"), _ops(shape, "xla")
    rng = np.random.default_rng(3)
    f, g = (jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(2))
    which = [(0, 1), (1, -1), (2, -1)]
    w = [jnp.asarray(rng.standard_normal(shape), jnp.float32) for _ in range(6)]

    def loss(ops: FourierOps, f: jax.Array, g: jax.Array) -> jax.Array:
        out = [d for ds in ops.diffs_many([f, g], which) for d in ds]
        return sum(jnp.sum(d * v) for d, v in zip(out, w))

    for x, y in zip(jax.grad(loss, (1, 2))(a, f, g), jax.grad(loss, (1, 2))(b, f, g)):
        _close(x, y, 1e-4)


def test_a_derivative_along_one_axis_is_exact_on_a_sine():
    """``diffs`` on FFTW (whole-grid transforms) differentiates a sine along one axis, at the
    staggered points, to round-off."""
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    n, d = 16, 1e-3
    ops = _ops((n, n, n), "fftw")
    x = np.arange(n) * d
    k = 2 * np.pi * 3 / (n * d)
    f = jnp.asarray(np.broadcast_to(np.sin(k * x)[None, :, None], (n, n, n)), jnp.float32)
    (dy,) = ops.diffs(f, [(1, 1)])
    exact = k * np.cos(k * (x + d / 2))[None, :, None]
    _close(dy, np.broadcast_to(exact, (n, n, n)), 1e-5)
