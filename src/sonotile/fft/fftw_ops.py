"""FFTW's custom calls for whole spectral operators on one grid (:func:`conv`,
:func:`conv_sum`) and for derivatives along one axis (:func:`axis_diff`, :func:`axis_update`);
the extension is built and loaded by :mod:`sonotile.fft.fftw_library`."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sonotile.fft import interface
from sonotile.fft.fftw_library import ConvOut

if TYPE_CHECKING:  # jax is imported when a transform is first made
    import jax

Epilogue = interface.Epilogue


def epilogue_args(e: Epilogue) -> list[jax.Array]:
    import jax.numpy as jnp

    mode, old, m, s, G = e
    assert 1 <= mode <= 3 and (G is not None) == (mode >= 2), "epilogue: mode and field"
    args = [
        old,
        jnp.reshape(m, (-1,)).astype(jnp.float32),
        jnp.reshape(s, (1,)).astype(jnp.float32),
    ]
    return args + ([G.astype(jnp.float32)] if G is not None else [])


def conv(
    xs: Sequence[jax.Array],
    op: jax.Array | None = None,
    outs: Sequence[ConvOut] = ((0, None, None),),
    epilogues: Sequence[Epilogue | None] | None = None,
    op2: jax.Array | None = None,
    apart: Sequence[bool] | None = None,
) -> list[jax.Array]:
    """Spectral operators on 2-D / 3-D float32 grids of one shape, in one custom call.

    Output ``o`` of ``outs = ((src, axis, vec), ...)`` is ``irfftn(rfftn(xs[src]) * op *
    vec[k_axis])``: ``op`` real on the half spectrum and even along axis 0 (a function of
    ``|k|``: ``op[x] = op[X - x]``; only rows ``0 .. X // 2`` are read), or None; ``vec`` a 1-D
    complex vector along grid ``axis`` (its half length on the last axis), or ``axis`` and
    ``vec`` None. Outputs of one input share its forward transform (see ``sonotile_fftw_conv``
    in the C++ source).
    ``axis = "spectrum"`` (at most one per input) returns instead the complex64 half spectrum
    ``rfftn(xs[src]) * op / N`` transformed back along axis 0 only, for :func:`planes_c2r`.
    ``axis = "op2"`` (``vec`` None) returns ``irfftn(rfftn(xs[src]) * op2)``: a second real
    operator (even along axis 0, as ``op``) from the same forward transform.
    ``epilogues[o]``: an :data:`Epilogue` applied to output ``o`` (a real output along a grid
    axis), or None; its ``old`` field must not be that output's buffer (not donated).
    ``apart[o]``: output ``o`` stays the operator's result and its epilogue's update is an
    extra result, after the outputs in their order, written over the update's ``old`` field
    (aliased: XLA copies ``old`` first only if it is read later).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = xs[0].shape
    half = (*shape[:-1], shape[-1] // 2 + 1)
    args = list(xs)
    if op is not None:
        args.append(jnp.broadcast_to(op, half).astype(jnp.float32))
    if any(a == "op2" for _, a, _ in outs):
        assert op2 is not None, "conv: an op2 output needs op2"
        args.append(jnp.broadcast_to(op2, half).astype(jnp.float32))
    vector = [a is not None and a not in ("spectrum", "op2") for _, a, _ in outs]
    for (_, _, v), w in zip(outs, vector):
        if w:
            assert v is not None, "conv: an output along a grid axis needs its vector"
            args.append(jnp.reshape(v, (-1,)).astype(jnp.complex64))
    epis = list(epilogues) if epilogues is not None else [None] * len(outs)
    assert len(epis) == len(outs), "conv: one epilogue (or None) per output"
    sep = [bool(b) for b in apart] if apart is not None else [False] * len(outs)
    assert len(sep) == len(outs), "conv: one apart flag per output"
    assert all(e is not None for e, b in zip(epis, sep) if b), "conv: apart needs an epilogue"
    aliases: dict[int, int] = {}
    for e, b in zip(epis, sep):
        if b:  # the update over its old field (the first epilogue operand)
            aliases[len(args)] = len(outs) + len(aliases)
        args += epilogue_args(e) if e is not None else []
    out = [
        jax.ShapeDtypeStruct(half, jnp.complex64)
        if a == "spectrum"
        else jax.ShapeDtypeStruct(shape, jnp.float32)
        for _, a, _ in outs
    ]
    out += [jax.ShapeDtypeStruct(shape, jnp.float32) for b in sep if b]
    codes: dict[int | str | None, int] = {None: -1, "spectrum": -2, "op2": -3}
    call = jax.ffi.ffi_call(
        "sonotile_fftw_conv", out, vmap_method="sequential", input_output_aliases=aliases
    )
    return list(
        call(
            *args,
            has_op=int(op is not None),
            src=np.array([s for s, _, _ in outs], np.int64),
            axis=np.array([codes.get(a, a) for _, a, _ in outs], np.int64),
            epi=np.array([0 if e is None else e[0] for e in epis], np.int64),
            apart=np.array(sep, np.int64),
        )
    )


def div_density(
    u: Sequence[jax.Array],
    op: jax.Array | None,
    vecs: Sequence[jax.Array],
    updates: Sequence[Epilogue],
    rho0: jax.typing.ArrayLike,
    nonlinear: bool = False,
    src: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, tuple[jax.Array, ...]]:
    """The divergence of ``u`` with the split-field density update, in one custom call
    (``sonotile_fftw_div_density`` in the C++ source), on a 2-D / 3-D float32 grid:
    ``d_a = irfftn(rfftn(u[a]) * op * vecs[a][k_a])`` (``vecs[a]`` as :func:`conv`'s vector
    along axis ``a``), ``updates[a]`` applied with ``d_a`` (kEpiScalar or kEpiField, the same
    scale and field for every component, ``m`` along axis ``a``), each written over its old
    field. ``nonlinear``: scalar updates whose coefficient is ``s (2 sum_a old_a + rho0)``, the
    nonlinear factor formed in the call from the old fields. ``src``: a grid added to every
    updated field (a pressure source in additive mode) before the sum. Returns ``(rho0 * sum_a d_a,
    sum_a updated_a, updated)``; ``rho0`` a grid or one value [kg/m^3]. No derivative is
    written to memory."""
    import jax
    import jax.numpy as jnp

    shape = u[0].shape
    rank = len(shape)
    assert len(u) == len(vecs) == len(updates) == rank, "div_density: one of each per axis"
    half = (*shape[:-1], shape[-1] // 2 + 1)
    modes = {e[0] for e in updates}
    assert len(modes) == 1 and modes <= {1, 2}, "div_density: one scalar or field mode"
    s, G = updates[0][3], updates[0][4]
    assert all(e[3] is s and e[4] is G for e in updates), "div_density: one coefficient"
    assert not nonlinear or G is None, "div_density: the nonlinear factor is made in the call"
    args = list(u)
    if op is not None:
        args.append(jnp.broadcast_to(op, half).astype(jnp.float32))
    args += [jnp.reshape(v, (-1,)).astype(jnp.complex64) for v in vecs]
    first_old = len(args)
    args += [e[1] for e in updates]
    args += [jnp.reshape(e[2], (-1,)).astype(jnp.float32) for e in updates]
    args.append(jnp.reshape(s, (1,)).astype(jnp.float32))
    if G is not None:
        args.append(G.astype(jnp.float32))
    r0 = jnp.asarray(rho0, jnp.float32)
    field = r0.shape == shape
    assert field or r0.size == 1, "div_density: rho0 a grid or one value"
    args.append(r0 if field else jnp.reshape(r0, (1,)))
    if src is not None:
        assert src.shape == shape, "div_density: a source grid of the fields' shape"
        args.append(src.astype(jnp.float32))
    grid = jax.ShapeDtypeStruct(shape, jnp.float32)
    n_spare = rank - 2  # the third spectrum's storage (dropped)
    aliases = {first_old + a: 2 + n_spare + a for a in range(rank)}
    call = jax.ffi.ffi_call(
        "sonotile_fftw_div_density", [grid] * (2 + n_spare + rank),
        vmap_method="sequential", input_output_aliases=aliases,
    )  # fmt: skip
    coef = 2 if nonlinear else int(G is not None)  # DensityCoef
    got = call(*args, has_op=int(op is not None), coef=coef, rho0_field=int(field),
               has_src=int(src is not None))  # fmt: skip
    return got[0], got[1], tuple(got[2 + n_spare :])


def conv_sum(
    xs: Sequence[jax.Array],
    op: jax.Array | None,
    vecs: Sequence[tuple[int, jax.Array] | None],
) -> jax.Array:
    """``sum_j irfftn(rfftn(xs[j]) * op * vec_j[k_axis])`` on a 2-D / 3-D float32 grid, one call.

    ``op``: as in :func:`conv` (even along axis 0). ``vecs[j]``: ``(axis, vector)`` as in
    :func:`conv` (the half length on the last axis) or None. One inverse transform for the sum
    (``sonotile_fftw_conv_sum`` in the C++ source): the adjoint of the gradient in 4
    transforms' work where ``len(xs)`` :func:`conv` calls take 6.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = xs[0].shape
    half = (*shape[:-1], shape[-1] // 2 + 1)
    args = list(xs)
    if op is not None:
        args.append(jnp.broadcast_to(op, half).astype(jnp.float32))
    args += [jnp.reshape(v[1], (-1,)).astype(jnp.complex64) for v in vecs if v is not None]
    axis = np.array([-1 if v is None else v[0] for v in vecs], np.int64)
    out = jax.ShapeDtypeStruct(shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_conv_sum", out, vmap_method="sequential")
    return call(*args, has_op=int(op is not None), axis=axis)


def hermitian(vec: jax.Array, n: int, half: bool) -> jax.Array:
    """The complex64 vector a 1-D real operator ``irfft(rfft(x) * vec[: n // 2 + 1], n)`` takes
    in :func:`axis_diff`: its ``n // 2 + 1`` bins (``half``: the last axis), else all ``n`` of
    the full spectrum, ``vec[n - k] = conj(vec[k])``; the imaginary parts of bins 0 and ``n / 2``
    dropped (as an inverse real transform drops them)."""
    import jax.numpy as jnp

    h = jnp.reshape(vec, (-1,))[: n // 2 + 1].astype(jnp.complex64)
    if half:
        return h
    mid = h[1 : (n + 1) // 2]
    ends = [jnp.real(h[:1]).astype(jnp.complex64)]
    nyquist = [jnp.real(h[n // 2 :]).astype(jnp.complex64)] if n % 2 == 0 else []
    return jnp.concatenate([*ends, mid, *nyquist, jnp.conj(mid[::-1])])


def axis_kernel(like: jax.Array) -> bool:
    """True when :func:`axis_diff` takes fields like ``like``: float32, rank 3, the last axis
    even and >= 4."""
    import jax.numpy as jnp

    return (
        like.dtype == jnp.float32
        and like.ndim == 3
        and like.shape[2] % 2 == 0
        and (like.shape[2] >= 4)
    )


def axis_diff(xs: Sequence[jax.Array], outs: Sequence[tuple[int, int, jax.Array]]) -> list:
    """Operators along single axes of rank-3 float32 grids (:func:`axis_kernel`), one call.

    Output ``o`` of ``outs = ((src, axis, vec), ...)`` is ``irfft(rfft(xs[src], axis) *
    vec[: n // 2 + 1], n, axis)`` (``vec``: ``n`` or ``n // 2 + 1`` values along ``axis``):
    1-D transforms only, each output one pass each way over the grid
    (``sonotile_fftw_axis_diff`` in the C++ source). Not differentiable (see
    :func:`_axis_diff_vjp`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = xs[0].shape
    k = 1 + max(s for s, _, _ in outs)
    vecs = [hermitian(v, shape[a], a == len(shape) - 1) for _, a, v in outs]
    out = [jax.ShapeDtypeStruct(shape, jnp.float32) for _ in outs]
    call = jax.ffi.ffi_call("sonotile_fftw_axis_diff", out, vmap_method="sequential")
    return list(
        call(
            *xs[:k],
            *vecs,
            src=np.array([s for s, _, _ in outs], np.int64),
            axis=np.array([a for _, a, _ in outs], np.int64),
        )
    )


#: One target of :func:`axis_update`: ``(old, m, terms)`` or ``(old, m, terms, (P, w))``: the
#: old field (or None: 0), the PML vectors per grid axis (or None: no damping),
#: ``((source, G), ...)`` (1 or 2 terms; G a grid, one value, or ``("mean", F, axis, s)``:
#: ``s / mean(F)`` with the next point along ``axis``, the last point ``F`` itself, as
#: :func:`sonotile.model.staggering.staggered_mean`) and ``w P`` added after (P a grid, w one
#: value)
AxisTarget = tuple[Any, ...]


def axis_update(
    srcs: Sequence[jax.Array], axis: int, vec: jax.Array, targets: Sequence[AxisTarget],
    after: Sequence[jax.Array] = (),
) -> list[jax.Array]:  # fmt: skip
    """Split-field updates from single-axis derivatives, in one call (rank-3 float32 grids,
    :func:`axis_kernel`): with ``d_s = irfft(rfft(srcs[s], axis) * vec[: n // 2 + 1], n,
    axis)`` (as :func:`axis_diff`), target ``(old, m, terms)`` becomes ``M (M old + sum G
    d_s)`` over its terms ``(s, G)``, ``M = m[axis] m[b] m[c]`` (the other axes in order; the
    PML along ``axis`` and the multi-axial one along the others); without ``m``, ``old + sum``
    (``old`` None: the sum); plus ``w P`` where given. ``after``: arrays the call waits for
    (not read). Each new field is written over its old one's buffer (XLA copies
    it first if it is still needed); no derivative is written to memory
    (``sonotile_fftw_axis_update`` in the C++ source). Not differentiable."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = srcs[0].shape
    f32 = jnp.float32
    args = [*srcs, hermitian(vec, shape[axis], axis == len(shape) - 1)]
    alias: dict[int, int] = {}
    coef_src: list[int] = []
    coef_axis: list[int] = []
    for t, (old, m, terms, *post) in enumerate(targets):
        if old is not None:
            alias[len(args)] = t
            args.append(old)
        if m is not None:
            args += [jnp.reshape(v, (-1,)).astype(f32) for v in m]
        for s, G in terms:
            coef_src.append(s)
            if isinstance(G, tuple):  # ("mean", field, axis, scale): scale / mean_axis(field)
                _, G, ax, scale = G
                coef_axis.append(ax)
                args += [
                    jnp.broadcast_to(G, shape).astype(f32),
                    jnp.reshape(scale, (1,)).astype(f32),
                ]
                continue
            coef_axis.append(-1)
            G = jnp.asarray(G, f32)
            args.append(jnp.reshape(G, (1,)) if G.size == 1 else jnp.broadcast_to(G, shape))
        if post:
            P, w = post[0]
            args += [jnp.broadcast_to(P, shape).astype(f32), jnp.reshape(w, (1,)).astype(f32)]
    out = [jax.ShapeDtypeStruct(shape, f32) for _ in targets]
    call = jax.ffi.ffi_call("sonotile_fftw_axis_update", out, input_output_aliases=alias,
                            vmap_method="sequential")  # fmt: skip
    return list(
        call(
            *args,
            *after,
            ndeps=len(after),
            axis=int(axis),
            nsrc=len(srcs),
            has_old=np.array([t[0] is not None for t in targets], np.int64),
            has_m=np.array([t[1] is not None for t in targets], np.int64),
            ncoef=np.array([len(t[2]) for t in targets], np.int64),
            coef_src=np.array(coef_src, np.int64),
            coef_axis=np.array(coef_axis, np.int64),
            has_post=np.array([len(t) > 3 for t in targets], np.int64),
        )
    )


@functools.cache
def axis_diff_vjp() -> Any:
    """:func:`axis_diff` with a reverse-mode rule: each output is a real circulant operator
    along its axis, whose adjoint is the same operator with ``conj(vec)``; an input's cotangent
    is the sum of its outputs' (one call for all). The vectors are constants."""
    import jax
    import jax.numpy as jnp

    def run(xs: list, where: tuple, vecs: list) -> list:
        return axis_diff(xs, [(s, a, v) for (s, a), v in zip(where, vecs)])

    def fwd(xs: list, where: tuple, vecs: list) -> tuple[list, tuple]:
        return run(xs, where, vecs), (vecs, len(xs))

    def bwd(where: tuple, res: tuple, cts: list) -> tuple:
        vecs, n_in = res
        back = axis_diff(list(cts), [(o, a, jnp.conj(v)) for o, ((_, a), v) in
                                     enumerate(zip(where, vecs))])  # fmt: skip
        bars = [jnp.zeros_like(cts[0]) for _ in range(n_in)]
        for (s, _), b in zip(where, back):
            bars[s] = bars[s] + b
        return bars, [jnp.zeros_like(v) for v in vecs]

    f = jax.custom_vjp(run, nondiff_argnums=(1,))
    f.defvjp(fwd, bwd)
    return f
