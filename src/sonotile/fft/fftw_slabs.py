"""FFTW's custom calls for the transforms of planes and slabs (:func:`planes_c2r`, a source's
filtered grid from its plane :func:`plane_source`, the pass along x :func:`xpass`,
:func:`rfft_split` / :func:`irfft_join` of the distributed FFT), whole grids of rank 1-3
(:func:`r2c`, :func:`c2r`, :func:`r2r_operator`), planning and fusion boundaries
(:func:`prepare`, :func:`keep`)."""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sonotile.fft import interface
from sonotile.fft.fftw_library import ConvOut, load
from sonotile.fft.fftw_ops import epilogue_args

if TYPE_CHECKING:  # jax is imported when a transform is first made
    import jax

Epilogue = interface.Epilogue


def planes_c2r(
    spec: jax.Array,
    shape: Sequence[int],
    axis: int | None = None,
    vec: jax.Array | None = None,
    lo: int = 0,
    epilogue: Epilogue | None = None,
    update_axis: int | None = None,
) -> jax.Array:
    """``irfftn`` of a spectrum from :func:`conv` (``axis="spectrum"``) times the 1-D complex
    vector ``vec`` along grid ``axis`` (>= 1) or none: the transforms over the planes only.
    The output's planes are ``spec``'s planes ``lo .. lo + shape[0] - 1`` (``spec`` may have
    more planes: a padded box from :func:`xpass`). ``epilogue``: an :data:`Epilogue` applied
    to the result, written over its ``old`` field's buffer (XLA copies it first if the field
    is still needed); it updates along grid ``update_axis`` (default ``axis``; 0 for a
    derivative along x that the pass along x applied)."""
    import jax
    import jax.numpy as jnp

    args = [spec] + ([] if vec is None else [jnp.reshape(vec, (-1,)).astype(jnp.complex64)])
    alias = {}
    epi_axis = axis if update_axis is None else update_axis
    if epilogue is not None:
        assert epi_axis is not None, "planes_c2r: an epilogue needs its grid axis"
        alias = {len(args): 0}
        args += epilogue_args(epilogue)
    out = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
    call = jax.ffi.ffi_call(
        "sonotile_fftw_planes_c2r", out, input_output_aliases=alias, vmap_method="sequential"
    )
    return call(
        *args,
        axis=-1 if axis is None else int(axis),
        lo=int(lo),
        epi=0 if epilogue is None else int(epilogue[0]),
        epi_axis=-1 if epi_axis is None else int(epi_axis),
    )


def plane_source(kernel: jax.Array, plane: jax.Array, shape: Sequence[int]) -> jax.Array:
    """The k-space filtered grid (``shape``, rank 2-3) of a source on one plane ``x = x0``,
    ``irfft`` over the plane's axes of ``kernel[x] * rfft(plane)`` for every ``x``: ``kernel``
    real on the planes' half spectra (:meth:`~sonotile.spectral.operators.FourierOps.
    plane_source_kernel`), ``plane`` the source's real values on ``x = x0``. One plane R2C and
    ``shape[0]`` plane C2Rs (``sonotile_fftw_plane_source`` in the C++ source)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    out = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_plane_source", out, vmap_method="sequential")
    scale = 1.0 / float(np.prod(shape[1:]))
    return call(kernel.astype(jnp.float32), plane.astype(jnp.float32), scale=np.float32(scale))


def _x_operands(
    half: tuple[int, ...], op: jax.Array | None, outs: Sequence[ConvOut]
) -> list[jax.Array]:
    """The operands after the boxes of an x-pass call: ``op`` on the box (if any), then each
    output's complex vector along axis 0 (if any)."""
    import jax.numpy as jnp

    extra = [] if op is None else [jnp.broadcast_to(op, half).astype(jnp.float32)]
    for _, a, v in outs:
        if a is not None:
            assert a == 0 and v is not None, "xpass: a vector runs along axis 0"
            extra.append(jnp.reshape(v, (-1,)).astype(jnp.complex64))
    return extra


def xpass(
    specs: Sequence[jax.Array],
    shape: Sequence[int],
    op: jax.Array | None = None,
    outs: Sequence[ConvOut] = ((0, None, None),),
    lo: int = 0,
    planes: int | None = None,
    inplace: bool = False,
    keep: tuple[int, int] | None = None,
) -> list[Any]:
    """The pass along axis 0 of :func:`conv` alone, on boxes whose planes are transformed.

    ``specs``: complex64 ``[X, plane half spectrum]`` boxes, each plane the unnormalised R2C
    of a plane of a real grid of ``shape`` (rank 2-3, ``shape[0] = X``). Output ``o`` of
    ``outs = ((src, axis, vec), ...)`` (``axis`` 0 with a complex ``vec`` of length X, or
    None) is planes ``lo .. lo + planes - 1`` (default all) of ``ifft(fft(specs[src], axis=0)
    * op * vec[k_x], axis=0) / prod(shape)``, complex64: :func:`planes_c2r` of it gives the real
    result ``irfftn(rfftn(x) * op * vec)`` on those planes. ``op``: real on the half spectrum,
    even along axis 0 (as in :func:`conv`).
    ``inplace``: output 0 is all X planes, written over ``specs[0]`` (XLA's buffer reused: the
    pass reads and writes the same memory); read its interior with ``planes_c2r(..., lo=lo)``.
    ``keep = (P, p)``: every output is the pair ``(full, others)`` of an all-to-all that keeps
    its own piece where it lies (``sonotile.parallel.mpi_ffi.transpose``): the X planes cut into
    P pieces along axis 0, stacked first: piece ``p`` written into ``full`` (``(P, X / P,
    ...)``; the other pieces left unwritten), the other pieces, in order, into ``others``
    (``(P - 1, X / P, ...)``).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    half = tuple(specs[0].shape)
    args = list(specs) + _x_operands(half, op, outs)
    n = half[0] - lo if planes is None else planes
    out = [jax.ShapeDtypeStruct((n, *half[1:]), jnp.complex64) for _ in outs]
    if inplace:
        assert outs[0][0] == 0, "xpass: in place, output 0 is made from input 0"
        out[0] = jax.ShapeDtypeStruct(half, jnp.complex64)
    alias = {0: 0} if inplace else {}
    parts, mine = (1, -1) if keep is None else keep
    if keep is not None:
        assert not inplace and n == half[0] and half[0] % parts == 0 and 0 <= mine < parts
        piece = half[0] // parts
        full = jax.ShapeDtypeStruct((parts, piece, *half[1:]), jnp.complex64)
        rest = jax.ShapeDtypeStruct((parts - 1, piece, *half[1:]), jnp.complex64)
        out = [s for _ in out for s in (full, rest)]
    got = jax.ffi.ffi_call(
        "sonotile_fftw_xpass", out, input_output_aliases=alias, vmap_method="sequential"
    )(
        *args,
        dims=np.array(shape, np.int64),
        has_op=int(op is not None),
        lo=int(lo),
        pad=0,
        parts=int(parts),
        keep=int(mine),
        src=np.array([s for s, _, _ in outs], np.int64),
        axis=np.array([-1 if a is None else a for _, a, _ in outs], np.int64),
    )
    return list(got) if keep is None else list(zip(got[::2], got[1::2]))


def xpass_halo(
    mid: jax.Array,
    halos: tuple[jax.Array, jax.Array],
    bell: jax.Array,
    count: jax.Array | int,
    shape: Sequence[int],
    op: jax.Array | None = None,
    outs: Sequence[ConvOut] = ((0, None, None),),
    inplace: bool = False,
) -> list[jax.Array]:
    """:func:`xpass` of a box assembled from its parts while the pass reads it (no padded copy):
    ``[left | mid[:count] | right | zeros] * bell`` along axis 0, ``halos = (left, right)`` of
    ``ov`` planes each, ``mid`` of ``X - 2 ov`` planes (``shape[0] = X``; ``count``, traced or
    not, its real planes), ``bell`` real of length X. Every output is the interior planes
    ``ov .. X - ov - 1`` (complex64, ``mid``'s shape); ``inplace``: output 0 over ``mid``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    left, right = halos
    ov = left.shape[0]
    half = (shape[0], *mid.shape[1:])
    args = [mid, left, right, jnp.reshape(bell, (-1,)).astype(jnp.float32),
            jnp.reshape(jnp.asarray(count, jnp.int32), (1,))]  # fmt: skip
    args += _x_operands(half, op, outs)
    assert all(s == 0 for s, _, _ in outs), "xpass_halo: one input"
    out = [jax.ShapeDtypeStruct(mid.shape, jnp.complex64) for _ in outs]
    call = jax.ffi.ffi_call("sonotile_fftw_xpass", out, vmap_method="sequential",
                            input_output_aliases={0: 0} if inplace else {})  # fmt: skip
    return list(
        call(*args, dims=np.array(shape, np.int64), has_op=int(op is not None), lo=int(ov),
             pad=int(ov), parts=1, keep=-1, src=np.zeros(len(outs), np.int64),
             axis=np.array([-1 if a is None else a for _, a, _ in outs], np.int64))
    )  # fmt: skip


def r2c(x: jax.Array) -> jax.Array:
    """The half spectrum (last axis halved) of a float32 array of rank 1-3, unnormalised."""
    import jax
    import jax.numpy as jnp

    out = jax.ShapeDtypeStruct((*x.shape[:-1], x.shape[-1] // 2 + 1), jnp.complex64)
    return jax.ffi.ffi_call("sonotile_fftw_r2c", out, vmap_method="sequential")(x)


def c2r(
    spec: jax.Array,
    shape: Sequence[int],
    op: jax.Array | None = None,
    vec: jax.Array | None = None,
    axis: int = 0,
) -> jax.Array:
    """``irfftn(spec * op * vec[k_axis], s=shape)`` in one call: ``op`` real, half-spectrum
    shaped, or None; ``vec`` a 1-D complex vector along grid ``axis`` (its half length on the
    last axis), or None."""
    import jax
    import jax.numpy as jnp

    args = [spec]
    if op is not None:
        args.append(jnp.broadcast_to(op, spec.shape).astype(jnp.float32))
    if vec is not None:
        args.append(jnp.reshape(vec, (-1,)).astype(jnp.complex64))
    out = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
    return jax.ffi.ffi_call("sonotile_fftw_c2r", out, vmap_method="sequential")(
        *args, has_op=int(op is not None), has_vec=int(vec is not None), axis=axis
    )


def r2r_operator(f: jax.Array, op: jax.Array, kind: str, scale: float) -> jax.Array:
    """``scale * T(op * T(f))`` in one call, ``T`` the unnormalised DCT-I (``kind`` "dct1") or
    DST-I ("dst1") along every axis of a float32 array of rank 1-3 (FFTW's ``REDFT00`` /
    ``RODFT00``), ``op`` real and shaped like ``f``: the operator of
    :mod:`sonotile.fft.dtt`'s ``inverse(op * forward(f))`` with ``scale`` the inverse's
    ``1 / prod(periods)``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    code = {"dct1": 0, "dst1": 1}[kind]
    out = jax.ShapeDtypeStruct(f.shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_r2r_op", out, vmap_method="sequential")
    return call(f, jnp.broadcast_to(op, f.shape).astype(jnp.float32), kind=code,
                scale=np.float32(scale))  # fmt: skip


def _trailing(axes: Sequence[int], ndim: int) -> int:
    """How many trailing axes ``axes`` names (they must be the last 1-3 of a rank <= 4 array)."""
    got = sorted(a % ndim for a in axes)
    k = len(got)
    if not 1 <= k <= 3 or ndim > 4 or got != list(range(ndim - k, ndim)):
        raise ValueError(f"axes {tuple(axes)}: 1-3 trailing axes of a rank <= 4 array expected")
    return k


def rfft_axes(x: jax.Array, axes: Sequence[int]) -> jax.Array:
    """``numpy.fft.rfftn(x, axes=axes)`` of a float32 array: complex64, the last axis halved to
    ``n // 2 + 1``, unnormalised; ``axes`` a trailing run (e.g. ``(2,)`` or ``(1, 2)`` of a
    3-D array), the leading axes a batch. One FFTW plan with all threads, or, for a batch of
    2-3 axes transforms (>= 2 per thread, e.g. the planes of an LFB block), groups of them in
    cache on 1-thread plans shared among the threads, as :func:`conv` transforms its planes."""
    import jax
    import jax.numpy as jnp

    k = _trailing(axes, x.ndim)
    out = jax.ShapeDtypeStruct((*x.shape[:-1], x.shape[-1] // 2 + 1), jnp.complex64)
    call = jax.ffi.ffi_call("sonotile_fftw_rfft_axes", out, vmap_method="sequential")
    return call(x.astype(jnp.float32), naxes=k)


def irfft_axes(
    X: jax.Array, n_last: int, axes: Sequence[int], scale: float | None = None
) -> jax.Array:
    """``numpy.fft.irfftn(X, s, axes=axes)`` of a complex64 half spectrum (``s``: the other
    transformed axes' lengths as they are, ``n_last`` points on the last): float32, times
    ``scale`` (default ``1 / prod(s)``, numpy's normalisation). The imaginary parts of the bins
    a real signal's spectrum has real (0 and Nyquist on the last axis) are ignored, as numpy."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    k = _trailing(axes, X.ndim)
    if X.shape[-1] != n_last // 2 + 1:
        raise ValueError(f"irfft_axes: {X.shape[-1]} bins on the last axis, not {n_last} // 2 + 1")
    shape = (*X.shape[:-1], int(n_last))
    if scale is None:
        scale = 1.0 / float(np.prod(shape[X.ndim - k :]))
    out = jax.ShapeDtypeStruct(shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_irfft_axes", out, vmap_method="sequential")
    return call(X.astype(jnp.complex64), naxes=k, scale=np.float32(scale))


def fft_axis(
    X: jax.Array, axis: int, inverse: bool = False, scale: float | None = None
) -> jax.Array:
    """``numpy.fft.fft`` (or ``ifft``) of a complex64 array (rank 1-4) along ``axis``, batched
    over the other axes, in place in the layout (strided, no transposes). The inverse is
    normalised by ``1 / n`` like numpy's; ``scale`` replaces that factor (1 on the forward)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if not 1 <= X.ndim <= 4:
        raise ValueError(f"fft_axis: rank 1-4 arrays, not {X.ndim}")
    axis = axis % X.ndim
    if scale is None:
        scale = 1.0 / X.shape[axis] if inverse and X.shape[axis] else 1.0
    out = jax.ShapeDtypeStruct(X.shape, jnp.complex64)
    call = jax.ffi.ffi_call("sonotile_fftw_fft_axis", out, vmap_method="sequential")
    return call(
        X.astype(jnp.complex64), axis=axis, sign=1 if inverse else -1, scale=np.float32(scale)
    )


def rfft_split(
    x: jax.Array, axes: Sequence[int], split_axis: int, pieces: int, keep: int | None = None
) -> Any:
    """:func:`rfft_axes` cut along ``split_axis`` (one of ``axes``) into ``pieces`` pieces,
    stacked first: shape ``(pieces, *spectrum shape with L on split_axis)``, ``L =
    ceil(s / pieces)`` for the spectrum's ``s`` points there, piece ``p`` holding indices ``[p L,
    p L + L)`` (zeros past ``s``). What an ``all_to_all`` that splits ``split_axis`` sends, made
    while each plane is in cache (no reordering pass).

    ``keep = p``: the pair ``(full, others)`` of an all-to-all that keeps its own piece where it
    lies (``sonotile.parallel.mpi_ffi.transpose``): piece ``p`` in ``full`` (the other pieces
    left unwritten), the others, in order, in ``others`` (``pieces - 1`` pieces)."""
    import jax
    import jax.numpy as jnp

    k = _trailing(axes, x.ndim)
    spec = [*x.shape[:-1], x.shape[-1] // 2 + 1]
    a = split_axis % x.ndim
    if a < x.ndim - k:
        raise ValueError(f"rfft_split: split axis {split_axis} is not among {tuple(axes)}")
    spec[a] = -(-spec[a] // pieces)
    out = [jax.ShapeDtypeStruct((pieces, *spec), jnp.complex64)]
    if keep is not None:
        assert 0 <= keep < pieces, f"rfft_split: keep {keep} of {pieces} pieces"
        out.append(jax.ShapeDtypeStruct((pieces - 1, *spec), jnp.complex64))
    call = jax.ffi.ffi_call("sonotile_fftw_rfft_split", out, vmap_method="sequential")
    mine = -1 if keep is None else keep
    got = call(x.astype(jnp.float32), naxes=k, q=a - (x.ndim - k), keep=mine)
    return got[0] if keep is None else tuple(got)


def irfft_join(
    X: jax.Array,
    shape: Sequence[int],
    axes: Sequence[int],
    split_axis: int,
    scale: float,
    axis: int | None = None,
    vec: jax.Array | None = None,
) -> jax.Array:
    """Inverse of :func:`rfft_split` times ``scale`` (``1 / prod(n)`` is numpy's ``irfftn``):
    the pieces ``X`` (``(pieces, *half spectrum with L on split_axis)``) joined along
    ``split_axis`` (entries past the spectrum's length ignored), transformed back to float32 of
    ``shape``: what an ``all_to_all`` that concatenates along ``split_axis`` receives, consumed
    without a reordering pass. ``vec``: a 1-D complex vector along grid ``axis`` (one of
    ``axes``; the whole spectrum's length there, ``n // 2 + 1`` on the last) multiplying the
    spectrum while the pieces are joined."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = tuple(int(n) for n in shape)
    k = _trailing(axes, len(shape))
    a = split_axis % len(shape)
    if a < len(shape) - k or X.ndim != len(shape) + 1:
        raise ValueError(f"irfft_join: split axis {split_axis} is not among {tuple(axes)}")
    args = [X.astype(jnp.complex64)]
    vaxis = -1
    if vec is not None:
        assert axis is not None, "irfft_join: a vector needs its axis"
        vaxis = axis % len(shape) - (len(shape) - k)
        if vaxis < 0:
            raise ValueError(f"irfft_join: vector axis {axis} is not among {tuple(axes)}")
        args.append(jnp.reshape(vec, (-1,)).astype(jnp.complex64))
    out = jax.ShapeDtypeStruct(shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_irfft_join", out, vmap_method="sequential")
    return call(*args, naxes=k, q=a - (len(shape) - k), scale=np.float32(scale), vaxis=vaxis)


def prepare(shape: tuple[int, ...]) -> bool:
    """Plan the transforms of a real grid ``shape`` now (see ``sonotile_fftw_prepare``)."""
    lib = load()
    if lib is None or not 1 <= len(shape) <= 3:
        return False
    dims = (ctypes.c_int64 * len(shape))(*shape)
    return bool(lib.sonotile_fftw_prepare(len(shape), dims))


def keep(x: jax.Array) -> jax.Array:
    """``x`` itself, materialised in memory at this point: a custom call aliasing its input,
    across which XLA cannot fuse (no data is moved)."""
    return keep_all([x])[0]


def keep_all(xs: Sequence[jax.Array]) -> list[jax.Array]:
    """The arrays ``xs`` themselves, all materialised before any of them is read after this
    point: one custom call aliasing each input to its output (no data is moved). XLA removes
    ``lax.optimization_barrier`` before it schedules a CPU program, so this is what orders
    work there (e.g. every field's transform before the first exchange)."""
    import jax

    outs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]
    call = jax.ffi.ffi_call(
        "sonotile_keep", outs, input_output_aliases={i: i for i in range(len(xs))},
        vmap_method="sequential",
    )  # fmt: skip
    return list(call(*xs))
