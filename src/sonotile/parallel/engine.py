"""Multi-device engines behind the same step function.

The physics is not repeated here: the problem's model (:func:`sonotile.physics.model_for`)
makes the constants (field-shaped arrays sharded like the state, 1-D profiles sharded along
their axis, point indices localised per shard) and the step; the scan body is
:func:`sonotile.solver.runner.scan_body`, sensor samples are gathered on the owning
shard and combined by one sum over the mesh through the index object
(:class:`sonotile.parallel.mesh.ShardIndex`, called by :func:`sonotile.solver.sensors.sample`):
once per chunk after its last step where the sensor allows it, else once per step.
Point indices keep their global order: every shard gets the full index list with the points it
does not own replaced by an out-of-range index, which the step's injection drops. What each
shard is given (constants, indices, operator arrays, the carry's specs) is
:mod:`sonotile.parallel.shard_consts`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from sonotile.model.problem import Problem
from sonotile.parallel import collectives
from sonotile.parallel import mpi as mpimod
from sonotile.parallel.auto import auto
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.decomposition import AUTO, LFB, NAMES, PENCIL, SINGLE, Decomposition
from sonotile.parallel.mesh import (
    ShardIndex,
    check_processes,
    global_array,
    make_mesh,
    shard_map,
)
from sonotile.parallel.shard_consts import ShardParts, carry_spec_tree, place_args, shard_parts
from sonotile.physics import Model, model_for
from sonotile.solver import runner, stepping
from sonotile.solver import sensors as sens


def normalise_mesh(
    decomposition: Decomposition, mesh_shape: Sequence[int] | None, n_devices: int, ndim: int
) -> tuple[int, ...]:
    """The mesh as the engine uses it: all devices on axis 0 by default, trailing 1s dropped
    (``2x4x1`` is a 2-D mesh), at most ``ndim - 1`` axes for pencil and ``ndim`` for lfb."""
    if mesh_shape is None:
        mesh_shape = (n_devices,)
    mesh_shape = tuple(int(s) for s in mesh_shape)
    if not mesh_shape or any(s < 1 for s in mesh_shape):
        raise ValueError(f"{decomposition}: mesh {mesh_shape}: expected positive sizes")
    while len(mesh_shape) > 1 and mesh_shape[-1] == 1:
        mesh_shape = mesh_shape[:-1]
    most = ndim - 1 if decomposition == PENCIL else ndim
    if len(mesh_shape) > most:
        raise ValueError(
            f"{decomposition}: mesh {'x'.join(map(str, mesh_shape))} splits {len(mesh_shape)} "
            f"axes of a {ndim}-D grid (at most {most}"
            + (": the last axis is never split" if decomposition == PENCIL else "")
            + ")"
        )
    return mesh_shape


def validate(problem: Problem, decomposition: Decomposition, blocks: Blocks, overlap: int) -> None:
    """Refuse what the decomposition cannot run, before anything is built."""
    if problem.grid.ndim < 2:
        raise ValueError("decomposed runs need a 2-D or 3-D grid")
    if decomposition not in (PENCIL, LFB):
        raise ValueError(f"decomposition = {decomposition!r}: expected single, pencil or lfb")
    blocks.check(decomposition)
    if decomposition == PENCIL:
        return
    if not 1 <= int(overlap) <= 64:
        raise ValueError(f"lfb: overlap = {overlap} points, expected 1..64")


def run_decomposed(
    problem: Problem,
    decomposition: Decomposition = PENCIL,
    mesh_shape: tuple[int, ...] | None = None,
    overlap: int = 16,
    bell_width: float = 0.5,
    progress: bool | None = False,
    devices: Sequence[jax.Device] | None = None,
    chunk: int | None = None,
    recorder: Callable[[str, int, np.ndarray], None] | None = None,
) -> tuple[dict, dict]:
    """Run a problem on a device mesh; returns ``(raw, final)`` exactly like
    :func:`sonotile.solver.runner.run` (see :func:`decomposed_engine` for the arguments)."""
    if decomposition == SINGLE:
        engine = runner.single_engine(problem)
    else:
        engine = decomposed_engine(problem, decomposition, mesh_shape, overlap, bell_width, devices)
    return runner.run_engine(engine, recorder=recorder, chunk=chunk, progress=progress)


def decomposed_engine(
    problem: Problem,
    decomposition: Decomposition = PENCIL,
    mesh_shape: tuple[int, ...] | None = None,
    overlap: int = 16,
    bell_width: float = 0.5,
    devices: Sequence[jax.Device] | None = None,
    transport: str | None = None,
) -> runner.Engine:
    """A :class:`~sonotile.solver.runner.Engine` running the one step on a device mesh.

    Any grid runs on any mesh: blocks differ by at most one point (:mod:`.blocks`).

    Args:
        decomposition: ``"pencil"`` (distributed FFT; ``mesh_shape`` of length 1 = slabs, 2 =
            pencils, at most ``ndim - 1``) or ``"lfb"`` (local Fourier basis; mesh of length 1 to
            ``ndim``). Trailing 1s of the mesh are ignored.
        mesh_shape: devices per split grid axis (axis j of the mesh splits grid axis j); default:
            all devices on axis 0.
        overlap, bell_width: LFB padding [points] and bell transition (fraction of the overlap).
        devices: the devices to use (default: all, across processes).
        transport: what carries the step's collectives between processes: ``"mpi"`` (MPI
            inside each process's one-device program, :mod:`.mpi`), ``"xla"`` (XLA's
            collectives: gloo on CPUs, NCCL on GPUs) or ``"auto"`` (MPI where it can; default:
            ``SONOTILE_TRANSPORT``, else auto). ``"local"`` (benchmarks only): every collective
            replaced by a local copy, no communication, wrong results.
    """
    g = problem.grid
    d = g.ndim
    devs = list(jax.devices() if devices is None else devices)
    mesh_shape = normalise_mesh(decomposition, mesh_shape, len(devs), d)
    m = len(mesh_shape)
    blocks = Blocks(tuple(g.shape), mesh_shape)
    phys = model_for(problem)
    layout = sens.layout_of(problem.sensor, g.shape, g.nt, g.dt, phys.records())
    mesh = make_mesh(mesh_shape, devs)
    validate(problem, decomposition, blocks, overlap)
    stepping.single_device_only(f"a {decomposition} run on {len(devs)} device(s)")
    check_processes(mesh)
    dtype = jnp.dtype(problem.dtype)
    parts = shard_parts(problem, phys, decomposition, blocks, overlap, bell_width, layout)
    carry_specs = carry_spec_tree(phys, layout, d, m)
    const_specs = parts.arg_specs(m)
    const_args = place_args(parts, const_specs, mesh, blocks)
    how = "local" if transport == "local" else mpimod.choose(transport, mesh)
    init_fn, chunk_fn, div_fn, carrier = _step_programs(
        how, parts, mesh, layout, phys, blocks.local_shape, dtype, const_args
    )

    def start() -> tuple[runner.RunState, dict[str, np.ndarray]]:
        carry, raw0 = init_fn(*const_args)
        return runner.RunState(carry, 1 if phys.ivp else 0), {
            k: np.asarray(v) for k, v in raw0.items()
        }

    def place(carry: tuple[Any, dict[str, Any]]) -> tuple[Any, dict[str, jax.Array]]:
        return jax.tree_util.tree_map(
            lambda spec, x: global_array(x, NamedSharding(mesh, spec), dtype, blocks),
            carry_specs, carry, is_leaf=lambda v: isinstance(v, P),
        )  # fmt: skip

    return runner.Engine(
        problem, layout, phys, start, lambda carry, xs: chunk_fn(carry, xs, *const_args),
        None if div_fn is None else (lambda u: div_fn(u, const_args[3])), place,
        _describe(decomposition, mesh_shape, devs, overlap, bell_width, blocks)
        + _via(carrier),
        lower=lambda carry, xs: chunk_fn.lower(carry, xs, *const_args),
        blocks=None if blocks.all_even else blocks,
        devices=math.prod(mesh_shape),
        transport=carrier,
        counted=False,
    )  # fmt: skip


def _step_programs(
    how: str, parts: ShardParts, mesh: Mesh, layout: sens.SensorLayout, phys: Model,
    local_shape: tuple[int, ...], dtype: jax.typing.DTypeLike, const_args: tuple,
) -> tuple[Any, Any, Any, collectives.Transport | None]:  # fmt: skip
    """``(init, chunk, divergence, transport)`` for the transport ``how``: ``"xla"``
    (``shard_map`` programs, transport None), ``"mpi"`` or ``"local"`` (one-device programs
    per process whose collectives go through the returned transport)."""
    if how == "xla":
        init_fn, chunk_fn = _programs(parts, mesh, layout, phys, local_shape, dtype)
        state_specs = carry_spec_tree(phys, layout, len(local_shape), len(parts.names))[0]
        u_specs = _velocity_specs(state_specs)
        div_fn = (
            None
            if u_specs is None
            else jax.jit(
                shard_map(
                    lambda u, o: parts.make_ops(o).div(u), mesh, (u_specs, parts.ops_specs), u_specs
                )
            )
        )
        return init_fn, chunk_fn, div_fn, None
    carrier: collectives.Transport = (
        mpimod.MpiTransport(mesh) if how == "mpi"
        else collectives.LocalCopies(dict(zip(mesh.axis_names, mesh.devices.shape)))
    )  # fmt: skip
    programs = _shard_programs(parts, mesh, layout, phys, local_shape, dtype, const_args, carrier)
    return (*programs, carrier)


def _velocity_specs(state_specs: Any) -> Any:
    """The specs of a wave state's velocity field ``u`` (its divergence is a k-Wave checkpoint's
    field), or None for a state without one."""
    return state_specs.u if "u" in getattr(state_specs, "_fields", ()) else None


def _via(carrier: collectives.Transport | None) -> str:
    """How the step's collectives travel, for the engine's description (``--verbose 2``)."""
    if not isinstance(carrier, mpimod.MpiTransport):
        return ""
    if carrier.staged:
        return ", halos and transposes through MPI, staged through host memory"
    if carrier.own_calls:
        return (", halos (one MPI call per group of fields) and transposes (own pieces kept in "
                "place) through MPI")  # fmt: skip
    from sonotile.parallel import mpi_ffi

    why = mpi_ffi.reason() or "another rank could not build it"
    return f", halos and transposes through MPI (halos one at a time, mpi4jax's alltoall: {why})"


def _deferred(index: ShardIndex | tuple[()], layout: sens.SensorLayout) -> ShardIndex | tuple[()]:
    """The sensor index summing once per chunk where the layout allows it
    (:func:`sonotile.solver.sensors.sums_deferrable`): the shards then meet 3 times per
    absorbing LFB step, not 4, and a butterfly of log2 P exchanges per step becomes one per
    chunk."""
    if isinstance(index, ShardIndex) and sens.sums_deferrable(layout):
        return replace(index, deferred=True)
    return index


def _settled(
    index: ShardIndex | tuple[()], raw: dict[str, jax.Array], agg: dict[str, jax.Array],
    layout: sens.SensorLayout,
) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:  # fmt: skip
    """A chunk's samples and statistics made whole on every shard (:meth:`ShardIndex.settle`)."""
    if not isinstance(index, ShardIndex):
        return raw, agg
    return index.settle(raw, agg, [f"{f}_{kind}" for f, kind in layout.stats])


def _local_programs(
    parts: ShardParts, layout: sens.SensorLayout, phys: Model, local_shape: tuple[int, ...],
    dtype: jax.typing.DTypeLike,
) -> tuple[Callable, Callable]:  # fmt: skip
    """One shard's ``init(*consts) -> (carry, raw0)`` (step 0) and ``chunk(carry, xs,
    *consts) -> (carry, raw)`` (one scan), on its local arrays."""

    def local_init(
        arr_l: list[jax.Array | None], src_l: dict[str, Any], sidx_l: tuple | None, ops_l: Any
    ) -> tuple[tuple[Any, dict[str, jax.Array]], dict[str, jax.Array]]:
        c, index = parts.rebuild(arr_l, src_l, sidx_l)
        agg = sens.init_aggregates(layout, local_shape, dtype)
        if phys.ivp:
            index = _deferred(index, layout)
            ops = parts.make_ops(ops_l)
            (state, agg), raw = runner.start_ivp(agg, c, ops, index, phys, layout)
            raw, agg = _settled(index, raw, agg, layout)
            return (state, agg), raw
        if phys.warm:
            return (phys.initial_state(c, parts.make_ops(ops_l)), agg), {}
        return (phys.zero_state(local_shape, dtype), agg), {}

    def local_chunk(
        carry: tuple[Any, dict[str, jax.Array]], xs: dict[str, jax.Array],
        arr_l: list[jax.Array | None], src_l: dict[str, Any], sidx_l: tuple | None, ops_l: Any,
    ) -> tuple[tuple[Any, dict[str, jax.Array]], dict[str, jax.Array]]:  # fmt: skip
        c, index = parts.rebuild(arr_l, src_l, sidx_l)
        index = _deferred(index, layout)
        ops = parts.make_ops(ops_l)
        c = phys.prepare(c, ops, carry[0])
        body = partial(runner.scan_body, c=c, ops=ops, index=index, phys=phys, layout=layout)
        (state, agg), raw = lax.scan(body, carry, xs)  # no step count: runner.Engine.counted
        raw, agg = _settled(index, raw, agg, layout)
        return (state, agg), raw

    return local_init, local_chunk


def _programs(
    parts: ShardParts, mesh: Mesh, layout: sens.SensorLayout, phys: Model,
    local_shape: tuple[int, ...], dtype: jax.typing.DTypeLike,
) -> tuple[jax.stages.Wrapped, jax.stages.Wrapped]:  # fmt: skip
    """The jitted ``shard_map`` programs: ``init(*consts) -> (carry, raw0)`` (step 0) and
    ``chunk(carry, xs, *consts) -> (carry, raw)`` (one scan, donated carry)."""
    m = len(parts.names)
    carry_specs = carry_spec_tree(phys, layout, len(local_shape), m)
    const_specs = parts.arg_specs(m)
    local_init, local_chunk = _local_programs(parts, layout, phys, local_shape, dtype)
    raw0_specs = {f: P() for f in layout.raw} if phys.ivp else {}
    raw_specs = {f: P() for f in layout.raw}
    init_fn = jax.jit(shard_map(local_init, mesh, const_specs, (carry_specs, raw0_specs)))
    chunk_fn = jax.jit(
        shard_map(local_chunk, mesh, (carry_specs, P()) + const_specs, (carry_specs, raw_specs)),
        donate_argnums=(0,),
    )
    return init_fn, chunk_fn


def _shard(x: Any) -> Any:
    """This process's one shard of a global array (the array the shard's program sees)."""
    return x.addressable_shards[0].data if isinstance(x, jax.Array) else x


def _assemble(x: jax.Array, spec: P, mesh: Mesh) -> jax.Array:
    """The global array whose shard on this process is ``x`` (no copy, no communication)."""
    names = tuple(spec) + (None,) * (x.ndim - len(spec))
    shape = tuple(n * (mesh.shape[a] if a is not None else 1) for n, a in zip(x.shape, names))
    return jax.make_array_from_single_device_arrays(shape, NamedSharding(mesh, spec), [x])


class _ShardProgram:
    """A shard's one-device program traced with a transport (MPI, or local copies), called like
    the ``shard_map`` program it replaces (global arrays, then the constants, which it holds as
    local shards already): local shards in, global arrays (``out_specs``) out. With
    ``samples`` the program returns ``(fields, samples)`` and the samples (the same on every
    process) stay local."""

    def __init__(
        self, fn: Callable, transport: collectives.Transport, mesh: Mesh, out_specs: Any,
        local_consts: tuple, donate: bool = False, samples: bool = True,
    ) -> None:  # fmt: skip
        self.jitted = jax.jit(fn, donate_argnums=(0,) if donate else ())
        self.transport, self.mesh, self.out_specs = transport, mesh, out_specs
        self.consts, self.samples = local_consts, samples

    def _local(self, args: tuple) -> tuple:
        return jax.tree_util.tree_map(_shard, args) + self.consts

    def lower(self, *args: Any) -> jax.stages.Lowered:
        """The program lowered for these arguments; an MPI transport's ``traced`` list holds
        this program's collectives afterwards."""
        if hasattr(self.transport, "traced"):
            self.transport.traced.clear()
        with collectives.using(self.transport):
            return self.jitted.lower(*self._local(args[: len(args) - len(self.consts)]))

    def __call__(self, *args: Any) -> Any:
        with collectives.using(self.transport):
            out = self.jitted(*self._local(args[: len(args) - len(self.consts)]))
        whole = jax.tree_util.tree_map(
            lambda s, x: _assemble(x, s, self.mesh), self.out_specs,
            out[0] if self.samples else out, is_leaf=lambda v: isinstance(v, P),
        )  # fmt: skip
        return (whole, out[1]) if self.samples else whole


def _shard_programs(
    parts: ShardParts, mesh: Mesh, layout: sens.SensorLayout, phys: Model,
    local_shape: tuple[int, ...], dtype: jax.typing.DTypeLike, const_args: tuple,
    transport: collectives.Transport,
) -> tuple[_ShardProgram, _ShardProgram, _ShardProgram | None]:  # fmt: skip
    """:func:`_programs` and the divergence as one-device programs whose collectives go through
    ``transport``; the constants are taken as this process's shards once."""
    carry_specs = carry_spec_tree(phys, layout, len(local_shape), len(parts.names))
    local_init, local_chunk = _local_programs(parts, layout, phys, local_shape, dtype)
    consts = jax.tree_util.tree_map(_shard, const_args)
    init = _ShardProgram(local_init, transport, mesh, carry_specs, consts)
    chunk = _ShardProgram(local_chunk, transport, mesh, carry_specs, consts, donate=True)
    u_specs = _velocity_specs(carry_specs[0])
    div = None if u_specs is None else _ShardProgram(
        lambda u, o: parts.make_ops(o).div(u), transport, mesh, u_specs, (consts[3],),
        samples=False)  # fmt: skip
    return init, chunk, div


def _describe(
    decomposition: Decomposition, mesh_shape: tuple[int, ...], devs: Sequence[jax.Device],
    overlap: int, bell_width: float, blocks: Blocks,
) -> str:  # fmt: skip
    shape_txt = "x".join(str(k) for k in mesh_shape)
    extra = f", overlap {overlap}, bell width {bell_width}" if decomposition == LFB else ""
    uneven = [a for a in range(len(mesh_shape)) if not blocks.even(a)]
    if uneven:
        extra += ", blocks of " + ", ".join(
            f"{blocks.counts(a).min()}-{blocks.counts(a).max()} points along {'xyz'[a]}"
            for a in uneven
        )
    return (
        f"{decomposition} on a {shape_txt} mesh of {math.prod(mesh_shape)} "
        f"{devs[0].platform} devices{extra}"
    )


DECOMPOSITIONS = NAMES


def engine_for(
    problem: Problem,
    decomposition: Decomposition = SINGLE,
    mesh_shape: tuple[int, ...] | None = None,
    overlap: int | None = None,
    bell_width: float = 0.5,
    accuracy: float = 1e-3,
    devices: Sequence[jax.Device] | None = None,
    transport: str | None = None,
) -> tuple[runner.Engine, str]:
    """The engine the user asked for, and a sentence saying what was chosen and why.

    ``decomposition="auto"`` picks with :func:`auto` from the grid, the devices (all of them,
    across processes) and the accuracy target; explicit ``mesh_shape``/``overlap`` override its
    picks. ``transport``: see :func:`decomposed_engine`.
    """
    devs = list(jax.devices() if devices is None else devices)
    reason = "asked for"
    model = model_for(problem)
    if decomposition not in (SINGLE, AUTO, *model.splits):
        ways = ", ".join(["single", "auto", *sorted(model.splits)])
        raise ValueError(
            f"decomposition {decomposition}: the {model.describe} runs with {ways} only"
        )
    if decomposition == AUTO and not model.splits:
        decomposition, reason = SINGLE, f"the {model.describe} runs on one device"
    if decomposition == AUTO:
        n = len(devs) if mesh_shape is None else math.prod(mesh_shape)
        pick = auto(problem.grid.shape, n, accuracy, processes=jax.process_count())
        decomposition, reason = pick["decomposition"], pick["reason"]
        if decomposition not in (SINGLE, *model.auto_splits):  # LFB's mesh may not suit pencils
            decomposition, reason = PENCIL, f"{reason}; the {model.describe} splits as pencils"
            pick["mesh_shape"] = None
        mesh_shape = mesh_shape or pick["mesh_shape"]
        overlap = overlap or pick["overlap"]
    if decomposition == SINGLE:
        if jax.process_count() > 1:
            raise ValueError(
                f"decomposition 'single' with {jax.process_count()} processes: use pencil, lfb "
                "or auto to run on the devices of all processes"
            )
        return runner.single_engine(problem), reason
    engine = decomposed_engine(
        problem, decomposition, mesh_shape, 16 if overlap is None else overlap, bell_width, devs,
        transport,
    )  # fmt: skip
    return engine, reason
