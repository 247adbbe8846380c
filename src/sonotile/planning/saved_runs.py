"""A plan's finished acoustic runs, kept so that a stopped plan goes on where it stopped.

With a checkpoint (:class:`~sonotile.api.heating.checkpoint.Checkpoint`),
:func:`~sonotile.planning.chain.plan` keeps each finished acoustic run (fluid or elastic: the
plan's beams, the aiming passes, the optimiser's basis fields and its forward run) in the
folder :func:`runs_folder` beside the checkpoint file, one ``.npz`` of the run's records per
run, named by a digest of everything the run depends on (grid, time axis, medium, source,
sensor, options, how it is spread over devices, sonotile's version). A run whose file is there
is read instead of run, so a plan run again with the same inputs repeats no finished run and
gives the same numbers bit for bit.

The plan stops between runs: on SIGINT / SIGTERM (the run under way is finished and kept first;
a second signal stops at once) or once the runs of this call have stepped for the checkpoint's
``interval`` [s], raising :class:`PlanStopped`. The heating keeps its own state in the
checkpoint file (:mod:`sonotile.api.heating.checkpoint`) and gets what is left of the
interval. The folder is removed when the plan is complete.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.base import files
from sonotile.base.runtime import install_stop_handlers, restore_handlers
from sonotile.base.version import __version__
from sonotile.model.problem import ProblemError

#: the file that marks a folder as a plan's saved runs (no other folder is written or removed)
MARK = "sonotile-plan-runs.json"
_KIND = "sonotile plan: finished acoustic runs"


class PlanStopped(RunStopped):
    """A plan stopped between its acoustic runs, the finished ones kept in ``path`` (a
    folder); the same call with the same checkpoint goes on from there."""

    def __init__(self, path: str, done: int) -> None:
        Exception.__init__(self, f"{done} acoustic run(s) of this call saved in {path}; run the "
                           "same command (or call) again to go on")  # fmt: skip
        self.path, self.step, self.nt = path, done, 0


def runs_folder(checkpoint_path: str) -> str:
    """The folder of a plan's finished runs for the checkpoint file ``checkpoint_path``: its
    name without ``.npz`` and with ``-runs`` (``heat.npz`` -> ``heat-runs``)."""
    base = checkpoint_path[:-4] if checkpoint_path.endswith(".npz") else checkpoint_path
    return base + "-runs"


def check_runs_folder(folder: str) -> None:
    """A :class:`ProblemError` when ``folder`` exists and is not a plan's saved runs (it is
    neither written nor removed), or cannot be made."""
    try:
        files.check_output_folder(folder, "the plan's saved runs")
    except OSError as e:
        raise ProblemError(str(e)) from None
    if os.path.isdir(folder) and _mark(folder) != _KIND:
        raise ProblemError(
            f"the plan's saved runs {folder!r}: the folder exists and is not one a plan made; "
            "it is not touched: give another checkpoint file, or move the folder away"
        )


def _mark(folder: str) -> str | None:
    try:
        with open(os.path.join(folder, MARK)) as f:
            return str(json.load(f).get("kind"))
    except (OSError, ValueError, AttributeError):
        return None


def _feed(h: Any, value: Any) -> None:
    """Add ``value`` (arrays, numbers, strings, None, dataclasses, mappings, sequences) to the
    hash ``h`` with its type and shape, so that different values never feed the same bytes."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        h.update(f"<{type(value).__name__}".encode())
        for f in dataclasses.fields(value):
            if f.compare:
                h.update(f.name.encode())
                _feed(h, getattr(value, f.name))
        h.update(b">")
    elif isinstance(value, Mapping):
        h.update(b"{")
        for k in sorted(value, key=str):
            h.update(repr(k).encode())
            _feed(h, value[k])
        h.update(b"}")
    elif isinstance(value, list | tuple):
        h.update(f"[{len(value)}".encode())
        for v in value:
            _feed(h, v)
    elif isinstance(value, np.ndarray | np.generic):
        a = np.ascontiguousarray(value)
        h.update(f"({a.dtype.str}{a.shape})".encode())
        h.update(a.view(np.uint8).reshape(-1) if a.dtype != object else repr(a).encode())
    else:
        h.update(f"{type(value).__name__}:{value!r};".encode())


def digest(*inputs: Any) -> str:
    """A SHA-256 digest (32 hex digits) of ``inputs`` and sonotile's version."""
    h = hashlib.sha256(__version__.encode())
    for v in inputs:
        _feed(h, v)
    return h.hexdigest()[:32]


@dataclasses.dataclass
class SavedRuns:
    """The finished runs of a plan in ``folder`` and when the plan stops.

    Attributes:
        folder: where the runs are kept (:func:`runs_folder`).
        interval: stop once the runs of this call have stepped this long [s] (None: never).
        flag: set by SIGINT / SIGTERM (``flag["stop"]``).
        seconds: how long the runs of this call have stepped [s]; done: how many ran.
    """

    folder: str
    interval: float | None = None
    flag: dict[str, Any] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    done: int = 0

    def run(self, inputs: tuple[Any, ...], go: Callable[[], Any]) -> dict[str, Any]:
        """The records of the run described by ``inputs``: read from the folder, or run by
        ``go`` (its records, ``name -> array``), kept, and then the stop checked."""
        path = os.path.join(self.folder, f"run-{digest(*inputs)}.npz")
        kept = _load(path)
        if kept is not None:
            return kept
        start = time.perf_counter()
        out = go()
        records = {k: np.asarray(out[k]) for k in out.keys()}  # noqa: SIM118  # Results
        self.seconds += time.perf_counter() - start
        self._open()
        files.save_npz(path, records, "saved acoustic run")
        self.done += 1
        self.check_stop()
        return records

    def check_stop(self) -> None:
        """:class:`PlanStopped` after a signal or once the interval has passed."""
        late = self.interval is not None and self.seconds >= self.interval
        if self.flag.get("stop") or late:
            raise PlanStopped(self.folder, self.done)

    def heating(self, checkpoint: Checkpoint) -> Checkpoint:
        """The heating's checkpoint: ``checkpoint`` with what is left of the interval."""
        if checkpoint.interval is None:
            return checkpoint
        left = max(checkpoint.interval - self.seconds, 1e-9)
        return dataclasses.replace(checkpoint, interval=left)

    def _open(self) -> None:
        if not os.path.isdir(self.folder):
            os.mkdir(self.folder)
            files.write_bytes(os.path.join(self.folder, MARK),
                              json.dumps({"kind": _KIND}).encode(), "mark")  # fmt: skip

    def remove(self) -> None:
        """Remove the folder (only when it is a plan's saved runs)."""
        if os.path.isdir(self.folder) and _mark(self.folder) == _KIND:
            shutil.rmtree(self.folder)


def _load(path: str) -> dict[str, np.ndarray] | None:
    """The records saved in ``path``, or None when there is no such file or it cannot be read
    (then the run is run again and the file replaced)."""
    if not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return None


@contextmanager
def saved_runs(checkpoint: Checkpoint | None) -> Iterator[SavedRuns | None]:
    """The plan's :class:`SavedRuns` for ``checkpoint`` (None without one), with SIGINT /
    SIGTERM stopping the plan between runs while the block runs; the folder is removed when
    the block ends without an error."""
    if checkpoint is None:
        yield None
        return
    runs = SavedRuns(runs_folder(checkpoint.path), checkpoint.interval)
    previous = install_stop_handlers(runs.flag)
    try:
        yield runs
    finally:
        restore_handlers(previous)
    runs.remove()
