"""Multi-device decompositions behind the same step function.

Two decompositions of the grid over a :class:`jax.sharding.Mesh`, both running the one
per-shard step :func:`sonotile.step.step` inside :func:`jax.shard_map`:

* ``pencil`` — the *global* spectral method on a distributed real-to-complex 3-D FFT. A 1-D
  mesh gives slabs, a 2-D mesh pencils. In real space grid axis ``j`` is split over mesh axis
  ``j`` (the last grid axis is never split); the forward transform does the local FFTs, then for
  each mesh axis (last first) an ``all_to_all`` transpose followed by the FFT along the axis it
  made local. Spectra stay in that transposed layout (grid axis 0 local, grid axis ``j + 1``
  split over mesh axis ``j``) until the inverse transform undoes it, so the k-space constants
  (kappa, shift operators, nablas, source kappa) are built once for the transposed layout and
  sharded. Results equal the single-device run to round-off.
* ``lfb`` — *local Fourier basis* (Jaros, Vaverka, Treeby): cuboid subdomains on a 1-, 2- or
  3-D mesh, grid axis ``j`` split over mesh axis ``j``. Before every spectral operation each
  block is padded with ``overlap`` points from its neighbours (``lax.ppermute`` on a periodic
  torus, axis by axis so edges and corners come along), multiplied by a bell that is 1 inside and
  falls to 0 across the overlap (Boyd's erf bell), differentiated with local FFTs and the padded
  block's own wavenumbers (shift operators and kappa included), and cropped to the interior.
  Communication is nearest-neighbour; the error is set by overlap and bell (see
  ``docs/decomposition.md``).

The physics is not repeated here: medium and PML constants come from :mod:`sonotile.plan`
(field-shaped arrays sharded like the state, 1-D PML profiles sharded along their axis), the
scan body is :func:`sonotile.runner._body`, sensor samples are gathered on the owning shard and
combined with ``psum`` through the index object's ``gather`` hook in :mod:`sonotile.sensors`.
Mask sources keep their global order: every shard gets the full index list with the points it
does not own replaced by an out-of-range index, which ``step._inject`` drops.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from . import plan as planmod
from . import runner
from . import sensors as sens
from .lazy import LazyField
from .operators import FourierOps
from .problem import Problem
from .step import zero_state

try:  # jax >= 0.6
    from jax import shard_map as _shard_map

    def shard_map(f, mesh, in_specs, out_specs):
        return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)

except ImportError:  # pragma: no cover - older jax
    from jax.experimental.shard_map import shard_map as _shard_map

    def shard_map(f, mesh, in_specs, out_specs):
        return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


AXIS_NAMES = ("a0", "a1", "a2")
#: Index used for points a shard does not own: beyond any block, dropped by scatters.
OUT_OF_RANGE = 2**30


# ---------------------------------------------------------------------------------------------
# mesh


def make_mesh(mesh_shape: tuple[int, ...], devices=None) -> Mesh:
    """A mesh of ``prod(mesh_shape)`` devices with axes ``a0, a1, ...`` (grid axis j <-> aj)."""
    mesh_shape = tuple(int(s) for s in mesh_shape)
    devices = list(jax.devices() if devices is None else devices)
    need = math.prod(mesh_shape)
    if not 1 <= len(mesh_shape) <= 3 or any(s < 1 for s in mesh_shape):
        raise ValueError(f"mesh_shape {mesh_shape}: expected 1 to 3 positive sizes")
    if len(devices) < need:
        raise ValueError(f"mesh_shape {mesh_shape} needs {need} devices, {len(devices)} available")
    arr = np.array(devices[:need], dtype=object).reshape(mesh_shape)
    return Mesh(arr, AXIS_NAMES[: len(mesh_shape)])


def _field_spec(ndim: int, m: int) -> P:
    return P(*(AXIS_NAMES[a] if a < m else None for a in range(ndim)))


# ---------------------------------------------------------------------------------------------
# pencil: distributed real-to-complex FFT


@dataclass(frozen=True)
class PencilMeta:
    """Static layout of the distributed FFT (hashable)."""

    shape: tuple  # global grid shape
    names: tuple  # mesh axis names, mesh axis j splits grid axis j in real space
    sizes: tuple  # mesh axis sizes
    nh: int  # rfft length of the last axis
    nh_pad: int  # ... padded to a multiple of the mesh size that splits it in k-space


@jax.tree_util.register_pytree_node_class
@dataclass
class PencilOps(FourierOps):
    """:class:`FourierOps` on a distributed FFT; the constants are this shard's blocks of the
    spectra in the transposed layout (grid axis 0 local, axis ``j+1`` split over mesh axis j)."""

    meta: PencilMeta | None = None

    def tree_flatten(self):
        children, _ = super().tree_flatten()
        return children, self.meta

    @classmethod
    def tree_unflatten(cls, meta, children):
        return cls(*children, meta=meta)

    def _spec(self, f):
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        F = jnp.fft.rfft(f, axis=d - 1)
        for a in range(d - 2, m - 1, -1):
            F = jnp.fft.fft(F, axis=a)
        for j in range(m - 1, -1, -1):
            if j + 1 == d - 1 and mt.nh_pad > mt.nh:
                pad = [(0, 0)] * d
                pad[d - 1] = (0, mt.nh_pad - mt.nh)
                F = jnp.pad(F, pad)
            F = lax.all_to_all(F, mt.names[j], j + 1, j, tiled=True)
            F = jnp.fft.fft(F, axis=j)
        return F

    def _back(self, F, like):
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        for j in range(m):
            F = jnp.fft.ifft(F, axis=j)
            F = lax.all_to_all(F, mt.names[j], j, j + 1, tiled=True)
            if j + 1 == d - 1 and mt.nh_pad > mt.nh:
                F = lax.slice_in_dim(F, 0, mt.nh, axis=d - 1)
        for a in range(m, d - 1):
            F = jnp.fft.ifft(F, axis=a)
        return jnp.fft.irfft(F, n=mt.shape[d - 1], axis=d - 1).astype(like.dtype)

    def unstagger(self, u, axis: int):
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        if axis >= m or mt.sizes[axis] == 1:
            return super().unstagger(u, axis)
        name = mt.names[axis]
        v = lax.all_to_all(u, name, d - 1, axis, tiled=True)  # make `axis` local
        v = super().unstagger(v, axis)
        return lax.all_to_all(v, name, axis, d - 1, tiled=True)


def _pencil_constants(problem: Problem, m: int, sizes: tuple, unstagger: bool):
    """Global spectral constants in the transposed, padded layout, and their specs."""
    g = problem.grid
    d = g.ndim
    full = planmod.spectral_ops(problem, unstagger=unstagger)
    nh = g.shape[-1] // 2 + 1
    nh_pad = nh
    if m == d - 1:
        q = sizes[d - 2]
        nh_pad = -(-nh // q) * q

    def spectral(x):
        if x is None:
            return None, None
        x = np.asarray(x)
        if x.shape[-1] == nh and nh_pad > nh:
            pad = [(0, 0)] * d
            pad[-1] = (0, nh_pad - nh)
            x = np.pad(x, pad)
        spec = P(*(AXIS_NAMES[a - 1] if 1 <= a <= m and x.shape[a] > 1 else None for a in range(d)))
        return x, spec

    kids, _ = full.tree_flatten()
    arrays, specs = [], []
    for i, kid in enumerate(kids):
        if i == 6:  # unshift: real-layout 1-D spectra, replicated
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
    meta = PencilMeta(g.shape, AXIS_NAMES[:m], tuple(sizes), nh, nh_pad)
    return arrays, specs, meta


# ---------------------------------------------------------------------------------------------
# LFB: local Fourier basis


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
    names: tuple  # mesh axis names; mesh axis j splits grid axis j
    sizes: tuple
    overlap: int
    ndim: int

    def padded(self, a: int) -> bool:
        return a < len(self.names) and self.sizes[a] > 1


@jax.tree_util.register_pytree_node_class
@dataclass
class LfbOps:
    """Spectral operators on a local Fourier basis: exchange overlaps, window with the bell,
    apply :class:`FourierOps` of the padded block (its own wavenumbers), keep the interior."""

    inner: FourierOps
    bells: tuple  # per grid axis: broadcastable bell on the padded length, or None
    unshift: tuple | None = None  # per axis exp(-i k d/2) on the global rfft length, or None
    meta: LfbMeta | None = None

    def tree_flatten(self):
        return (self.inner, self.bells, self.unshift), self.meta

    @classmethod
    def tree_unflatten(cls, meta, children):
        return cls(*children, meta=meta)

    # --- communication
    def _halo(self, f, a: int, side: int):
        """``overlap`` planes along axis ``a`` from the neighbour on ``side`` (-1 left, +1 right),
        taken from as many hops as needed when a block is thinner than the overlap."""
        mt = self.meta
        name, size, ov = mt.names[a], mt.sizes[a], mt.overlap
        n = f.shape[a]
        hops = -(-ov // n)
        pieces = []
        for h in range(1, hops + 1):
            # shard i receives the block of shard i + side*h
            perm = [((i + side * h) % size, i) for i in range(size)]
            pieces.append(lax.ppermute(f, name, perm))
        if side < 0:
            halo = jnp.concatenate(pieces[::-1], axis=a) if hops > 1 else pieces[0]
            return lax.slice_in_dim(halo, hops * n - ov, hops * n, axis=a)
        halo = jnp.concatenate(pieces, axis=a) if hops > 1 else pieces[0]
        return lax.slice_in_dim(halo, 0, ov, axis=a)

    def _halo_fast(self, f, a: int, side: int):
        mt = self.meta
        name, size, ov = mt.names[a], mt.sizes[a], mt.overlap
        n = f.shape[a]
        if ov > n:
            return self._halo(f, a, side)
        if side < 0:  # my left halo = right edge of the left neighbour
            edge = lax.slice_in_dim(f, n - ov, n, axis=a)
            perm = [(i, (i + 1) % size) for i in range(size)]
        else:
            edge = lax.slice_in_dim(f, 0, ov, axis=a)
            perm = [(i, (i - 1) % size) for i in range(size)]
        return lax.ppermute(edge, name, perm)

    def _pad(self, f, axes=None):
        for a in range(len(self.meta.names)):
            if not self.meta.padded(a) or (axes is not None and a not in axes):
                continue
            f = jnp.concatenate([self._halo_fast(f, a, -1), f, self._halo_fast(f, a, +1)], axis=a)
        return f

    def _window(self, f, axes=None):
        for a, b in enumerate(self.bells):
            if b is not None and (axes is None or a in axes):
                f = f * b
        return f

    def _crop(self, f, axes=None):
        ov = self.meta.overlap
        for a in range(len(self.meta.names)):
            if self.meta.padded(a) and (axes is None or a in axes):
                f = lax.slice_in_dim(f, ov, f.shape[a] - ov, axis=a)
        return f

    def _local(self, fs):
        """Pad all fields first (all exchanges issued before any is used), then window."""
        padded = [self._pad(f) for f in fs]
        return [self._window(p) for p in padded]

    # --- the FourierOps interface
    def grad(self, p):
        (q,) = self._local([p])
        return tuple(self._crop(g) for g in self.inner.grad(q))

    def div(self, u):
        q = self._local(list(u))
        return tuple(self._crop(x) for x in self.inner.div(tuple(q)))

    def fractional(self, f, which: int):
        (q,) = self._local([f])
        return self._crop(self.inner.fractional(q, which))

    def filter_source(self, s):
        (q,) = self._local([s])
        return self._crop(self.inner.filter_source(q))

    def unstagger(self, u, axis: int):
        """Half-cell shift along ``axis`` (sensor output only). Exact when possible: a transpose
        over the one mesh axis that splits ``axis`` makes it local (the shift's kernel decays
        only like 1/r, so an overlap cannot localise it); otherwise pad + bell."""
        mt = self.meta
        if not mt.padded(axis):
            return self.inner.unstagger(u, axis)
        size = mt.sizes[axis]
        other = [b for b in range(mt.ndim) if b != axis and u.shape[b] % size == 0]
        if other and self.unshift is not None:
            b, name = other[-1], mt.names[axis]
            v = lax.all_to_all(u, name, b, axis, tiled=True)
            n = v.shape[axis]
            F = jnp.fft.rfft(v, axis=axis) * self.unshift[axis]
            v = jnp.fft.irfft(F, n=n, axis=axis).astype(u.dtype)
            return lax.all_to_all(v, name, axis, b, tiled=True)
        ax = (axis,)
        q = self._window(self._pad(u, ax), ax)
        return self._crop(self.inner.unstagger(q, axis), ax)


def _lfb_constants(problem: Problem, mesh_shape, overlap: int, bell_width: float, unstagger: bool):
    g = problem.grid
    d, m = g.ndim, len(mesh_shape)
    local = [n // mesh_shape[a] if a < m else n for a, n in enumerate(g.shape)]
    padded = [n + 2 * overlap if a < m and mesh_shape[a] > 1 else n for a, n in enumerate(local)]
    s, med = problem.sources, problem.medium
    additive = (s.p is not None and s.p.mode == "additive") or any(
        u is not None and u.mode == "additive" for u in s.u
    )
    inner = FourierOps.build(
        tuple(padded), g.spacing, med.c_ref, g.dt, problem.dtype,
        alpha_power=med.alpha_power if med.absorption == "power_law" else None,
        source_filter=additive, unstagger=unstagger,
    )  # fmt: skip
    bells = []
    for a in range(d):
        if a < m and mesh_shape[a] > 1:
            b = erf_bell(local[a], overlap, bell_width)
            shape = [1] * d
            shape[a] = b.shape[0]
            bells.append(jnp.asarray(b.reshape(shape), problem.dtype))
        else:
            bells.append(None)
    meta = LfbMeta(AXIS_NAMES[:m], tuple(mesh_shape), int(overlap), d)
    unshift = None
    if unstagger:
        cdtype = jnp.complex64 if problem.dtype == "float32" else jnp.complex128
        unshift = []
        for a, (n, dx) in enumerate(zip(g.shape, g.spacing)):
            k = 2 * np.pi * np.fft.rfftfreq(n, dx)
            shape = [1] * d
            shape[a] = k.shape[0]
            unshift.append(jnp.asarray(np.exp(-0.5j * k * dx).reshape(shape), cdtype))
        unshift = tuple(unshift)
    return inner, tuple(bells), unshift, meta


# ---------------------------------------------------------------------------------------------
# sensor and source indices per shard


@jax.tree_util.register_pytree_node_class
@dataclass
class ShardIndex:
    """Sensor points seen from one shard: local indices (clipped) and an ownership mask;
    ``gather`` returns the global sample vector on every shard (psum over the mesh)."""

    index: tuple
    owned: jax.Array
    names: tuple = ()

    def tree_flatten(self):
        return (self.index, self.owned), self.names

    @classmethod
    def tree_unflatten(cls, names, children):
        return cls(*children, names=names)

    def gather(self, field):
        idx = tuple(jnp.clip(i, 0, n - 1) for i, n in zip(self.index, field.shape))
        v = jnp.where(self.owned, field[idx], jnp.zeros((), field.dtype))
        return lax.psum(v, self.names)


def _local_index(points: np.ndarray, shape, mesh_shape):
    """Per-shard local indices ``(mesh..., Ns)`` per axis (OUT_OF_RANGE where not owned) and the
    ownership mask ``(mesh..., Ns)``."""
    m = len(mesh_shape)
    block = [n // mesh_shape[a] if a < m else n for a, n in enumerate(shape)]
    owner = [points[:, a] // block[a] for a in range(m)]
    ns = points.shape[0]
    owned = np.zeros(tuple(mesh_shape) + (ns,), bool)
    for coords in np.ndindex(*mesh_shape):
        ok = np.ones(ns, bool)
        for a in range(m):
            ok &= owner[a] == coords[a]
        owned[coords] = ok
    idx = []
    for a in range(points.shape[1]):
        loc = np.broadcast_to(points[:, a] % block[a], owned.shape)
        idx.append(np.where(owned, loc, OUT_OF_RANGE).astype(np.int32))
    return tuple(idx), owned


# ---------------------------------------------------------------------------------------------
# the decomposed run


def global_array(x, sharding: NamedSharding, dtype=None) -> jax.Array:
    """A global array with ``sharding`` whose shards each process makes from its own slices of
    ``x``: a host array, a device array, or anything sliceable with ``x[index]`` to numpy (e.g.
    :class:`sonotile.kwave_io.XyzView` over an HDF5 dataset, so that each process reads only its
    hyperslabs)."""
    if isinstance(x, jax.Array) and jax.process_count() == 1:
        return jax.device_put(x if dtype is None else x.astype(dtype), sharding)
    if isinstance(x, jax.Array):
        x = np.asarray(x)
    dt = np.dtype(dtype if dtype is not None else x.dtype)
    shape = tuple(x.shape)

    def piece(index):
        return np.asarray(x[index] if shape else x, dt)

    return jax.make_array_from_callback(shape, sharding, piece)


def _on_host():
    """Build whole-grid constants in host memory (the CPU backend), not on an accelerator."""
    try:
        return jax.default_device(jax.local_devices(backend="cpu")[0])
    except RuntimeError:  # no CPU backend (JAX_PLATFORMS without cpu)
        return contextlib.nullcontext()


def _check_processes(mesh: Mesh) -> None:
    """With several processes every one must drive part of the mesh."""
    if jax.process_count() == 1:
        return
    procs = {dev.process_index for dev in mesh.devices.flat}
    missing = sorted(set(range(jax.process_count())) - procs)
    if missing:
        raise ValueError(
            f"mesh {dict(mesh.shape)} uses devices of processes {sorted(procs)} only; "
            f"process(es) {missing} would be idle: use all {jax.device_count()} devices"
        )


def _check_divisible(shape, mesh_shape, what):
    for a, p in enumerate(mesh_shape):
        if shape[a] % p:
            raise ValueError(
                f"{what}: grid axis {a} has {shape[a]} points, not divisible by mesh size {p}"
            )


def _split_consts(consts: dict, shape, m: int):
    """Separate the plan's constants into device arrays with specs and static Python floats."""
    d = len(shape)
    fspec = _field_spec(d, m)
    leaves, treedef = jax.tree_util.tree_flatten(consts)
    arrays, specs, static = [], [], []
    for leaf in leaves:
        if not isinstance(leaf, jax.Array | LazyField):
            static.append(leaf)
            arrays.append(None)
            specs.append(None)
            continue
        static.append(None)
        shp = tuple(leaf.shape)
        if shp == tuple(shape):
            spec = fspec
        elif len(shp) == d and sum(s != 1 for s in shp) == 1:
            a = next(i for i, s in enumerate(shp) if s != 1)
            spec = P(
                *(
                    AXIS_NAMES[i] if i == a and a < m and shp[a] == shape[a] else None
                    for i in range(d)
                )
            )
        else:
            spec = P()
        arrays.append(leaf)
        specs.append(spec)
    return arrays, specs, static, treedef


def run_decomposed(
    problem: Problem,
    decomposition: str = "pencil",
    mesh_shape: tuple[int, ...] | None = None,
    overlap: int = 16,
    bell_width: float = 0.5,
    progress: bool | None = False,
    devices=None,
    chunk: int | None = None,
    recorder=None,
) -> tuple[dict, dict]:
    """Run a problem on a device mesh; returns ``(raw, final)`` exactly like
    :func:`sonotile.runner.run` (see :func:`decomposed_engine` for the arguments)."""
    if decomposition == "single":
        engine = runner.single_engine(problem)
    else:
        engine = decomposed_engine(problem, decomposition, mesh_shape, overlap, bell_width, devices)
    return runner.run_engine(engine, recorder=recorder, chunk=chunk, progress=progress)


def decomposed_engine(
    problem: Problem,
    decomposition: str = "pencil",
    mesh_shape: tuple[int, ...] | None = None,
    overlap: int = 16,
    bell_width: float = 0.5,
    devices=None,
) -> runner.Engine:
    """A :class:`~sonotile.runner.Engine` running the one step on a device mesh.

    Args:
        decomposition: ``"pencil"`` (distributed FFT; ``mesh_shape`` of length 1 = slabs, 2 =
            pencils, at most ``ndim - 1``) or ``"lfb"`` (local Fourier basis; mesh of length 1 to
            ``ndim``).
        mesh_shape: devices per split grid axis (axis j of the mesh splits grid axis j); default:
            all devices on axis 0.
        overlap, bell_width: LFB padding [points] and bell transition (fraction of the overlap).
        devices: the devices to use (default: all, across processes).
    """
    g = problem.grid
    d = g.ndim
    devs = list(jax.devices() if devices is None else devices)
    if mesh_shape is None:
        mesh_shape = (len(devs),)
    mesh_shape = tuple(int(s) for s in mesh_shape)
    m = len(mesh_shape)
    if d < 2:
        raise ValueError("decomposed runs need a 2-D or 3-D grid")
    if decomposition == "pencil":
        if m > d - 1:
            raise ValueError(f"pencil: mesh of {m} axes for a {d}-D grid (at most {d - 1})")
        _check_divisible(g.shape, mesh_shape, "pencil (real layout)")
        # k-space layout: grid axis j+1 split over mesh axis j (last axis padded)
        for j in range(m):
            if j + 1 < d - 1 and g.shape[j + 1] % mesh_shape[j]:
                raise ValueError(
                    f"pencil: grid axis {j + 1} ({g.shape[j + 1]} points) not divisible by mesh "
                    f"axis {j} ({mesh_shape[j]} devices) needed for the transposed layout"
                )
    elif decomposition == "lfb":
        if m > d:
            raise ValueError(f"lfb: mesh of {m} axes for a {d}-D grid")
        _check_divisible(g.shape, mesh_shape, "lfb")
        if not 1 <= int(overlap) <= 64:
            raise ValueError(f"lfb: overlap = {overlap} points, expected 1..64")
    else:
        raise ValueError(f"decomposition = {decomposition!r}: expected single, pencil or lfb")

    mesh = make_mesh(mesh_shape, devs)
    _check_processes(mesh)
    layout = sens.layout_of(problem.sensor, d)
    phys = planmod.physics_of(problem)
    dtype = jnp.dtype(problem.dtype)
    fspec = _field_spec(d, m)
    local_shape = tuple(n // mesh_shape[a] if a < m else n for a, n in enumerate(g.shape))

    # constants of the medium, PML (sharded) and sources (indices localised per shard); built
    # in host memory and sliced per shard, never whole on one accelerator
    with _on_host():
        # dt/rho0_sg from rho0 in the step along the axes each pencil shard holds whole
        derive = tuple(range(m, d)) if decomposition == "pencil" else ()
        consts = planmod.medium_constants(problem, derive_axes=derive)
        srcc = planmod.source_constants(problem)
    idx_keys = {}
    for key in ("p_index", "tr_index"):
        if key in srcc:
            idx_keys[key] = srcc.pop(key)
    u_index = srcc.pop("u_index")
    consts.update(srcc)
    arrays, aspecs, static, treedef = _split_consts(consts, g.shape, m)
    ispec = P(*AXIS_NAMES[:m], None)

    def localise(index_tuple):
        pts = np.stack([np.asarray(i) for i in index_tuple], axis=1)
        loc, _ = _local_index(pts, g.shape, mesh_shape)
        return tuple(jnp.asarray(x) for x in loc)

    src_idx = {k: localise(v) for k, v in idx_keys.items()}
    src_idx["u_index"] = tuple(None if v is None else localise(v) for v in u_index)
    src_specs = jax.tree_util.tree_map(lambda _: ispec, src_idx)

    if layout.points is not None:
        loc, owned = _local_index(layout.points, g.shape, mesh_shape)
        sidx = (tuple(jnp.asarray(x) for x in loc), jnp.asarray(owned))
        sidx_specs = (tuple(ispec for _ in loc), ispec)
    else:
        sidx, sidx_specs = None, None

    if decomposition == "pencil":
        with _on_host():
            ops_arrays, ops_specs, ops_meta = _pencil_constants(
                problem, m, mesh_shape, layout.needs_unstagger
            )
        for j in range(m):
            if layout.needs_unstagger and mesh_shape[j] > 1 and g.shape[-1] % mesh_shape[j]:
                raise ValueError(
                    f"pencil: u_non_staggered needs the last axis divisible by mesh axis {j}"
                )

        def make_ops(arrs):
            return PencilOps(*arrs, meta=ops_meta)
    else:
        with _on_host():
            inner, bells, unshift, lmeta = _lfb_constants(
                problem, mesh_shape, int(overlap), float(bell_width), layout.needs_unstagger
            )
        ops_arrays = (inner, bells, unshift)
        ops_specs = jax.tree_util.tree_map(lambda _: P(), ops_arrays)

        def make_ops(arrs):
            return LfbOps(arrs[0], arrs[1], arrs[2], meta=lmeta)

    names = AXIS_NAMES[:m]

    def rebuild(arr_local, src_local, sidx_local):
        leaves = [s if a is None else a for a, s in zip(arr_local, static)]
        c = jax.tree_util.tree_unflatten(treedef, leaves)
        for k, v in src_local.items():
            if k == "u_index":
                c[k] = tuple(None if x is None else tuple(i.reshape(-1) for i in x) for x in v)
            else:
                c[k] = tuple(i.reshape(-1) for i in v)
        if sidx_local is None:
            index = ()
        else:
            index = ShardIndex(
                tuple(i.reshape(-1) for i in sidx_local[0]), sidx_local[1].reshape(-1), names
            )
        return c, index

    whole_keys = {f"{f}_{k}" for f, k in layout.whole}
    agg_keys = [f"{f}_{k}" for f, k in layout.stats] + [f"{f}_{k}" for f, k in layout.whole]
    agg_specs = {k: (fspec if k in whole_keys else P()) for k in agg_keys}
    state_specs = type(zero_state((2,) * d, dtype))(
        fspec, tuple(fspec for _ in range(d)), tuple(fspec for _ in range(d))
    )
    carry_specs = (state_specs, agg_specs)
    const_specs = (aspecs, src_specs, sidx_specs, ops_specs)
    const_args = (arrays, src_idx, sidx, ops_arrays)

    def local_init(arr_l, src_l, sidx_l, ops_l):
        c, index = rebuild(arr_l, src_l, sidx_l)
        ops = make_ops(ops_l)
        agg = sens.init_aggregates(layout, local_shape, dtype)
        if phys.p0:
            return runner.start_ivp(agg, c, ops, index, phys, layout)
        return (zero_state(local_shape, dtype), agg), {}

    raw0_specs = {f: P() for f in layout.raw} if phys.p0 else {}
    init_fn = jax.jit(shard_map(local_init, mesh, const_specs, (carry_specs, raw0_specs)))

    def local_chunk(carry, xs, arr_l, src_l, sidx_l, ops_l):
        c, index = rebuild(arr_l, src_l, sidx_l)
        ops = make_ops(ops_l)
        body = partial(runner._body, c=c, ops=ops, index=index, phys=phys, layout=layout)
        return lax.scan(body, carry, xs)

    raw_specs = {f: P() for f in layout.raw}
    chunk_fn = jax.jit(
        shard_map(local_chunk, mesh, (carry_specs, P()) + const_specs, (carry_specs, raw_specs)),
        donate_argnums=(0,),
    )

    # place constants on the mesh once: each process builds only its addressable shards
    def put(x, spec):
        return global_array(x, NamedSharding(mesh, spec))

    const_args = jax.tree_util.tree_map(
        lambda s, x: None if x is None else jax.tree_util.tree_map(lambda y: put(y, s), x),
        const_specs, const_args,
        is_leaf=lambda s: s is None or isinstance(s, P),
    )  # fmt: skip

    def start():
        carry, raw0 = init_fn(*const_args)
        rs = runner.RunState(carry, 1 if phys.p0 else 0)
        return rs, {k: np.asarray(v) for k, v in raw0.items()}

    def chunk(carry, xs):
        return chunk_fn(carry, xs, *const_args)

    u_specs = tuple(fspec for _ in range(d))
    div_fn = jax.jit(
        shard_map(lambda u, ops_l: make_ops(ops_l).div(u), mesh, (u_specs, ops_specs), u_specs)
    )

    def place(carry):
        return jax.tree_util.tree_map(
            lambda spec, x: global_array(x, NamedSharding(mesh, spec), dtype), carry_specs, carry,
            is_leaf=lambda v: isinstance(v, P),
        )  # fmt: skip

    shape_txt = "x".join(str(k) for k in mesh_shape)
    extra = f", overlap {overlap}, bell width {bell_width}" if decomposition == "lfb" else ""
    return runner.Engine(
        problem,
        layout,
        phys,
        start,
        chunk,
        lambda u: div_fn(u, const_args[3]),
        place,
        f"{decomposition} on a {shape_txt} mesh of {math.prod(mesh_shape)} "
        f"{devs[0].platform} devices{extra}",
        lower=lambda carry, xs: chunk_fn.lower(carry, xs, *const_args),
    )


# ---------------------------------------------------------------------------------------------
# choosing a decomposition


#: Measured LFB error (worst relative error over the recorded quantities, 3-D heterogeneous
#: absorbing nonlinear case on a 2x2x2 mesh, bell width 0.5; see docs/decomposition.md).
LFB_ERROR = {2: 5.1e-2, 4: 2.9e-3, 8: 2.1e-3, 16: 7.1e-4, 32: 3.2e-4}


def _factor(n: int, k: int, shape) -> tuple[int, ...] | None:
    """Near-balanced factorisation of ``n`` devices over the first ``k`` grid axes, each factor
    dividing its axis (and, for the FFT layout, the next axis); None when impossible."""
    best = None
    divisors = [p for p in range(1, n + 1) if n % p == 0]

    def rec(prefix, rest):
        nonlocal best
        if len(prefix) == k - 1:
            cand = tuple(prefix) + (rest,)
            if all(shape[a] % c == 0 for a, c in enumerate(cand)):
                score = max(cand) / min(cand)
                if best is None or score < best[0]:
                    best = (score, cand)
            return
        for p in divisors:
            if rest % p == 0:
                rec(prefix + [p], rest // p)

    rec([], n)
    return None if best is None else best[1]


def auto(
    grid_shape: tuple[int, ...],
    n_devices: int,
    accuracy: float = 1e-3,
    processes: int = 1,
) -> dict:
    """Pick ``single``, ``pencil`` or ``lfb`` (and mesh, overlap) for a grid and a device count.

    Rules: one device -> single. A target tighter than LFB reaches at overlap 32 -> pencil.
    Otherwise LFB when the grid is split over several processes/nodes (all-to-all traffic then
    dominates) or when the padded blocks cost little extra work (``(1 + 2 ov / n)^k <= 2``),
    choosing the smallest overlap that meets the target; pencil when padding would more than
    double the work.

    Returns ``{"decomposition", "mesh_shape", "overlap", "reason"}``.
    """
    shape = tuple(int(n) for n in grid_shape)
    d = len(shape)
    if n_devices <= 1:
        return {
            "decomposition": "single",
            "mesh_shape": (),
            "overlap": 0,
            "reason": "one device: no decomposition needed",
        }
    ok_ov = [ov for ov, e in sorted(LFB_ERROR.items()) if e <= accuracy]
    pencil_mesh = _factor(n_devices, min(2, d - 1), shape) if d >= 2 else None
    if pencil_mesh is not None and len(pencil_mesh) == 2 and pencil_mesh[0] == 1:
        pencil_mesh = (pencil_mesh[1],)
    lfb_mesh = _factor(n_devices, d, shape)
    if not ok_ov:
        return _pencil_pick(
            pencil_mesh, n_devices, shape,
            f"accuracy target {accuracy:g} is tighter than LFB reaches "
            f"({min(LFB_ERROR.values()):g} at overlap 32): global FFT is exact",
        )  # fmt: skip
    ov = ok_ov[0]
    if lfb_mesh is not None:
        block = [shape[a] // lfb_mesh[a] for a in range(d)]
        work = math.prod((b + 2 * ov) / b for b, p in zip(block, lfb_mesh) if p > 1)
    else:
        work = math.inf
    if lfb_mesh is not None and (processes > 1 or pencil_mesh is None or work <= 2.0):
        why = (
            "several processes: nearest-neighbour exchange instead of all-to-all"
            if processes > 1
            else f"padded blocks cost {work:.2f}x the work, acceptable"
        )
        return {
            "decomposition": "lfb",
            "mesh_shape": lfb_mesh,
            "overlap": ov,
            "reason": f"overlap {ov} meets accuracy {accuracy:g} "
            f"(measured {LFB_ERROR[ov]:g}); {why}",
        }
    return _pencil_pick(
        pencil_mesh, n_devices, shape,
        f"LFB at overlap {ov} would cost {work:.2f}x the work on blocks of {shape} / "
        f"{lfb_mesh}; one process: all-to-all is cheap, pencil is exact",
    )  # fmt: skip


def _pencil_pick(mesh, n_devices: int, shape: tuple, reason: str) -> dict:
    if mesh is None:
        raise ValueError(f"no mesh of {n_devices} devices divides grid {shape}")
    return {"decomposition": "pencil", "mesh_shape": mesh, "overlap": 0, "reason": reason}


DECOMPOSITIONS = ("auto", "single", "pencil", "lfb")


def engine_for(
    problem: Problem,
    decomposition: str = "single",
    mesh_shape: tuple[int, ...] | None = None,
    overlap: int | None = None,
    bell_width: float = 0.5,
    accuracy: float = 1e-3,
    devices=None,
) -> tuple[runner.Engine, str]:
    """The engine the user asked for, and a sentence saying what was chosen and why.

    ``decomposition="auto"`` picks with :func:`auto` from the grid, the devices (all of them,
    across processes) and the accuracy target; explicit ``mesh_shape``/``overlap`` override its
    picks.
    """
    if decomposition not in DECOMPOSITIONS:
        raise ValueError(f"decomposition = {decomposition!r}: expected one of {DECOMPOSITIONS}")
    devs = list(jax.devices() if devices is None else devices)
    reason = "asked for"
    if decomposition == "auto":
        n = len(devs) if mesh_shape is None else math.prod(mesh_shape)
        pick = auto(problem.grid.shape, n, accuracy, processes=jax.process_count())
        decomposition, reason = pick["decomposition"], pick["reason"]
        mesh_shape = mesh_shape or pick["mesh_shape"]
        overlap = overlap or pick["overlap"]
    if decomposition == "single":
        if jax.process_count() > 1:
            raise ValueError(
                f"decomposition 'single' with {jax.process_count()} processes: use pencil, lfb "
                "or auto to run on the devices of all processes"
            )
        return runner.single_engine(problem), reason
    engine = decomposed_engine(
        problem, decomposition, mesh_shape, 16 if overlap is None else overlap, bell_width, devs
    )
    return engine, reason
