"""``pencil``: the global spectral method on a distributed real-to-complex FFT.

A 1-D mesh gives slabs, a 2-D mesh pencils. In real space grid axis ``j`` is split over mesh axis
``j`` (the last grid axis is never split); the forward transform does the local FFTs, then for
each mesh axis (last first) an ``all_to_all`` transpose followed by the FFT along the axis it
made local. Spectra stay in that transposed layout (grid axis 0 local, grid axis ``j + 1``
split over mesh axis ``j``) until the inverse transform undoes it, so the k-space constants
(kappa, shift operators, nablas, source kappa) are built once for the transposed layout and
sharded. Results equal the single-device run to round-off.

On slabs (1-D meshes) with the FFTW backend (float32 on the CPU) each operator is three FFTW
custom calls (:mod:`sonotile.fft.fftw`) around the two transposes: the plane transforms do the
transpose's reordering plane by plane in cache (``rfft_split``), so the all-to-all sends and
receives contiguous pieces and the pieces received, stacked, are the transposed layout; one
``xpass`` per input field then does the forward transform along x, the k-space operator (kappa
or a power-law or source filter, the x shift vector) and the inverse along x, block by block in
cache, for all the field's outputs; ``irfft_join`` joins the pieces received back while applying
the y / z shift vector (these are whole on every shard) and the rest of ``1 / N``. Where the
transport keeps each shard's own piece in place (MPI, :func:`collectives.kept_piece`), the plane
transforms and the passes along x write the piece a shard keeps straight into the transpose's
result and only the others into a buffer to send (no copy of the kept half), and the fields of
one operator (the divergence's components, the two fractional Laplacians' operands, the
gradient's two results) are transposed at one meeting of the shards each way. 2-D meshes,
other backends and gradients (:mod:`sonotile.parallel.differentiable`) use XLA's FFT and
multiply the spectrum in XLA.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from sonotile.fft import backend as fft_backend
from sonotile.model.grid import along
from sonotile.model.problem import Problem
from sonotile.parallel import collectives
from sonotile.parallel.blocks import Blocks, compact, expand, resize
from sonotile.parallel.mesh import AXIS_NAMES
from sonotile.physics import model_for
from sonotile.spectral import linear
from sonotile.spectral.operators import FourierOps, half_wavenumbers

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


@dataclass(frozen=True)
class PencilMeta:
    """Static layout of the distributed FFT (hashable)."""

    shape: tuple[int, ...]  # global grid shape
    names: tuple[str, ...]  # mesh axis names, mesh axis j splits grid axis j in real space
    sizes: tuple[int, ...]  # mesh axis sizes
    klen: tuple[int, ...]  # per axis: spectrum length (n, or n // 2 + 1 for the last axis)
    kpad: tuple[int, ...]  # ... padded to a multiple of the mesh size that splits it in k-space
    blocks: Blocks  # real-space blocks (dead points of uneven axes)
    fft: str = fft_backend.PORTABLE  # the local transforms' backend (fft.backend.get)
    spacing: tuple[float, ...] = ()  # grid spacing [m] (single-axis derivatives)


@jax.tree_util.register_pytree_node_class
@dataclass
class PencilOps(FourierOps):
    """:class:`FourierOps` on a distributed FFT; the constants are this shard's blocks of the
    spectra in the transposed layout (grid axis 0 local, axis ``j+1`` split over mesh axis j)."""

    meta: PencilMeta | None = None

    def tree_flatten(self) -> tuple[tuple[Any, ...], PencilMeta | None]:
        children, _ = super().tree_flatten()
        return children, self.meta

    @classmethod
    def tree_unflatten(cls, meta: PencilMeta | None, children: Sequence[Any]) -> PencilOps:
        return cls(*children, meta=meta)  # type: ignore[misc]  # FourierOps' fields, then meta

    def _compact(self, F: jax.Array, a: int) -> jax.Array:
        """Axis ``a`` made whole by a transpose: drop the dead points of uneven blocks."""
        return _compact(F, a, self.meta)

    def _expand(self, F: jax.Array, a: int) -> jax.Array:
        """Inverse of :meth:`_compact`: zeros at the dead points."""
        return _expand(F, a, self.meta)

    def _local_slabs(self, like: jax.Array) -> bool:
        """The local transforms of fields like ``like`` go through the backend's slab kernels
        (FFTW's custom calls): on slabs (1-D meshes), for fields the backend takes. 2-D meshes
        keep the portable FFT: FFTW's measured plans differ between processes and thread
        counts, and a 2-D mesh must give the same numbers however its devices are spread over
        processes (tests/parallel/test_multiprocess.py)."""
        be = self._slabs
        return be.slab_kernels and len(self.meta.names) == 1 and be.native(like)

    @property
    def _slabs(self) -> Any:
        """The local transforms' backend (its slab kernels where ``slab_kernels``)."""
        return fft_backend.get(self.meta.fft)

    def _slab_planes(self, fs: Sequence[jax.Array]) -> list[jax.Array]:
        """The slab transforms of fields ``fs`` on FFTW up to the pass along x: the plane
        transforms leave each spectrum in the pieces the transpose sends (no reordering pass);
        the pieces received, stacked, are the x blocks in order (a reshape), the dead points
        dropped. Where the transport keeps pieces in place, the fields' transposes are one
        meeting of the shards."""
        mt = self.meta
        n, me = mt.sizes[0], collectives.kept_piece(mt.names[0])
        axes = tuple(range(1, fs[0].ndim))
        if me is None:
            pieces = [self._slabs.rfft_split(f, axes, 1, n) for f in fs]  # (n, X_l, kpad/n, ...)
            Fs = [collectives.all_to_all(q, mt.names[0], 0, 0) for q in pieces]
        else:
            kept = [self._slabs.rfft_split(f, axes, 1, n, keep=me) for f in fs]
            Fs = collectives.transpose_kept(kept, mt.names[0])
        return [self._compact(F.reshape((n * F.shape[1], *F.shape[2:])), 0) for F in Fs]

    def _box(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The real grid ``xpass`` sees in this shard's transposed spectrum of ``shape``
        ``(X, L[, Z // 2 + 1])``: ``(X, L, Z)``, or ``(X, 2 L - 1)`` (``L`` bins) on 2-D grids."""
        if len(shape) == 3:
            return (shape[0], shape[1], self.meta.shape[2])
        return (shape[0], 2 * shape[1] - 1)

    def _xpass(self, F: jax.Array, op: jax.Array | None, xvecs: Sequence[Any]) -> list[Any]:
        """The spectrum ``F`` (transposed layout, from :meth:`_slab_planes`), transformed along
        x, times ``op`` and per output ``xvecs[o]`` along x (None: none), transformed back along
        x, in one FFTW pass in cache (``xpass``; scaled by ``1 / prod(self._box(...))``,
        see :meth:`_send`). Each output is an array, or where the transport keeps pieces in
        place (even blocks along x) the pair ``(full, others)`` of
        :func:`collectives.transpose_kept`."""
        mt = self.meta
        outs = [(0, None if v is None else 0, v) for v in xvecs]
        me = collectives.kept_piece(mt.names[0])
        keep = None if me is None or not mt.blocks.even(0) else (mt.sizes[0], me)
        # not in place: XLA copied the all-to-all's output (a whole spectrum) before every
        # in-place pass, 7 copies of ~0.5 ms per 128^3 step; a fresh output costs ~0.3 ms
        return self._slabs.xpass([F], self._box(F.shape), op, outs, keep=keep)

    def _send(self, Ss: Sequence[Any]) -> list[tuple[jax.Array, float]]:
        """:meth:`_xpass` outputs to the pieces ``irfft_join`` joins (one meeting of
        the shards for them all where the transport keeps pieces in place), each with the scale
        that completes the inverse's ``1 / N`` after xpass's ``1 / prod(box)``."""
        mt = self.meta
        n, N = mt.sizes[0], float(np.prod(mt.shape))
        if all(isinstance(S, tuple) for S in Ss):  # (full, others): own pieces in place
            boxes = [self._box((n * full.shape[1], *full.shape[2:])) for full, _ in Ss]
            got = collectives.transpose_kept(list(Ss), mt.names[0])
            return [(R, float(np.prod(b)) / N) for R, b in zip(got, boxes)]
        out = []
        for S in Ss:
            scale = float(np.prod(self._box(S.shape))) / N
            S = self._expand(S, 0)
            S = collectives.all_to_all(S.reshape((n, S.shape[0] // n, *S.shape[1:])),
                                       mt.names[0], 0, 0)  # fmt: skip
            out.append((S, scale))
        return out

    def _join(
        self, sent: tuple[jax.Array, float], like: jax.Array, a: int = 0, vec: Any = None
    ) -> jax.Array:
        """The real field from :meth:`_send`'s pieces, times ``vec`` (the whole replicated
        vector, padded, see :func:`pencil_constants`) along plane axis ``a`` if given."""
        S, scale = sent
        if vec is not None:
            vec = jnp.reshape(vec, (-1,))[: self.meta.klen[a]]
        axes = tuple(range(1, like.ndim))
        return self._slabs.irfft_join(
            S, like.shape, axes, 1, scale, a if vec is not None else None, vec
        )

    def grad(self, p: jax.Array) -> tuple[jax.Array, ...]:
        if not self._local_slabs(p):
            return super().grad(p)
        # the x component and the spectrum without a vector from one pass along x; each other
        # component's vector applied while its pieces are joined (one transpose for them all)
        (F,) = self._slab_planes([p])
        gx, spec = self._xpass(F, self.kappa, [self.shift_pos[0], None])
        sent_x, sent = self._send([gx, spec])
        rest = [self._join(sent, p, a, s) for a, s in enumerate(self.shift_pos) if a]
        return (self._join(sent_x, p), *rest)

    def div(self, u: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
        if not self._local_slabs(u[0]):
            return super().div(u)
        # every component's transposes at one meeting each way
        Ss = [self._xpass(F, self.kappa, [s if a == 0 else None])[0]
              for a, (F, s) in enumerate(zip(self._slab_planes(u), self.shift_neg))]  # fmt: skip
        sent = self._send(Ss)
        return tuple(self._join(sent[a], ua, a, s if a else None)
                     for a, (ua, s) in enumerate(zip(u, self.shift_neg)))  # fmt: skip

    def fractional(self, f: jax.Array, which: int) -> jax.Array:
        if not self._local_slabs(f):
            return super().fractional(f, which)
        return self._apply([f], [self.nabla1 if which == 1 else self.nabla2])[0]

    def fractionals(self, f1: jax.Array, f2: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(fractional(f1, 1), fractional(f2, 2))``, both fields' transposes at one meeting
        each way (:func:`sonotile.spectral.operators.fractional_pair`)."""
        if not self._local_slabs(f1):
            return super().fractional(f1, 1), super().fractional(f2, 2)
        a, b = self._apply([f1, f2], [self.nabla1, self.nabla2])
        return a, b

    def filter_source(self, s: jax.Array) -> jax.Array:
        if not self._local_slabs(s):
            return super().filter_source(s)
        return self._apply([s], [self.source_kappa])[0]

    def _apply(self, fs: Sequence[jax.Array], ops: Sequence[jax.Array | None]) -> list[jax.Array]:
        """Operator ``ops[i]`` on the spectrum of field ``fs[i]`` (slabs on FFTW), the fields'
        transposes together."""
        Ss = [self._xpass(F, op, [None])[0] for F, op in zip(self._slab_planes(fs), ops)]
        return [self._join(sent, f) for sent, f in zip(self._send(Ss), fs)]

    def _spec(self, f: jax.Array) -> jax.Array:
        return pencil_spec(f, self.meta)

    def _back(self, F: jax.Array, like: jax.Array) -> jax.Array:
        return pencil_back(F, like, self.meta)

    def axis_vector(self, v: jax.Array, axis: int) -> jax.Array:
        """This shard's piece of a whole half-spectrum vector along ``axis`` (see
        :meth:`FourierOps.axis_vector`) in the transposed layout: grid axis ``j + 1`` split
        over mesh axis ``j`` (zeros on its padding to ``kpad``), the others whole."""
        mt = self.meta
        v = jnp.reshape(v, (-1,))
        j = axis - 1
        if 0 <= j < len(mt.names) and mt.sizes[j] > 1:
            n = mt.kpad[axis] // mt.sizes[j]
            v = resize(v, mt.kpad[axis], 0)
            v = jax.lax.dynamic_slice_in_dim(v, collectives.axis_index(mt.names[j]) * n, n)
        return super().axis_vector(v, axis)

    def keep(self, f: jax.Array) -> jax.Array:
        """A fusion boundary (differentiable, :func:`sonotile.spectral.linear.keep`) where the local
        transforms are FFTW's, like :meth:`FourierOps.keep` on one device. Without it XLA fused
        the nonlinear density factor into each of the three density updates (each reading all
        three old components and keeping copies of them)."""
        return linear.keep(f, self.meta.fft)

    @property
    def barrier(self) -> linear.Barrier:
        """The fusion boundary for derivative rules (:class:`sonotile.spectral.linear.Barrier`;
        the identity unless the local transforms are FFTW's)."""
        return linear.Barrier(self.meta.fft)

    def diffs(self, f: jax.Array, which: Sequence[tuple[int, int]]) -> list[jax.Array]:
        """:meth:`FourierOps.diffs` on the mesh: the derivative of ``f`` along one axis at a
        time (``(axis, shift)`` pairs, ``shift = +1``: at ``x + d/2``, ``-1``: at ``x - d/2``),
        each from a 1-D transform along that axis. An axis split over the mesh is first made
        whole by one ``all_to_all`` (with the last axis, never split, split instead) and put
        back after its derivatives; the pairs on one axis share its transform and transposes."""
        out: dict[int, jax.Array] = {}
        for axis in dict.fromkeys(a for a, _ in which):
            mine = [(i, s) for i, (a, s) in enumerate(which) if a == axis]
            got = self._along(f, axis, lambda v, a=axis, m=mine: self._axis_diffs(v, a, m))
            out.update(zip((i for i, _ in mine), got))
        return [out[i] for i in range(len(which))]

    def _axis_diffs(
        self, v: jax.Array, axis: int, pairs: Sequence[tuple[int, int]]
    ) -> list[jax.Array]:
        """The derivatives of ``pairs`` of ``v``, which holds ``axis`` whole."""
        n = v.shape[axis]
        be = fft_backend.portable()
        F = be.rfft(v, axis)
        cdtype = jnp.complex64 if v.dtype == jnp.float32 else jnp.complex128
        out = []
        for _, shift in pairs:
            vec = jnp.asarray(axis_derivative(self.meta, axis, shift), cdtype)
            out.append(be.irfft(F * vec, n, axis).astype(v.dtype))
        return out

    def _along(self, u: jax.Array, axis: int, fn: Any) -> list[jax.Array]:
        """``fn(v)`` (a list of fields) on ``u`` with ``axis`` whole: on this shard where the
        axis is not split, else after a transpose with the last axis (and back)."""
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        if axis >= m or mt.sizes[axis] == 1:
            return fn(u)
        name, size, n_last = mt.names[axis], mt.sizes[axis], u.shape[d - 1]
        v = resize(u, -(-n_last // size) * size, d - 1)  # zeros: each line on its own
        v = self._compact(collectives.all_to_all(v, name, d - 1, axis), axis)
        back = []
        for r in fn(v):
            r = collectives.all_to_all(self._expand(r, axis), name, axis, d - 1)
            back.append(resize(r, n_last, d - 1))
        return back

    def diffs_many(
        self, fs: Sequence[jax.Array], which: Sequence[tuple[int, int]]
    ) -> list[list[jax.Array]]:  # fmt: skip
        """:meth:`diffs` of each field of ``fs``: ``out[i][j]`` is ``diffs(fs[i], which)[j]``
        (as :meth:`FourierOps.diffs_many`; one field at a time on the mesh)."""
        return [self.diffs(f, which) for f in fs]

    def unstagger(self, u: jax.Array, axis: int) -> jax.Array:
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        if axis >= m or mt.sizes[axis] == 1:
            return super().unstagger(u, axis)
        name, size, n_last = mt.names[axis], mt.sizes[axis], u.shape[d - 1]
        v = resize(u, -(-n_last // size) * size, d - 1)  # zeros: each line shifts on its own
        v = collectives.all_to_all(v, name, d - 1, axis)  # make `axis` local
        v = self._expand(super().unstagger(self._compact(v, axis), axis), axis)
        return resize(collectives.all_to_all(v, name, axis, d - 1), n_last, d - 1)


def _compact(F: jax.Array, a: int, meta: PencilMeta) -> jax.Array:
    """Axis ``a`` made whole by a transpose: drop the dead points of uneven blocks."""
    bl = meta.blocks
    return F if bl.even(a) else compact(F, bl.counts(a), a)


def _expand(F: jax.Array, a: int, meta: PencilMeta) -> jax.Array:
    """Inverse of :func:`_compact`: zeros at the dead points."""
    bl = meta.blocks
    return F if bl.even(a) else expand(F, bl.counts(a), a)


def axis_derivative(meta: PencilMeta, axis: int, shift: int) -> np.ndarray:
    """``i k exp(+-i k d/2)`` along ``axis`` on its 1-D ``rfft`` spectrum, broadcastable
    (:meth:`FourierOps.diffs`' operator, made from the same wavenumbers)."""
    if not meta.spacing:
        raise ValueError("pencil operators built without the grid spacing (PencilMeta.spacing)")
    shape, d = meta.shape, meta.spacing[axis]
    k = half_wavenumbers(shape, meta.spacing)[axis][: shape[axis] // 2 + 1]
    return along(1j * k * np.exp(0.5j * shift * k * d), axis, len(shape))


def pencil_spec(f: jax.Array, mt: PencilMeta) -> jax.Array:
    """The distributed ``rfftn`` of a shard's block ``f``: this shard's block of the spectrum in
    the transposed layout (the portable backend's transforms and ``all_to_all``)."""
    d, m = len(mt.shape), len(mt.names)
    be = fft_backend.portable()
    F = be.rfft(f, d - 1)
    for a in range(d - 2, m - 1, -1):
        F = be.fft(F, a)
    for j in range(m - 1, -1, -1):
        F = resize(F, mt.kpad[j + 1], j + 1)
        F = collectives.all_to_all(F, mt.names[j], j + 1, j)
        F = be.fft(_compact(F, j, mt), j)
    return F


def pencil_back(F: jax.Array, like: jax.Array, mt: PencilMeta) -> jax.Array:
    """Inverse of :func:`pencil_spec`: the real block of the field, ``like``'s dtype."""
    d, m = len(mt.shape), len(mt.names)
    be = fft_backend.portable()
    for j in range(m):
        F = _expand(be.ifft(F, j), j, mt)
        F = collectives.all_to_all(F, mt.names[j], j, j + 1)
        F = resize(F, mt.klen[j + 1], j + 1)
    for a in range(m, d - 1):
        F = be.ifft(F, a)
    return be.irfft(F, mt.shape[d - 1], d - 1).astype(like.dtype)


@dataclass(frozen=True)
class PencilTransform:
    """The distributed FFT of a pencil mesh as a model's operators use it
    (:meth:`sonotile.physics.base.MeshOperators.on_mesh`): ``spec`` / ``back``."""

    meta: PencilMeta

    def spec(self, f: jax.Array) -> jax.Array:
        return pencil_spec(f, self.meta)

    def back(self, F: jax.Array, like: jax.Array) -> jax.Array:
        return pencil_back(F, like, self.meta)


def spectral_layout(
    shape: tuple[int, ...], sizes: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(klen, kpad)``: per axis the half spectrum's length, and that padded to a multiple of
    the mesh size that splits it in the transposed layout."""
    d, m = len(shape), len(sizes)
    klen = tuple(shape[a] if a < d - 1 else shape[a] // 2 + 1 for a in range(d))
    kpad = tuple(
        -(-klen[a] // sizes[a - 1]) * sizes[a - 1] if 1 <= a <= m else klen[a] for a in range(d)
    )
    return klen, kpad


def spectral_piece(x: ArrayLike | None, klen: tuple[int, ...], kpad: tuple[int, ...],
                   m: int) -> tuple[np.ndarray | None, P | None]:  # fmt: skip
    """A half-spectrum array (or a broadcastable per-axis vector of it) padded to ``kpad`` and
    its spec in the transposed layout (axis ``j + 1`` split over mesh axis ``j``)."""
    if x is None:
        return None, None
    d = len(klen)
    x = np.asarray(x)
    pad = [(0, kpad[a] - n if n == klen[a] and a >= 1 else 0) for a, n in enumerate(x.shape)]
    if any(p for _, p in pad):
        x = np.pad(x, pad)
    spec = P(*(AXIS_NAMES[a - 1] if 1 <= a <= m and x.shape[a] > 1 else None for a in range(d)))
    return x, spec


def pencil_operators(
    problem: Any, blocks: Blocks, unstagger: bool, slab_kernels: bool = True
) -> tuple[Any, Any, Callable[[Any], Any]]:
    """``(arrays, specs, make_ops)`` of the problem's model's operators on a pencil mesh:
    :class:`PencilOps` for Fourier operators (:func:`pencil_constants`); any other model's
    operators (a pytree of half-spectrum arrays with ``on_mesh``) sharded in the transposed
    layout and given the distributed FFT (:class:`PencilTransform`)."""
    full = model_for(problem).operators(problem, unstagger)
    if isinstance(full, FourierOps):
        arrays, specs, meta = pencil_constants(problem, blocks, unstagger, slab_kernels, full)
        return arrays, specs, lambda arrs: PencilOps(*arrs, meta=meta)  # type: ignore[misc]
    if not hasattr(full, "on_mesh"):
        raise ValueError(f"pencil: the operators {type(full).__name__} cannot be distributed")
    sizes = blocks.mesh_shape
    klen, kpad = spectral_layout(problem.grid.shape, sizes)
    meta = PencilMeta(problem.grid.shape, AXIS_NAMES[: len(sizes)], tuple(sizes), klen, kpad,
                      blocks, spacing=problem.grid.spacing)  # fmt: skip
    kids, aux = full.tree_flatten()
    arrays = jax.tree_util.tree_map(lambda x: spectral_piece(x, klen, kpad, len(sizes))[0], kids)
    specs = jax.tree_util.tree_map(lambda x: spectral_piece(x, klen, kpad, len(sizes))[1], kids)
    kind, transform = type(full), PencilTransform(meta)
    return arrays, specs, lambda arrs: kind.tree_unflatten(aux, arrs).on_mesh(transform)


def pencil_constants(
    problem: Problem, blocks: Blocks, unstagger: bool, slab_kernels: bool = True,
    full: FourierOps | None = None,
) -> tuple[list[Any], list[Any], PencilMeta]:  # fmt: skip
    """Global spectral constants in the transposed, padded layout, and their specs.

    ``slab_kernels``: the local transforms through the backend's slab kernels where the
    operators' backend has them (FFTW's custom calls; False: the portable FFT everywhere,
    which JAX can differentiate); ``full``: the
    single-device operators (default: the model's)."""
    g = problem.grid
    sizes = blocks.mesh_shape
    m = len(sizes)
    if full is None:
        full = model_for(problem).operators(problem, unstagger)
    klen, kpad = spectral_layout(g.shape, sizes)

    def spectral(x: ArrayLike | None) -> tuple[np.ndarray | None, P | None]:
        return spectral_piece(x, klen, kpad, m)

    slabs = slab_kernels and full.backend.slab_kernels
    local = full.fft if slabs else fft_backend.PORTABLE
    kids, _ = full.tree_flatten()
    arrays: list[Any] = []  # the operators' pytree children, sharded (None where absent)
    specs: list[Any] = []  # their specs
    for i, kid in enumerate(kids):
        if i in (0, 1) and slabs and m == 1:
            # slabs on FFTW: the shift vectors whole on every shard (irfft_join applies the
            # one along the split axis to the pieces of every shard)
            arrays.append(tuple(spectral(k)[0] for k in kid))
            specs.append(tuple(P() for _ in kid))
        elif i == 6:  # unshift: real-layout 1-D spectra, replicated
            arrays.append(kid)
            specs.append(None if kid is None else tuple(P() for _ in kid))
        elif isinstance(kid, tuple):
            pairs = [spectral(k) for k in kid]
            arrays.append(tuple(p[0] for p in pairs))
            specs.append(tuple(p[1] for p in pairs))
        else:
            a, s = spectral(kid)
            arrays.append(a)
            specs.append(s)
    meta = PencilMeta(g.shape, AXIS_NAMES[:m], tuple(sizes), klen, kpad, blocks, local,
                      g.spacing)  # fmt: skip
    return arrays, specs, meta
