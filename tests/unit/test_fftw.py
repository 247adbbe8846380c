"""The FFTW backend (custom calls, :mod:`sonotile.fft.fftw`) equals XLA's FFT to round-off, and the
solver falls back to XLA's FFT when the extension cannot be built."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import h5py
import jax
import numpy as np
import pytest
from even_op import even_along_x, unread_rows_nan
from paths import REFERENCE
from require import require_fftw

from sonotile.fft import backend as fft_backend
from sonotile.fft import fftw, fftw_library, sizes
from sonotile.kwave.cli import main as kwave_main
from sonotile.spectral.operators import FourierOps


@pytest.fixture
def fftw_ok():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")


needs_fftw = pytest.mark.usefixtures("fftw_ok")


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a)), 1e-30))


def _ops(shape, fft):
    spacing = tuple(1e-4 * (1 + 0.1 * i) for i in range(len(shape)))
    return FourierOps.build(
        shape, spacing, 1500.0, 2e-8, alpha_power=1.5, source_filter=True, fft=fft
    )


@needs_fftw
@pytest.mark.parametrize("shape", [(16,), (15,), (12, 9), (9, 12), (8, 7, 6), (9, 10, 11)])
def test_operators_equal_xla(shape):
    """Every operator on FFTW (R2C and multiply-and-C2R calls on 1-D grids, one conv call per
    operator on 2-D and 3-D ones) equals XLA's FFT."""
    ox, of = _ops(shape, "xla"), _ops(shape, "fftw")
    assert (ox.fft, of.fft) == ("xla", "fftw")
    rng = np.random.default_rng(len(shape))
    p = jax.numpy.asarray(rng.standard_normal(shape), "float32")
    u = tuple(jax.numpy.asarray(rng.standard_normal(shape), "float32") for _ in shape)
    for fn in (
        lambda o: o.grad(p),
        lambda o: o.div(u),
        lambda o: (o.fractional(p, 1), o.fractional(p, 2)),
        lambda o: (o.filter_source(p),),
    ):
        for a, b in zip(jax.jit(fn)(ox), jax.jit(fn)(of)):
            assert a.shape == b.shape and b.dtype == np.float32
            assert _rel(a, b) < 2e-6


@needs_fftw
@pytest.mark.parametrize("shape", [(16,), (15,), (12, 9), (10, 9, 8), (7, 6, 5)])
def test_r2c_and_c2r_equal_numpy(shape):
    """``r2c`` is numpy's ``rfftn``; ``c2r`` with an operator and a vector along each axis (or
    neither) is ``irfftn(spec * op * vec)``, on grids of rank 1-3 with odd and even axes; the
    spectrum is left intact."""
    rng = np.random.default_rng(len(shape))
    nd = len(shape)
    half = (*shape[:-1], shape[-1] // 2 + 1)
    x = rng.standard_normal(shape).astype(np.float32)
    spec = jax.jit(fftw.r2c)(jax.numpy.asarray(x))
    assert spec.shape == half and spec.dtype == np.complex64
    want = np.fft.rfftn(x.astype(np.float64))
    assert np.max(np.abs(want - np.asarray(spec))) / np.max(np.abs(want)) < 2e-6
    kept = np.asarray(spec).copy()
    op = rng.random(half).astype(np.float32)
    got = jax.jit(lambda s: fftw.c2r(s, shape))(spec)
    assert _rel(np.fft.irfftn(want, s=shape, axes=tuple(range(nd))), got) < 2e-6
    for axis, n in enumerate(half):
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        got = jax.jit(lambda s, k, w, a=axis: fftw.c2r(s, shape, k, w, axis=a))(spec, op, v)
        ref = want * op * v.reshape([-1 if a == axis else 1 for a in range(nd)])
        assert _rel(np.fft.irfftn(ref, s=shape, axes=tuple(range(nd))), got) < 2e-6, axis
    np.testing.assert_array_equal(np.asarray(spec), kept)


@needs_fftw
# (6, 64, 100) and (7, 4000): planes of 3264 / 2001 bins, blocks of 128 bins along x, the last
# one partial (the small grids take blocks of 16)
@pytest.mark.parametrize(
    "shape", [(12, 10, 8), (9, 7, 5), (11, 6), (6, 64, 100), (5, 9, 4), (7, 4000)]
)
def test_conv_general_outputs_equal_numpy(shape):
    """One ``conv`` call with several inputs, several vectors along x for one input (each its
    own pass product), shared outputs with and without a vector along a plane axis, and no
    operator; a spectrum output and ``planes_c2r`` from it: every output equals numpy's
    transforms, and the inputs are left intact. Both plane transforms of rank-3 grids (by
    halves with an even last axis, FFTW's 2-D plans with an odd one); the random vectors make
    the spectra non-Hermitian, so both must drop the same imaginary parts as numpy's irfftn."""
    rng = np.random.default_rng(7)
    nd = len(shape)
    half = (*shape[:-1], shape[-1] // 2 + 1)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    op = even_along_x(rng.random(half).astype(np.float32))
    op_read = unread_rows_nan(op)  # what the call gets: the rows it must not read are NaN
    vec = [
        (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64) for n in half
    ]
    outs = [(0, 0, vec[0]), (0, nd - 1, vec[-1]), (0, None, None), (1, 0, vec[0] * 2),
            (0, 0, vec[0].conj()), (1, 1, vec[1])]  # fmt: skip

    def ref(src, axis, v, with_op=True):
        spec = np.fft.rfftn(xs[src].astype(np.float64)) * (op if with_op else 1.0)
        if axis is not None:
            spec = spec * v.reshape([-1 if a == axis else 1 for a in range(nd)])
        return np.fft.irfftn(spec, s=shape, axes=tuple(range(nd)))

    keep = [x.copy() for x in xs]
    jx = [jax.numpy.asarray(x) for x in xs]
    got = jax.jit(lambda a, b, k: fftw.conv([a, b], k, outs))(*jx, op_read)
    for (src, axis, v), g in zip(outs, got):
        assert _rel(ref(src, axis, v), g) < 2e-6
    (g,) = jax.jit(lambda a: fftw.conv([a], None, [(0, 1, vec[1])]))(jx[1])
    assert _rel(ref(1, 1, vec[1], with_op=False), g) < 2e-6
    # the spectrum after the pass along x, then the plane transforms from it, one at a time
    gx, spec = jax.jit(lambda a, k: fftw.conv([a], k, [(0, 0, vec[0]), (0, "spectrum", None)]))(
        jx[0], op
    )
    assert spec.shape == half and spec.dtype == np.complex64
    assert _rel(ref(0, 0, vec[0]), gx) < 2e-6
    back = jax.jit(lambda s, v: fftw.planes_c2r(s, shape, nd - 1, v))(spec, vec[-1])
    assert _rel(ref(0, nd - 1, vec[-1]), back) < 2e-6
    assert _rel(ref(0, None, None), jax.jit(lambda s: fftw.planes_c2r(s, shape))(spec)) < 2e-6
    for x, k in zip(jx, keep):
        np.testing.assert_array_equal(np.asarray(x), k)


@needs_fftw
@pytest.mark.parametrize("shape", [(12, 10, 8), (9, 7, 5), (11, 6), (6, 64, 100)])
def test_conv_second_operator_equals_numpy(shape):
    """``op2`` outputs: ``irfftn(rfftn(x) * op2)`` beside ``op``'s outputs of the same input (a
    gradient component along x, a spectrum and a shared output), alone, and with no ``op``:
    each equals numpy's transforms; the rows of ``op2`` it must not read are NaN."""
    rng = np.random.default_rng(11)
    nd = len(shape)
    half = (*shape[:-1], shape[-1] // 2 + 1)
    x = rng.standard_normal(shape).astype(np.float32)
    op, op2 = (even_along_x(rng.random(half).astype(np.float32)) for _ in range(2))
    v = (rng.standard_normal(shape[0]) + 1j * rng.standard_normal(shape[0])).astype(np.complex64)

    def ref(k, vx=None):
        spec = np.fft.rfftn(x.astype(np.float64)) * k
        spec = spec if vx is None else spec * vx.reshape([-1] + [1] * (nd - 1))
        return np.fft.irfftn(spec, s=shape, axes=tuple(range(nd)))

    jx = jax.numpy.asarray(x)
    outs = [(0, 0, v), (0, "op2", None), (0, None, None), (0, "spectrum", None)]
    run = jax.jit(lambda a, k, k2: fftw.conv([a], k, outs, op2=k2))
    gx, g2, g1, spec = run(jx, unread_rows_nan(op), unread_rows_nan(op2))
    assert _rel(ref(op, v), gx) < 2e-6 and _rel(ref(op), g1) < 2e-6
    assert _rel(ref(op2), g2) < 2e-6
    assert _rel(ref(op), jax.jit(lambda s: fftw.planes_c2r(s, shape))(spec)) < 2e-6
    (alone,) = jax.jit(lambda a, k2: fftw.conv([a], op2=k2, outs=[(0, "op2", None)]))(jx, op2)
    assert _rel(ref(op2), alone) < 2e-6
    g2, g0 = jax.jit(lambda a, k2: fftw.conv([a], None, [(0, "op2", None), (0, 0, v)], op2=k2))(
        jx, op2
    )
    assert _rel(ref(op2), g2) < 2e-6 and _rel(ref(1.0, v), g0) < 2e-6
    np.testing.assert_array_equal(np.asarray(jx), x)


@needs_fftw
@pytest.mark.parametrize("shape", [(40, 12, 10), (37, 9, 11), (21, 14), (19, 15), (14, 64, 100)])
def test_xpass_then_planes_c2r_equals_numpy(shape):
    """``xpass`` on plane spectra (two inputs, a vector along x, shared outputs, an operator or
    none, the interior planes only, in place) and ``planes_c2r`` of its outputs (from plane
    ``lo`` of a whole box): the interior planes of numpy's ``irfftn(rfftn(x) * op * vec)``; the
    inputs are left intact."""
    rng = np.random.default_rng(3)
    nd = len(shape)
    half = (*shape[:-1], shape[-1] // 2 + 1)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    op = even_along_x(rng.random(half).astype(np.float32))
    op_read = unread_rows_nan(op)  # what the call gets: the rows it must not read are NaN
    vx = (rng.standard_normal(shape[0]) + 1j * rng.standard_normal(shape[0])).astype(np.complex64)
    lo, n = 5, shape[0] - 10
    inner = (n, *shape[1:])
    outs = [(0, 0, vx), (0, None, None), (1, 0, vx.conj()), (1, None, None)]

    def ref(src, v, with_op=True):
        spec = np.fft.rfftn(xs[src].astype(np.float64)) * (op if with_op else 1.0)
        if v is not None:
            spec = spec * v.reshape([-1] + [1] * (nd - 1))
        return np.fft.irfftn(spec, s=shape, axes=tuple(range(nd)))[lo : lo + n]

    specs = [np.fft.rfftn(x, axes=tuple(range(1, nd))).astype(np.complex64) for x in xs]
    keep = [s.copy() for s in specs]
    js = [jax.numpy.asarray(s) for s in specs]
    got = jax.jit(lambda a, b, k: fftw.xpass([a, b], shape, k, outs, lo=lo, planes=n))(*js, op_read)
    for (src, _, v), g in zip(outs, got):
        assert g.shape == (n, *half[1:]) and g.dtype == np.complex64
        assert _rel(ref(src, v), jax.jit(lambda s: fftw.planes_c2r(s, inner))(g)) < 2e-6
    (g,) = jax.jit(lambda a: fftw.xpass([a], shape, lo=lo, planes=n))(js[1])
    assert _rel(ref(1, None, with_op=False), fftw.planes_c2r(g, inner)) < 2e-6
    (whole,) = jax.jit(lambda a: fftw.xpass([a], shape, None, [(0, 0, vx)]))(js[0])
    assert _rel(np.fft.irfftn(np.fft.rfftn(xs[0].astype(np.float64))
                              * vx.reshape([-1] + [1] * (nd - 1)), s=shape, axes=tuple(range(nd))),
                fftw.planes_c2r(whole, shape)) < 2e-6  # fmt: skip
    # in place: output 0 over its input (all planes, read back from plane lo), output 1 interior
    two = [(0, None, None), (0, 0, vx)]
    full, gi = jax.jit(lambda a, k: fftw.xpass([a], shape, k, two, lo=lo, planes=n, inplace=True))(
        js[0], op
    )
    assert full.shape == half and gi.shape == (n, *half[1:])
    assert _rel(ref(0, None), jax.jit(lambda s: fftw.planes_c2r(s, inner, lo=lo))(full)) < 2e-6
    assert _rel(ref(0, vx), fftw.planes_c2r(gi, inner)) < 2e-6
    for s, k in zip(js, keep):
        np.testing.assert_array_equal(np.asarray(s), k)


#: column lengths: products of the vector kernel's primes (each radix and their mixes, 2 to 289
#: points; 11, 13, 17 and 19 alone, with the others and with each other: 143 = 11 x 13, 289 =
#: 17^2), then lengths it leaves to FFTW
COLUMN_LENGTHS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 25, 27, 30, 45, 48, 49, 56, 64, 75,
                  81, 96, 98, 100, 105, 112, 125, 128, 160, 168, 11, 13, 17, 19, 22, 38, 51, 102,
                  143, 289, 23, 29, 53)  # fmt: skip


def _lengths_checked():
    """Each of :data:`COLUMN_LENGTHS`, its kernel checked first: the vector one where it is
    built and the length factors into ``sizes.KERNEL_PRIMES``, else FFTW's."""
    for n in COLUMN_LENGTHS:
        m = n
        for f in sizes.KERNEL_PRIMES:
            while m % f == 0:
                m //= f
        vector = fftw.vector_width() > 0 and m == 1
        assert fftw.column_kernel(n) == ("vector" if vector else "fftw"), n
        yield n


@needs_fftw
def test_pass_along_x_of_every_length_equals_numpy():
    """The pass along x of every length the vector kernel takes (products of its primes 2 to 19,
    each radix and their mixes) and of lengths it leaves to FFTW (23, 29, 53):
    the kernel that runs is the one possible, and ``xpass`` (forward, an operator, a vector
    along x, backward) equals numpy's transforms on every plane bin of blocks whose bins do not
    fill a whole vector (planes of 5 x 3 bins)."""
    rng = np.random.default_rng(11)
    for n in _lengths_checked():
        shape = (n, 5, 4)
        half = (n, 5, 3)
        x = rng.standard_normal(shape).astype(np.float32)
        op = even_along_x(rng.random(half).astype(np.float32))
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
        spec = np.fft.rfftn(x, axes=(1, 2)).astype(np.complex64)
        (got,) = fftw.xpass([jax.numpy.asarray(spec)], shape, op, [(0, 0, v)])
        along_x = np.fft.fft(spec.astype(np.complex128), axis=0) * op * v.reshape(-1, 1, 1)
        # xpass scales by 1 / N (N: all real points), numpy's ifft by 1 / n of them
        want = np.fft.ifft(along_x, axis=0) * n / np.prod(shape)
        assert _rel(want, got) < 2e-6, n


def _conv_along_columns(rng: np.random.Generator, shape: tuple[int, int, int]):
    """A random field, numpy's ``irfftn(rfftn(x) * op * v[k_1])`` of it and ``fftw.conv``'s
    (``op`` even along x, ``v`` a complex vector along the columns' axis 1)."""
    x = rng.standard_normal(shape).astype(np.float32)
    op = even_along_x(rng.random((*shape[:2], shape[2] // 2 + 1)).astype(np.float32))
    v = (rng.standard_normal(shape[1]) + 1j * rng.standard_normal(shape[1])).astype(np.complex64)
    (got,) = fftw.conv([jax.numpy.asarray(x)], op, [(0, 1, v)])
    spec = np.fft.rfftn(x.astype(np.float64)) * op * v.reshape(1, -1, 1)
    return x, np.fft.irfftn(spec, s=shape, axes=(0, 1, 2)), got


@needs_fftw
def test_plane_columns_of_every_length_equal_numpy():
    """A plane's columns (transformed by halves: rows of n2 reals, then n1-point columns over
    its n2 / 2 + 1 bins) on the vector kernel for every column length it takes, with and
    without bins after the last whole vector (with 8 bins per vector, n2 = 16: 9 bins, the
    last on FFTW's tail plan; n2 = 14: 8 bins, none), and on FFTW's plans for other lengths:
    ``conv`` with a vector along the columns' axis equals numpy's transforms."""
    rng = np.random.default_rng(13)
    for n1 in _lengths_checked():
        for n2 in (14, 16):
            _, want, got = _conv_along_columns(rng, (3, n1, n2))
            assert _rel(want, got) < 2e-6, (n1, n2)


@needs_fftw
@pytest.mark.parametrize("n1", [3, 17, 102])
@pytest.mark.parametrize("n2", [22, 34, 38, 102])
def test_planes_with_a_factor_above_7_equal_numpy(n1, n2):
    """Planes whose rows (half length 11, 17, 19, 51) or columns (17, 102) have a prime factor
    above 7, which the vector kernel takes whole: the rows through a transposed copy (fewer rows
    than a vector, 3, and more, 17, 102), the bins after the last whole vector through a padded
    copy (n2 / 2 + 1 = 12, 18, 20, 52 bins; 3 rows: FFTW's columns). ``conv`` with a vector
    along the columns' axis and ``rfft_axes`` equal numpy's transforms."""
    rng = np.random.default_rng(n1 * 1000 + n2)
    x, want, got = _conv_along_columns(rng, (4, n1, n2))
    assert _rel(want, got) < 2e-6
    half = fftw.rfft_axes(jax.numpy.asarray(x), (1, 2))
    assert _rel(np.fft.rfftn(x.astype(np.float64), axes=(1, 2)), half) < 2e-6


@needs_fftw
@pytest.mark.parametrize(
    "shape,short", [((40, 12, 10), 0), ((37, 9, 11), 1), ((21, 14), 1), ((16, 64, 100), 1)]
)
def test_xpass_halo_equals_xpass_of_the_assembled_box(shape, short):
    """``xpass_halo`` (the box assembled from interior, halos and bell as the pass reads it; a
    block one plane short: zeros after the right halo; output 0 in place) equals ``xpass`` of
    the box built in numpy."""
    rng = np.random.default_rng(5)
    ov, nd = 5, len(shape)
    half = (*shape[:-1], shape[-1] // 2 + 1)
    b = shape[0] - 2 * ov
    count = b - short

    def cplx(n):
        return rng.standard_normal((n, *half[1:])) + 1j * rng.standard_normal((n, *half[1:]))

    mid, left, right = (cplx(n).astype(np.complex64) for n in (b, ov, ov))
    bell = rng.random(shape[0]).astype(np.float32)
    op = even_along_x(rng.random(half).astype(np.float32))
    op_read = unread_rows_nan(op)  # what the call gets: the rows it must not read are NaN
    vx = (rng.standard_normal(shape[0]) + 1j * rng.standard_normal(shape[0])).astype(np.complex64)
    box = np.concatenate([left, mid[:count], right, np.zeros((short, *half[1:]), np.complex64)])
    box = (box * bell.reshape([-1] + [1] * (nd - 1))).astype(np.complex64)
    outs = [(0, None, None), (0, 0, vx)]
    want = fftw.xpass([jax.numpy.asarray(box)], shape, op, outs, lo=ov, planes=b)
    got = jax.jit(
        lambda m, le, r, c: fftw.xpass_halo(m, (le, r), bell, c, shape, op_read, outs, inplace=True)
    )(mid, left, right, np.int32(count))
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.complex128), np.asarray(w, np.complex128)
        assert g.shape == mid.shape and np.max(np.abs(g - w)) / np.max(np.abs(w)) < 1e-6


@needs_fftw
@pytest.mark.parametrize(
    "case", ["3d_het_absorb15_nonlin_hetbona_p0_index", "2d_het_nonlin_psrc_additive_many_index"]
)
def test_reference_case_fftw_equals_xla(case, tmp_path, monkeypatch):
    folder = REFERENCE / case
    if not folder.is_dir():
        pytest.fail(f"reference case missing: {folder}")
    out = {}
    for fft in ("xla", "fftw"):
        monkeypatch.setenv("SONOTILE_FFT", fft)
        path = tmp_path / f"{fft}.h5"
        flags = ["--p_raw", "--p_final", "--u_final"]
        assert kwave_main(["-i", str(folder / "input.h5"), "-o", str(path), *flags]) == 0
        with h5py.File(path, "r") as f:
            out[fft] = {k: f[k][()] for k in ("p", "p_final", "ux_final")}
    for k in out["xla"]:  # float32 round-off, grown over the run (the physics is nonlinear)
        assert _rel(out["xla"][k], out["fftw"][k]) < 5e-4, k


@pytest.fixture
def no_fftw(monkeypatch, tmp_path):
    """The extension cannot be built: no FFTW library (fresh state, empty cache)."""
    saved = dict(fftw_library._state)
    fftw_library.reset()
    fft_backend.reset()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fftw_library, "find_library", lambda: None)
    yield
    fftw_library._state.clear()
    fftw_library._state.update(saved)


def test_fallback_to_xla_when_unavailable(no_fftw, capsys):
    assert not fftw.available()
    assert "libfftw3f" in fftw.reason()
    ops = _ops((8, 6), "auto")
    assert ops.fft == "xla"
    assert _ops((8, 6), "fftw").fft == "xla"
    err = capsys.readouterr().err
    assert err.count("FFTW unavailable, using XLA's FFT") == 1
    p = jax.numpy.asarray(np.random.default_rng(0).random((8, 6)), "float32")
    ref = np.fft.irfftn(
        np.fft.rfftn(np.asarray(p)) * np.asarray(ops.source_kappa), s=(8, 6), axes=(0, 1)
    )
    assert _rel(ref, jax.jit(ops.filter_source)(p)) < 1e-5


def test_fallback_compiler_failure(monkeypatch, tmp_path):
    """A compiler that fails: no extension, XLA's FFT, the reason says so."""
    saved = dict(fftw_library._state)
    fftw_library.reset()
    fft_backend.reset()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CXX", "false")
    try:
        if fftw.find_library() is None:
            require_fftw(False, "no libfftw3f: the compiler is never reached")
        assert not fftw.available()
        assert "compiling" in fftw.reason()
        assert _ops((8,), "auto").fft == "xla"
    finally:
        fftw_library._state.clear()
        fftw_library._state.update(saved)


def test_xla_on_other_platforms_and_float64(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert fft_backend.resolve("auto", "float32") == "xla"
    assert fft_backend.resolve("fftw", "float32") == "xla"
    monkeypatch.undo()
    assert fft_backend.resolve("auto", "float64") == "xla"
    assert fft_backend.resolve("xla", "float32") == "xla"
    with pytest.raises(ValueError):
        fft_backend.resolve("mkl", "float32")


def test_configure_threads_sets_xla_and_fftw_threads():
    """``-t 1``: affinity of one CPU, XLA's Eigen pool off, FFTW plans on one thread, and the
    compilation cache configured (in a child process: affinity is per process)."""
    code = (
        "import os\n"
        "from sonotile.kwave.cli import configure_threads\n"
        "from sonotile.fft import fftw\n"
        "configure_threads(1)\n"
        "print(len(os.sched_getaffinity(0)), fftw.threads(),\n"
        "      '--xla_cpu_multi_thread_eigen=false' in os.environ.get('XLA_FLAGS', ''),\n"
        "      'intra_op' in os.environ.get('XLA_FLAGS', ''),\n"
        "      bool(os.environ.get('JAX_COMPILATION_CACHE_DIR')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    assert out == ["1", "1", "True", "False", "True"]


def test_pyfftw_wheel_library_builds_and_loads(tmp_path):
    """Where the system has no libfftw3f, the copy in pyFFTW's wheel is used (setup.sh installs
    it): the extension must find that wheel's private libgomp too, and match XLA."""
    import importlib.util

    if importlib.util.find_spec("pyfftw") is None:
        require_fftw(False, "pyfftw not installed (setup.sh installs it only with no system FFTW)")
    code = """
import numpy as np, jax.numpy as jnp
import sonotile.fft.fftw_library as f
f._lib_dirs = lambda: []
assert "pyfftw.libs" in f.find_library()[0]
from sonotile.spectral.operators import FourierOps
a = FourierOps.build((20, 18, 12), (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
b = FourierOps.build((20, 18, 12), (1e-4,) * 3, 1500.0, 2e-8, fft="xla")
assert f._state.get("lib") is not None, f._state.get("reason")
p = jnp.asarray(np.random.default_rng(0).random((20, 18, 12)), jnp.float32)
err = max(float(jnp.abs(x - y).max() / jnp.abs(y).max()) for x, y in zip(a.grad(p), b.grad(p)))
assert err < 2e-6, err
"""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]


def test_cpu_signature_follows_the_model_and_features_not_the_clock(tmp_path):
    """The ``-march=native`` build is kept per CPU: another feature set (a node of another
    kind sharing the cache directory) gets its own build; the clock changes nothing."""
    base = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: EPYC\ncpu MHz\t: {mhz}\n"
    base += "flags\t\t: fpu sse2 {extra}\n\nprocessor\t: 1\nflags\t\t: fpu\n"
    sig = []
    for mhz, extra in ((2400.1, "avx2"), (3100.7, "avx2"), (2400.1, "avx2 avx512f")):
        path = tmp_path / f"cpuinfo{len(sig)}"
        path.write_text(base.format(mhz=mhz, extra=extra))
        sig.append(fftw.cpu_signature(str(path)))
    assert sig[0] == sig[1] != sig[2]
    assert fftw.cpu_signature().startswith("native ")


@needs_fftw
@pytest.mark.slow
def test_the_avx2_kernel_forced_on_an_avx512_cpu_equals_xla():
    """``SONOTILE_FFTW_AVX512=0`` on a CPU with AVX-512: the extension is built with 256-bit
    vectors (8 floats per kernel vector), and the operators on grids whose every axis runs on
    the kernel (102 and 34: rows, padded tail bins and factor 17; 112: radix 7) equal XLA's.
    A build of its own (about a minute once; then from the cache)."""
    flags = open("/proc/cpuinfo").read().split()
    if not {"avx512f", "avx2", "fma"} <= set(flags):
        pytest.skip("needs a CPU with AVX-512, AVX2 and FMA")
    code = """
import numpy as np, jax.numpy as jnp
import sonotile.fft.fftw_library as f
from sonotile.spectral.operators import FourierOps
assert f.available(), f.reason()
assert f.vector_width() == 8, f.vector_width()
for shape in ((17, 102, 34), (112, 24, 16)):
    assert all(f.column_kernel(n) == "vector" for n in shape[:2])
    a = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
    b = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="xla")
    p = jnp.asarray(np.random.default_rng(0).random(shape), jnp.float32)
    err = max(float(jnp.abs(x - y).max() / jnp.abs(y).max()) for x, y in zip(a.grad(p), b.grad(p)))
    assert err < 2e-6, (shape, err)
"""
    env = dict(os.environ, SONOTILE_FFTW_AVX512="0")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]


@needs_fftw
def test_a_compiler_without_march_native_builds_the_portable_extension(tmp_path):
    """The extension is compiled for the CPU it runs on; a compiler that refuses
    ``-march=native`` builds it for any CPU instead, with the same results."""
    cxx = tmp_path / "cxx"
    cxx.write_text(
        '#!/bin/sh\nfor a in "$@"; do [ "$a" = -march=native ] && exit 1; done\n'
        f'exec {shutil.which("g++") or "c++"} "$@"\n'
    )
    cxx.chmod(0o755)
    code = """
import numpy as np, jax.numpy as jnp
import sonotile.fft.fftw_library as f
from sonotile.spectral.operators import FourierOps
a = FourierOps.build((20, 18, 12), (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
b = FourierOps.build((20, 18, 12), (1e-4,) * 3, 1500.0, 2e-8, fft="xla")
assert f.available(), f.reason()
p = jnp.asarray(np.random.default_rng(0).random((20, 18, 12)), jnp.float32)
err = max(float(jnp.abs(x - y).max() / jnp.abs(y).max()) for x, y in zip(a.grad(p), b.grad(p)))
assert err < 2e-6, err
"""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path), CXX=str(cxx))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(list((tmp_path / "sonotile").glob("fftw_ffi_*.so"))) == 1


@needs_fftw
@pytest.mark.parametrize("build", ["avx2", "portable"])
def test_the_fused_updates_hold_on_the_avx2_and_the_portable_build(build):
    """The fused update kernels (gradient, divergence, absorbing divergence with its sums) are
    plain loops that each build vectorises its own way: their tests pass on the extension built
    with 256-bit vectors on an AVX-512 CPU and on the one built for any x86-64 (each a build of
    its own, about a minute once; then from the cache)."""
    flags = set(open("/proc/cpuinfo").read().split())
    if build == "avx2" and not {"avx512f", "avx2", "fma"} <= flags:
        pytest.skip("needs a CPU with AVX-512, AVX2 and FMA")
    setting = {"avx2": "SONOTILE_FFTW_AVX512", "portable": "SONOTILE_FFTW_NATIVE"}[build]
    env = dict(os.environ, **{setting: "0"})
    check = "import sonotile.fft.fftw_library as f; assert f.available(); print(f.vector_width())"
    width = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                           text=True, timeout=600)  # fmt: skip
    assert width.returncode == 0, width.stderr[-2000:]
    assert int(width.stdout.split()[-1]) == {"avx2": 8, "portable": 0}[build]
    updates = os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_fftw_updates.py")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", updates],
                       env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    assert r.returncode == 0, r.stdout[-3000:]
    assert re.fullmatch(r"\d+ passed in [\d.]+s", summary), summary


FAILING_ALLOC = """
import jax, jax.numpy as jnp, numpy as np
from sonotile.fft import backend as fft_backend
from sonotile.fft import fftw, fftw_library, sizes
from sonotile.spectral.operators import FourierOps
assert fftw.available(), fftw.reason()
ops = FourierOps.build((24, 20, 16), (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
p = jnp.asarray(np.random.default_rng(0).random((24, 20, 16)), jnp.float32)
grad = jax.jit(ops.grad)
good = [np.asarray(g) for g in grad(p)]
fftw.load().sonotile_fftw_fail_allocations(1)   # every fftwf_malloc fails from now on
for what, f, x in (("scratch", grad, p),
                   ("plan", jax.jit(FourierOps.build((18, 14, 10), (1e-4,) * 3, 1500.0, 2e-8,
                                                     fft="fftw").grad),
                    jnp.ones((18, 14, 10), jnp.float32)),
                   ("r2c", jax.jit(fftw.r2c),
                    jnp.ones((6, 10, 12), jnp.float32))):
    try:
        jax.block_until_ready(f(x))
        print(what, "NO ERROR")
    except Exception as e:
        print(what, type(e).__name__, str(e).splitlines()[0][:200])
fftw.load().sonotile_fftw_fail_allocations(0)
again = [np.asarray(g) for g in grad(p)]   # the process is intact and recovers
print("recovered", all(np.array_equal(a, b) for a, b in zip(good, again)))
"""


@needs_fftw
def test_allocation_or_plan_failure_is_an_xla_error_not_a_crash(tmp_path):
    """``fftwf_malloc`` failing (forced by ``sonotile_fftw_fail_allocations``) in a custom call's
    scratch or in planning a new shape: the call raises an XLA error naming the cause, the
    process survives, and works again once memory is back."""
    env = dict(os.environ, XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", ""))
    r = subprocess.run([sys.executable, "-c", FAILING_ALLOC], capture_output=True, text=True,
                       timeout=300, env={k: v for k, v in env.items() if v})  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(ln.split(" ", 1) for ln in r.stdout.splitlines())
    assert "out of memory" in lines["scratch"] and "Error" in lines["scratch"], lines
    assert "planning failed" in lines["plan"], lines
    assert "planning failed" in lines["r2c"], lines
    assert lines["recovered"] == "True"


@needs_fftw
def test_a_warm_loop_of_transforms_allocates_nothing_per_step():
    """The custom calls' worker scratch is kept between calls: a warm compiled loop of 128^3
    gradients (a conv and two plane C2Rs per step, ~150 KB of scratch per worker and pass)
    makes fewer FFTW-aligned allocations than steps (none once the kept blocks suffice; a call
    with more workers at once than before adds theirs). Scratch freed after each call would be
    trimmed from glibc's heap and faulted in again by the next: ~10 allocations per step here,
    ~300 page faults per 128^3 absorbing step, and TLB flushes of the other cores."""
    import ctypes

    lib = fftw.load()
    lib.sonotile_fftw_allocations.restype = ctypes.c_int64
    shape, steps = (128, 128, 128), 24
    ops = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
    p = jax.numpy.asarray(np.random.default_rng(0).random(shape), "float32")
    loop = jax.jit(lambda p: jax.lax.fori_loop(0, steps, lambda i, q: 0.5 * sum(ops.grad(q)), p))
    jax.block_until_ready(loop(p))  # compiled, planned, scratch grown
    counts = []
    for _ in range(3):
        a0 = lib.sonotile_fftw_allocations()
        jax.block_until_ready(loop(p))
        counts.append(lib.sonotile_fftw_allocations() - a0)
    assert min(counts) < steps, f"FFTW-aligned allocations per call of {steps} steps: {counts}"
