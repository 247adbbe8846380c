"""Checkpoint files: k-Wave's layout plus sonotile's running statistics; written and read
shard by shard, resumable on another device count.

Each checkpoint sonotile writes carries a manifest (root attribute ``sonotile_manifest``, JSON):
the SHA-256 of the input's datasets, the run settings that define the results, ``t_index`` and
the SHA-256 of every dataset. Resuming verifies all of it, and that the state is float and
finite, and refuses any mismatch or a missing manifest. A checkpoint written by k-Wave (no
manifest, no ``sonotile_aggregates``, not created by sonotile) cannot be verified: it is checked
for grid size, types and finite values only and resumed with a loud warning.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import h5py
import jax
import jax.numpy as jnp
import numpy as np

from sonotile.base import files
from sonotile.base.files import write_errors
from sonotile.base.version import __version__
from sonotile.kwave.layout import XyzView, to_xyz
from sonotile.kwave.output import (
    check_finite,
    set_str,
    write_scalar,
    write_shards,
)
from sonotile.model.grid import AXES
from sonotile.parallel.distributed import barrier, in_turns
from sonotile.physics.acoustic import State
from sonotile.physics.base import NONFINITE_HINT
from sonotile.solver import runner as rn
from sonotile.solver import sensors as sens
from sonotile.solver.finite import all_finite

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from numpy.typing import DTypeLike

    from sonotile.kwave.reader import KwaveInput


#: The group of sonotile's running statistics in its checkpoints (k-Wave writes none).
AGGREGATES = "sonotile_aggregates"


class CheckpointError(ValueError):
    """A checkpoint that does not belong to this run or is damaged: not resumed."""


@dataclass(frozen=True)
class Fingerprint:
    """What a checkpoint must match to be resumed: the input's datasets (SHA-256) and the run
    settings that define the results (``{name: value}``, JSON-serialisable)."""

    input_sha256: str
    settings: dict


def _fields(engine: rn.Engine, state: State) -> dict[str, jax.Array]:
    """k-Wave's checkpoint fields of a state: ``p``, ``rho*``, ``u*_sg*``, ``du*d*``."""
    assert engine.divergence is not None  # k-Wave's acoustic model: a wave model's engine
    du = engine.divergence(state.u)
    fields = {"p": state.p}
    for a in range(len(state.u)):
        fields[f"rho{AXES[a]}"] = state.rho[a]
        fields[f"u{AXES[a]}_sg{AXES[a]}"] = state.u[a]
        fields[f"du{AXES[a]}d{AXES[a]}"] = du[a]
    return fields


def save_checkpoint(
    path: str, engine: rn.Engine, rs: rn.RunState, meta: KwaveInput, fp: Fingerprint,
    hint: str = NONFINITE_HINT, output_path: str | None = None,
    before_rename: Callable[[], None] | None = None,
) -> None:  # fmt: skip
    """k-Wave checkpoint (docs/kwave-format.md) plus sonotile's running statistics and its
    manifest, atomically: a unique temporary file, fsynced, renamed over ``path``.

    Fields are written shard by shard: process 0 creates the file and writes its shards, then
    every other process in turn writes its own (no whole field is gathered anywhere). A
    checkpoint written by N processes holds the same datasets as a single-process one, so it
    resumes on any number of processes and devices. A state holding NaN/Inf is not saved.
    ``output_path``: the partial output written before, whose datasets' SHA-256 join the
    manifest (a resume refuses an output changed since). ``before_rename`` (process 0) runs
    once the checkpoint is complete, before it is renamed into place: the output's own rename,
    so that a checkpoint that cannot be written leaves the earlier output untouched.
    """
    fields = _fields(engine, rs.carry[0])
    for name, v in {**fields, **rs.carry[1]}.items():
        if not all_finite(v):
            check_finite(name, np.array([np.nan]), f"after time step {rs.next_step}", hint)
    leader = jax.process_index() == 0
    tmp = files.temp_name(path, files.token())
    created = False
    try:
        if leader:
            files.create_exclusive(tmp)
            created = True
        with write_errors("checkpoint file", tmp):
            _write_checkpoint(tmp, engine, rs, meta, fields)
            if leader:
                series = (engine.layout.raw, engine.layout.start)
                _seal(tmp, fp, rs.next_step, output_path, series)
        if leader and before_rename is not None:
            before_rename()
        if leader:
            files.commit(tmp, path, "checkpoint file")
    except BaseException:
        if created:
            files.remove_own(tmp)  # no half-written checkpoint left behind
        raise
    barrier("sonotile-checkpoint-done")


def _digests(f: h5py.File) -> dict[str, str]:
    return {n: files.dataset_digest(f[n]) for n in _dataset_names(f)}


def _seal(tmp: str, fp: Fingerprint, t_index: int, output_path: str | None, series: Series) -> None:
    """The manifest: input and settings fingerprints, ``t_index``, every dataset's SHA-256
    and those of the partial output's time series up to ``t_index``."""
    out_sums = None if output_path is None else _output_digests(output_path, series, t_index)
    with files.open_own_hdf5(tmp, "r+") as f:
        manifest = {
            "input_sha256": fp.input_sha256, "settings": fp.settings, "t_index": t_index,
            "sha256": _digests(f), "output_sha256": out_sums,
        }  # fmt: skip
        set_str(f, "sonotile_manifest", json.dumps(manifest, sort_keys=True))


#: The raw time series of a run and its first sampled step: ``(names, start)``.
Series = tuple[tuple[str, ...], int]


def _output_digests(path: str, series: Series, t_index: int) -> dict[str, str]:
    """SHA-256 of the rows of each time series of an output written by step ``t_index``
    (an output left ahead of its checkpoint by a kill holds the same rows, and more)."""
    names, start = series
    rows = max(0, t_index - start)
    out = {}
    with h5py.File(path, "r") as g:
        for name in names:
            obj = g[name]
            if isinstance(obj, h5py.Group):  # cuboids: (Ts, Cz, Cy, Cx) each
                for k in sorted(obj):
                    out[f"{name}/{k}"] = files.rows_digest(obj[k], 0, rows)
            else:  # (1, Ts, Ns)
                out[name] = files.rows_digest(obj, 1, rows)
    return out


def _dataset_names(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return sorted(names)


def _write_checkpoint(
    tmp: str, engine: rn.Engine, rs: rn.RunState, meta: KwaveInput, fields: dict[str, jax.Array]
) -> None:
    agg = rs.carry[1]
    blocks = engine.blocks
    nx, ny, nz = meta.shape_xyz
    zyx = (nz, ny, nx)
    leader = jax.process_index() == 0
    if leader:
        with files.open_own_hdf5(tmp, "w") as f:
            set_str(f, "file_type", "checkpoint")
            set_str(f, "created_by", f"sonotile v{__version__}")
            set_str(f, "creation_date", time.strftime("%d/%m/%y, %H:%M:%S"))
            for k in ("file_description", "major_version", "minor_version"):
                set_str(f, k, meta.header[k])
            write_scalar(f, "t_index", rs.next_step, np.uint64)
            for n, size in (("Nx", nx), ("Ny", ny), ("Nz", nz)):
                write_scalar(f, n, size, np.uint64)
            for name, v in fields.items():  # the run's precision (float64 with --float64)
                d = f.create_dataset(name, shape=zyx, dtype=np.dtype(v.dtype))
                d.attrs["data_type"], d.attrs["domain_type"] = (
                    np.bytes_(b"float"),
                    np.bytes_(b"real"),
                )
            g = f.create_group(AGGREGATES)
            for name, v in agg.items():
                shape = tuple(v.shape) if blocks is None else blocks.true_shape_of(v.shape)
                g.create_dataset(name, shape=shape, dtype=np.dtype(v.dtype))
            g.attrs["dtype"] = engine.problem.dtype
        size = sum(v.nbytes for v in fields.values()) + sum(v.nbytes for v in agg.values())
        files.reserve(tmp, size + files.MARGIN, "checkpoint file")  # a full disk fails here

    def mine() -> None:
        with files.open_own_hdf5(tmp, "r+") as f:
            for name, v in fields.items():
                write_shards(f[name], v, zyx=True, blocks=blocks)
            for name, v in agg.items():
                write_shards(f[AGGREGATES][name], v, zyx=False, blocks=blocks)

    in_turns(mine, "sonotile-checkpoint")


def verify_checkpoint(
    f: h5py.File, fp: Fingerprint, output_path: str | None = None, series: Series = ((), 0)
) -> None:
    """Refuse a checkpoint that is not this run's or is damaged (:class:`CheckpointError`):
    its manifest must match the input and settings, every dataset its checksum; state and
    statistics must be float and finite. k-Wave's own checkpoints have no manifest."""
    path = f.filename
    raw = f.attrs.get("sonotile_manifest")
    if raw is None:
        created = f.attrs.get("created_by", b"")
        created = created.decode(errors="replace") if isinstance(created, bytes) else str(created)
        if created.startswith("sonotile") or AGGREGATES in f:
            raise CheckpointError(
                f"{path}: checkpoint has no sonotile_manifest (removed or damaged, or written by "
                "an older sonotile): it cannot be verified against this input, not resumed"
            )
        if jax.process_index() == 0:
            print(
                f"sonotile-kwave: warning: {path}: a checkpoint without sonotile's manifest "
                f"(created by '{created}'): it CANNOT BE VERIFIED against this input and these "
                "settings (only its grid size, types and finite values are checked); resuming "
                "from it as k-Wave would. If it is not this run's checkpoint, the output will "
                "be wrong: delete it to start afresh",
                file=sys.stderr,
            )
    else:
        _check_manifest(f, raw, fp, output_path, series)
    for name in _dataset_names(f):
        if name in ("t_index", "Nx", "Ny", "Nz"):
            continue
        d = f[name]
        if d.dtype not in (np.float32, np.float64):
            raise CheckpointError(f"{path}: dataset '{name}' is {d.dtype}, expected float32/64")
        if not files.dataset_finite(d):
            raise CheckpointError(f"{path}: dataset '{name}' holds NaN or Inf: not resumed")


def _check_manifest(
    f: h5py.File, raw: object, fp: Fingerprint, output_path: str | None, series: Series
) -> None:
    path = f.filename
    try:
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        m = json.loads(text)
        sums = dict(m["sha256"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise CheckpointError(f"{path}: checkpoint manifest is unreadable (damaged)") from None
    if m.get("input_sha256") != fp.input_sha256:
        raise CheckpointError(
            f"{path}: checkpoint of another input (the input's datasets differ from those it "
            "was written for): not resumed"
        )
    if m.get("settings") != fp.settings:
        theirs = m.get("settings") or {}
        keys = set(theirs) | set(fp.settings)
        diff = sorted(k for k in keys if theirs.get(k) != fp.settings.get(k))
        raise CheckpointError(
            f"{path}: checkpoint written with other settings ({', '.join(diff)}: "
            f"{ {k: theirs.get(k) for k in diff} }, now { {k: fp.settings.get(k) for k in diff} })"
        )
    names = _dataset_names(f)
    if set(names) != set(sums):
        odd = sorted(set(names) ^ set(sums))[0]
        raise CheckpointError(f"{path}: dataset '{odd}' added or missing since it was written")
    for n in names:
        if files.dataset_digest(f[n]) != sums[n]:
            raise CheckpointError(
                f"{path}: dataset '{n}' does not match its checksum (damaged): not resumed"
            )
    if int(np.asarray(f["t_index"][()]).reshape(-1)[0]) != m.get("t_index"):
        raise CheckpointError(f"{path}: t_index does not match the saved state: not resumed")
    if m.get("output_sha256") and output_path is not None and os.path.exists(output_path):
        _check_output(output_path, m["output_sha256"], path, series, int(m["t_index"]))


def _check_output(
    output_path: str, sums: dict[str, str], path: str, series: Series, t_index: int
) -> None:
    """The partial output must hold the rows it held when the checkpoint was written."""
    try:
        now = _output_digests(output_path, series, t_index)
    except (OSError, KeyError) as e:
        raise CheckpointError(
            f"{output_path}: output to resume from {path} cannot be read ({e})"
        ) from None
    for n, digest in sorted(sums.items()):
        if now.get(n) != digest:
            raise CheckpointError(
                f"{output_path}: dataset '{n}' changed since the checkpoint {path} was written "
                "(damaged, or another run's output): not resumed"
            )


def load_checkpoint(
    path: str, engine: rn.Engine, meta: KwaveInput, output_path: str | None = None,
    fp: Fingerprint | None = None,
) -> rn.RunState:  # fmt: skip
    """State and running statistics from a checkpoint.

    sonotile's own checkpoints carry the running statistics (``sonotile_aggregates``, in the
    run's precision); a checkpoint written by k-Wave's binary does not, and then, as k-Wave
    does, they are reloaded from the partial output file ``output_path``. With ``fp`` the
    checkpoint is verified first (:func:`verify_checkpoint`).
    """
    dtype = jnp.dtype(engine.problem.dtype)
    with h5py.File(path, "r") as f:
        ftype = f.attrs.get("file_type", b"").decode() if "file_type" in f.attrs else ""
        if ftype != "checkpoint":
            raise ValueError(f"{path}: file_type '{ftype}', expected 'checkpoint'")
        if fp is not None:
            verify_checkpoint(f, fp, output_path, (engine.layout.raw, engine.layout.start))
        dims = tuple(int(f[n][()].reshape(-1)[0]) for n in ("Nx", "Ny", "Nz"))
        if dims != tuple(meta.shape_xyz):
            raise ValueError(
                f"{path}: checkpoint grid {dims} does not match input {meta.shape_xyz}"
            )
        t_index = int(f["t_index"][()].reshape(-1)[0])
        nd = engine.problem.grid.ndim

        # read lazily: each process reads only its hyperslabs in place()
        def field(name: str) -> XyzView:
            if name not in f:
                raise ValueError(f"{path}: dataset '{name}' is missing")
            view = XyzView(f[name], dtype)
            if view.shape != tuple(engine.problem.grid.shape):
                raise ValueError(
                    f"{path}: dataset '{name}' holds {f[name].shape}, expected the grid"
                )
            return view

        state = State(  # views, not arrays: engine.place reads each process's shards
            field("p"),  # type: ignore[arg-type]
            tuple(field(f"rho{AXES[a]}") for a in range(nd)),
            tuple(field(f"u{AXES[a]}_sg{AXES[a]}") for a in range(nd)),
        )
        agg0 = sens.init_aggregates(engine.layout, engine.problem.grid.shape, dtype)
        g = f.get(AGGREGATES)
        if g is not None:
            missing = [n for n in agg0 if n not in g]
            if missing:
                raise ValueError(
                    f"{path}: running statistic '{missing[0]}' is missing (the checkpoint "
                    "was written with other output flags)"
                )
            agg: Mapping[str, XyzView | np.ndarray] = {
                n: XyzView(g[n], dtype, stored_xyz=True) for n in agg0
            }
        else:
            agg = _aggregates_from_output(output_path, engine, agg0, dtype)
        if not 0 < t_index <= engine.problem.grid.nt:
            raise ValueError(f"{path}: t_index {t_index} outside 1..Nt = {engine.problem.grid.nt}")
        rs = rn.RunState(engine.place((state, agg)), t_index)
    # process 0 moves the output file aside next: the others must have read it first
    barrier("sonotile-checkpoint-loaded")
    return rs


def _aggregates_from_output(
    output_path: str | None, engine: rn.Engine, agg0: dict[str, jax.Array], dtype: DTypeLike
) -> dict[str, np.ndarray]:
    """Running max/min/sum of squares as a k-Wave checkpoint leg left them in the output."""
    if not agg0:
        return {}
    if output_path is None or not os.path.exists(output_path):
        raise ValueError(
            f"output file '{output_path}' to resume from is missing (it holds the running "
            "statistics of the checkpointed run)"
        )
    agg = {}
    with h5py.File(output_path, "r") as f:
        for name, v0 in agg0.items():
            if name not in f:
                raise ValueError(
                    f"{output_path}: dataset '{name}' to resume from is missing (the run was "
                    "started with other output flags)"
                )
            obj = f[name]
            if name.endswith("_all"):
                v = to_xyz(obj[()])
            elif isinstance(obj, h5py.Group):
                n = len(engine.layout.cuboid_shapes)
                v = np.concatenate([to_xyz(obj[str(i + 1)][()]).reshape(-1) for i in range(n)])
            else:
                v = np.asarray(obj[()]).reshape(-1)
            if v.shape != tuple(v0.shape):
                raise ValueError(
                    f"{output_path}: dataset '{name}' holds {v.shape}, expected {tuple(v0.shape)}"
                )
            agg[name] = np.asarray(v, dtype)
    return agg
