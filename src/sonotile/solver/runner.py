"""Runner: jit-compiled chunks of steps under ``lax.scan``, sensors sampled inside the scan.

Between chunks the raw sensor samples go to a recorder (memory does not grow with the number of
steps on the device), progress is reported, and a caller may checkpoint or stop. The loop
knows the equations only through the problem's model (:class:`sonotile.physics.Model`): its
constants, operators, state, step and per-step inputs, and what its sensors record.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from numpy.typing import ArrayLike

from sonotile.base import config, runtime
from sonotile.model.problem import Problem
from sonotile.physics import Model, model_for
from sonotile.solver import finite, growth, programs
from sonotile.solver import sensors as sens
from sonotile.solver.tape import Tape
from sonotile.spectral.device import in_host_memory, to_device
from sonotile.spectral.operators import SpectralOps

PointIndex = sens.PointIndex
#: The scan's carry: the model's state and the running sensor aggregates.
Carry = tuple[Any, dict[str, jax.Array]]
#: ``recorder(name, first_row, values)``: takes raw sensor samples ``(steps, Ns)`` of a chunk.
Recorder = Callable[[str, int, np.ndarray], None]


class ListRecorder:
    """Collects raw sensor chunks in host memory: ``{name: [array (steps, Ns), ...]}``."""

    def __init__(self) -> None:
        self.chunks: dict[str, list[np.ndarray]] = {}

    def __call__(self, name: str, first_row: int, values: np.ndarray) -> None:
        self.chunks.setdefault(name, []).append(values)

    def result(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate(v, axis=0) for k, v in self.chunks.items()}


@dataclass
class Progress:
    """Reports how far a run is: percent, step, steps/s and ETA.

    On a terminal one bar is redrawn in place (at most every 0.2 s); in a log (a file, a pipe)
    a plain line is written each ``every_pct`` percent of the steps (k-Wave's ``-r``) or, when
    that is not given, every ``interval`` seconds. ``enabled=None``: only on a terminal.
    """

    total: int
    cells: int
    enabled: bool | None = None
    interval: float = 10.0
    stream: Any = field(default_factory=lambda: sys.stderr)
    every_pct: float | None = None

    def __post_init__(self) -> None:
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        if self.enabled is None:
            self.enabled = self.tty
        self._t0 = time.perf_counter()
        self._n0: int | None = None
        self._last_t = -math.inf
        self._next_n = 0

    def __call__(self, done: int, force: bool = False) -> None:
        """Report that ``done`` steps of ``total`` are complete."""
        if not self.enabled:
            return
        now = time.perf_counter()
        if self._n0 is None:  # the first report sets the origin of the rate (compile excluded)
            self._n0, self._t0 = done, now
            self._next_n = done + self._step_gap()
        due = done >= self.total or force
        if self.tty:
            due = due or now - self._last_t >= 0.2
        elif self.every_pct:
            due = due or done >= self._next_n
        else:
            due = due or now - self._last_t >= self.interval
        if not due:
            return
        self._last_t = now
        text = "".join(self.line(n, now, self.rate(done, now)) for n in self._passed(done))
        self._next_n = self._next_mark(done)
        self.stream.write(text + self.line(done, now))
        self.stream.flush()

    def _passed(self, done: int) -> range:
        """In a log with ``every_pct``: the interval steps a chunk passed before ``done`` (a
        chunk spans several when they are short, :data:`PACE_SECONDS`), one line each."""
        if self.tty or not self.every_pct:
            return range(0)
        return range(self._next_n, done, self._step_gap())

    def _next_mark(self, done: int) -> int:
        """The next line's step: the steps every interval from the first report, at least half
        an interval after ``done`` (``done`` plus an interval when chunks end on them)."""
        gap, n0 = self._step_gap(), self._n0 or 0
        return n0 + gap * -(-(2 * (done - n0) + gap) // (2 * gap))

    def rate(self, done: int, now: float) -> float:
        """Steps per second since the first report (0 before it has a duration)."""
        el = now - self._t0
        return (done - (self._n0 or 0)) / el if el > 0 else 0.0

    def _step_gap(self) -> int:
        return max(1, int(self.total * (self.every_pct or 100) / 100))

    def line(self, done: int, now: float, rate: float | None = None) -> str:
        """The bar (terminal) or line (log) for ``done`` steps at time ``now`` (``rate``: the
        steps per second to show, default :meth:`rate`)."""
        rate = self.rate(done, now) if rate is None else rate
        eta = (self.total - done) / rate if rate > 0 else math.inf
        eta_s = "--" if not math.isfinite(eta) else f"{eta:.1f}s"
        pct = 100 * done / max(self.total, 1)
        stats = f"step {done}/{self.total}"
        if rate > 0:  # known once two reports are apart
            stats += f"  {rate:.1f} steps/s  {rate * self.cells / 1e6:.1f} Mcells/s  ETA {eta_s}"
        if not self.tty:
            return f"  {pct:5.1f}%  {stats}\n"
        filled = int(30 * done / max(self.total, 1))
        end = "\n" if done >= self.total else ""
        return f"\r  [{'#' * filled}{'.' * (30 - filled)}] {pct:5.1f}%  {stats}  {end}"


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
    """The single-device engine: global FFTs on the default device."""
    cp = compile_problem(problem)
    layout, phys = cp.layout, cp.phys
    dtype = jnp.dtype(problem.dtype)

    statics = {"phys": phys, "layout": layout}
    first = programs.cached(start_ivp, "start", statics)  # kept on disk: no trace when warm
    run = programs.cached(run_chunk, "chunk", statics)

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
        return run_chunk.lower(carry, xs, cp.consts, cp.ops, cp.index, phys, layout)

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
        f"single device ({dev.platform}:{dev.id})",
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
    remat_step: bool = False,
) -> tuple[Carry, dict[str, jax.Array]]:  # fmt: skip
    """The traceable loop of :func:`scan_body` over ``xs`` from ``carry``: each ``chunk`` of
    steps rematerialised in a derivative (:func:`sonotile.solver.adjoint.checkpointed_scan`),
    or with a ``tape`` the state every ``chunk`` steps kept there
    (:func:`sonotile.solver.adjoint.taped_scan`; ``axes``: inside ``shard_map``, the mesh axes
    the state is split over). ``remat_step``: each step rematerialised too. ``index``: the
    sensor's points (a shard's on a mesh)."""
    from sonotile.solver import adjoint  # not at import: a plain run needs no derivative rules

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


def default_chunk(problem: Problem, layout: sens.SensorLayout, budget_bytes: float = 64e6) -> int:
    """Steps per chunk: raw samples of one chunk stay under ``budget_bytes`` on the device."""
    per_step = max(1, len(layout.raw) * layout.n_out * np.dtype(problem.dtype).itemsize)
    return int(max(1, min(problem.grid.nt, budget_bytes // per_step, 1000)))


#: seconds of work per chunk: progress is reported, and signals with a checkpoint file, the
#: checkpoint interval and ``should_stop`` are handled, between chunks (a stop without checkpoint
#: is not delayed: ``wait_ready`` polls; but the computation of a chunk cannot be cancelled, so
#: a process exits, or the next computation starts, only after it: an interrupted
#: ``simulate()`` script ends within about this long). Large grids are bounded by
#: :data:`MIN_CHUNK_STEPS` instead, so their per-call cost does not grow with a shorter target.
CHUNK_SECONDS = 1.0
#: the fewest steps of a chunk sized by time (fewer only when the limit or the run is shorter).
#: Each chunk (one call of the compiled loop) has a fixed cost that grows with the grid: XLA
#: maps its temporary buffers afresh for every call and the first touch of each page costs ~4 us
#: on the 2-core EPYC (20 B/point for the heterogeneous absorbing step: ~37 ms per call at
#: 128^3, ~150 ms at 256^3, a quarter to a half of a step). At 256^3 on 2 threads chunks of 2
#: steps ran 12 % slower per step than chunks of 8, at 128^3 chunks of 8 steps 5 % slower than
#: chunks of 64. With 2 MiB pages for malloc
#: (``runtime.restart_with_hugepages``) the per-call cost at 128^3 halves (~15 ms).
MIN_CHUNK_STEPS = 16
#: rate assumed before anything is measured [cell-steps/s]: low, so that the first chunk is short
ASSUMED_RATE = 1e7
#: progress lines (``pace``) end chunks only while their steps take at least this long [s]:
#: lines closer in time come together after a chunk. Each chunk costs ~0.5 ms besides its
#: steps on one thread (~3 ms on two): k-Wave's ``-r 5`` made 38 chunks of a 600-step 128^2
#: run, 20-100 ms of its 0.2 s of steps.
PACE_SECONDS = 0.25


def _pow2_at_most(x: float, limit: int) -> int:
    n = 1
    while 2 * n <= min(x, limit):
        n *= 2
    return max(1, min(n, limit))


def _pow2_floor(x: float, least: int, limit: int) -> int:
    """The largest power of two at most ``x``, but at least ``least`` and at most ``limit``
    (so a chunk of a fast grid stays within its seconds: an interrupted API run returns
    only after the chunk in flight)."""
    return max(1, min(max(_pow2_at_most(x, sys.maxsize), least), limit))


@dataclass
class ChunkSizer:
    """Steps per chunk from the measured time per step: about ``seconds`` of work per chunk
    (:data:`CHUNK_SECONDS`), at least ``least`` steps (:data:`MIN_CHUNK_STEPS`).

    The first chunk's length comes from :data:`ASSUMED_RATE`; the second chunk (the first
    without compilation) is timed, and when it took outside ``[seconds/2, 2 seconds]`` the
    length is set once from the measured time per step: a power of two at most that, at least
    ``least`` (also when the length is kept), at most ``limit`` (the memory bound on raw
    samples). Each length compiles once (a shorter chunk reuses the program, see
    :func:`scan_steps`): a shorter length keeps the rows already compiled, and a length past
    them is taken only when more than ``seconds`` of steps remain. ``pace``: steps between
    progress lines; chunks end
    on them while those steps take at least :data:`PACE_SECONDS` (the rows stay those of the
    length without it: no program of its own). ``fixed`` turns sizing off. ``agree(n)`` makes
    the processes of a job use the same length (the minimum).
    """

    cells: int
    limit: int
    seconds: float = CHUNK_SECONDS
    fixed: int | None = None
    agree: Callable[[int], int] = field(default=lambda n: n)
    least: int = MIN_CHUNK_STEPS
    length: int = 0
    calls: int = 0
    pace: int = 0
    free: int = 0  # the length without the pace
    compiled: int = 0  # the rows of the program the chunks ran in so far

    def __post_init__(self) -> None:
        if self.fixed:
            self.length = self.free = self.fixed
        else:
            guess = self.seconds * ASSUMED_RATE / max(self.cells, 1)
            self.free = _pow2_at_most(guess, self.limit)
            self.length = min(self.free, self.pace or self.free)

    @property
    def rows(self) -> int:
        """The rows the chunk programs are compiled for (:func:`padded_inputs`): the length,
        but at least ``least`` (within ``limit``) while sized by time, so that a first chunk
        shorter than the floor runs in the program of the chunks after it (on large grids the
        timed length is the floor: one program per run instead of two)."""
        if self.fixed:
            return self.length
        return (
            max(self.compiled, self._floored()) if self.compiled >= self.free else self._floored()
        )

    def _floored(self) -> int:
        """The length without the pace raised to ``least``, within ``limit``."""
        return min(max(self.free, self.least), self.limit)

    def observe(self, steps: int, seconds: float, remaining: int | None = None) -> None:
        """Record that a chunk of ``steps`` steps took ``seconds`` (dispatch to results), with
        ``remaining`` steps of the run after it (None: many)."""
        self.calls += 1
        self.compiled = max(self.compiled, self.rows)
        if self.fixed or self.calls != 2 or steps != self.length:
            return
        per_step = max(seconds, 1e-9) / steps
        new = self._floored()  # within a factor 2 of the target: kept
        if not self.seconds / 2 <= per_step * self.free <= 2 * self.seconds:
            new = _pow2_floor(self.seconds / per_step, self.least, self.limit)
        if remaining is not None and remaining * per_step <= self.seconds:
            new = min(new, self._floored())  # a longer program would not pay for itself
        self.free = self.agree(new)
        paced = self.pace and per_step * self.pace >= PACE_SECONDS
        self.length = min(self.free, self.pace) if paced else self.free


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


def agree_min(n: int) -> int:
    """The smallest ``n`` over the processes of a job (``n`` itself with one process)."""
    if jax.process_count() == 1:
        return n
    from jax.experimental import multihost_utils

    return int(np.min(multihost_utils.process_allgather(np.int64(n))))


def make_sizer(
    engine: Engine, chunk: int | None = None, limit: int | None = None,
    seconds: float | None = None, pace: int = 0,
) -> ChunkSizer:  # fmt: skip
    """The chunk sizer of a run: ``chunk`` fixed steps, or sized by time (default): about
    ``seconds`` of work per chunk (at most :data:`CHUNK_SECONDS`; e.g. a shorter checkpoint
    interval, then with no floor of :data:`MIN_CHUNK_STEPS`), at most ``limit`` steps and the
    memory bound on raw samples, ending on the progress lines' steps (``pace``) while those
    are far apart in time."""
    bound = default_chunk(engine.problem, engine.layout)
    bound = min(bound, max(1, limit)) if limit else bound
    target = CHUNK_SECONDS if seconds is None else min(seconds, CHUNK_SECONDS)
    least = MIN_CHUNK_STEPS if target >= CHUNK_SECONDS else 1
    return ChunkSizer(
        engine.problem.grid.size, bound, target, fixed=chunk, agree=agree_min, least=least,
        pace=max(0, pace),
    )  # fmt: skip


def available_memory(device: jax.Device | None = None) -> tuple[int | None, str]:
    """Free memory of ``device`` (default: JAX's first) [bytes] and where the figure comes from.

    CPU: the smallest of the host's ``MemAvailable``, the memory cgroups' and ``RLIMIT_AS``'s
    room (:func:`sonotile.base.runtime.host_memory_limit`); GPU/TPU: the device's limit minus
    what is in use (``memory_stats``). ``Settings.memory_limit`` (``SONOTILE_MEMORY_LIMIT=BYTES``)
    replaces the figure (a cap, or a test); ``(None, ...)`` when nothing is known."""
    limit = config.current().memory_limit
    if limit is not None:
        return limit, "SONOTILE_MEMORY_LIMIT"
    dev = device or jax.devices()[0]
    if dev.platform == "cpu":
        return runtime.host_memory_limit()
    stats = dev.memory_stats() or {}
    if "bytes_limit" not in stats:
        return None, f"{dev.platform} memory unknown"
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return free, f"free memory of {dev.platform}:{dev.id}"


def check_memory(problem: Problem, n_devices: int = 1, device: jax.Device | None = None) -> None:
    """Raise :class:`MemoryError` (one line) when the run's estimated memory
    (the model's :meth:`~sonotile.physics.base.Model.memory_estimate`) exceeds what the device
    has free; on accelerators the estimate is shared over ``n_devices``, on a CPU all share the
    host's RAM."""
    need = model_for(problem).memory_estimate(problem)
    have, what = available_memory(device)
    dev = device or jax.devices()[0]
    per_device = need if dev.platform == "cpu" else need / max(n_devices, 1)
    if have is not None and per_device > have:
        raise MemoryError(
            f"grid {problem.grid.shape} needs about {per_device / 2**20:.3g} MB "
            f"(estimate), more than the {have / 2**20:.3g} MB of {what}: use a smaller grid, "
            "float32, or more devices (--decomposition)"
        )


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
