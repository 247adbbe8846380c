"""A run's state on disk and back, for any model: stop a long run (heat, elastic, acoustic)
and go on later, on the same or another engine of the same problem.

:func:`save_state` writes the carry (the model's state and the running sensor aggregates) and
the next step index to one ``.npz`` file, whole fields in the grid's shape (the dead points of
uneven blocks removed); :func:`load_state` checks that the file belongs to this problem and
model and places the carry on the engine's devices (:attr:`Engine.place
<sonotile.solver.runner.Engine.place>`), so a run saved on one device may go on on a mesh. The
samples recorded before the stop are the caller's (its recorder). k-Wave's own checkpoint
files are :mod:`sonotile.kwave.checkpoint`.
"""

from __future__ import annotations

import json
import os
import stat
import zipfile

import jax
import numpy as np

from sonotile.base import files
from sonotile.solver import runner

FORMAT = "sonotile-run-state"


def _key(engine: runner.Engine) -> str:
    """What a saved state must match: the model, the grid and time axis, the sensor layout."""
    g = engine.problem.grid
    lay = engine.layout
    return json.dumps({"format": FORMAT, "model": repr(engine.phys), "shape": list(g.shape),
                       "spacing": list(g.spacing), "dt": g.dt, "nt": g.nt,
                       "dtype": str(engine.problem.dtype), "raw": list(lay.raw),
                       "stats": [list(s) for s in lay.stats], "whole": [list(w) for w in lay.whole],
                       "points": lay.n_points})  # fmt: skip


def save_state(path: str, engine: runner.Engine, rs: runner.RunState,
               extra: dict[str, np.ndarray] | None = None) -> None:  # fmt: skip
    """Write ``rs`` (a run of ``engine`` stopped between chunks) to ``path`` (``.npz``,
    replaced atomically: :func:`sonotile.base.files.save_npz`), with the caller's ``extra``
    arrays (:func:`load_extra`: e.g. the samples recorded so far). One process: the arrays
    are gathered here."""
    leaves = jax.tree_util.tree_leaves(rs.carry)
    if not all(getattr(x, "is_fully_addressable", True) for x in leaves):
        raise NotImplementedError("save_state: a run over several processes (one process only)")
    ndim = len(engine.problem.grid.shape)
    arrays: dict[str, np.ndarray] = {
        "key": np.asarray(_key(engine)),
        "next_step": np.asarray(rs.next_step, np.int64),
    }
    for i, x in enumerate(leaves):
        a = np.asarray(jax.device_get(x))
        if engine.blocks is not None and a.ndim == ndim:
            a = engine.blocks.to_true(a)
        arrays[f"leaf{i}"] = a
    for name, v in (extra or {}).items():
        arrays[f"extra.{name}"] = np.asarray(v)
    files.save_npz(path, arrays, "checkpoint file")


def load_state(path: str, engine: runner.Engine) -> runner.RunState:
    """The run state saved in ``path`` placed on ``engine``'s devices; raises ``ValueError``
    when the file was saved for another problem, model or sensor."""
    with np.load(path) as f:
        if "key" not in f.files or str(f["key"]) != _key(engine):
            raise ValueError(f"{path}: not a saved state of this problem and model")
        n_leaves = sum(1 for n in f.files if n.startswith("leaf"))
        leaves = [f[f"leaf{i}"] for i in range(n_leaves)]
        next_step = int(f["next_step"])
    start, _ = engine.start()  # the carry's structure (and a check of the leaves' count)
    ref, treedef = jax.tree_util.tree_flatten(start.carry)
    if len(ref) != len(leaves):
        raise ValueError(f"{path}: {len(leaves)} arrays, the run's state has {len(ref)}")
    return runner.RunState(engine.place(jax.tree_util.tree_unflatten(treedef, leaves)), next_step)


def load_extra(path: str) -> dict[str, np.ndarray]:
    """The ``extra`` arrays :func:`save_state` wrote to ``path``."""
    with np.load(path) as f:
        return {n.removeprefix("extra."): f[n] for n in f.files if n.startswith("extra.")}


def is_state_file(path: str) -> bool:
    """Whether ``path`` is a run state written by :func:`save_state` (of any problem)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block np.load
            return False
        with np.load(path) as f:
            return "key" in f.files and json.loads(str(f["key"])).get("format") == FORMAT
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):  # damaged or other
        return False
