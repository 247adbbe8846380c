"""An elastic run saved and resumed (``checkpoint=`` of :func:`sonotile.api.elastic.
pstd_elastic_2d` / ``pstd_elastic_3d``), as a heat run is (:mod:`sonotile.api.heating.checkpoint`).

With a :class:`~sonotile.api.heating.Checkpoint` the run saves its state
(:func:`sonotile.solver.resume.save_state`: every split field, the running sensor statistics and
the samples recorded so far) and stops after ``interval`` seconds or ``steps`` steps, or on
SIGINT/SIGTERM between chunks, raising :class:`~sonotile.api.heating.RunStopped`; the same call
with the same file goes on from there, on the same or another decomposition, and the result
equals an uninterrupted run bit for bit on the same engine. A file saved with other inputs
(grid, precision, time axis, medium, sources, sensor) is refused naming them; a file that is
not a run state is never written over; the file is removed once the run is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import jax
import numpy as np

from sonotile.api.heating.checkpoint import Checkpoint, RunStopped, saved_run
from sonotile.base.runtime import install_stop_handlers, restore_handlers
from sonotile.parallel.decomposition import Decomposition
from sonotile.parallel.engine import engine_for
from sonotile.physics.elastic.problem import ElasticRun
from sonotile.solver import runner
from sonotile.solver import sensors as sens
from sonotile.solver.resume import save_state


def _digest(*values: Any) -> str:
    """A short hash of arrays (leaves of pytrees; None counts as NaN)."""
    h = hashlib.sha256()
    for v in values:
        for leaf in jax.tree_util.tree_leaves(v, is_leaf=lambda x: x is None):
            a = np.asarray(np.nan if leaf is None else leaf)
            a = np.ascontiguousarray(a.astype(np.float64) if a.dtype != bool else a)
            h.update(repr(a.shape).encode() + a.tobytes())
    return h.hexdigest()[:16]


def _off_grid(run: ElasticRun) -> str:
    """A digest of the off-grid sensor points and how they are read ("" for grid points)."""
    at = run.off_grid
    if at is None:
        return ""
    how = repr((at.interpolation, at.bli_tolerance)).encode()
    return _digest(at.positions) + hashlib.sha256(how).hexdigest()[:8]


def fingerprint(run: ElasticRun) -> dict[str, str]:
    """A digest of each input a saved state must match: grid (and precision), time axis, medium,
    sources (scaled signals, masks, ``p0``, PML), sensor (points and records); with the
    slip-aware interface, ``interface``."""
    slip = {"interface": "slip"} if run.statics.slip else {}
    return slip | {
        "grid": _digest(run.shape, run.spacing, run.dtype == "float64"),
        "time axis": _digest(run.dt, run.nt),
        "medium": _digest(run.medium_values()),
        "sources": _digest(run.xs, run.fixed),
        "sensor": _digest(() if run.points is None else run.points, run.recording.start)
        + hashlib.sha256(repr(tuple(run.record)).encode()).hexdigest()[:8]
        + _off_grid(run),
    }


def _resume(path: str, engine: runner.Engine, prints: dict[str, str],
            rec: runner.ListRecorder) -> runner.RunState:  # fmt: skip
    """The saved run state on ``engine``, its samples handed to ``rec``."""
    rs, extra = saved_run(path, engine, prints)
    for name, v in extra.items():
        if name.startswith("raw.") and v.shape[0]:
            rec(name[4:], 0, v)
    return rs


def _save(cp: Checkpoint, engine: runner.Engine, rs: runner.RunState, rec: runner.ListRecorder,
          prints: dict[str, str]) -> None:  # fmt: skip
    """Write the run state, the samples so far and the inputs' digests."""
    extra = {"inputs": np.asarray(json.dumps(prints))}
    extra |= {f"raw.{k}": v for k, v in rec.result().items()}
    save_state(cp.path, engine, rs, extra)


def run_checkpointed(
    run: ElasticRun,
    checkpoint: Checkpoint,
    decomposition: Decomposition,
    mesh: tuple[int, ...] | None,
    progress: bool | None,
    check_finite: bool,
    **engine_args: Any,
) -> tuple[dict, dict, str]:
    """Run (or go on with) ``run`` under ``checkpoint``: ``(raw, final, how)`` as
    :func:`sonotile.solver.runner.run_engine` returns them and what ran it; raises
    :class:`RunStopped` when the checkpoint stops it (its state saved)."""
    checkpoint.check()
    engine, reason = engine_for(run, decomposition, mesh, **engine_args)  # type: ignore[arg-type]
    runner.check_memory(run, n_devices=engine.devices)  # type: ignore[arg-type]
    rec, prints, cp = runner.ListRecorder(), fingerprint(run), checkpoint
    if os.path.exists(cp.path):
        rs = _resume(cp.path, engine, prints, rec)
    else:
        rs, raw0 = engine.start()
        runner.emit_step0(raw0, engine.layout.start, rec)
    prog = runner.Progress(run.nt, int(np.prod(run.shape)), enabled=progress, every_pct=10)
    flag: dict = {}
    handlers = install_stop_handlers(flag)
    t0, first = time.perf_counter(), rs.next_step

    def should_stop() -> bool:
        late = cp.interval is not None and time.perf_counter() - t0 > cp.interval
        return bool(flag.get("stop")) or late

    try:
        limit = run.nt if cp.steps is None else min(run.nt, first + int(cp.steps))
        if rs.next_step < limit and not should_stop():
            rs = runner.advance(engine, rs, limit, rec, progress=prog, should_stop=should_stop,
                                check_finite=check_finite)  # fmt: skip
        if rs.next_step < run.nt:
            _save(cp, engine, rs, rec, prints)
            raise RunStopped(cp.path, rs.next_step, run.nt)
    finally:
        restore_handlers(handlers)
    final = engine.to_true(sens.finish(rs.carry[1], rs.carry[0], engine.layout, run.nt))
    if os.path.exists(cp.path):
        os.remove(cp.path)
    return rec.result(), final, f"{engine.describe} ({reason})"
