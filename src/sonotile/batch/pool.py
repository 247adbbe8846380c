"""Run a batch on subsets of the devices: a pool of long-lived workers, one per subset.

The devices are cut into slots of ``devices_per_run`` (on a CPU: cores, each worker runs with
that many threads on its own cores; on GPUs: devices, each worker sees only its own through
``CUDA_VISIBLE_DEVICES`` and splits a run over them with ``--decomposition auto``). Each slot
has one worker process (:mod:`sonotile.batch.worker`) that runs its runs one after another, so
a compiled step is reused by every later run of the same grid. A run starts when a worker is
idle and the memory estimates of the runs in progress leave room for it. A run that fails, or
whose worker dies, is reported and the others go on.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from sonotile.batch.spec import Run


@dataclass(frozen=True)
class Slot:
    """A subset of the devices one worker runs on.

    Attributes:
        cpus: CPU ids (CPU platform) the worker is pinned to, or ().
        gpus: accelerator ids (``CUDA_VISIBLE_DEVICES``), or ().
        threads: CPU threads of the worker's runs (XLA and FFTW).
    """

    cpus: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    threads: int | None = None

    def describe(self) -> str:
        if self.gpus:
            return f"GPU {','.join(map(str, self.gpus))}"
        return f"CPU {','.join(map(str, self.cpus))}" if self.cpus else "all CPUs"


def cpu_slots(cpus: list[int], per_run: int) -> list[Slot]:
    """Consecutive groups of ``per_run`` CPUs, one slot each (at least one slot)."""
    per_run = max(1, min(per_run, len(cpus)))
    n = max(1, len(cpus) // per_run)
    return [
        Slot(cpus=tuple(cpus[i * per_run : (i + 1) * per_run]), threads=per_run) for i in range(n)
    ]


def gpu_slots(n_gpus: int, per_run: int) -> list[Slot]:
    """Groups of ``per_run`` accelerators, one slot each."""
    per_run = max(1, min(per_run, n_gpus))
    return [
        Slot(gpus=tuple(range(i * per_run, (i + 1) * per_run)))
        for i in range(max(1, n_gpus // per_run))
    ]


@dataclass
class Worker:
    """A running worker process and the run it is busy with."""

    slot: Slot
    proc: subprocess.Popen[str]
    results: IO[str]  # file object reading the worker's result descriptor
    run: Run | None = None
    started: float = 0.0


def start_worker(slot: Slot) -> Worker:
    """Start a worker process for ``slot`` (its result pipe is inherited as a descriptor)."""
    r, w = os.pipe()
    cmd = [sys.executable, "-m", "sonotile.batch.worker", "--fd", str(w)]
    if slot.threads:
        cmd += ["--threads", str(slot.threads)]
    if slot.cpus:
        cmd += ["--cpus", ",".join(map(str, slot.cpus))]
    env = dict(os.environ)
    if slot.gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, slot.gpus))
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, pass_fds=(w,), env=env, text=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(w)
    return Worker(slot, proc, os.fdopen(r, "r", buffering=1))


def send(worker: Worker, run: Run, argv: list[str], log: str) -> None:
    """Hand ``run`` to an idle worker."""
    worker.run, worker.started = run, time.perf_counter()
    assert worker.proc.stdin is not None
    worker.proc.stdin.write(json.dumps({"name": run.name, "argv": argv, "log": log}) + "\n")
    worker.proc.stdin.flush()


def stop_worker(worker: Worker) -> None:
    """Close a worker's input (it exits after its current run) and wait for it."""
    try:
        if worker.proc.stdin:
            worker.proc.stdin.close()
    except OSError:
        pass
    try:
        worker.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        worker.proc.kill()
    worker.results.close()


def died(worker: Worker) -> dict[str, Any]:
    """The result record of a run whose worker ended without answering."""
    assert worker.run is not None
    code = worker.proc.wait()
    how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
    return {
        "name": worker.run.name,
        "status": "failed",
        "error": f"worker process died ({how}); see its log",
        "wall_s": time.perf_counter() - worker.started,
        "peak_rss_bytes": 0,
    }


@dataclass
class Pool:
    """Dispatch runs to workers, at most one run per worker and within a memory budget.

    Attributes:
        slots: the device subsets (one worker each).
        argv: ``run -> sonotile-kwave argv`` for a worker of a given slot.
        log: ``run -> log file path``.
        estimate: ``run -> bytes`` the run will need (0 if unknown).
        budget: memory the runs in progress may use together [bytes] (None: no limit).
    """

    slots: list[Slot]
    argv: Callable[[Run, Slot], list[str]]
    log: Callable[[Run], str]
    estimate: Callable[[Run], int] = lambda r: 0
    budget: float | None = None
    workers: list[Worker] = field(default_factory=list)

    def fits(self, run: Run) -> bool:
        busy = [w for w in self.workers if w.run is not None]
        if self.budget is None or not busy:
            return True
        return sum(self.estimate(w.run) for w in busy) + self.estimate(run) <= self.budget

    def run_all(
        self, runs: list[Run], on_start: Callable[[Run, Slot], object],
        on_done: Callable[[Run, dict[str, Any]], object],
    ) -> None:  # fmt: skip
        """Run every run; ``on_start(run, slot)`` and ``on_done(run, result)`` report."""
        pending = list(runs)
        self.workers = [start_worker(s) for s in self.slots]
        sel = selectors.DefaultSelector()
        for w in self.workers:
            sel.register(w.results, selectors.EVENT_READ, w)
        try:
            while pending or any(w.run is not None for w in self.workers):
                for w in self.workers:
                    if w.run is None and pending and self.fits(pending[0]):
                        run = pending.pop(0)
                        send(w, run, self.argv(run, w.slot), self.log(run))
                        on_start(run, w.slot)
                for key, _ in sel.select(timeout=1.0):
                    self._collect(key.data, sel, on_done)
        except BaseException:  # Ctrl-C / SIGTERM: runs in progress stop, no output of theirs
            for w in self.workers:
                w.proc.terminate()
            raise
        finally:
            for w in self.workers:
                stop_worker(w)

    def _collect(
        self, w: Worker, sel: selectors.BaseSelector,
        on_done: Callable[[Run, dict[str, Any]], object],
    ) -> None:  # fmt: skip
        line = w.results.readline()
        run = w.run
        if line:
            result = json.loads(line)
        else:  # the worker died: report its run, start a fresh worker in its place
            result = died(w)
            sel.unregister(w.results)
            stop_worker(w)
            fresh = start_worker(w.slot)
            self.workers[self.workers.index(w)] = fresh
            sel.register(fresh.results, selectors.EVENT_READ, fresh)
        w.run = None
        on_done(run, result)
