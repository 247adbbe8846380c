"""FFTW's general transforms (:func:`sonotile.fft.fftw.rfft_axes`, :func:`~.irfft_axes`,
:func:`~.fft_axis`) equal numpy's ``rfftn`` / ``irfftn`` / ``fft`` / ``ifft`` to float32
round-off on odd, even and prime lengths, every axis, 2-D and 3-D, and round-trip."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from require import require_fftw

from sonotile.fft import fftw

SHAPES_2D = [(45, 64), (53, 97), (64, 45), (97, 53)]
SHAPES_3D = [(45, 53, 64), (64, 97, 45), (53, 45, 97), (7, 64, 53)]


@pytest.fixture(autouse=True)
def fftw_ok():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.complex128), np.asarray(b, np.complex128)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def _real(shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _complex(shape, seed=1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _trailing_runs(ndim):
    return [tuple(range(ndim - k, ndim)) for k in range(1, ndim + 1)]


@pytest.mark.parametrize("shape", SHAPES_2D + SHAPES_3D)
def test_rfft_axes_equals_numpy(shape):
    x = _real(shape)
    for axes in _trailing_runs(len(shape)):
        got = jax.jit(lambda v, a=axes: fftw.rfft_axes(v, a))(x)
        assert got.dtype == jnp.complex64 and got.shape == (*shape[:-1], shape[-1] // 2 + 1)
        assert _rel(got, np.fft.rfftn(x.astype(np.float64), axes=axes)) < 1e-5, axes


@pytest.mark.parametrize(
    "shape",
    [(45, 53, 64), (37, 64, 45), (6, 9, 10), (5, 250, 251), (9, 32, 30, 33), (4, 7, 33, 20)],
)  # fmt: skip
def test_rfft_axes_of_a_batch_in_groups_equals_numpy(shape, fftw_threads):
    """A batch of 2-D / 3-D transforms (>= 2 per thread) goes group by group on 1-thread plans
    (an LFB block's planes): numpy's rfftn on every transform, odd and even sizes, groups of
    several planes with a shorter last group (45 planes of 53x64: 18, 18, 9) or of one plane
    (250x251), 1 and 2 threads; 2-D planes with even rows (53x64, 9x10, 33x20) also by
    halves, one plane per work item."""
    x = _real(shape, seed=11)
    axes = tuple(range(1, len(shape)))
    got = jax.jit(lambda v: fftw.rfft_axes(v, axes))(x)
    assert fftw.threads() == fftw_threads
    assert got.dtype == jnp.complex64 and got.shape == (*shape[:-1], shape[-1] // 2 + 1)
    assert _rel(got, np.fft.rfftn(x.astype(np.float64), axes=axes)) < 1e-5


@pytest.mark.parametrize("shape", SHAPES_2D + SHAPES_3D)
def test_irfft_axes_equals_numpy(shape):
    for axes in _trailing_runs(len(shape)):
        half = (*shape[:-1], shape[-1] // 2 + 1)
        X = _complex(half)  # not Hermitian on the edge bins: numpy ignores what C2R ignores
        s = [shape[a] for a in axes]
        want = np.fft.irfftn(X.astype(np.complex128), s=s, axes=axes)
        got = jax.jit(lambda v, a=axes: fftw.irfft_axes(v, shape[-1], a))(X)
        assert got.dtype == jnp.float32 and got.shape == shape
        assert _rel(got, want) < 1e-5, axes
        assert np.array_equal(np.asarray(X), _complex(half)), "the input must stay intact"


@pytest.mark.parametrize("shape", [(97,), (45,), *SHAPES_2D, *SHAPES_3D])
@pytest.mark.parametrize("inverse", [False, True])
def test_fft_axis_equals_numpy(shape, inverse):
    X = _complex(shape)
    ref = np.fft.ifft if inverse else np.fft.fft
    for axis in range(len(shape)):
        got = jax.jit(lambda v, a=axis: fftw.fft_axis(v, a, inverse))(X)
        assert got.dtype == jnp.complex64 and got.shape == shape
        assert _rel(got, ref(X.astype(np.complex128), axis=axis)) < 1e-5, axis


def test_fft_axis_scale_and_negative_axis():
    X = _complex((45, 64))
    got = fftw.fft_axis(jnp.asarray(X), -2, inverse=True, scale=1.0)
    assert _rel(got, 45 * np.fft.ifft(X.astype(np.complex128), axis=0)) < 1e-5


@pytest.mark.parametrize("shape", [(64, 45), (53, 97, 64), (45, 64, 97)])
def test_round_trip(shape):
    """rfft over the planes, fft along axis 0, back: the input (a whole 3-D transform built
    from the pieces the distributed FFT uses)."""
    x = _real(shape, seed=3)
    planes = tuple(range(1, len(shape)))

    def there_and_back(v):
        F = fftw.fft_axis(fftw.rfft_axes(v, planes), 0)
        return fftw.irfft_axes(fftw.fft_axis(F, 0, inverse=True), shape[-1], planes), F

    back, F = jax.jit(there_and_back)(x)
    assert _rel(F, np.fft.rfftn(x.astype(np.float64))) < 1e-5
    assert _rel(back, x) < 1e-5


def test_rejects_leading_axes():
    x = jnp.zeros((8, 9, 10), jnp.float32)
    with pytest.raises(ValueError):
        fftw.rfft_axes(x, (0, 1))
    with pytest.raises(ValueError):
        fftw.irfft_axes(fftw.rfft_axes(x, (2,)), 12, (2,))


def _pieces(F: np.ndarray, axis: int, pieces: int) -> np.ndarray:
    """``F`` zero-padded along ``axis`` to a multiple of ``pieces``, cut, stacked first."""
    L = -(-F.shape[axis] // pieces)
    pad = [(0, 0)] * F.ndim
    pad[axis] = (0, L * pieces - F.shape[axis])
    return np.stack(np.split(np.pad(F, pad), pieces, axis=axis))


@pytest.mark.parametrize(
    "shape, axes, split",
    [((45, 53, 64), (1, 2), 1), ((7, 64, 97), (1, 2), 2), ((53, 45), (1,), 1),
     ((8, 97, 45), (2,), 2), ((45, 64, 53), (0, 1, 2), 0), ((3, 16, 6), (1, 2), 1)],
)  # fmt: skip
@pytest.mark.parametrize("pieces", [1, 2, 3, 4])
def test_split_and_join_equal_numpy(shape, axes, split, pieces):
    """rfft_split: numpy's rfftn cut into pieces; irfft_join: numpy's irfftn of the joined
    pieces (the padding ignored: set to junk here), scaled; planes with even rows (53x64,
    16x6) by halves and by FFTW's plane plans."""
    x = _real(shape, seed=5)
    want = _pieces(np.fft.rfftn(x.astype(np.float64), axes=axes), split, pieces)
    got = jax.jit(lambda v: fftw.rfft_split(v, axes, split, pieces))(x)
    assert got.shape == want.shape and got.dtype == jnp.complex64
    assert _rel(got, want) < 1e-5
    n = want.shape[1 + split] * pieces - (np.fft.rfftn(x, axes=axes).shape[split])
    junk = np.array(got)
    if n:  # the padded entries of the last piece must not matter
        sl = [slice(None)] * junk.ndim
        sl[0], sl[1 + split] = -1, slice(junk.shape[1 + split] - n, None)
        junk[tuple(sl)] = 7.0 + 3.0j
    s = float(np.prod([shape[a] for a in axes]))
    back = jax.jit(lambda v: fftw.irfft_join(v, shape, axes, split, 2.0 / s))(junk)
    assert back.shape == shape and back.dtype == jnp.float32
    assert _rel(back, 2.0 * x) < 1e-5


@pytest.mark.parametrize(
    "shape, axes, split, vaxis",
    [((45, 53, 64), (1, 2), 1, 1), ((45, 53, 64), (1, 2), 1, 2), ((7, 64, 97), (1, 2), 2, 1),
     ((53, 45), (1,), 1, 1), ((45, 64, 53), (0, 1, 2), 0, 1), ((3, 16, 6), (1, 2), 1, 2)],
)  # fmt: skip
@pytest.mark.parametrize("pieces", [1, 3])
def test_join_with_a_vector_equals_numpy(shape, axes, split, vaxis, pieces):
    """irfft_join's vector: numpy's irfftn of the joined spectrum times a complex vector along
    a transformed axis (the split one or another), scaled; padding ignored. The vector makes
    the spectrum non-Hermitian: by halves and FFTW's plane plans must both drop what numpy's
    irfftn drops."""
    x = _real(shape, seed=6)
    F = np.fft.rfftn(x.astype(np.float64), axes=axes)
    rng = np.random.default_rng(7)
    v = rng.standard_normal(F.shape[vaxis]) + 1j * rng.standard_normal(F.shape[vaxis])
    shp = [1] * len(shape)
    shp[vaxis] = -1
    want = np.fft.irfftn(F * v.reshape(shp), s=[shape[a] for a in axes], axes=axes)
    got = np.array(jax.jit(lambda u: fftw.rfft_split(u, axes, split, pieces))(x))
    s = float(np.prod([shape[a] for a in axes]))
    back = jax.jit(lambda p, w: fftw.irfft_join(p, shape, axes, split, 1.0 / s, vaxis, w))(
        got, jnp.asarray(v, jnp.complex64)
    )
    assert back.shape == shape and back.dtype == jnp.float32
    assert _rel(back, want) < 1e-5


@pytest.mark.parametrize("shape, pieces", [((6, 45, 64), 3), ((5, 53, 30), 2), ((4, 12), 4)])
def test_kept_piece_and_the_others_are_the_pieces(shape, pieces):
    """``keep`` (the MPI transport's transposes that leave a rank's own piece in place): for
    every kept piece, ``rfft_split`` writes that piece into the full output and the others, in
    order, into the second; ``xpass`` does the same with the X planes cut along x, for each of
    its outputs."""
    x = _real(shape, seed=8)
    axes = tuple(range(1, len(shape)))
    whole = np.array(jax.jit(lambda v: fftw.rfft_split(v, axes, 1, pieces))(x))
    spec = jnp.asarray(np.fft.rfftn(x.astype(np.float64), axes=axes), jnp.complex64)
    X = shape[0] * pieces  # a box whose planes cut evenly into the pieces
    box = jnp.concatenate([spec] * pieces)
    outs = [(0, None, None), (0, 0, jnp.exp(1j * jnp.arange(X) / X))]
    ref = [np.array(y) for y in fftw.xpass([box], (X, *shape[1:]), None, outs)]
    for k in range(pieces):
        rest = [p for p in range(pieces) if p != k]
        full, others = jax.jit(lambda v, k=k: fftw.rfft_split(v, axes, 1, pieces, keep=k))(x)
        assert full.shape == whole.shape and others.shape == (pieces - 1, *whole.shape[1:])
        np.testing.assert_array_equal(np.array(full)[k], whole[k])
        np.testing.assert_array_equal(np.array(others), whole[rest])
        got = fftw.xpass([box], (X, *shape[1:]), None, outs, keep=(pieces, k))
        for (f, o), r in zip(got, ref):
            r = r.reshape(pieces, shape[0], *r.shape[1:])
            assert f.shape == r.shape and o.shape == (pieces - 1, *r.shape[1:])
            np.testing.assert_array_equal(np.array(f)[k], r[k])
            np.testing.assert_array_equal(np.array(o), r[rest])
