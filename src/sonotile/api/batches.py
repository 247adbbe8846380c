"""``simulate_many``: one grid and sensor, many media or sources, in one process.

Elastic media (``docs/elastic.md``) run the same two ways: each run is
:func:`sonotile.simulate`'s elastic run on the shared time axis (``"loop"``), or all of them
vectorised (``"vmap"``: one medium's fields per run, on one grid).

Two ways to run the set, same results:

* ``"loop"`` — one run after another on one device. The compiled step is shared by every run
  of the same grid, so each run after the first costs only its time steps.
* ``"vmap"`` — all runs as one vectorised program (``jax.vmap`` over the medium constants,
  the source signals and the state): one launch per chunk of steps for the whole set, which
  pays on accelerators, where a small grid leaves most of the device idle.

``vectorize="auto"`` takes ``"vmap"`` on accelerators and ``"loop"`` on CPUs, where the
vectorised program was measured slower (docs/batch.md: 0.77x with FFTW, 0.61x with XLA's FFT,
4 runs of 64^3 on 2 cores): a CPU's cores are already busy with one grid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from sonotile.api import (
    KSensor,
    KSource,
    KWaveGrid,
    KWaveMedium,
    OptionArgs,
    Options,
    Results,
    shape_results,
)
from sonotile.api import inputs as user_input
from sonotile.api.options import NAMES, RunOptions
from sonotile.api.problem import assemble
from sonotile.api.types import ElasticSource, KWaveElasticMedium, model_of
from sonotile.base import config
from sonotile.model.grid import make_time
from sonotile.model.problem import Problem, ProblemError
from sonotile.physics.elastic import ElasticMedium
from sonotile.solver import finite, growth, runner, stepping
from sonotile.solver import sensors as sens
from sonotile.solver.finite import SimulationDiverged

if TYPE_CHECKING:
    from jax.tree_util import PyTreeDef
    from typing_extensions import Unpack

    from sonotile.spectral.operators import FourierOps

VECTORIZE = ("auto", "loop", "vmap")


def _broadcast(media: Any, sources: Any) -> tuple[list[Any], list[Any]]:
    media = list(media) if isinstance(media, Sequence) else [media]
    sources = list(sources) if isinstance(sources, Sequence) else [sources]
    n = max(len(media), len(sources))
    for what, v in (("media", media), ("sources", sources)):
        if len(v) not in (1, n):
            raise ProblemError(f"simulate_many: {len(v)} {what} for {n} runs (give 1 or {n})")
        if not v:
            raise ProblemError(f"simulate_many: no {what}")
    return media * (n // len(media)), sources * (n // len(sources))


def _time_axis(kgrid: KWaveGrid, media: list[KWaveMedium]) -> KWaveGrid:
    """One time axis for every run: k-Wave's default from the extreme sound speeds of all
    (checked) media (a step stable for the fastest medium), unless the grid has one."""
    if kgrid.dt is not None and kgrid.nt is not None:
        return kgrid
    cs = [np.asarray(m.sound_speed, np.float64) for m in media]
    dt, nt = make_time(
        tuple(kgrid.shape), cast("tuple[float, ...]", kgrid.spacing),  # a tuple once built
        max(float(c.max()) for c in cs), min(float(c.min()) for c in cs),
    )  # fmt: skip
    return replace(kgrid, dt=kgrid.dt or dt, nt=kgrid.nt or nt)


def _elastic_time_axis(kgrid: KWaveGrid, media: list[Any]) -> KWaveGrid:
    """As :func:`_time_axis` for elastic media: k-Wave's default at CFL 0.3 on the largest
    compressional speed of all media (``pstdElastic``'s), unless the grid has one."""
    if kgrid.dt is not None and kgrid.nt is not None:
        return kgrid
    shape = tuple(kgrid.shape)
    spacing = tuple(float(d) for d in np.broadcast_to(kgrid.spacing, (len(shape),)))
    ms = []
    for i, m in enumerate(media):
        try:
            ms.append(ElasticMedium(m.sound_speed_compression, m.sound_speed_shear,
                                    getattr(m, "density", None), shape))  # fmt: skip
        except (ProblemError, AttributeError) as e:
            raise ProblemError(f"simulate_many: media[{i}]: {e}") from None
    dt, nt = make_time(shape, spacing, max(m.c_max for m in ms), min(m.c_min for m in ms), 0.3)
    return replace(kgrid, dt=kgrid.dt or dt, nt=kgrid.nt or nt)


def _elastic_vmapped(
    grid: KWaveGrid, media: list[Any], sources: list[Any], sensor: KSensor, options: Options
) -> list[Results]:
    """Elastic runs as one vmapped program (:func:`run_vmapped`), each checked and built as
    :func:`sonotile.api.elastic.simulate_elastic` builds it; its :class:`Results`."""
    from dataclasses import asdict

    from sonotile.api.elastic.intensity import with_intensity
    from sonotile.api.elastic.pstd import check_options, prepare, x64
    from sonotile.api.elastic.sensor import by_cuboid

    if options.elastic_interface != "kwave":
        raise ProblemError(f"simulate_many(vectorize='vmap'): elastic_interface = "
                           f"{options.elastic_interface!r} runs one medium at a time (each "
                           "medium's interfaces have their own continuations); use "
                           "vectorize='loop'")  # fmt: skip
    runs = []
    for i, (m, s) in enumerate(zip(media, sources)):
        try:
            check_options(m, options)
            runs.append(prepare(replace(grid), m, s, sensor, options.pml_size,
                                options.pml_alpha, dtype=options.dtype,
                                smooth_p0=options.smooth_p0))  # fmt: skip
        except ProblemError as e:
            raise ProblemError(f"simulate_many: media[{i}] / sources[{i}]: {e}") from None
    with x64(options.dtype):
        outs = run_vmapped(runs, options.check_finite)  # type: ignore[arg-type]
    results = []
    for run, (raw, final), m, s in zip(runs, outs, media, sources):
        data: dict[str, Any] = {k: np.asarray(v).T for k, v in raw.items()}  # (N, steps)
        data = with_intensity(data, run.record, len(run.shape), np)
        data = by_cuboid(data | {k: np.asarray(v) for k, v in final.items()}, run.cuboids)
        t = np.arange(run.recording.start, run.nt) * run.dt
        notes = [] if run.record else ["sensor.record is empty: nothing will be recorded"]
        points = None if run.cuboids else run.sensor_points
        results.append(Results(data, run.grid, t, points, notes, (grid, m, s, sensor),
                               asdict(options)))  # fmt: skip
    return results


def _simulate_elastic_many(
    kgrid: KWaveGrid,
    media: list[Any],
    sources: list[Any],
    sensor: KSensor,
    vectorize: str,
    options: Options,
) -> list[Results]:
    """Elastic media one after another (:func:`sonotile.api.elastic.simulate_elastic` on the
    shared time axis) or vectorised (:func:`_elastic_vmapped`)."""
    from sonotile.api.elastic.pstd import simulate_elastic

    grid = _elastic_time_axis(kgrid, media)
    slip = options.elastic_interface != "kwave"
    if (vectorize == "vmap" or not slip) and _resolve(vectorize) == "vmap":  # auto: loop
        return _elastic_vmapped(grid, media, sources, sensor, options)
    results = []
    for i, (m, s) in enumerate(zip(media, sources)):
        try:
            results.append(simulate_elastic(replace(grid), m, s, sensor, options,
                                            RunOptions(quiet=True)))  # fmt: skip
        except SimulationDiverged as e:
            raise e.of_run(f"simulate_many run {i}") from None
    return results


def _resolve(vectorize: str) -> str:
    if vectorize not in VECTORIZE:
        raise ValueError(f"vectorize = {vectorize!r}: expected one of {VECTORIZE}")
    if vectorize != "auto":
        return vectorize
    return "loop" if jax.devices()[0].platform == "cpu" else "vmap"


def simulate_many(
    kgrid: KWaveGrid,
    media: KWaveMedium | KWaveElasticMedium | Sequence[KWaveMedium | KWaveElasticMedium],
    sources: KSource | ElasticSource | Sequence[KSource | ElasticSource],
    sensor: KSensor,
    vectorize: str = "auto",
    options: Options | None = None,
    run: RunOptions | None = None,
    **option_args: Unpack[OptionArgs],
) -> list[Results]:
    """Run one simulation per medium / source pair on one grid with one sensor.

    Args:
        kgrid, sensor: shared by every run. Without ``dt``/``Nt`` the time axis is k-Wave's
            default for the fastest and slowest of all media, the same for every run.
        media, sources: one each, or sequences of equal length (a single one is shared).
            Elastic media (all of them: one model per batch) run each as
            :func:`sonotile.simulate` would run it on the shared time axis.
        vectorize: ``"loop"``, ``"vmap"`` (runs must have equally shaped inputs: same kinds of
            medium fields and source masks of the same sizes) or ``"auto"`` (vmap on
            accelerators, loop on CPUs).
        options, option_args: as :func:`sonotile.simulate` (:class:`sonotile.api.Options`).
        run: how the runs run (:class:`sonotile.api.RunOptions`): each on one device, so only
            ``decomposition="single"`` (the others refused by name).

    Returns:
        one :class:`sonotile.Results` per run, in order; equal to :func:`sonotile.simulate` of
        each run (bit for bit in ``"loop"``, to round-off in ``"vmap"``).
    """
    from sonotile.base import runtime

    runtime.prepare()  # XLA flags (if JAX has not started), allocator, compilation cache
    media, sources = _broadcast(media, sources)
    options = Options.of(options, option_args, "simulate_many")
    if vectorize not in VECTORIZE:
        raise ValueError(f"vectorize = {vectorize!r}: expected one of {VECTORIZE}")
    (run or RunOptions()).refuse(NAMES, "simulate_many runs each run on one device (give it "
                                 "to simulate for one run)")  # fmt: skip
    if model_of(media[0], media) == "elastic":  # the model chosen by the media, all alike
        return _simulate_elastic_many(kgrid, media, sources, sensor, vectorize, options)
    grid = _checked(kgrid, media, sources, sensor, options)
    built = [assemble(replace(grid), m, s, sensor, options) for m, s in zip(media, sources)]
    problems = [p for p, _ in built]
    how = _resolve(vectorize)
    if how == "loop":
        outs = [_run_one(i, p, options.check_finite) for i, p in enumerate(problems)]
    else:
        outs = run_vmapped(problems, options.check_finite)
    results = []
    for (problem, mapping), (raw, final) in zip(built, outs):
        data = shape_results(problem, raw, final, mapping["crop"])
        t = np.arange(problem.grid.nt) * problem.grid.dt
        results.append(Results(data, problem.grid, t, mapping["points"]))
    return results


def _checked(
    kgrid: KWaveGrid, media: list[Any], sources: list[Any], sensor: KSensor, options: Options
) -> KWaveGrid:
    """The batch's edge: every input checked once (:mod:`sonotile.api.inputs`, a medium or
    source shared by several runs once), named ``media[i]`` / ``sources[i]``; returns the grid
    with the shared time axis."""
    shape = user_input.check_grid(kgrid)
    user_input.check_options(options, shape, sensor)
    first = {id(m): i for i, m in reversed(list(enumerate(media)))}
    for m, i in ((m, i) for i, m in enumerate(media) if first[id(m)] == i):
        user_input.check_medium(m, shape, options, f"media[{i}]")
    grid = _time_axis(kgrid, media)
    assert grid.dt is not None and grid.nt is not None  # set by _time_axis
    pairs = {(id(m), id(s)): i for i, (m, s) in reversed(list(enumerate(zip(media, sources))))}
    for i in sorted(pairs.values()):
        user_input.check_sources(sources[i], shape, media[i], f"sources[{i}]", f"media[{i}]")
    user_input.check_sensor(sensor, grid, grid.dt, grid.nt)
    return grid


def _run_one(i: int, problem: Problem, check_finite: bool) -> tuple[dict, dict]:
    """:func:`runner.run` of run ``i`` (a :class:`SimulationDiverged` names the run)."""
    try:
        return runner.run(problem, check_finite=check_finite)
    except SimulationDiverged as e:
        raise e.of_run(f"simulate_many run {i}") from None


# --------------------------------------------------------------------------- vectorised


def _stack(trees: list[Any]) -> Any:
    """Stack equally shaped pytrees along a new axis 0 (every array leaf batched)."""
    return _batch(trees, share=False)[0]


def _batch(trees: list[Any], share: bool = True) -> tuple[Any, Any]:
    """``(tree, in_axes)``: leaves equal in every run kept once (axis None) when ``share``,
    the others stacked along a new axis 0; Python numbers that differ become arrays."""
    flat: list[tuple[list[Any], PyTreeDef]] = [jax.tree_util.tree_flatten(t) for t in trees]
    treedef = flat[0][1]
    if any(f[1] != treedef for f in flat[1:]):
        raise ProblemError(
            "simulate_many(vectorize='vmap'): the runs' inputs differ in kind (a field in one, "
            "a scalar in another, or different sources); use vectorize='loop'"
        )
    values, axes = [], []
    for xs in zip(*(f[0] for f in flat)):
        if isinstance(xs[0], jax.Array | np.ndarray):
            shapes = {np.shape(x) for x in xs}
            if len(shapes) > 1:
                raise ProblemError(
                    f"simulate_many(vectorize='vmap'): inputs of different shapes {shapes}; "
                    "use vectorize='loop'"
                )
            same = share and all(np.array_equal(xs[0], x) for x in xs[1:])
            values.append(xs[0] if same else jnp.stack([jnp.asarray(x) for x in xs]))
            axes.append(None if same else 0)
        elif all(x == xs[0] for x in xs[1:]):
            values.append(xs[0])
            axes.append(None)
        elif all(isinstance(x, int | float) and not isinstance(x, bool) for x in xs):
            values.append(jnp.asarray(xs))  # e.g. a homogeneous sound speed per run
            axes.append(0)
        else:
            raise ProblemError("simulate_many(vectorize='vmap'): runs differ in a setting")
    unflatten = jax.tree_util.tree_unflatten
    return unflatten(treedef, values), unflatten(treedef, axes)


def _check_runs(state: Any, raw: dict, models: list[Any], problems: list[Problem],
                first: int, last: int) -> None:  # fmt: skip
    """:func:`finite.check_state` of stacked runs: one reduction; the first run holding NaN or
    Inf is named."""
    if bool(finite.state_finite(state)):
        return
    for b, (model, problem) in enumerate(zip(models, problems)):
        one = jax.tree_util.tree_map(lambda x, b=b: x[b], (state, raw))
        try:
            finite.check_state(one[0], model, problem, first, last, one[1])
        except SimulationDiverged as e:
            raise e.of_run(f"simulate_many run {b}") from None


def _watch_runs(state: Any, monitors: list[growth.GrowthMonitor | None], last: int) -> None:
    """The growth check of each stacked run after time step ``last``
    (:class:`~sonotile.solver.growth.GrowthMonitor`); the first run growing is named."""
    for b, monitor in enumerate(monitors):
        if monitor is None:
            continue
        one = jax.tree_util.tree_map(lambda x, b=b: x[b], state)
        try:
            monitor.check(growth.reduce(one, monitor.proxy.weights)[1], last)
        except growth.SimulationGrowing as e:
            raise e.of_run(f"simulate_many run {b}") from None


def run_vmapped(problems: list[Problem], check_finite: bool = True) -> list[tuple[dict, dict]]:
    """All problems as one vmapped program; ``[(raw, final)]`` as :func:`runner.run` gives
    (``check_finite``: see :func:`runner.advance`, with its growth check per run)."""
    cps = [runner.compile_problem(p) for p in problems]
    first = cps[0]
    phys = first.phys.joined([cp.phys for cp in cps])
    if phys is None or any(cp.layout != first.layout for cp in cps):
        raise ProblemError("simulate_many(vectorize='vmap'): runs differ in physics (e.g. "
                           "absorption in some) or sensor; use vectorize='loop'")  # fmt: skip
    layout, index = first.layout, first.index
    consts, c_axes = _batch([cp.consts for cp in cps])
    ops, o_axes = _batch([cp.ops for cp in cps])  # kappa differs when c_ref does
    engines = [runner.single_engine(p) for p in problems]
    starts = [e.start() for e in engines]
    carry = _stack([rs.carry for rs, _ in starts])
    nt = problems[0].grid.nt

    loop = stepping.choose(phys, first.ops)  # the stacked step where Settings.step picks it

    def chunk(
        carry: tuple[Any, dict[str, jax.Array]], xs: dict[str, jax.Array], c: dict[str, Any],
        ops: FourierOps,
    ) -> tuple[tuple[Any, dict[str, jax.Array]], dict[str, jax.Array]]:  # fmt: skip
        if loop is not None:
            return runner.run_stacked_chunk(carry, xs, c, ops, index, phys, layout, loop)
        c = phys.prepare(c, ops, carry[0])
        body = partial(runner.scan_body, c=c, ops=ops, index=index, phys=phys, layout=layout)
        return lax.scan(body, carry, xs)

    fn = jax.jit(jax.vmap(chunk, in_axes=(0, 0, c_axes, o_axes)), donate_argnums=(0,))
    recs = [runner.ListRecorder() for _ in problems]
    for rec, (_, raw0) in zip(recs, starts):
        runner.emit_step0(raw0, layout.start, rec)
    n = starts[0][0].next_step
    size = runner.default_chunk(problems[0], layout) // len(problems) or 1
    watch = check_finite and config.current().growth_check
    monitors = [growth.GrowthMonitor.of(cp.phys, p) if watch else None
                for cp, p in zip(cps, problems)]  # fmt: skip
    while n < nt:
        m = min(nt, n + size)
        xs = _stack([runner.step_inputs(p, n, m, cp.phys) for p, cp in zip(problems, cps)])
        carry, raw = fn(carry, xs, consts, ops)
        if check_finite:
            _check_runs(carry[0], raw, [cp.phys for cp in cps], problems, n + 1, m)
            _watch_runs(carry[0], monitors, m)
        keep = max(0, layout.start - n)
        for b, rec in enumerate(recs):
            for name, v in raw.items():
                if keep < m - n:
                    rec(name, n + keep - layout.start, np.asarray(v[b, keep:]))
        n = m
    outs = []
    for b, rec in enumerate(recs):
        state, agg = jax.tree_util.tree_map(lambda x, b=b: x[b], carry)
        outs.append((rec.result(), sens.finish(agg, state, layout, nt)))
    return outs
