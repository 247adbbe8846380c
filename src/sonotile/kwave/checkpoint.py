"""Checkpoint files: k-Wave's layout plus sonotile's running statistics; written and read
shard by shard, resumable on another device count."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING

import h5py
import jax
import jax.numpy as jnp
import numpy as np

from sonotile.base.version import __version__
from sonotile.kwave.layout import XyzView, to_xyz
from sonotile.kwave.output import set_str, temp_path, write_scalar, write_shards
from sonotile.model.grid import AXES
from sonotile.parallel.distributed import barrier, in_turns
from sonotile.physics.acoustic import State
from sonotile.solver import runner as rn
from sonotile.solver import sensors as sens

if TYPE_CHECKING:
    from collections.abc import Mapping

    from numpy.typing import DTypeLike

    from sonotile.kwave.reader import KwaveInput


def save_checkpoint(path: str, engine: rn.Engine, rs: rn.RunState, meta: KwaveInput) -> None:
    """k-Wave checkpoint (docs/kwave-format.md) plus sonotile's running statistics, atomically.

    Fields are written shard by shard: process 0 creates the file and writes its shards, then
    every other process in turn writes its own (no whole field is gathered anywhere). A
    checkpoint written by N processes holds the same datasets as a single-process one, so it
    resumes on any number of processes and devices.
    """
    try:
        _write_checkpoint(path, temp_path(path), engine, rs, meta)
    except BaseException:
        if jax.process_index() == 0 and os.path.exists(temp_path(path)):
            os.remove(temp_path(path))  # no half-written checkpoint left behind
        raise
    barrier("sonotile-checkpoint-done")


def _write_checkpoint(
    path: str, tmp: str, engine: rn.Engine, rs: rn.RunState, meta: KwaveInput
) -> None:
    state, agg = rs.carry
    blocks = engine.blocks
    nx, ny, nz = meta.shape_xyz
    du = engine.divergence(state.u)
    fields = {"p": state.p}
    for a in range(len(state.u)):
        fields[f"rho{AXES[a]}"] = state.rho[a]
        fields[f"u{AXES[a]}_sg{AXES[a]}"] = state.u[a]
        fields[f"du{AXES[a]}d{AXES[a]}"] = du[a]
    zyx = (nz, ny, nx)
    leader = jax.process_index() == 0
    if leader:
        with h5py.File(tmp, "w") as f:
            set_str(f, "file_type", "checkpoint")
            set_str(f, "created_by", f"sonotile v{__version__}")
            set_str(f, "creation_date", time.strftime("%d/%m/%y, %H:%M:%S"))
            for k in ("file_description", "major_version", "minor_version"):
                set_str(f, k, meta.header[k])
            write_scalar(f, "t_index", rs.next_step, np.uint64)
            for n, v in (("Nx", nx), ("Ny", ny), ("Nz", nz)):
                write_scalar(f, n, v, np.uint64)
            for name, v in fields.items():  # the run's precision (float64 with --float64)
                d = f.create_dataset(name, shape=zyx, dtype=np.dtype(v.dtype))
                d.attrs["data_type"], d.attrs["domain_type"] = (
                    np.bytes_(b"float"),
                    np.bytes_(b"real"),
                )
            g = f.create_group("sonotile_aggregates")
            for name, v in agg.items():
                shape = tuple(v.shape) if blocks is None else blocks.true_shape_of(v.shape)
                g.create_dataset(name, shape=shape, dtype=np.dtype(v.dtype))
            g.attrs["dtype"] = engine.problem.dtype

    def mine() -> None:
        with h5py.File(tmp, "r+") as f:
            for name, v in fields.items():
                write_shards(f[name], v, zyx=True, blocks=blocks)
            for name, v in agg.items():
                write_shards(f["sonotile_aggregates"][name], v, zyx=False, blocks=blocks)

    in_turns(mine, "sonotile-checkpoint")
    if leader:
        os.replace(tmp, path)


def load_checkpoint(
    path: str, engine: rn.Engine, meta: KwaveInput, output_path: str | None = None
) -> rn.RunState:
    """State and running statistics from a checkpoint.

    sonotile's own checkpoints carry the running statistics (``sonotile_aggregates``, in the
    run's precision); a checkpoint written by k-Wave's binary does not, and then, as k-Wave
    does, they are reloaded from the partial output file ``output_path``.
    """
    dtype = jnp.dtype(engine.problem.dtype)
    with h5py.File(path, "r") as f:
        ftype = f.attrs.get("file_type", b"").decode() if "file_type" in f.attrs else ""
        if ftype != "checkpoint":
            raise ValueError(f"{path}: file_type '{ftype}', expected 'checkpoint'")
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
        g = f.get("sonotile_aggregates")
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
