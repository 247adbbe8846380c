"""What each shard of a decomposed run is given besides its state: the model's constants split
into sharded device arrays and static values, point indices localised per shard, the
decomposition's operator arrays, and the specs of the carry; placed so that each process builds
only its own shards."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sonotile.model.lazy import LazyField
from sonotile.model.problem import Problem
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.decomposition import PENCIL, Decomposition
from sonotile.parallel.lfb import LfbOps, lfb_constants
from sonotile.parallel.mesh import (
    AXIS_NAMES,
    ShardIndex,
    field_spec,
    global_array,
    local_index,
    on_host,
)
from sonotile.parallel.pencil import pencil_operators
from sonotile.physics import Model, point_index_keys
from sonotile.solver import sensors as sens
from sonotile.spectral.operators import FourierOps

if TYPE_CHECKING:
    from jax.tree_util import PyTreeDef
    from numpy.typing import ArrayLike

    from sonotile.parallel.blocks import Sliceable

#: ``local operator arrays -> operators`` of a decomposition (inside a shard)
MakeOps = Callable[[Any], FourierOps | LfbOps]


def _split_consts(
    consts: dict[str, Any], shape: tuple[int, ...], m: int
) -> tuple[list[jax.Array | LazyField | None], list[P | None], list[Any], PyTreeDef]:
    """Separate the plan's constants into device arrays with specs and static Python floats."""
    d = len(shape)
    fspec = field_spec(d, m)
    leaves, treedef = jax.tree_util.tree_flatten(consts)
    arrays: list[jax.Array | LazyField | None] = []
    specs: list[P | None] = []
    static: list[Any] = []
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


@dataclass
class ShardParts:
    """Everything a shard needs besides the state, as global (host or device) arrays + specs."""

    #: medium, PML and source constants (None where static)
    arrays: list[jax.Array | LazyField | None]
    specs: list[P | None]
    static: list[Any]  # Python values of the static leaves
    treedef: PyTreeDef
    src_idx: dict[str, Any]  # the model's point indices localised per shard
    sidx: tuple[tuple[jax.Array, ...], jax.Array] | None  # sensor indices and ownership per shard
    ops: Any  # operator arrays (a pytree)
    ops_specs: Any  # their specs (the same pytree)
    make_ops: MakeOps  # local operator arrays -> operators object
    names: tuple[str, ...]  # mesh axis names
    blocks: Blocks  # how the grid is cut (the sensor index reads lines across blocks)

    def args(self) -> tuple:
        return (self.arrays, self.src_idx, self.sidx, self.ops)

    def arg_specs(self, m: int) -> tuple:
        ispec = P(*AXIS_NAMES[:m], None)
        src = jax.tree_util.tree_map(lambda _: ispec, self.src_idx)
        sidx = None if self.sidx is None else (tuple(ispec for _ in self.sidx[0]), ispec)
        return (self.specs, src, sidx, self.ops_specs)

    def rebuild(
        self, arr_l: list[jax.Array | None], src_l: dict[str, Any], sidx_l: tuple | None
    ) -> tuple[dict[str, Any], ShardIndex | tuple[()]]:
        """Inside a shard: the constants dict and the sensor index object."""
        leaves = [s if a is None else a for a, s in zip(arr_l, self.static)]
        c = jax.tree_util.tree_unflatten(self.treedef, leaves)
        for k, v in src_l.items():
            c[k] = _flat_index(v)
        if sidx_l is None:
            return c, ()
        index = ShardIndex(
            tuple(i.reshape(-1) for i in sidx_l[0]), sidx_l[1].reshape(-1), self.names,
            self.blocks,
        )  # fmt: skip
        return c, index


def _flat_index(index: Any) -> Any:
    """A shard's point index (see :func:`_localise_any`) as flat per-axis arrays."""
    if index is None or not index:
        return index
    if isinstance(index[0], tuple) or index[0] is None:
        return tuple(_flat_index(i) for i in index)
    return tuple(i.reshape(-1) for i in index)


def _localise(index_tuple: Sequence[ArrayLike], blocks: Blocks) -> tuple[jax.Array, ...]:
    pts = np.stack([np.asarray(i) for i in index_tuple], axis=1)
    loc, _ = local_index(pts, blocks.shape, blocks.mesh_shape)
    return tuple(jnp.asarray(x) for x in loc)


def _localise_any(index: Any, blocks: Blocks) -> Any:
    """A model's point index (per-axis arrays, or a tuple over axes of them or None),
    localised to the shards (:func:`_localise`)."""
    if index is None or not index:
        return index
    if isinstance(index[0], tuple) or index[0] is None:
        return tuple(_localise_any(i, blocks) for i in index)
    return _localise(index, blocks)


def _operators(problem: Problem, decomposition: Decomposition, blocks: Blocks, overlap: int,
               bell_width: float, unstagger: bool) -> tuple[Any, Any, MakeOps]:  # fmt: skip
    """``(arrays, specs, make_ops)`` of the decomposition's spectral operators."""
    with on_host():
        if decomposition == PENCIL:
            return pencil_operators(problem, blocks, unstagger)
        inner, bells, unshift, lmeta = lfb_constants(
            problem, blocks, int(overlap), float(bell_width), unstagger
        )
    lfb_arrays = (inner, bells, unshift)
    specs = jax.tree_util.tree_map(lambda _: P(), lfb_arrays)
    return lfb_arrays, specs, lambda arrs: LfbOps(arrs[0], arrs[1], arrs[2], meta=lmeta)


def shard_parts(problem: Problem, phys: Model, decomposition: Decomposition, blocks: Blocks,
                overlap: int, bell_width: float,
                layout: sens.SensorLayout) -> ShardParts:  # fmt: skip
    """Constants of the medium, PML (sharded) and sources (indices localised per shard); built
    in host memory and sliced per shard, never whole on one accelerator."""
    d, m = problem.grid.ndim, len(blocks.mesh_shape)
    with on_host():
        # dt/rho0_sg from rho0 in the step along the axes each pencil shard holds whole
        derive = tuple(range(m, d)) if decomposition == PENCIL else ()
        consts = phys.constants(problem, derive_axes=derive)
    src_idx = {k: _localise_any(consts.pop(k), blocks) for k in point_index_keys(consts)}
    arrays, specs, static, treedef = _split_consts(consts, problem.grid.shape, m)
    sidx = None
    if layout.points is not None:
        loc, owned = local_index(layout.points, blocks.shape, blocks.mesh_shape)
        sidx = (tuple(jnp.asarray(x) for x in loc), jnp.asarray(owned))
    ops, ops_specs, make_ops = _operators(
        problem, decomposition, blocks, overlap, bell_width, layout.needs_unstagger
    )
    return ShardParts(arrays, specs, static, treedef, src_idx, sidx, ops, ops_specs, make_ops,
                  AXIS_NAMES[:m], blocks)  # fmt: skip


def carry_spec_tree(
    phys: Model, layout: sens.SensorLayout, d: int, m: int
) -> tuple[Any, dict[str, P]]:
    """The specs of the carry on a mesh of ``m`` split axes of a ``d``-D grid: the model's
    state (fields sharded) and the sensor aggregates (whole-grid ones sharded, others
    replicated)."""
    fspec = field_spec(d, m)
    whole = {f"{f}_{k}" for f, k in layout.whole}
    keys = [f"{f}_{k}" for f, k in layout.stats] + [f"{f}_{k}" for f, k in layout.whole]
    agg = {k: (fspec if k in whole else P()) for k in keys}
    # the state's structure with specs as leaves
    state = jax.tree_util.tree_map(lambda _: fspec, phys.zero_state((2,) * d, jnp.float32))
    return state, agg


def place_args(parts: ShardParts, specs: tuple, mesh: Mesh, blocks: Blocks) -> tuple:
    """Each process builds only its addressable shards; real-space arrays padded by blocks."""

    def put(spec: P, x: Sliceable, pad: bool) -> jax.Array:
        return global_array(x, NamedSharding(mesh, spec), blocks=blocks if pad else None)

    out = []
    for k, (sp, args) in enumerate(zip(specs, parts.args())):
        pad = k == 0  # medium / PML / source constants: real space. Indices, operators: not.
        out.append(
            jax.tree_util.tree_map(
                lambda s, x, pad=pad: None if x is None
                else jax.tree_util.tree_map(lambda y: put(s, y, pad), x),
                sp, args, is_leaf=lambda s: s is None or isinstance(s, P),
            )
        )  # fmt: skip
    return tuple(out)
