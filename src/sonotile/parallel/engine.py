"""Multi-device engines behind the same step function.

The physics is not repeated here: medium and PML constants come from :mod:`sonotile.solver.plan`
(field-shaped arrays sharded like the state, 1-D PML profiles sharded along their axis), the
scan body is :func:`sonotile.solver.runner.scan_body`, sensor samples are gathered on the owning
shard and combined with ``psum`` through the index object's ``gather`` hook in
:mod:`sonotile.solver.sensors`. Mask sources keep their global order: every shard gets the full
index list with the points it does not own replaced by an out-of-range index, which the step's
injection drops.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from sonotile.model.lazy import LazyField
from sonotile.model.problem import Problem
from sonotile.parallel.auto import auto
from sonotile.parallel.lfb import LfbOps, lfb_constants
from sonotile.parallel.mesh import (
    AXIS_NAMES,
    ShardIndex,
    check_processes,
    field_spec,
    global_array,
    local_index,
    make_mesh,
    on_host,
    shard_map,
)
from sonotile.parallel.pencil import PencilOps, pencil_constants
from sonotile.solver import plan as planmod
from sonotile.solver import runner
from sonotile.solver import sensors as sens
from sonotile.solver.step import zero_state


def check_divisible(shape, mesh_shape, what):
    for a, p in enumerate(mesh_shape):
        if shape[a] % p:
            raise ValueError(
                f"{what}: grid axis {a} has {shape[a]} points, not divisible by mesh size {p}"
            )


def _split_consts(consts: dict, shape, m: int):
    """Separate the plan's constants into device arrays with specs and static Python floats."""
    d = len(shape)
    fspec = field_spec(d, m)
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
    :func:`sonotile.solver.runner.run` (see :func:`decomposed_engine` for the arguments)."""
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
    """A :class:`~sonotile.solver.runner.Engine` running the one step on a device mesh.

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
        check_divisible(g.shape, mesh_shape, "pencil (real layout)")
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
        check_divisible(g.shape, mesh_shape, "lfb")
        if not 1 <= int(overlap) <= 64:
            raise ValueError(f"lfb: overlap = {overlap} points, expected 1..64")
    else:
        raise ValueError(f"decomposition = {decomposition!r}: expected single, pencil or lfb")

    mesh = make_mesh(mesh_shape, devs)
    check_processes(mesh)
    layout = sens.layout_of(problem.sensor, d)
    phys = planmod.physics_of(problem)
    dtype = jnp.dtype(problem.dtype)
    fspec = field_spec(d, m)
    local_shape = tuple(n // mesh_shape[a] if a < m else n for a, n in enumerate(g.shape))

    # constants of the medium, PML (sharded) and sources (indices localised per shard); built
    # in host memory and sliced per shard, never whole on one accelerator
    with on_host():
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
        loc, _ = local_index(pts, g.shape, mesh_shape)
        return tuple(jnp.asarray(x) for x in loc)

    src_idx = {k: localise(v) for k, v in idx_keys.items()}
    src_idx["u_index"] = tuple(None if v is None else localise(v) for v in u_index)
    src_specs = jax.tree_util.tree_map(lambda _: ispec, src_idx)

    if layout.points is not None:
        loc, owned = local_index(layout.points, g.shape, mesh_shape)
        sidx = (tuple(jnp.asarray(x) for x in loc), jnp.asarray(owned))
        sidx_specs = (tuple(ispec for _ in loc), ispec)
    else:
        sidx, sidx_specs = None, None

    if decomposition == "pencil":
        with on_host():
            ops_arrays, ops_specs, ops_meta = pencil_constants(
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
        with on_host():
            inner, bells, unshift, lmeta = lfb_constants(
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
        body = partial(runner.scan_body, c=c, ops=ops, index=index, phys=phys, layout=layout)
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
