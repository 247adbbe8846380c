"""Runner: jit-compiled chunks of steps under ``lax.scan``, sensors sampled inside the scan.

Between chunks the raw sensor samples go to a recorder (memory does not grow with the number of
steps on the device), progress is reported, and a caller may checkpoint or stop. The loop
knows the equations only through the problem's model (:class:`sonotile.physics.Model`): its
constants, operators, state, step and per-step inputs, and what its sensors record. Chunk
sizes are :mod:`.chunks`'; progress lines and the in-memory recorder :mod:`.progress`; the
memory check before a run :mod:`.memory`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from numpy.typing import ArrayLike

from sonotile.base import config
from sonotile.model.problem import Problem
from sonotile.physics import Model, model_for
from sonotile.physics.base import LoopStep
from sonotile.solver import finite, growth, programs, stepping
from sonotile.solver import sensors as sens
from sonotile.solver.chunks import ChunkSizer, make_sizer
from sonotile.solver.chunks import default_chunk as default_chunk  # re-exported for callers
from sonotile.solver.memory import available_memory as available_memory  # re-exported too
from sonotile.solver.memory import check_memory
from sonotile.solver.progress import ListRecorder, Progress
from sonotile.solver.tape import Tape
from sonotile.spectral.device import in_host_memory, to_device
from sonotile.spectral.operators import SpectralOps

PointIndex = sens.PointIndex
#: The scan's carry: the model's state and the running sensor aggregates.
Carry = tuple[Any, dict[str, jax.Array]]
#: ``recorder(name, first_row, values)``: takes raw sensor samples ``(steps, Ns)`` of a chunk.
Recorder = Callable[[str, int, np.ndarray], None]


@dataclass(frozen=True)
class Engine:
    """A problem prepared for some devices: how to start, advance and finish a run.

    The same loop (:func:`advance`), recorders, progress and checkpoints serve every
    decomposition; only these callables differ (:func:`single_engine` here, the decomposed
    engines in :mod:`sonotile.parallel`).

    Attributes:
        problem, layout, phys: what is run.
        start: ``() -> (RunState, raw0)``: the carry before the first chunk and the samples of
            step 0 of an initial-value problem.
        chunk: ``(carry, xs) -> (carry, raw)``: one scan over the steps in ``xs`` (the first
            ``xs["count"]`` rows when it is given, see :func:`scan_steps`).
        divergence: ``u -> du``: per-axis velocity divergence (for k-Wave checkpoints), or
            None for a model without velocities.
        place: ``host carry -> device carry`` (restoring a checkpoint); the leaves may be
            lazy views (``view[index] -> numpy``) so that each process reads only its shards.
        describe: one line saying where it runs.
        lower: ``(carry, xs) -> jax.stages.Lowered`` of one chunk (for benchmarks: compiled
            memory, collectives in the program).
        blocks: how whole fields are padded on the devices when the grid is cut into blocks of
            different sizes (:class:`sonotile.parallel.blocks.Blocks`: ``to_true`` removes the
            dead points), or None when device arrays have the grid's shape.
        devices: how many devices the arrays are spread over (memory check).
        transport: what carries the step's collectives when it is not XLA (e.g.
            :class:`sonotile.parallel.mpi.MpiTransport`), else None.
        counted: whether ``chunk`` takes rows padded to the chunk length with a step count
            (:func:`padded_inputs`, :func:`scan_steps`), so that a shorter last chunk reuses
            the program. The decomposed engines do not: with jaxlib 0.10.2, XLA:CPU's
            in-process collectives inside a loop with a run-time trip count abort in their
            rendezvous check ("7 vs. 6" participants) when the program was loaded from the
            persistent compilation cache (tests/parallel/test_uneven.py, second run).
    """

    problem: Problem
    layout: sens.SensorLayout
    phys: Model
    start: Callable
    chunk: Callable
    divergence: Callable | None
    place: Callable
    describe: str = "single device"
    lower: Callable | None = None
    blocks: Any = None
    devices: int = 1  # devices the engine's arrays are spread over
    transport: Any = None
    counted: bool = True

    def to_true(self, fields: dict) -> dict:
        """Gathered whole fields (host arrays) in the grid's shape."""
        if self.blocks is None:
            return fields
        return {k: self.blocks.to_true(v) for k, v in fields.items()}


@dataclass(frozen=True)
class Compiled:
    """Everything a run needs on the device, built once per problem."""

    problem: Problem
    phys: Model
    layout: sens.SensorLayout
    consts: dict
    ops: SpectralOps
    index: PointIndex


def compile_problem(
    problem: Problem, ops: SpectralOps | None = None, consts: dict | None = None
) -> Compiled:
    """Build constants, operators and the sensor layout for a problem."""
    g = problem.grid
    phys = model_for(problem)
    layout = sens.layout_of(problem.sensor, g.shape, g.nt, g.dt, phys.records())
    if consts is None:
        consts = phys.constants(problem, derive_axes=tuple(range(problem.grid.ndim)))
    if ops is None:
        ops = phys.operators(problem, unstagger=layout.needs_unstagger)
    pts = layout.points
    index = (
        () if pts is None else tuple(to_device(pts[:, a], jnp.int32) for a in range(pts.shape[1]))
    )
    return Compiled(problem, phys, layout, consts, ops, index)


def single_engine(problem: Problem) -> Engine:
    """The single-device engine: global FFTs on the default device; the model's step, or its
    step on stacked fields where ``Settings.step`` picks it (:func:`.stepping.choose`)."""
    cp = compile_problem(problem)
    layout, phys = cp.layout, cp.phys
    dtype = jnp.dtype(problem.dtype)

    statics = {"phys": phys, "layout": layout}
    first = programs.cached(start_ivp, "start", statics)  # kept on disk: no trace when warm
    loop = stepping.choose(phys, cp.ops)
    if loop is not None:  # the stacked step: its own chunk program
        statics = {**statics, "loop": loop}
    chunk_fn: Any = run_chunk if loop is None else run_stacked_chunk
    run = programs.cached(chunk_fn, "chunk" if loop is None else "chunk-stacked", statics)

    def start() -> tuple[RunState, dict[str, np.ndarray]]:
        agg = sens.init_aggregates(layout, problem.grid.shape, dtype, eager=True)
        if phys.ivp:
            carry, raw0 = first(agg, cp.consts, cp.ops, cp.index)
            return RunState(carry, 1), {k: np.asarray(v) for k, v in raw0.items()}
        if phys.warm:
            return RunState((start_warm(cp.consts, cp.ops, phys), agg), 0), {}
        return RunState((phys.zero_state(problem.grid.shape, dtype, eager=True), agg), 0), {}

    def chunk(carry: Carry, xs: dict) -> tuple[Carry, dict[str, jax.Array]]:
        return run(carry, xs, cp.consts, cp.ops, cp.index)

    def place(carry: Any) -> Carry:
        def put(
            a: ArrayLike,
        ) -> jax.Array:  # host arrays, device arrays, or lazy views (kwave_io.XyzView)
            return to_device(a if isinstance(a, jax.Array) else np.asarray(a), dtype)

        return jax.tree_util.tree_map(put, carry)

    def lower(carry: Carry, xs: dict) -> jax.stages.Lowered:
        return chunk_fn.lower(carry, xs, cp.consts, cp.ops, cp.index, **statics)

    dev = jax.devices()[0]
    div = getattr(cp.ops, "div", None)  # a wave model's (k-Wave checkpoints)
    return Engine(
        problem,
        layout,
        phys,
        start,
        chunk,
        None if div is None else jax.jit(div),
        place,
        f"single device ({dev.platform}:{dev.id})" + ("" if loop is None else ", stacked step"),
        lower,
    )


def scan_body(
    carry: Carry,
    x: dict,
    c: dict,
    ops: SpectralOps,
    index: PointIndex | sens.PointGather,
    phys: Model,
    layout: sens.SensorLayout,
) -> tuple[Carry, dict[str, jax.Array]]:
    state, agg = carry
    state = phys.step(state, x, c, ops)
    return record(state, agg, x, c, ops, index, phys, layout)


def record(
    state: Any, agg: dict[str, jax.Array], x: dict, c: dict, ops: SpectralOps,
    index: PointIndex | sens.PointGather, phys: Model, layout: sens.SensorLayout,
) -> tuple[Carry, dict[str, jax.Array]]:  # fmt: skip
    """The sensors' part of a step: ``state`` (after step ``x["n"]``) sampled, the running
    aggregates updated; the carry and this step's raw samples."""
    fields, samples = sens.sample(phys.observed(state, c), ops, layout, index)
    agg = sens.update(agg, fields, samples, x["n"] >= layout.start, layout, x["n"])
    raw = {f: samples[f] for f in layout.raw}
    return (state, agg), raw


@partial(jax.jit, static_argnames=("phys", "layout"), donate_argnums=(0,))
def run_chunk(
    carry: Carry,
    xs: dict,
    c: dict,
    ops: SpectralOps,
    index: PointIndex | sens.PointGather,
    phys: Model,
    layout: sens.SensorLayout,
) -> tuple[Carry, dict[str, jax.Array]]:
    """Advance ``carry = (state, aggregates)`` through the steps in ``xs`` (see
    :func:`scan_steps`)."""
    c = phys.prepare(c, ops, carry[0])
    body = partial(scan_body, c=c, ops=ops, index=index, phys=phys, layout=layout)
    return scan_steps(body, carry, xs)


def stacked_body(
    carry: Carry, x: dict, c: dict, ops: SpectralOps, index: PointIndex | sens.PointGather,
    phys: Model, layout: sens.SensorLayout, loop: LoopStep, lc: dict, lops: Any,
) -> tuple[Carry, dict[str, jax.Array]]:  # fmt: skip
    """:func:`scan_body` with ``loop``'s step on its state, constants ``lc`` and operators
    ``lops``; the sensors sample that state with the model's ``c`` and ``ops``."""
    state, agg = carry
    state = loop.step(state, x, lc, lops)
    return record(state, agg, x, c, ops, index, phys, layout)


@partial(jax.jit, static_argnames=("phys", "layout", "loop"), donate_argnums=(0,))
def run_stacked_chunk(
    carry: Carry, xs: dict, c: dict, ops: SpectralOps, index: PointIndex | sens.PointGather,
    phys: Model, layout: sens.SensorLayout, loop: LoopStep,
) -> tuple[Carry, dict[str, jax.Array]]:  # fmt: skip
    """:func:`run_chunk` on the state of a model's stacked step ``loop``
    (:func:`.stepping.choose`): entered after the model's ``prepare``, left after the last step
    of ``xs``, so the carry between chunks holds the model's own state."""
    c = phys.prepare(c, ops, carry[0])
    return stacked_scan(scan_steps, carry, xs, c, ops, index, phys, layout, loop)


def stacked_scan(
    scan: Callable[[Callable, Any, dict], tuple[Any, Any]], carry: Carry, xs: dict, c: dict,
    ops: SpectralOps, index: Any, phys: Model, layout: sens.SensorLayout, loop: LoopStep,
) -> tuple[Carry, dict[str, jax.Array]]:  # fmt: skip
    """``scan(body, carry, xs)`` of :func:`stacked_body`: the model's state in ``carry`` enters
    ``loop``'s layout before the first step and leaves it after the last."""
    state, lc, lops = loop.enter(carry[0], c, ops)
    body = partial(stacked_body, c=c, ops=ops, index=index, phys=phys, layout=layout, loop=loop,
                   lc=lc, lops=lops)  # fmt: skip
    (state, agg), raw = scan(body, (state, carry[1]), xs)
    return (loop.leave(state), agg), raw


def scan_steps(body: Callable, carry: Any, xs: dict) -> tuple[Any, Any]:
    """``lax.scan(body, carry, xs)``; when ``xs`` holds ``"count"`` (a scalar), only its first
    ``count`` rows are steps and the rest is padding (:func:`padded_inputs`), so that one
    compiled program serves every chunk up to the rows' length (a shorter last chunk does not
    compile a program of its own). The outputs keep the full length; rows past ``count`` are
    zeros."""
    if "count" not in xs:
        return lax.scan(body, carry, xs)
    rows = {k: v for k, v in xs.items() if k != "count"}
    length = jax.tree_util.tree_leaves(rows)[0].shape[0]

    def row(i: Any) -> dict:
        return jax.tree_util.tree_map(lambda a: lax.dynamic_index_in_dim(a, i, 0, False), rows)

    # the outputs' shapes need a trace of the body; as a jit function its trace is cached and
    # the loop below reuses it (traced twice, the step took ~40 % of a chunk program's trace)
    body = jax.jit(body)
    shapes = jax.eval_shape(lambda c: body(c, row(0))[1], carry)
    out0 = jax.tree_util.tree_map(lambda s: jnp.zeros((length, *s.shape), s.dtype), shapes)

    def one(i: Any, st: tuple[Any, Any]) -> tuple[Any, Any]:
        c, out = body(st[0], row(i))
        put = partial(lax.dynamic_update_index_in_dim, index=i, axis=0)
        return c, jax.tree_util.tree_map(lambda o, v: put(o, v), st[1], out)

    return lax.fori_loop(0, xs["count"], one, (carry, out0))


@partial(jax.jit, static_argnames=("phys", "layout"))
def start_ivp(
    agg: dict[str, jax.Array],
    c: dict,
    ops: SpectralOps,
    index: PointIndex | sens.PointGather,
    phys: Model,
    layout: sens.SensorLayout,
) -> tuple[Carry, dict[str, jax.Array]]:
    """Step 0 of an initial-value problem: the p0 state, sampled."""
    state = phys.initial_state(c, ops)
    fields, samples = sens.sample(phys.observed(state, c), ops, layout, index)
    agg = sens.update(agg, fields, samples, 0 >= layout.start, layout, 0)
    return (state, agg), {f: samples[f][None] for f in layout.raw}


@partial(jax.jit, static_argnames=("phys",))
def start_warm(c: dict, ops: SpectralOps, phys: Model) -> Any:
    """The state before step 0 of a model that starts from its initial state
    (:attr:`~sonotile.physics.base.Model.warm`)."""
    return phys.initial_state(c, ops)


def _taped_body(
    c: dict, fixed: tuple, carry: Carry, x: dict, phys: Model, layout: sens.SensorLayout
) -> tuple[Carry, dict[str, jax.Array]]:
    """:func:`scan_body` as :func:`sonotile.solver.adjoint.taped_scan` calls it: the constants
    (differentiated) and ``fixed = (ops, index)`` passed in, not closed over."""
    return scan_body(carry, x, c, fixed[0], fixed[1], phys, layout)


def loop_scan(
    phys: Model, layout: sens.SensorLayout, c: dict, ops: SpectralOps, index: Any,
    carry: Carry, xs: dict, chunk: int | None, tape: Tape | None = None, axes: tuple[str, ...] = (),
    remat_step: bool = False, loop: LoopStep | None = None,
) -> tuple[Carry, dict[str, jax.Array]]:  # fmt: skip
    """The traceable loop of :func:`scan_body` over ``xs`` from ``carry``: each ``chunk`` of
    steps rematerialised in a derivative (:func:`sonotile.solver.adjoint.checkpointed_scan`),
    or with a ``tape`` the state every ``chunk`` steps kept there
    (:func:`sonotile.solver.adjoint.taped_scan`; ``axes``: inside ``shard_map``, the mesh axes
    the state is split over). ``remat_step``: each step rematerialised too. ``index``: the
    sensor's points (a shard's on a mesh). ``loop``: a model's step on stacked fields
    (:func:`.stepping.choose`; without a tape), entered before the first step and left after
    the last."""
    from sonotile.solver import adjoint  # not at import: a plain run needs no derivative rules

    if loop is not None and tape is None:
        scan = partial(adjoint.checkpointed_scan, chunk=chunk, remat_step=remat_step)
        return stacked_scan(scan, carry, xs, c, ops, index, phys, layout, loop)
    if tape is None:
        body = partial(scan_body, c=c, ops=ops, index=index, phys=phys, layout=layout)
        return adjoint.checkpointed_scan(body, carry, xs, chunk, remat_step)
    taped = partial(_taped_body, phys=phys, layout=layout)
    return adjoint.taped_scan(taped, c, (ops, index), carry, xs, tape, chunk or 1, axes,
                              remat_step)  # fmt: skip


def traced_run(
    phys: Model, layout: sens.SensorLayout, c: dict, ops: SpectralOps, index: PointIndex,
    xs: dict, shape: tuple[int, ...], dtype: Any, state: Any = None, chunk: int | None = None,
    tape: Tape | None = None, axes: tuple[str, ...] = (),
) -> tuple[dict[str, jax.Array], dict[str, jax.Array], Any]:  # fmt: skip
    """The whole time loop as one traceable function (``jax.jit``, ``jax.grad``, ``jax.vmap``
    through the constants ``c``): the steps of ``xs`` (:meth:`Model.inputs`) from ``state``
    (default: the model's start), the same scan body as the engines, each ``chunk`` of steps
    rematerialised in a derivative (:func:`sonotile.solver.adjoint.checkpointed_scan`). With a
    ``tape`` the state every ``chunk`` steps goes onto it instead of device memory
    (:func:`sonotile.solver.adjoint.taped_scan`; reverse mode only; ``axes``: inside
    ``shard_map``, the mesh axes the state is split over).

    Returns ``(raw, aggregates, state)``: raw samples ``(steps, Ns)`` per name (with the
    sample of step 0 of an initial-value problem first), the running statistics and the final
    state (whole fields: ``state.fields()``)."""
    agg = sens.init_aggregates(layout, shape, dtype)
    raw0: dict[str, jax.Array] = {}
    if state is None and phys.ivp:
        (state, agg), raw0 = start_ivp(agg, c, ops, index, phys, layout)
    elif state is None:
        state = phys.initial_state(c, ops) if phys.warm else phys.zero_state(shape, dtype)
    c = phys.prepare(c, ops, state)
    (state, agg), raw = loop_scan(phys, layout, c, ops, index, (state, agg), xs, chunk, tape, axes)
    raw = {k: jnp.concatenate([raw0[k], v]) if k in raw0 else v for k, v in raw.items()}
    return raw, agg, state


def step_inputs(problem: Problem, n0: int, n1: int, model: Model | None = None) -> dict:
    """Scan inputs for steps ``n0 <= n < n1``: ``model``'s :meth:`Model.inputs` (default: the
    problem's model, made anew; a loop passes the one it holds)."""
    return (model or model_for(problem)).inputs(problem, n0, n1)


def padded_inputs(
    problem: Problem, n0: int, n1: int, rows: int, model: Model | None = None
) -> dict:
    """:func:`step_inputs` for steps ``n0 <= n < n1`` padded with zero rows to ``rows`` rows,
    with ``"count"`` = ``n1 - n0`` (see :func:`scan_steps`)."""
    xs = step_inputs(problem, n0, n1, model)
    k = n1 - n0
    if rows < k:
        raise ValueError(f"{k} steps do not fit in {rows} rows")

    def pad(a: np.ndarray) -> np.ndarray:
        return np.concatenate([a, np.zeros((rows - k, *a.shape[1:]), a.dtype)]) if rows > k else a

    xs = jax.tree_util.tree_map(pad, xs)
    xs["count"] = np.int32(k)
    return xs


def wait_ready(
    tree: Any, should_abort: Callable[[], bool] | None, expected: float | None = None
) -> None:
    """Block until every array of ``tree`` is computed, checking ``should_abort`` at least every
    20 ms (so that signal handlers run and an abandoned run returns at once).

    ``expected``: how long the computation should take [s] (the last chunk's time per step):
    the checks sleep until 90 % of it, then every 0.5 ms. Without it the pause grows with the
    time waited (1/64 of it, 0.5-20 ms). Polling every 20 ms left the device idle for half
    that per chunk on average, 6 ms per step of a 128^3 run on one thread (docs/performance.md);
    a helper thread blocking on the arrays would wake sooner but, abandoned inside XLA by an
    interrupted run, aborts the interpreter at exit.
    """
    leaves = [x for x in jax.tree_util.tree_leaves(tree) if isinstance(x, jax.Array)]
    t0 = time.perf_counter()
    while not all(x.is_ready() for x in leaves):  # type: ignore[attr-defined]  # jax >= 0.4.19
        if should_abort is not None and should_abort():
            raise InterruptedError("stopped during a chunk of steps")
        waited = time.perf_counter() - t0
        if expected is not None and waited < 0.9 * expected:
            pause = 0.9 * expected - waited
        else:
            pause = max(0.0005, waited / 64)
        time.sleep(min(pause, 0.02))


@dataclass
class RunState:
    """Where a run stands: the carry and the next step index (for checkpoints)."""

    carry: tuple
    next_step: int


def advance(
    engine: Engine,
    rs: RunState,
    stop: int,
    recorder: Recorder,
    chunk: int | ChunkSizer | None = None,
    progress: Callable[[int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    should_abort: Callable[[], bool] | None = None,
    check_finite: bool = True,
    check_growth: bool | None = None,
) -> RunState:
    """Run steps ``rs.next_step .. stop-1`` in chunks, streaming raw samples to ``recorder``.

    ``recorder(name, first_row, values)`` receives ``values`` of shape ``(steps, Ns)`` for the
    sampled steps (those ``>= sensor start``); ``first_row`` is the row in the full series.
    ``chunk``: steps per chunk, or a :class:`ChunkSizer` (default: about
    :data:`CHUNK_SECONDS` of work per chunk). ``should_stop()`` is checked between chunks
    (checkpointing, signals); ``should_abort()`` while a chunk runs: when true, the run is
    abandoned at once with :class:`InterruptedError` (its state is lost). ``check_finite``:
    after each chunk the state is reduced to one flag (:func:`.finite.state_finite`); at the
    first chunk whose state holds NaN or Inf the run stops with
    :class:`~sonotile.solver.finite.SimulationDiverged`. ``check_growth`` (None: with
    ``check_finite``, the setting ``growth_check``): after each chunk the energy is judged
    (:class:`~sonotile.solver.growth.GrowthMonitor`); a run whose energy rises with no source
    on stops with :class:`~sonotile.solver.growth.SimulationGrowing`.
    """
    sizer = chunk if isinstance(chunk, ChunkSizer) else make_sizer(engine, chunk)
    if check_growth is None:
        check_growth = check_finite and config.current().growth_check
    monitor = growth.GrowthMonitor.of(engine.phys, engine.problem) if check_growth else None
    start = engine.layout.start
    n = rs.next_step
    carry = rs.carry
    per_step: float | None = None  # seconds, from the last chunk (the first one compiles)
    while n < stop:
        m = min(stop, n + sizer.length)
        if engine.counted:
            xs = padded_inputs(engine.problem, n, m, sizer.rows, engine.phys)
        else:
            xs = step_inputs(engine.problem, n, m, engine.phys)
        t = time.perf_counter()
        carry, raw = engine.chunk(carry, xs)
        wait_ready((carry, raw), should_abort, None if per_step is None else per_step * (m - n))
        seconds = time.perf_counter() - t
        sizer.observe(m - n, seconds, stop - m)
        per_step = seconds / (m - n)
        if check_finite or monitor is not None:  # one pass: finite, and the energy watched
            ok, energy = growth.reduce(carry[0], monitor.proxy.weights if monitor else ())
            if check_finite and not bool(ok):
                finite.check_state(carry[0], engine.phys, engine.problem, n + 1, m, raw)
            if monitor is not None:
                monitor.check(energy, m)
        if raw:
            keep = max(0, start - n)
            for name, v in raw.items():
                if keep < m - n:
                    recorder(name, n + keep - start, host_rows(v, keep, m - n))
        n = m
        if progress:
            progress(n)
        if should_stop is not None and should_stop():
            break
    return RunState(carry, n)


def host_rows(v: Any, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo:hi`` of ``v`` as a host array: cut on the host when ``v`` is in host memory
    (no program to trace and load for each slice's shape, 2-5 ms each in a small run), else
    on its device (only those rows travel)."""
    return np.asarray(v)[lo:hi] if in_host_memory(v) else np.asarray(v[lo:hi])


def emit_step0(raw0: dict, start: int, recorder: Recorder) -> None:
    """Hand the step-0 samples of an IVP to the recorder when step 0 is recorded."""
    if start == 0:
        for name, v in raw0.items():
            recorder(name, 0, v)


def run_engine(
    engine: Engine,
    recorder: Recorder | None = None,
    chunk: int | None = None,
    progress: bool | None = None,
    check_finite: bool = True,
) -> tuple[dict, dict]:
    """Run a whole problem with an engine; ``check_finite``: stop with
    :class:`~sonotile.solver.finite.SimulationDiverged` at the first chunk of steps whose state
    holds NaN or Inf (see :func:`advance`).

    Returns ``(raw, final)``: raw time series ``{name: (Ts, Ns)}`` (when the recorder is the
    default in-memory one) and the aggregated / whole-field / final quantities.
    """
    problem = engine.problem
    check_memory(problem, n_devices=engine.devices)
    rec = recorder or ListRecorder()
    rs, raw0 = engine.start()
    emit_step0(raw0, engine.layout.start, rec)
    prog = Progress(problem.grid.nt, problem.grid.size, enabled=progress, every_pct=10)
    rs = advance(
        engine, rs, problem.grid.nt, rec, chunk=chunk, progress=prog, check_finite=check_finite
    )
    final = engine.to_true(sens.finish(rs.carry[1], rs.carry[0], engine.layout, problem.grid.nt))
    raw = rec.result() if isinstance(rec, ListRecorder) else {}
    return raw, final


def run(
    problem: Problem,
    recorder: Recorder | None = None,
    chunk: int | None = None,
    progress: bool | None = None,
    check_finite: bool = True,
) -> tuple[dict, dict]:
    """Run a whole problem on one device (see :func:`run_engine`)."""
    return run_engine(single_engine(problem), recorder, chunk, progress, check_finite)
