"""What a run shows and keeps as it goes: progress lines (percent, step, steps/s, ETA) and the
in-memory recorder of raw sensor samples."""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np


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
