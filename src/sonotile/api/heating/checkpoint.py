"""A sonication's heat run through an engine, saved and resumed as k-Wave's checkpoints are.

:func:`run_sonication` runs one heat problem (heating, then cooling) through the common loop
(:func:`sonotile.parallel.engine.engine_for`). With a :class:`Checkpoint` the run saves its
state (:func:`sonotile.solver.resume.save_state`: the fields, dose, maximum, the focal samples
so far, the temperature at the end of the heating) and stops after ``interval`` seconds or
``steps`` steps, or on SIGINT/SIGTERM between chunks, raising :class:`RunStopped`; the same call
with the same file goes on from there, and the result equals an uninterrupted run bit for bit.
A file saved with other inputs (grid, time axis, medium, source, schedule, precision) is
refused naming them; a file that is not a run state is never written over; the file is
removed once the run is complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from sonotile.base import files
from sonotile.base.runtime import install_stop_handlers, restore_handlers
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import SINGLE, Decomposition
from sonotile.parallel.engine import engine_for
from sonotile.physics.heat.medium import BOUNDARY_CONDITIONS
from sonotile.physics.heat.model import HeatProblem
from sonotile.solver import runner
from sonotile.solver import sensors as sens
from sonotile.solver.resume import is_state_file, load_extra, load_state, save_state


@dataclass(frozen=True)
class Checkpoint:
    """Where a heat run saves its state, and when it stops (k-Wave's ``checkpoint_file``,
    ``checkpoint_interval``, ``checkpoint_timesteps``).

    Attributes:
        path: the state file (``.npz``); rerunning with it resumes the run.
        interval: save and stop after this many seconds of stepping (None: never).
        steps: save and stop after this many steps of this call (None: never).
    """

    path: str
    interval: float | None = None
    steps: int | None = None

    def check(self, others: tuple[str, ...] = ()) -> None:
        """A :class:`ProblemError` for a bad setting, for a file that exists and is not a
        run state (it is not overwritten), or for a path that is one of ``others``."""
        if self.interval is not None and not self.interval > 0:
            raise ProblemError(f"checkpoint interval must be > 0 s, got {self.interval}")
        if self.steps is not None and not (int(self.steps) == self.steps and self.steps >= 1):
            raise ProblemError(f"checkpoint steps must be a whole number >= 1, got {self.steps}")
        for o in others:
            if files.same_file(o, self.path):
                raise ProblemError(f"checkpoint {self.path!r} is also an input or the output")
        try:  # a link, a FIFO, a device, a folder: refused before it is opened
            files.check_output_path(self.path, "checkpoint file")
        except OSError as e:
            raise ProblemError(str(e)) from None
        if os.path.exists(self.path) and not is_state_file(self.path):
            raise ProblemError(
                f"checkpoint {self.path!r} exists and is not a sonotile run state: it is not "
                "overwritten; give another file"
            )


class RunStopped(Exception):  # noqa: N818  # a normal end of a checkpointed call, not an error
    """A run saved its state to ``path`` after ``step`` of ``nt`` steps and stopped; the same
    call with the same checkpoint goes on from there."""

    def __init__(self, path: str, step: int, nt: int) -> None:
        super().__init__(f"state saved to {path} after step {step} of {nt}; run the same "
                         "command (or call) again to go on")  # fmt: skip
        self.path, self.step, self.nt = path, step, nt


def _digest(*values: Any) -> str:
    h = hashlib.sha256()
    for v in values:
        a = np.ascontiguousarray(np.asarray(v if v is not None else np.nan, dtype=np.float64))
        h.update(repr(a.shape).encode() + a.tobytes())
    return h.hexdigest()[:16]


def fingerprint(problem: HeatProblem, n_on: int) -> dict[str, str]:
    """A digest of each input a saved state must match: grid (and precision), time axis
    (step and count), medium (and its boundary), initial temperature, heat source, schedule,
    sensor."""
    co = problem.co
    pts = () if problem.points is None else problem.points
    bc = () if co.boundary == "periodic" else (BOUNDARY_CONDITIONS.index(co.boundary),)
    return {
        "grid": _digest(problem.shape, problem.spacing, problem.dtype == "float64"),
        "time axis": _digest(problem.dt, problem.nt),
        "medium": _digest(
            co.p1, co.p2, co.perfusion, co.ambient, co.q_scale, co.d_ref, co.p_ref, *bc
        ),
        "T0": _digest(problem.T0),
        "Q": _digest(problem.Q),
        "schedule": _digest(problem.on, n_on),
        "sensor": _digest(*pts),
    }


def saved_run(path: str, engine: runner.Engine,
              prints: dict[str, str]) -> tuple[runner.RunState, dict[str, Any]]:  # fmt: skip
    """The run state saved in checkpoint ``path`` on ``engine`` and the file's extra arrays,
    refused in the user's words when the file was saved by a run whose input fingerprints
    differ from ``prints`` or is not a run state."""
    extra = load_extra(path)
    saved = json.loads(str(extra.get("inputs", "{}")))
    other = [k for k in prints if saved.get(k) != prints[k]]
    if other:
        raise ProblemError(
            f"checkpoint {path!r} was saved by a run with another {', '.join(other)}: give "
            "the inputs it was saved with, or delete it to start afresh"
        )
    try:
        return load_state(path, engine), extra
    except ValueError as e:
        raise ProblemError(f"checkpoint {path!r}: {e}") from None


def _resume(path: str, engine: runner.Engine, prints: dict[str, str],
            rec: runner.ListRecorder) -> tuple[runner.RunState, np.ndarray | None]:  # fmt: skip
    """The saved run state on ``engine``, its samples handed to ``rec``, and the temperature
    at the end of the heating if the run had passed it."""
    rs, extra = saved_run(path, engine, prints)
    if extra["T"].shape[0]:
        rec("T", 0, extra["T"])
    return rs, extra.get("T_heated")


def _temperature(engine: runner.Engine, rs: runner.RunState) -> np.ndarray:
    """The temperature field [degC] of a run state (host array, the grid's shape)."""
    fin = engine.to_true(sens.finish(rs.carry[1], rs.carry[0], engine.layout, rs.next_step))
    return np.asarray(fin["T_final"])


def _save(cp: Checkpoint, engine: runner.Engine, rs: runner.RunState, rec: runner.ListRecorder,
          prints: dict[str, str], heated: np.ndarray | None) -> None:  # fmt: skip
    """Write the run state, the samples so far, the inputs' digests and ``heated``."""
    n_pts = int(engine.layout.n_points)
    samples = rec.result().get("T", np.zeros((0, n_pts)))
    extra = {"inputs": np.asarray(json.dumps(prints)), "T": samples}
    if heated is not None:
        extra["T_heated"] = heated
    save_state(cp.path, engine, rs, extra)


def run_sonication(problem: HeatProblem, n_on: int, decomposition: Decomposition = SINGLE,
                   mesh: tuple[int, ...] | None = None, progress: bool | None = False,
                   checkpoint: Checkpoint | None = None,
                   ) -> tuple[dict, np.ndarray, dict[str, np.ndarray]]:  # fmt: skip
    """Run ``problem`` (the source on for its first ``n_on`` steps): ``(final, T_heated,
    raw)``: the whole fields (``T_final``, ``T_max_final``, ``cem43_final``), the temperature
    after step ``n_on`` [degC], the sensor samples ``{"T": (nt, n)}``. Raises
    :class:`RunStopped` when the checkpoint stops it (its state saved)."""
    engine, _ = engine_for(problem, decomposition, mesh)  # type: ignore[arg-type]
    runner.check_memory(problem, n_devices=engine.devices)  # type: ignore[arg-type]
    rec, prints = runner.ListRecorder(), fingerprint(problem, n_on)
    cp, heated = checkpoint, None
    if cp is not None and os.path.exists(cp.path):
        rs, heated = _resume(cp.path, engine, prints, rec)
    else:
        rs, raw0 = engine.start()
        runner.emit_step0(raw0, engine.layout.start, rec)
    prog = runner.Progress(problem.nt, problem.grid.size, enabled=progress, every_pct=10)
    flag: dict = {}
    handlers = install_stop_handlers(flag) if cp is not None else {}
    t0, first = time.perf_counter(), rs.next_step

    def should_stop() -> bool:
        late = cp is not None and cp.interval is not None and time.perf_counter() - t0 > cp.interval
        return bool(flag.get("stop")) or late

    try:
        for stop in (n_on, problem.nt):
            if heated is None and rs.next_step >= n_on:
                heated = _temperature(engine, rs)
            limit = stop if cp is None or cp.steps is None else min(stop, first + int(cp.steps))
            if rs.next_step < limit and not should_stop():
                rs = runner.advance(engine, rs, limit, rec, progress=prog, should_stop=should_stop)
            if heated is None and rs.next_step >= n_on:
                heated = _temperature(engine, rs)
            if rs.next_step < stop and cp is not None:
                _save(cp, engine, rs, rec, prints, heated)
                raise RunStopped(cp.path, rs.next_step, problem.nt)
    finally:
        restore_handlers(handlers)
    final = engine.to_true(sens.finish(rs.carry[1], rs.carry[0], engine.layout, problem.nt))
    if cp is not None and os.path.exists(cp.path):
        os.remove(cp.path)
    assert heated is not None
    return final, heated, rec.result()
