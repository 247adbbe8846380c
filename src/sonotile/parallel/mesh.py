"""The device mesh and what every decomposition needs of it: axis names, field
specs, global arrays built shard by shard, sensor/source indices per shard.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sonotile.parallel import collectives
from sonotile.parallel.blocks import Blocks

if TYPE_CHECKING:
    from sonotile.parallel.blocks import Sliceable

try:  # jax >= 0.6
    from jax import shard_map as _shard_map

    def shard_map(
        f: Callable[..., Any], mesh: Mesh, in_specs: Any, out_specs: Any
    ) -> Callable[..., Any]:
        return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)

except ImportError:  # pragma: no cover - older jax
    from jax.experimental.shard_map import shard_map as _shard_map  # type: ignore[no-redef]

    def shard_map(
        f: Callable[..., Any], mesh: Mesh, in_specs: Any, out_specs: Any
    ) -> Callable[..., Any]:
        return _shard_map(  # type: ignore[call-overload]  # older jax: check_rep
            f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False
        )


AXIS_NAMES = ("a0", "a1", "a2")
#: Index used for points a shard does not own: beyond any block, dropped by scatters.
OUT_OF_RANGE = 2**30


# ---------------------------------------------------------------------------------------------
# mesh


def make_mesh(mesh_shape: Sequence[int], devices: Sequence[jax.Device] | None = None) -> Mesh:
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


def field_spec(ndim: int, m: int) -> P:
    return P(*(AXIS_NAMES[a] if a < m else None for a in range(ndim)))


# ---------------------------------------------------------------------------------------------
# sensor and source indices per shard


@jax.tree_util.register_pytree_node_class
@dataclass
class ShardIndex:
    """Sensor points seen from one shard: local indices (clipped) and an ownership mask;
    ``gather_all`` returns the global sample vectors (and sensor lines) on every shard (a sum
    over the mesh, :func:`sonotile.parallel.collectives.sum_over`). ``blocks``: how the grid is
    cut (needed for the lines).

    ``deferred``: ``gather_all`` returns this shard's part instead (zeros where another shard
    holds the value) and :meth:`settle` sums a whole chunk's samples once after its last step
    (:func:`sonotile.solver.sensors.sums_deferrable`): the shards meet once per chunk for the
    sensors, not once per step."""

    index: tuple[jax.Array, ...]
    owned: jax.Array
    names: tuple[str, ...] = ()
    blocks: Blocks | None = None
    deferred: bool = False

    def tree_flatten(self) -> tuple[tuple[tuple[jax.Array, ...], jax.Array], tuple]:
        return (self.index, self.owned), (self.names, self.blocks, self.deferred)

    @classmethod
    def tree_unflatten(cls, aux: tuple, children: tuple[Any, Any]) -> ShardIndex:
        return cls(*children, names=aux[0], blocks=aux[1], deferred=aux[2])

    def gather_all(
        self,
        fields: Sequence[jax.Array],
        line_fields: Sequence[jax.Array] = (),
        lines: Sequence[Any] = (),
    ) -> tuple[list[jax.Array], list[jax.Array]]:
        """The samples of each of ``fields`` at the points and the whole grid lines ``(L, N)`` of
        each of ``line_fields`` (``lines``: their :class:`~sonotile.solver.sensors.Lines`; each
        shard puts its segments in place, zeros elsewhere), the same on every shard, in one sum
        over the mesh:
        one exchange per step, after every field it carries is computed, so that every process
        meets its partners at the same point of the step (separate sums let each process run
        the step's independent work in its own order and wait for the other's)."""
        owned = [self._owned(f) for f in fields]
        segs = [self._segments(f, ln) for f, ln in zip(line_fields, lines)]
        if self.deferred:
            return owned, segs
        out = self._sum(owned + segs)
        return out[: len(owned)], out[len(owned) :]

    def _sum(self, parts: list[jax.Array]) -> list[jax.Array]:
        """Each of ``parts`` summed over the mesh, all in one sum."""
        if not parts:
            return []
        flat = collectives.sum_over(jnp.concatenate([x.reshape(-1) for x in parts]), self.names)
        out, at = [], 0
        for x in parts:
            out.append(flat[at : at + x.size].reshape(x.shape).astype(x.dtype))
            at += x.size
        return out

    def settle(
        self, raw: dict[str, jax.Array], agg: dict[str, jax.Array], stats: Sequence[str]
    ) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
        """A deferred chunk's samples ``raw`` (per step, this shard's parts) and running point
        statistics ``agg[k]`` for ``k`` in ``stats`` (this shard's, right at its own points)
        made whole on every shard in one sum: the raw parts summed, each statistic taken from
        the shard owning its point. Unchanged unless :attr:`deferred`."""
        if not self.deferred:
            return raw, agg
        rk, sk = sorted(raw), sorted(stats)
        mine = [jnp.where(self.owned, agg[k], jnp.zeros((), agg[k].dtype)) for k in sk]
        out = self._sum([raw[k] for k in rk] + mine)
        return dict(zip(rk, out[: len(rk)])), {**agg, **dict(zip(sk, out[len(rk) :]))}

    def _owned(self, field: jax.Array) -> jax.Array:
        """This shard's values at the points it owns, zeros at the others."""
        idx = tuple(jnp.clip(i, 0, n - 1) for i, n in zip(self.index, field.shape))
        return jnp.where(self.owned, field[idx], jnp.zeros((), field.dtype))

    def _span(self, a: int) -> tuple[jax.Array, jax.Array]:
        """This shard's first global index and real points along grid axis ``a``."""
        assert self.blocks is not None  # set by the engines that sample lines
        i = collectives.axis_index(self.names[a])
        starts = jnp.asarray(self.blocks.starts(a), jnp.int32)
        return starts[i], jnp.asarray(self.blocks.counts(a), jnp.int32)[i]

    def _segments(self, field: jax.Array, ln: Any) -> jax.Array:
        """This shard's part of the lines ``ln`` of ``field`` (its block) in their global
        positions ``(L, N)``, zeros where another shard holds them."""
        m, ax, b = len(self.names), ln.axis, field.shape[ln.axis]
        mine = jnp.ones(ln.coords.shape[0], bool)
        idx: list[jax.Array] = []
        for a in range(field.ndim):
            g = jnp.asarray(ln.coords[:, a])
            if a != ax and a < m:
                start, count = self._span(a)
                g = g - start
                mine = mine & (g >= 0) & (g < count)
            idx.append(jnp.arange(b, dtype=jnp.int32)[None, :] if a == ax
                       else jnp.clip(g, 0, field.shape[a] - 1)[:, None])  # fmt: skip
        seg = jnp.where(mine[:, None], field[tuple(idx)], jnp.zeros((), field.dtype))
        if ax >= m:
            return seg
        assert self.blocks is not None
        start, count = self._span(ax)
        k = jnp.arange(b, dtype=jnp.int32)
        at = jnp.where(k < count, start + k, OUT_OF_RANGE)  # dead points dropped
        n = self.blocks.shape[ax]
        return jnp.zeros((seg.shape[0], n), seg.dtype).at[:, at].set(seg, mode="drop")


def local_index(
    points: np.ndarray, shape: Sequence[int], mesh_shape: Sequence[int]
) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """Per-shard local indices ``(mesh..., Ns)`` per axis (OUT_OF_RANGE where not owned) and the
    ownership mask ``(mesh..., Ns)``, for blocks of any size (:class:`Blocks`)."""
    owner, local = Blocks(tuple(shape), tuple(mesh_shape)).owner(np.asarray(points))
    ns = points.shape[0]
    owned = np.zeros(tuple(mesh_shape) + (ns,), bool)
    for coords in np.ndindex(*mesh_shape):
        owned[coords] = np.all(owner == np.array(coords, np.int64), axis=1)
    idx = []
    for a in range(points.shape[1]):
        loc = np.broadcast_to(local[:, a], owned.shape)
        idx.append(np.where(owned, loc, OUT_OF_RANGE).astype(np.int32))
    return tuple(idx), owned


# ---------------------------------------------------------------------------------------------
# the decomposed run


def global_array(
    x: Sliceable, sharding: NamedSharding, dtype: jax.typing.DTypeLike | None = None,
    blocks: Blocks | None = None,
) -> jax.Array:  # fmt: skip
    """A global array with ``sharding`` whose shards each process makes from its own slices of
    ``x``: a host array, a device array, or anything sliceable with ``x[index]`` to numpy (e.g.
    :class:`sonotile.kwave.layout.XyzView` over an HDF5 dataset, so that each process reads only
    its hyperslabs). With uneven ``blocks`` the axes the sharding splits are padded
    (:class:`Blocks`): ``x`` has the true shape, the result the padded one."""
    dt = np.dtype(dtype if dtype is not None else x.dtype)
    shape = tuple(x.shape)
    spec = tuple(sharding.spec) + (None,) * (len(shape) - len(sharding.spec))
    if blocks is not None and not blocks.all_even and shape:
        padded = blocks.padded_shape_of(shape, tuple(s is not None for s in spec))
    else:
        padded = shape
    if padded == shape:
        if isinstance(x, jax.Array) and jax.process_count() == 1:
            return jax.device_put(x if dtype is None else x.astype(dtype), sharding)
        if isinstance(x, jax.Array):
            x = np.asarray(x)

        def piece(index: tuple[slice, ...]) -> np.ndarray:
            return np.asarray(x[index] if shape else x, dt)

        return jax.make_array_from_callback(shape, sharding, piece)
    if isinstance(x, jax.Array):
        x = np.asarray(x)

    def padded_piece(index: tuple[slice, ...]) -> np.ndarray:
        return blocks.read_padded(x, index, padded, dt)

    return jax.make_array_from_callback(padded, sharding, padded_piece)


def on_host() -> contextlib.AbstractContextManager[Any]:
    """Build whole-grid constants in host memory (the CPU backend), not on an accelerator."""
    try:
        return jax.default_device(jax.local_devices(backend="cpu")[0])
    except RuntimeError:  # no CPU backend (JAX_PLATFORMS without cpu)
        return contextlib.nullcontext()


def check_processes(mesh: Mesh) -> None:
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
