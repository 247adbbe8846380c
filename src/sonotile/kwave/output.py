"""k-Wave output files: streamed sensor series, aggregates, whole-field outputs, header.

The file is written under a unique temporary name next to the target (``files.temp_name``:
the process id and a random token) and renamed into place only when a run (or a checkpoint leg)
ends, after an fsync, so a failed or killed run never leaves a file that looks complete and
never destroys a file already at the target path. Every chunk of samples is checked for NaN/Inf
before it is written and flushed after; a write error (a full disk) ends the run with one line.
A resumed leg writes a copy of the earlier legs' output, so that file stays intact until the
leg has ended. Each file carries its provenance as root attributes ``sonotile_*``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import resource
import shutil
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import h5py
import jax
import numpy as np

from sonotile.base import config, files
from sonotile.base.files import OutputWriteError, write_errors
from sonotile.base.version import __version__
from sonotile.kwave.layout import to_zyx
from sonotile.kwave.reader import KwaveInput
from sonotile.model.grid import AXES
from sonotile.physics.base import NONFINITE_HINT
from sonotile.solver.finite import NonFiniteError, all_finite
from sonotile.solver.sensors import SensorLayout

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike

    from sonotile.parallel.blocks import Blocks

FLOAT_ATTRS = {"data_type": np.bytes_(b"float"), "domain_type": np.bytes_(b"real")}
LONG_ATTRS = {"data_type": np.bytes_(b"long"), "domain_type": np.bytes_(b"real")}


def check_finite(name: str, values: np.ndarray, where: str, hint: str = NONFINITE_HINT) -> None:
    """Raise :class:`NonFiniteError` naming ``name`` and ``where`` when ``values`` hold NaN/Inf."""
    if not np.all(np.isfinite(values)):
        raise NonFiniteError(f"{name}: NaN or Inf {where}; {hint}; no output written")


def first_bad_row(values: np.ndarray) -> int:
    """Index of the first row (time step) of ``values`` holding NaN or Inf."""
    rows = ~np.isfinite(values).reshape(values.shape[0], -1).all(axis=1)
    return int(np.argmax(rows))


def temp_path(path: str) -> str:
    """A fresh unique temporary name for ``path`` in its folder (this process, a random token)."""
    return files.temp_name(path, files.local_token())


def partial_file(path: str) -> contextlib.AbstractContextManager[str]:
    """The temporary name to write ``path`` under (:func:`sonotile.base.files.partial_file`)."""
    return files.partial_file(path, "file")


def set_str(obj: h5py.File | h5py.Group | h5py.Dataset, name: str, value: str) -> None:
    obj.attrs[name] = np.bytes_(value.encode())


def write_scalar(f: h5py.File, name: str, value: ArrayLike, dtype: DTypeLike) -> None:
    arr = np.asarray(value, dtype=dtype).reshape(1, 1, 1)
    if name in f:
        del f[name]
    d = f.create_dataset(name, data=arr)
    for k, v in (LONG_ATTRS if np.dtype(dtype).kind in "iu" else FLOAT_ATTRS).items():
        d.attrs[k] = v


class OutputFile:
    """An open k-Wave output file being filled by a run (``recorder`` interface for raw data).

    Args:
        path: final output path; data goes to a unique temporary file until :meth:`finish_leg`.
        meta: the input file's header and scalars.
        layout: the sensor layout of the run.
        nt: number of steps; ``ts = nt - start`` rows per raw series.
        compression: deflate level 0-9 (``-c``).
        resume: reopen an existing partial file (checkpoint restart) instead of creating one.
        provenance: ``{name: text}`` written as root attributes ``sonotile_<name>``; the leg is
            appended to ``sonotile_resume_history`` by :meth:`finish_leg`.
        hint: what a NaN/Inf most likely means (added to the error).
        reserve: bytes the complete file may take (uncompressed): reserved on the disk before
            any data is written (:func:`files.reserve`); 0 (compressed output): the room for
            each write is checked before it.
    """

    def __init__(
        self, path: str, meta: KwaveInput, layout: SensorLayout, nt: int, compression: int = 0,
        resume: bool = False, provenance: Mapping[str, str] | None = None,
        hint: str = NONFINITE_HINT, reserve: int = 0,
    ) -> None:  # fmt: skip
        self.path, self.meta, self.layout, self.nt = path, meta, layout, nt
        self.provenance, self.hint = dict(provenance or {}), hint
        self.reserve, self.reserved = reserve, False
        self.tmp = files.temp_name(path, files.token())  # the same name on every process
        # several processes: process 0 owns the file; the others only write their shards of
        # whole fields into it, in turn (write_fields)
        self.leader = _process_index() == 0
        self.f: h5py.File | None = None
        self.created = False
        self.level = compression
        self.ts = nt - layout.start
        self.cuboid = bool(layout.cuboid_shapes)
        self._splits = np.cumsum([math.prod(s) for s in layout.cuboid_shapes])[:-1]
        if not self.leader:
            return
        try:
            self._open(path, resume)
        except BaseException:
            self.abort()
            raise

    def _open(self, path: str, resume: bool) -> None:
        if resume and not os.path.exists(path):
            raise FileNotFoundError(f"{path}: output file to resume from is missing")
        if resume:
            self._check_resumable(path)
        files.create_exclusive(self.tmp)
        self.created = True
        with write_errors("output file", self.tmp):
            if resume:
                # the output of the earlier legs stays in place, untouched, until this leg has
                # ended: the leg writes a copy (a kill at any moment leaves a resumable file)
                shutil.copyfile(path, self.tmp)
            else:
                with files.open_own_hdf5(self.tmp, "w") as f:
                    self.f = f
                    self._create()
                self.f = None
        if self.reserve:
            self.reserved = files.reserve(self.tmp, self.reserve, "output file")
        try:
            self.f = files.open_own_hdf5(self.tmp, "r+")
        except OSError as e:
            raise OSError(f"{path}: output file cannot be reopened for writing ({e})") from None

    def _check_resumable(self, path: str) -> None:
        """The partial output of a checkpointed run: same grid, same raw datasets."""
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            raise OSError(f"{path}: output file to resume from cannot be opened ({e})") from None
        with f:
            ftype = f.attrs.get("file_type", b"")
            ftype = ftype.decode() if isinstance(ftype, bytes) else str(ftype)
            if ftype != "output":
                raise ValueError(f"{path}: file_type '{ftype}', expected 'output' to resume")
            for n, v in zip(("Nx", "Ny", "Nz"), self.meta.shape_xyz):
                if n not in f or int(f[n][()].reshape(-1)[0]) != v:
                    raise ValueError(f"{path}: '{n}' does not match the input file ({v})")
            ns = self.layout.n_points
            for name in self.layout.raw:
                if self.cuboid:
                    ok = name in f and all(
                        str(i + 1) in f[name] and f[name][str(i + 1)].shape[0] == self.ts
                        for i in range(len(self.layout.cuboid_shapes))
                    )
                else:
                    ok = name in f and f[name].shape == (1, self.ts, ns)
                if not ok:
                    raise ValueError(
                        f"{path}: dataset '{name}' missing or of another shape than this run "
                        f"needs ({self.ts} rows); resume with the same command line"
                    )
            theirs = _text(f.attrs.get("sonotile_input_sha256", b""))
            ours = self.provenance.get("input_sha256", "")
            if theirs and ours and theirs != ours:
                raise ValueError(
                    f"{path}: the output to resume was computed from another input (its "
                    f"sonotile_input_sha256 differs from {self.meta.path}'s)"
                )

    # -- layout -----------------------------------------------------------------------------
    def _dataset(self, name: str, shape: tuple[int, ...], chunks: tuple[int, ...]) -> h5py.Dataset:
        d = self.f.create_dataset(
            name,
            shape=shape,
            dtype=np.float32,
            chunks=chunks,
            compression="gzip",
            compression_opts=self.level,
        )
        for k, v in FLOAT_ATTRS.items():
            d.attrs[k] = v
        return d

    def _create(self) -> None:
        f, m = self.f, self.meta
        for k in ("file_description", "major_version", "minor_version"):
            set_str(
                f,
                k,
                m.header[k]
                if k == "file_description"
                else {"major_version": "1", "minor_version": "2"}[k],
            )
        set_str(f, "file_type", "output")
        set_str(f, "created_by", f"sonotile v{__version__}")
        set_str(f, "creation_date", time.strftime("%d/%m/%y, %H:%M:%S"))
        for k, v in self.provenance.items():
            set_str(f, f"sonotile_{k}", v)
        for name, (value, dtype) in m.scalars.items():
            write_scalar(f, name, value, dtype)
        write_scalar(f, "Nz", m.shape_xyz[2], np.uint64)
        write_scalar(f, "t_index", 0, np.uint64)
        ns = self.layout.n_points
        for name in self.layout.raw:
            if self.cuboid:
                g = f.create_group(name)
                for i, shp in enumerate(self.layout.cuboid_shapes):
                    zyx = tuple(reversed(shp + (1,) * (3 - len(shp))))
                    self._dataset(f"{name}/{i + 1}", (self.ts,) + zyx, (1,) + zyx)
                del g
            else:
                self._dataset(name, (1, self.ts, ns), (1, 1, ns))

    # -- recorder interface -----------------------------------------------------------------
    def __call__(self, name: str, first_row: int, values: np.ndarray) -> None:
        if not self.leader:  # every process has the samples (psum); process 0 writes them
            return
        if not np.all(np.isfinite(values)):
            step = self.layout.start + first_row + first_bad_row(values) + 1
            check_finite(name, values, f"from time step {step} of {self.nt} on", self.hint)
        if not self.reserved:
            files.check_room(self.tmp, values.nbytes, "output file")
        with write_errors("output file", self.tmp):
            self._write_rows(name, first_row, values)
            self.f.flush()  # a full disk shows here, at the chunk that hit it

    def _write_rows(self, name: str, first_row: int, values: np.ndarray) -> None:
        k = values.shape[0]
        if not self.cuboid:
            self.f[name][0, first_row : first_row + k, :] = values
            return
        for i, (part, shp) in enumerate(
            zip(np.split(values, self._splits, axis=1), self.layout.cuboid_shapes)
        ):
            block = part.reshape((k,) + shp)
            if block.ndim == 3:
                block = block[..., None]
            self.f[f"{name}/{i + 1}"][first_row : first_row + k] = np.transpose(block, (0, 3, 2, 1))

    # -- end of a leg -----------------------------------------------------------------------
    def write_fields(
        self, values: Mapping[str, np.ndarray | jax.Array], blocks: Blocks | None = None,
        step: int | None = None,
    ) -> None:  # fmt: skip
        """Aggregates (``p_max`` ...), whole-field (``*_all``) and final fields, replacing any
        earlier values (checkpoint legs rewrite them).

        Whole fields may be host arrays or (global) device arrays; the latter are written shard
        by shard, each process writing the shards on its own devices in turn (process 0 first,
        then the others reopen the file), so no process ever holds a whole field. All processes
        must call this with the same names. ``blocks`` (:class:`sonotile.parallel.blocks.Blocks`)
        says where device arrays carry dead points (a grid cut into uneven blocks). Every value
        is checked for NaN/Inf first (``step``: the step the leg ended at, for the message).
        """
        for name, v in values.items():  # every process: device arrays are checked together
            if not all_finite(v):
                where = f"after time step {step if step is not None else self.nt}"
                check_finite(name, np.array([np.nan]), where, self.hint)
        if self.leader and not self.reserved:
            files.check_room(self.tmp, sum(v.nbytes for v in values.values()), "output file")
        with write_errors("output file", self.tmp):
            self._write_fields(values, blocks)

    def _write_fields(
        self, values: Mapping[str, np.ndarray | jax.Array], blocks: Blocks | None
    ) -> None:
        sharded = []
        for name, v in values.items():
            whole = name.endswith("_all") or name.endswith("_final")
            if whole and isinstance(v, jax.Array):
                sharded.append((name, v))
                if self.leader:
                    shape = v.shape if blocks is None else blocks.true_shape_of(v.shape)
                    self._whole_dataset(name, shape)
                    write_shards(self.f[name], v, zyx=True, blocks=blocks)
                continue
            if not self.leader:
                continue
            v = np.asarray(v, np.float32)
            if whole and blocks is not None:
                v = blocks.to_true(v)
            if whole:
                self._replace(name, to_zyx(v), None)
            elif self.cuboid:
                if name not in self.f:
                    self.f.create_group(name)
                parts = np.split(v, self._splits)
                for i, (part, shp) in enumerate(zip(parts, self.layout.cuboid_shapes)):
                    blk = to_zyx(part.reshape(shp))
                    self._replace(f"{name}/{i + 1}", blk, blk.shape)  # k-Wave: one chunk
            else:
                self._replace(name, v.reshape(1, 1, -1), None)
        if sharded and _process_count() > 1:
            self._others_write(sharded, blocks)
        if self.leader:
            self.f.flush()

    def _whole_dataset(self, name: str, shape_xyz: tuple[int, ...]) -> h5py.Dataset:
        zyx = tuple(reversed(tuple(shape_xyz) + (1,) * (3 - len(shape_xyz))))
        if name not in self.f:
            chunks = (1,) + zyx[1:] if zyx[0] > 1 else zyx
            self._dataset(name, zyx, chunks)
        return self.f[name]

    def _others_write(
        self, sharded: list[tuple[str, jax.Array]], blocks: Blocks | None = None
    ) -> None:
        """Processes 1.. write their shards into the file process 0 created (closed meanwhile)."""
        from sonotile.parallel.distributed import barrier, in_turns

        if self.leader:
            self.f.close()
        barrier("sonotile-output-closed")

        def mine() -> None:
            if self.leader:
                return
            with files.open_own_hdf5(self.tmp, "r+") as f:
                for name, v in sharded:
                    write_shards(f[name], v, zyx=True, blocks=blocks)

        in_turns(mine, "sonotile-output-fields")
        if self.leader:
            self.f = files.open_own_hdf5(self.tmp, "r+")

    def _replace(self, name: str, data: np.ndarray, chunks: tuple[int, ...] | None) -> None:
        if name in self.f:
            self.f[name][...] = data
            return
        if chunks is None:
            chunks = (1,) + data.shape[1:] if data.shape[0] > 1 else data.shape
        d = self._dataset(name, data.shape, chunks)
        d[...] = data

    def copy_sensor_mask(self) -> None:
        if not self.leader:
            return
        m = self.meta
        write_scalar(self.f, "sensor_mask_type", m.mask_type, np.uint64)
        name = "sensor_mask_index" if m.mask_type == 0 else "sensor_mask_corners"
        raw = np.asarray(m.mask_raw, np.uint64)
        data = raw.reshape(1, 1, -1) if m.mask_type == 0 else raw.reshape(1, -1, 6)
        if name in self.f:
            del self.f[name]
        d = self.f.create_dataset(  # k-Wave: one chunk, deflate level -c
            name, data=data, chunks=data.shape, compression="gzip", compression_opts=self.level
        )
        for k, v in LONG_ATTRS.items():
            d.attrs[k] = v

    def finish_leg(
        self, t_index: int, timings: Mapping[str, float], first: int = 0, commit: bool = True
    ) -> None:
        """Write ``t_index``, the run statistics and this leg in the resume history (steps
        ``first`` to ``t_index``), close, and (``commit``) fsync and move into place."""
        if not self.leader:
            return
        with write_errors("output file", self.tmp):
            self._statistics(t_index, timings, first)
            self.f.close()
            self.f = None
        if commit:
            self.commit()

    def commit(self) -> None:
        """fsync the closed temporary file and rename it over the output path."""
        if self.leader and self.created:
            files.commit(self.tmp, self.path, "output file")
            self.created = False

    def _statistics(self, t_index: int, timings: Mapping[str, float], first: int) -> None:
        write_scalar(self.f, "t_index", t_index, np.uint64)
        f = self.f
        set_str(f, "host_names", f"{socket.gethostname()} (sonotile {__version__})")
        cores = _cores()
        set_str(f, "number_of_cpu_cores", str(cores))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        set_str(f, "total_memory_in_use", f"{rss} MB")
        set_str(f, "peak_core_memory_in_use", f"{rss // cores} MB")
        for key in (
            "total",
            "data_loading_phase",
            "pre-processing_phase",
            "simulation_phase",
            "post-processing_phase",
        ):
            prev = 0.0
            attr = f"{key}_execution_time"
            if attr in f.attrs:
                try:
                    prev = float(f.attrs[attr].decode().strip().rstrip("s"))
                except ValueError:
                    prev = 0.0
            set_str(f, attr, f"{prev + timings.get(key, 0.0):8.2f}s")
        history = json.loads(_text(f.attrs.get("sonotile_resume_history", b"")) or "[]")
        date = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        leg = {"steps": [first, t_index], "date": date}
        leg.update({k: self.provenance[k] for k in ("command_line",) if k in self.provenance})
        set_str(f, "sonotile_resume_history", json.dumps(history + [leg]))

    def abort(self) -> None:
        """Drop this run's temporary file: a failed run leaves no output, a failed resumed leg
        leaves the output of the earlier legs as it was. No other file is touched."""
        if not self.leader:
            return
        try:
            if self.f is not None:
                with contextlib.suppress(Exception):  # a full disk may fail the close too
                    self.f.close()
                self.f = None
        finally:
            if self.created:
                files.remove_own(self.tmp)
                self.created = False


def _text(v: object) -> str:
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0] if v.size else b""
    return v.decode(errors="replace") if isinstance(v, bytes | np.bytes_) else str(v)


def _process_index() -> int:
    return jax.process_index()


def _process_count() -> int:
    return jax.process_count()


def write_shards(
    dset: h5py.Dataset, arr: ArrayLike, zyx: bool = True, blocks: Blocks | None = None
) -> None:
    """Write the shards of ``arr`` that live on this process's devices into ``dset``.

    ``arr`` is ``(x, y[, z])``-indexed: a global device array (each unique shard is written once,
    by the process holding its replica 0) or a host array (written whole). With ``zyx`` the
    dataset is k-Wave's ``(Nz, Ny, Nx)``; otherwise it has ``arr``'s own layout. With uneven
    ``blocks`` the dead points of each shard are left out.
    """
    if not isinstance(arr, jax.Array):
        a = np.asarray(arr, dset.dtype)
        a = a if blocks is None else blocks.to_true(a)
        dset[...] = to_zyx(a) if zyx else a
        return
    for shard in arr.addressable_shards:
        if shard.replica_id != 0:
            continue
        block = np.asarray(shard.data, dset.dtype)
        index = tuple(shard.index) + (slice(None),) * (block.ndim - len(shard.index))
        if blocks is not None:
            index = tuple(sl if isinstance(sl, slice) else slice(None) for sl in index)
            index, block = blocks.true_piece(index, block, arr.shape)
        if not zyx:
            dset[index] = block
        elif block.ndim == 3:
            dset[index[::-1]] = to_zyx(block)
        else:
            dset[(slice(0, 1),) + index[::-1]] = to_zyx(block)


def _cores() -> int:
    """CPU cores the run used: its threads (``-t``, or one for a small grid) within the CPUs
    this process may use (``-t`` restricts the affinity mask)."""
    try:
        cpus = max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = max(1, os.cpu_count() or 1)
    threads = config.current().threads
    return min(threads, cpus) if threads else cpus


__all__ = [
    "OutputFile", "NonFiniteError", "OutputWriteError", "temp_path", "write_scalar",
    "write_shards", "AXES",
]  # fmt: skip
