"""How many steps a chunk of the time loop runs: a memory bound on the raw samples a chunk holds,
and a sizer that aims at about :data:`CHUNK_SECONDS` of work per chunk (agreed between the
processes of a job)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sonotile.base.processes import agree_min
from sonotile.model.problem import Problem
from sonotile.solver import sensors as sens

if TYPE_CHECKING:
    from sonotile.solver.runner import Engine


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
    length without it: no program of its own). ``fixed`` turns sizing off. ``agree(n)``: the
    smallest ``n`` over the processes of a job; the measured time per step is agreed through it
    (the largest), so that all processes choose the same lengths.
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
        # every choice below follows from the slowest process's time per step: the processes
        # of a job must run chunks of the same length (their collectives pair up step by step)
        per_step = -self.agree(-max(1, round(seconds / steps * 1e9))) * 1e-9
        new = self._floored()  # within a factor 2 of the target: kept
        if not self.seconds / 2 <= per_step * self.free <= 2 * self.seconds:
            new = _pow2_floor(self.seconds / per_step, self.least, self.limit)
        if remaining is not None and remaining * per_step <= self.seconds:
            new = min(new, self._floored())  # a longer program would not pay for itself
        self.free = new
        paced = self.pace and per_step * self.pace >= PACE_SECONDS
        self.length = min(self.free, self.pace) if paced else self.free


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
