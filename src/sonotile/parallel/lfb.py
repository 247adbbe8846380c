"""``lfb``: local Fourier basis (Jaros, Vaverka, Treeby).

Cuboid subdomains on a 1-, 2- or 3-D mesh, grid axis ``j`` split over mesh axis ``j``. Before
every spectral operation each block is padded with ``overlap`` points from its neighbours
(``lax.ppermute`` on a periodic torus, axis by axis so edges and corners come along), multiplied
by a bell that is 1 inside and falls to 0 across the overlap (Boyd's erf bell), differentiated
with local FFTs and the padded block's own wavenumbers (shift operators and kappa included),
and cropped to the interior. Communication is nearest-neighbour; the error is set by overlap
and bell (see ``docs/decomposition.md``). Where every block's box would reach the whole length
of a split axis (:func:`whole_axis`), the box along it is that axis from the block on, without
a bell: exact along that axis.

Blocks split along grid axis 0 only (a 1-D mesh, or one whose other axes are 1), on the FFTW
backend, take a shorter way to the same padded spectrum ("planes first"): the transforms over
the other axes commute with the padding, the bell and the crop along x, so each block
transforms only its interior planes (R2C), exchanges the overlap planes in that basis
(complex64), and one call (the backend's ``xpass_halo``,
:class:`~sonotile.fft.backend.SlabKernels`) does the pass along x of the
box padded and windowed along x (read straight from the spectrum and the halos) with the
operator and keeps the interior planes, which alone are transformed back
(:meth:`~sonotile.fft.backend.SlabKernels.planes_c2r`). FFT work per block falls from the
padded box's to about its own (``LfbMeta.planes``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from sonotile.fft import backend as fft_backend
from sonotile.model.problem import Problem
from sonotile.parallel import collectives
from sonotile.parallel.blocks import Blocks, compact, expand, resize
from sonotile.parallel.mesh import AXIS_NAMES
from sonotile.physics import model_for
from sonotile.spectral import linear
from sonotile.spectral.device import to_device
from sonotile.spectral.operators import FourierOps, SplitUpdate

if TYPE_CHECKING:
    from sonotile.spectral.linear import AdjointOps

#: Per grid axis: a broadcastable bell on the padded length (uneven axes: the pair for a full
#: block and a block one point short, zero-filled to the box), or None where not split.
Bells = tuple[jax.Array | tuple[jax.Array, jax.Array] | None, ...]


def erf_bell(n: int, overlap: int, width: float = 1.0) -> np.ndarray:
    """Boyd's erf bell on a padded axis of ``n + 2 overlap`` points.

    1 on the ``n`` interior points and on the inner ``(1 - width)`` part of each overlap; across
    the outer ``width`` fraction it rises from ~0 to 1 as ``erfc(-s / sqrt(1 - s^2)) / 2`` with
    ``s`` running over (-1, 1) — infinitely smooth, and ~0 at both ends so that the padded block
    is periodic.
    """
    if not 0 < width <= 1:
        raise ValueError(f"bell_width = {width}: must be in (0, 1]")
    length = n + 2 * overlap
    b = np.ones(length)
    t = max(width * overlap, 1.0)  # transition length [points]
    i = np.arange(overlap)
    s = 2 * (i + 0.5) / t - 1
    left = np.array(
        [
            0.0 if v <= -1 else 1.0 if v >= 1 else 0.5 * math.erfc(-v / math.sqrt(1 - v * v))
            for v in s
        ]
    )
    b[:overlap] = left
    b[length - overlap :] = left[::-1]
    return b


@dataclass(frozen=True)
class LfbMeta:
    names: tuple[str, ...]  # mesh axis names; mesh axis j splits grid axis j
    sizes: tuple[int, ...]
    overlap: int
    ndim: int
    #: per split axis: real points of each block when the blocks differ (n % p != 0), else None
    counts: tuple[tuple[int, ...] | None, ...] = ()
    #: transform the planes before the exchange where a block is split along axis 0 only (less
    #: FFT work than the padded box's 3-D transforms, same results; False: those transforms)
    planes: bool = True
    #: per split axis: the axis's length where every block's box would reach it (the box is
    #: then the whole axis from the block on: exact, no bell), else None
    whole: tuple[int | None, ...] = ()
    #: per split axis: the slot length of a block [points]
    slots: tuple[int, ...] = ()

    def padded(self, a: int) -> bool:
        return a < len(self.names) and self.sizes[a] > 1

    def is_whole(self, a: int) -> bool:
        """Whether axis ``a``'s box is the whole axis (exact along it)."""
        return self.padded(a) and a < len(self.whole) and self.whole[a] is not None

    def width(self, a: int) -> int:
        """Halo width along axis ``a`` [points]: the overlap, or on a whole axis the points
        after the thinnest block up to the axis's length."""
        if not self.is_whole(a):
            return self.overlap
        thinnest = min(self.counts[a]) if self.uneven(a) else self.slots[a]
        return cast(int, self.whole[a]) - thinnest

    def uneven(self, a: int) -> bool:
        return a < len(self.counts) and self.counts[a] is not None

    def x_only(self) -> bool:
        """Blocks split (padded) along grid axis 0 and no other."""
        return self.padded(0) and not any(self.padded(a) for a in range(1, len(self.names)))


@jax.tree_util.register_pytree_node_class
@dataclass
class LfbOps:
    """Spectral operators on a local Fourier basis: exchange overlaps, window with the bell,
    apply :class:`FourierOps` of the padded block (its own wavenumbers), keep the interior."""

    inner: FourierOps | AdjointOps  # AdjointOps: differentiable FFTW operators
    bells: Bells  # per grid axis: broadcastable bell on the padded length, or None
    #: per axis exp(-i k d/2) on the global rfft length, or None
    unshift: tuple[jax.Array, ...] | None = None
    meta: LfbMeta | None = None

    def tree_flatten(self) -> tuple[tuple[Any, ...], LfbMeta | None]:
        return (self.inner, self.bells, self.unshift), self.meta

    @classmethod
    def tree_unflatten(cls, meta: LfbMeta | None, children: tuple[Any, Any, Any]) -> LfbOps:
        return cls(*children, meta=meta)

    # --- communication
    def _halo(self, f: jax.Array, a: int, side: int, ov: int) -> jax.Array:
        """``ov`` planes along axis ``a`` from the neighbour on ``side`` (-1 left, +1 right),
        taken from as many hops as needed when a block is thinner than that."""
        mt = self.meta
        name, size = mt.names[a], mt.sizes[a]
        n = f.shape[a]
        hops = -(-ov // n)
        pieces = []
        for h in range(1, hops + 1):
            # shard i receives the block of shard i + side*h
            perm = [((i + side * h) % size, i) for i in range(size)]
            pieces.append(collectives.ppermute(f, name, perm))
        if side < 0:
            halo = jnp.concatenate(pieces[::-1], axis=a) if hops > 1 else pieces[0]
            return lax.slice_in_dim(halo, hops * n - ov, hops * n, axis=a)
        halo = jnp.concatenate(pieces, axis=a) if hops > 1 else pieces[0]
        return lax.slice_in_dim(halo, 0, ov, axis=a)

    def _count(self, a: int) -> jax.Array:
        """This block's real points along axis ``a`` (traced: it depends on the shard)."""
        counts = jnp.asarray(self.meta.counts[a], jnp.int32)
        return counts[collectives.axis_index(self.meta.names[a])]

    def _halo_uneven(self, f: jax.Array, a: int, side: int, ov: int) -> jax.Array:
        """:meth:`_halo` for blocks of different sizes: the ``ov`` real points nearest to this
        block, gathered over as many neighbours as the thinnest block needs."""
        mt = self.meta
        name, size = mt.names[a], mt.sizes[a]
        b = f.shape[a]
        counts = jnp.asarray(mt.counts[a], jnp.int32)
        me = collectives.axis_index(name)
        hops = -(-ov // min(mt.counts[a]))
        ks = range(hops, 0, -1) if side < 0 else range(1, hops + 1)  # in grid order
        pieces = [collectives.ppermute(f, name, [((i + side * k) % size, i) for i in range(size)])
                  for k in ks]  # fmt: skip
        real = jnp.concatenate([jnp.arange(b) < counts[(me + side * k) % size] for k in ks])
        order = jnp.argsort(~real, stable=True)  # real points first, in grid order
        first = jnp.sum(real) - ov if side < 0 else 0
        pick = lax.dynamic_slice_in_dim(order, first, ov)
        return jnp.take(jnp.concatenate(pieces, axis=a), pick, axis=a)

    def _halo_fast(self, f: jax.Array, a: int, side: int) -> jax.Array:
        """The halo on ``side`` of axis ``a`` (:meth:`LfbMeta.width` points), from the nearest
        neighbour in one hop where it holds them."""
        mt = self.meta
        name, size = mt.names[a], mt.sizes[a]
        n = f.shape[a]
        ov = mt.width(a)
        if mt.uneven(a) and ov > min(mt.counts[a]):
            return self._halo_uneven(f, a, side, ov)
        if ov > n:
            return self._halo(f, a, side, ov)
        if side < 0 and mt.uneven(a):  # the real end of the block (dead points after it)
            edge = lax.dynamic_slice_in_dim(f, self._count(a) - ov, ov, axis=a)
            perm = [(i, (i + 1) % size) for i in range(size)]
        elif side < 0:  # my left halo = right edge of the left neighbour
            edge = lax.slice_in_dim(f, n - ov, n, axis=a)
            perm = [(i, (i + 1) % size) for i in range(size)]
        else:
            edge = lax.slice_in_dim(f, 0, ov, axis=a)
            perm = [(i, (i - 1) % size) for i in range(size)]
        return collectives.ppermute(edge, name, perm)

    def _join(
        self, f: jax.Array, left: jax.Array | None, right: jax.Array, a: int
    ) -> jax.Array:  # fmt: skip
        """``f`` with its halos along axis ``a``: ``[left | f | right]``; on an uneven axis
        ``[left | real points | right | zeros]`` (the right halo follows the real points and
        overwrites the dead one; the box keeps one length on every shard). On a whole axis
        (no left halo) the box is the axis from the block's first point on: ``[real points |
        right]``, cut to the axis's length."""
        mt = self.meta
        if mt.is_whole(a):
            if mt.uneven(a):
                f = jnp.concatenate([f, jnp.zeros_like(right)], axis=a)
                f = lax.dynamic_update_slice_in_dim(f, right, self._count(a), a)
            else:
                f = jnp.concatenate([f, right], axis=a)
            return lax.slice_in_dim(f, 0, cast(int, mt.whole[a]), axis=a)
        assert left is not None
        if not mt.uneven(a):
            return jnp.concatenate([left, f, right], axis=a)
        f = jnp.concatenate([left, f, jnp.zeros_like(right)], axis=a)
        return lax.dynamic_update_slice_in_dim(f, right, mt.overlap + self._count(a), a)

    def _pad(self, f: jax.Array, axes: tuple[int, ...] | None = None) -> jax.Array:
        for a in range(len(self.meta.names)):
            if not self.meta.padded(a) or (axes is not None and a not in axes):
                continue
            left = None if self.meta.is_whole(a) else self._halo_fast(f, a, -1)
            f = self._join(f, left, self._halo_fast(f, a, +1), a)
        return f

    def _pad_all(self, fs: list[jax.Array]) -> list[jax.Array]:
        """:meth:`_pad` of every field, axis by axis (edges and corners come along), each axis's
        halos of all fields in one exchange where the transport does that
        (:func:`sonotile.parallel.collectives.halos`, the MPI transport)."""
        mt = self.meta
        for a in range(len(mt.names)):
            if not mt.padded(a):
                continue
            ends = mt.counts[a] if mt.uneven(a) else None
            got = collectives.halos(fs, mt.names[a], mt.width(a), ends, axis=a)
            if got is None:
                fs = [self._pad(f, (a,)) for f in fs]
            else:  # a whole axis uses the right halo only
                fs = [self._join(f, None if mt.is_whole(a) else lo, hi, a)
                      for f, (lo, hi) in zip(fs, got)]  # fmt: skip
        return fs

    def _window(self, f: jax.Array, axes: tuple[int, ...] | None = None) -> jax.Array:
        for a, b in enumerate(self.bells):
            if b is None or (axes is not None and a not in axes):
                continue
            if self.meta.uneven(a):  # (full block, block one point short): this shard's bell
                b = jnp.where(self._count(a) == f.shape[a] - 2 * self.meta.overlap, b[0], b[1])
            f = f * cast(jax.Array, b)  # one bell here (an uneven axis's pair picked above)
        return f

    def _crop(self, f: jax.Array, axes: tuple[int, ...] | None = None) -> jax.Array:
        """The block's slot out of its box (a whole axis's box starts at the block)."""
        mt = self.meta
        for a in range(len(mt.names)):
            if mt.padded(a) and (axes is None or a in axes):
                lo = 0 if mt.is_whole(a) else mt.overlap
                f = lax.slice_in_dim(f, lo, lo + mt.slots[a], axis=a)
        return f

    def _local(self, fs: list[jax.Array]) -> list[jax.Array]:
        """Pad all fields first (all exchanges issued before any is used), then window."""
        return [self._window(p) for p in self._pad_all(list(fs))]

    # --- planes first (blocks split along axis 0 only, FFTW; see the module docstring)
    @property
    def _kernels(self) -> Any:
        """The padded box's FFT backend, whose slab kernels the planes-first way calls
        (:class:`sonotile.fft.backend.SlabKernels`)."""
        inner = self.inner
        return inner.backend if isinstance(inner, FourierOps) else inner.inner.backend

    def _split(self, f: jax.Array) -> FourierOps | None:
        """The padded box's operators when ``f`` takes the planes-first way, else None."""
        mt, inner = self.meta, self.inner
        if mt.planes and mt.x_only() and isinstance(inner, FourierOps) and inner.fused(f):
            return inner
        return None

    def _local_planes(
        self, fs: list[jax.Array]
    ) -> list[tuple[jax.Array, jax.Array | None, jax.Array]]:  # fmt: skip
        """``(plane spectra, left halo, right halo)`` of each block (complex64, planes along x):
        the padded box's parts, which :meth:`_xpass` pads and windows as it reads them.

        Several fields meet their neighbours once: every field's planes are transformed before
        any exchange, and every exchange is done before any pass uses it
        (the backend's ``keep_all``). Otherwise XLA put each field's transform between
        the exchanges of the others (seven meeting points per absorbing step instead of four),
        and at each the processes waited for the slower one's work since the last."""
        specs = [self._kernels.rfft_axes(f, tuple(range(1, f.ndim))) for f in fs]
        mt = self.meta
        ends = mt.counts[0] if mt.uneven(0) else None
        got = collectives.halos(specs, mt.names[0], mt.width(0), ends, axis=0)
        if got is not None:  # one call for the group (the MPI transport): no slices, no keeps
            return [(s, None if mt.is_whole(0) else lo, hi) for s, (lo, hi) in zip(specs, got)]
        if mt.is_whole(0):  # one halo, no left one (see _join)
            return self._whole_planes(specs)
        if len(fs) == 1:
            (s,) = specs
            return [(s, self._halo_fast(s, 0, -1), self._halo_fast(s, 0, +1))]
        specs = self._kernels.keep_all(specs)
        halos = [h for s in specs for h in (self._halo_fast(s, 0, -1), self._halo_fast(s, 0, +1))]
        kept = self._kernels.keep_all([*specs, *halos])
        k = len(specs)
        return [(kept[i], kept[k + 2 * i], kept[k + 2 * i + 1]) for i in range(k)]

    def _whole_planes(
        self, specs: list[jax.Array]
    ) -> list[tuple[jax.Array, jax.Array | None, jax.Array]]:  # fmt: skip
        """:meth:`_local_planes` on a whole axis 0: each spectrum and the planes after it."""
        if len(specs) == 1:
            return [(specs[0], None, self._halo_fast(specs[0], 0, +1))]
        specs = self._kernels.keep_all(specs)
        kept = self._kernels.keep_all([*specs, *(self._halo_fast(s, 0, +1) for s in specs)])
        k = len(specs)
        return [(kept[i], None, kept[k + i]) for i in range(k)]

    def _xpass(
        self,
        part: tuple[jax.Array, jax.Array | None, jax.Array],
        like: jax.Array,
        op: jax.Array | None,
        outs: list[Any],
    ) -> list[jax.Array]:
        """``xpass_halo`` of a block's padded, windowed box, the interior planes of
        each output (output 0 over the block's spectrum); on a whole axis 0 ``xpass``
        of the box :meth:`_join` assembles, its first planes."""
        mid, left, right = part
        b, ov = like.shape[0], self.meta.overlap
        if left is None:
            box = self._join(mid, None, right, 0)
            shape = (box.shape[0], *like.shape[1:])
            return self._kernels.xpass([box], shape, op, outs, planes=b)
        bell = self.bells[0]
        count: jax.Array | int = b
        if self.meta.uneven(0):  # this shard's bell of the pair, its real planes
            count = self._count(0)
            bell = jnp.where(count == b, cast(tuple, bell)[0], cast(tuple, bell)[1])
        shape = (b + 2 * ov, *like.shape[1:])  # the padded real box
        return self._kernels.xpass_halo(mid, (left, right), cast(jax.Array, bell), count, shape,
                                        op, outs, inplace=True)  # fmt: skip

    def _grad_planes(
        self, p: jax.Array, ops: FourierOps, updates: Sequence[SplitUpdate] | None = None
    ) -> tuple[jax.Array, ...]:
        """The gradient's components, or (``updates``) the split-field updates by them inside
        the plane transforms back (:func:`sonotile.spectral.operators.grad_update`)."""
        epi = [None] * p.ndim if updates is None else [up.epilogue() for up in updates]
        (q,) = self._local_planes([p])
        spec, gx = self._xpass(q, p, ops.kappa, [(0, None, None), (0, 0, ops.shift_pos[0])])
        rest = [self._kernels.planes_c2r(spec, p.shape, a, s, epilogue=epi[a])
                for a, s in enumerate(ops.shift_pos) if a]  # fmt: skip
        return (self._kernels.planes_c2r(gx, p.shape, epilogue=epi[0], update_axis=0), *rest)

    def _div_planes(
        self, u: Sequence[jax.Array], ops: FourierOps, updates: Sequence[SplitUpdate] | None = None
    ) -> tuple[jax.Array, ...]:
        """The divergence's per-axis parts, or (``updates``) the updates by them
        (:func:`sonotile.spectral.operators.div_update`)."""
        out = []
        for a, (q, ua, s) in enumerate(zip(self._local_planes(list(u)), u, ops.shift_neg)):
            epi = None if updates is None else updates[a].epilogue()
            if a == 0:
                (d,) = self._xpass(q, ua, ops.kappa, [(0, 0, s)])
                out.append(self._kernels.planes_c2r(d, ua.shape, epilogue=epi, update_axis=0))
            else:
                (d,) = self._xpass(q, ua, ops.kappa, [(0, None, None)])
                out.append(self._kernels.planes_c2r(d, ua.shape, a, s, epilogue=epi))
        return tuple(out)

    def _apply_planes(
        self, fs: Sequence[jax.Array], ops: Sequence[jax.Array | None]
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        """Operator ``ops[i]`` applied to field ``fs[i]``, the exchanges of all together."""
        out = []
        for q, f, op in zip(self._local_planes(list(fs)), fs, ops):
            (d,) = self._xpass(q, f, op, [(0, None, None)])
            out.append(self._kernels.planes_c2r(d, f.shape))
        return tuple(out)

    # --- split-field updates inside the FFTW calls (sonotile.spectral.operators.grad_update)
    def fuses_updates(self, like: jax.Array) -> bool:
        """Whether :meth:`grad_update` / :meth:`div_update` apply: the planes-first way on plain
        FFTW operators, unless :attr:`sonotile.base.config.Settings.fftw_updates` was off when they
        were built."""
        ops = self._split(like)
        return type(ops) is FourierOps and "separate-updates" not in ops.fft

    def grad_update(
        self, p: jax.Array, updates: Sequence[SplitUpdate]
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        ops = self._split(p)
        assert ops is not None
        return self._grad_planes(p, ops, updates)

    def div_update(
        self, u: Sequence[jax.Array], updates: Sequence[SplitUpdate]
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        ops = self._split(u[0])
        assert ops is not None
        return self._div_planes(u, ops, updates)

    # --- the FourierOps interface
    def grad(self, p: jax.Array) -> tuple[jax.Array, ...]:
        if (ops := self._split(p)) is not None:
            return self._grad_planes(p, ops)
        (q,) = self._local([p])
        return tuple(self._crop(g) for g in self.inner.grad(q))

    def div(self, u: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
        if (ops := self._split(u[0])) is not None:
            return self._div_planes(u, ops)
        q = self._local(list(u))
        return tuple(self._crop(x) for x in self.inner.div(tuple(q)))

    def fractional(self, f: jax.Array, which: int) -> jax.Array:
        if (ops := self._split(f)) is not None:
            return self._apply_planes([f], [ops.nabla1 if which == 1 else ops.nabla2])[0]
        (q,) = self._local([f])
        return self._crop(self.inner.fractional(q, which))

    def fractionals(self, f1: jax.Array, f2: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(fractional(f1, 1), fractional(f2, 2))`` with both fields' overlaps exchanged at
        one meeting point of the processes (:func:`sonotile.spectral.operators.fractional_pair`)."""
        if (ops := self._split(f1)) is not None:
            a, b = self._apply_planes([f1, f2], [ops.nabla1, ops.nabla2])
            return a, b
        q1, q2 = self._local([f1, f2])
        return self._crop(self.inner.fractional(q1, 1)), self._crop(self.inner.fractional(q2, 2))

    def filter_source(self, s: jax.Array) -> jax.Array:
        if (ops := self._split(s)) is not None:
            return self._apply_planes([s], [ops.source_kappa])[0]
        (q,) = self._local([s])
        return self._crop(self.inner.filter_source(q))

    def diffs(self, f: jax.Array, which: Sequence[tuple[int, int]]) -> list[jax.Array]:
        """:meth:`FourierOps.diffs` (single-axis derivatives, the elastic model's operator) on
        the blocks: the padded, windowed block differentiated with the box's wavenumbers and
        cropped (exact along an axis that is not split)."""
        return self.diffs_many([f], which)[0]

    def diffs_many(
        self, fs: Sequence[jax.Array], which: Sequence[tuple[int, int]]
    ) -> list[list[jax.Array]]:  # fmt: skip
        """:meth:`diffs` of each field of ``fs`` (``out[i][j]``), every field's overlaps
        exchanged before any is differentiated."""
        got = self._fourier.diffs_many(self._local(list(fs)), which)
        return [[self._crop(g) for g in row] for row in got]

    def keep_together(self, fs: Sequence[jax.Array]) -> list[jax.Array]:
        """The inner operators' :meth:`FourierOps.keep_together` (element-wise)."""
        return self._fourier.keep_together(fs)

    @property
    def _fourier(self) -> FourierOps:
        """The padded box's plain Fourier operators, whose single-axis derivatives JAX
        differentiates as they are (the backends' derivative rules: the elastic model's
        gradients on LFB blocks); :class:`AdjointOps` wraps the acoustic model's operators."""
        if not isinstance(self.inner, FourierOps):
            raise TypeError("lfb: single-axis derivatives take plain FourierOps of the box, "
                            "not AdjointOps")  # fmt: skip
        return self.inner

    def keep(self, f: jax.Array) -> jax.Array:
        """The inner operators' fusion boundary (element-wise: the same on a block). Without it
        XLA fused the nonlinear density factor into each of the three density updates, each
        reading all three old components (and keeping copies of them): ~4 ms of a 128^3 step."""
        return self.inner.keep(f)

    @property
    def barrier(self) -> linear.Barrier:
        """The inner operators' fusion boundary for derivative rules (``AdjointOps.barrier``);
        on plain :class:`FourierOps` (not differentiable) the same kind of boundary."""
        inner = self.inner
        return inner.barrier if isinstance(inner, linear.AdjointOps) else linear.Barrier(inner.fft)

    def unstagger(self, u: jax.Array, axis: int) -> jax.Array:
        """Half-cell shift along ``axis`` (sensor output only). Exact when possible: a transpose
        over the one mesh axis that splits ``axis`` makes it local (the shift's kernel decays
        only like 1/r, so an overlap cannot localise it); otherwise pad + bell."""
        mt = self.meta
        if not mt.padded(axis):
            return self.inner.unstagger(u, axis)
        size = mt.sizes[axis]
        if self.unshift is not None:
            # another axis, cut into `size` pieces (zero-padded: each line shifts on its own)
            b, name = max(c for c in range(mt.ndim) if c != axis), mt.names[axis]
            nb = u.shape[b]
            v = collectives.all_to_all(resize(u, -(-nb // size) * size, b), name, b, axis)
            if mt.uneven(axis):
                v = compact(v, mt.counts[axis], axis)
            v = fft_backend.portable().along_axis([v], axis, [self.unshift[axis]])[0]
            if mt.uneven(axis):
                v = expand(v, mt.counts[axis], axis)
            return resize(collectives.all_to_all(v, name, axis, b), nb, b)
        ax = (axis,)
        q = self._window(self._pad(u, ax), ax)
        return self._crop(self.inner.unstagger(q, axis), ax)


def _bell(
    n: int, overlap: int, width: float, axis: int, d: int, dtype: jax.typing.DTypeLike
) -> jax.Array:
    """The bell of a block of ``n`` points, broadcastable along ``axis`` of a ``d``-D box."""
    b = erf_bell(n, overlap, width)
    shape = [1] * d
    shape[axis] = b.shape[0]
    return to_device(b.reshape(shape), dtype)


def _prepare_planes(meta: LfbMeta, inner: FourierOps, local: tuple[int, ...]) -> None:
    """Plan the FFTW transforms of a block's interior planes now (before the run's state
    exists) when its operators will take the planes-first way."""
    if meta.planes and meta.x_only() and len(local) >= 2 and inner.backend.slab_kernels:
        inner.backend.prepare(local)


def whole_axis(blocks: Blocks, a: int, overlap: int) -> int | None:
    """Grid axis ``a``'s length where every block's box (its points and an ``overlap`` on both
    sides) would reach the whole axis, else None. Such a box would hold points twice under
    different weights of the bell; the whole axis, from the block's first point on and without
    a bell, is shorter and exact (the global wavenumbers along it)."""
    if blocks.parts(a) < 2 or int(blocks.counts(a).min()) + 2 * overlap < blocks.shape[a]:
        return None
    return blocks.shape[a]


def box_operators(problem: Any, shape: tuple[int, ...], unstagger: bool) -> FourierOps:
    """The Fourier operators of a padded box of ``shape``: the model's own where it builds them
    (its ``box_operators``: the elastic model's single-axis derivatives), else the acoustic
    model's (k-space correction, absorption, source filter)."""
    own = getattr(model_for(problem), "box_operators", None)
    if own is not None:
        return cast(FourierOps, own(problem, shape, unstagger))
    g, s, med = problem.grid, problem.sources, problem.medium
    additive = (s.p is not None and s.p.mode == "additive") or any(
        u is not None and u.mode == "additive" for u in s.u
    )
    return FourierOps.build(
        shape, g.spacing, med.c_ref, g.dt, problem.dtype,
        alpha_power=med.alpha_power if med.absorption == "power_law" else None,
        source_filter=additive, unstagger=unstagger,
    )  # fmt: skip


def lfb_constants(
    problem: Problem, blocks: Blocks, overlap: int, bell_width: float, unstagger: bool
) -> tuple[FourierOps, Bells, tuple[jax.Array, ...] | None, LfbMeta]:
    """Per-shard LFB operators: the padded box's :class:`FourierOps`, the bells (on uneven axes
    the pair for a full block and a block one point short, zero-filled to the box), the
    unstagger shifts, and the static layout."""
    g = problem.grid
    mesh_shape = blocks.mesh_shape
    d, m = g.ndim, len(mesh_shape)
    local = blocks.local_shape
    whole = tuple(whole_axis(blocks, a, overlap) for a in range(m))
    padded = [
        whole[a] or n + 2 * overlap if a < m and mesh_shape[a] > 1 else n
        for a, n in enumerate(local)
    ]
    inner = box_operators(problem, tuple(padded), unstagger)
    bells: list[jax.Array | tuple[jax.Array, jax.Array] | None] = []
    for a in range(d):
        if not (a < m and mesh_shape[a] > 1) or whole[a]:
            bells.append(None)
        elif blocks.even(a):
            bells.append(_bell(local[a], overlap, bell_width, a, d, problem.dtype))
        else:
            full = _bell(local[a], overlap, bell_width, a, d, problem.dtype)
            short = _bell(local[a] - 1, overlap, bell_width, a, d, problem.dtype)
            pad = [(0, 0)] * d
            pad[a] = (0, 1)
            bells.append((full, jnp.pad(short, pad)))
    counts = tuple(
        None if blocks.even(a) else tuple(int(c) for c in blocks.counts(a)) for a in range(m)
    )
    meta = LfbMeta(AXIS_NAMES[:m], tuple(mesh_shape), int(overlap), d, counts, True, whole,
                   tuple(local[:m]))  # fmt: skip
    _prepare_planes(meta, inner, tuple(local))
    unshift: tuple[jax.Array, ...] | None = None
    if unstagger:
        cdtype = jnp.complex64 if problem.dtype == "float32" else jnp.complex128
        shifts = []
        for a, (n, dx) in enumerate(zip(g.shape, g.spacing)):
            k = 2 * np.pi * np.fft.rfftfreq(n, dx)
            shape = [1] * d
            shape[a] = k.shape[0]
            shifts.append(to_device(np.exp(-0.5j * k * dx).reshape(shape), cdtype))
        unshift = tuple(shifts)
    return inner, tuple(bells), unshift, meta
