"""The cuFFT operators' backend (sonotile.fft.cufft.CufftBackend) with its cuFFT calls replaced by
the CPU stand-in of the same convention (unnormalised inverse): the same operators as XLA's
backend, so only the transforms differ on a GPU."""

import jax
import numpy as np
import pytest

from sonotile.base import config
from sonotile.base.config import Settings
from sonotile.fft import batched, cufft, xla


def test_backend_algebra_matches_xla(monkeypatch):
    monkeypatch.setattr(cufft, "BATCHED", batched.XLA)
    rng = np.random.default_rng(1)
    f = rng.standard_normal((8, 6, 10)).astype(np.float32)
    op = rng.standard_normal((8, 6, 6)).astype(np.float32)
    vecs = [rng.standard_normal(s).astype(np.complex64) for s in ((8, 1, 1), (1, 6, 1), (1, 1, 6))]
    be, ref = cufft.BACKEND, xla.BACKEND
    for a, b in zip(be.derivatives(f, op, vecs), ref.derivatives(f, op, vecs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(be.operator(f, op)), np.asarray(ref.operator(f, op)),
                               rtol=1e-4, atol=1e-4)  # fmt: skip
    assert be.native(f) and not be.native(f[None, None])


def test_inverse_hands_its_spectrum_over():
    """cuFFT's C2R overwrites its input: the call declares the spectrum aliased to an output."""
    X = jax.ShapeDtypeStruct((3, 8, 6, 5), np.complex64)
    text = jax.jit(lambda X: cufft.BATCHED.inverse(X, (8, 6, 8))).lower(X).as_text()
    assert "@sonotile_cufft_inverse" in text and "output_operand_alias" in text
    assert "tensor<3x8x6x8xf32>" in text and "rank = 3" in text


def test_vmapped_transforms_are_one_call():
    """Under ``jax.vmap`` (``simulate_many(vectorize="vmap")``) the mapped axis joins the batch
    of the call: one cuFFT call for every run, not one call per run in a loop."""
    x = jax.ShapeDtypeStruct((4, 3, 8, 6, 8), np.float32)
    text = jax.jit(jax.vmap(lambda x: cufft.BATCHED.forward(x, 3))).lower(x).as_text()
    assert text.count("@sonotile_cufft_forward") == 1 and "while" not in text
    assert "tensor<4x3x8x6x5xcomplex<f32>>" in text
    X = jax.ShapeDtypeStruct((4, 3, 8, 6, 5), np.complex64)
    text = jax.jit(jax.vmap(lambda X: cufft.BATCHED.inverse(X, (8, 6, 8)))).lower(X).as_text()
    assert text.count("@sonotile_cufft_inverse") == 1 and "while" not in text
    assert "tensor<4x3x8x6x8xf32>" in text and "output_operand_alias" in text


def _numpy_call(kind):
    """A transform of the batched convention with no derivative rules (as a custom call)."""

    def call(x, static):
        if kind == "forward":
            shape = (*x.shape[:-1], x.shape[-1] // 2 + 1)
            out = jax.ShapeDtypeStruct(shape, np.complex64)
            axes = tuple(range(-static, 0))
            return jax.pure_callback(lambda a: np.fft.rfftn(a, axes=axes).astype(np.complex64),
                                     out, x, vmap_method="broadcast_all")  # fmt: skip
        out = jax.ShapeDtypeStruct((*x.shape[: x.ndim - len(static)], *static), np.float32)
        axes = tuple(range(-len(static), 0))
        n = int(np.prod(static))
        return jax.pure_callback(
            lambda a: (np.fft.irfftn(a, s=static, axes=axes) * n).astype(np.float32), out, x,
            vmap_method="broadcast_all")  # fmt: skip

    return call


def test_derivatives_of_the_calls_go_through_xla():
    """A call without derivative rules, wrapped: gradients (reverse), tangents (forward) and a
    vmapped gradient equal those of XLA's transforms to float32 round-off."""
    fwd = cufft.with_portable_derivatives(_numpy_call("forward"), batched.XLA.forward)
    inv = cufft.with_portable_derivatives(_numpy_call("inverse"), batched.XLA.inverse)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 8, 6, 10)).astype(np.float32)
    op = rng.standard_normal((8, 6, 6)).astype(np.float32)

    def loss(f, g):
        return lambda x: jax.numpy.sum(g(f(x, 3) * op, (8, 6, 10)) ** 3) * 1e-4

    ours, ref = loss(fwd, inv), loss(batched.XLA.forward, batched.XLA.inverse)
    np.testing.assert_allclose(ours(x), ref(x), rtol=1e-5)
    g, g_ref = jax.grad(ours)(x), jax.grad(ref)(x)
    assert np.abs(g_ref).max() > 0
    np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=1e-4 * np.abs(g_ref).max())
    t = rng.standard_normal(x.shape).astype(np.float32)
    _, d = jax.jvp(ours, (x,), (t,))
    _, d_ref = jax.jvp(ref, (x,), (t,))
    np.testing.assert_allclose(d, d_ref, rtol=1e-4)
    gv = jax.vmap(jax.grad(ours))(np.stack([x, 2 * x]))
    np.testing.assert_allclose(gv[0], g_ref, rtol=1e-4, atol=1e-4 * np.abs(g_ref).max())


def test_gradients_through_the_cufft_calls_trace():
    """``jax.grad`` through the cuFFT calls (the operators of ``make_simulator`` on a GPU): the
    primal on the calls, the derivatives on XLA's FFT."""
    x = jax.ShapeDtypeStruct((3, 8, 6, 8), np.float32)

    def loss(x):
        X = cufft.BATCHED.forward(x, 3)
        return jax.numpy.sum(cufft.BATCHED.inverse(X * 0.5, (8, 6, 8)) ** 2)

    text = jax.jit(jax.grad(loss)).lower(x).as_text()
    assert "@sonotile_cufft_forward" in text and "@sonotile_cufft_inverse" in text
    assert "stablehlo.fft" in text


def test_inverse_refuses_a_spectrum_of_another_grid():
    with pytest.raises(ValueError, match="half spectrum"):
        cufft.BATCHED.inverse(np.zeros((8, 6, 4), np.complex64), (8, 6, 8))


def test_load_says_why_not(monkeypatch, tmp_path):
    """The library comes from the setting (``SONOTILE_CUFFT_LIB``); each path is tried once."""
    monkeypatch.setattr(cufft, "_loaded", {})
    saved = config.current()
    try:
        config.configure(cufft_lib="")
        assert "SONOTILE_CUFFT_LIB is not set" in cufft.load()
        assert not cufft.named() and not cufft.available()
        config.configure(cufft_lib=str(tmp_path / "missing.so"))
        assert cufft.named() and "missing.so: no such file" in cufft.load()
        assert Settings.from_env({cufft.ENV: "/x/lib.so"}).cufft_lib == "/x/lib.so"
    finally:
        config.configure(saved)
