"""Off-device storage of the time loop's states for the backward pass (a "tape").

Reverse-mode differentiation needs the states of the forward run in reverse order. Kept on the
device (:func:`sonotile.solver.adjoint.checkpointed_scan`) they cost device memory that grows
with the step count; a :class:`Tape` keeps them in host memory (``"host"``: off a GPU's memory)
or in files (``"disk"``: off the process's memory altogether), written during the forward pass
and read back, newest first, during the backward pass (:func:`sonotile.solver.adjoint.taped_scan`).

The JAX program reaches the tape through host callbacks: every ``store`` returns a token the
matching ``load`` takes as input, so a state is always read after it was written. Keys are
``(shard, index)``: on a device mesh each shard stores its own block.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, cast

import numpy as np

WHERE = ("host", "disk")
PENDING = 2  # states a disk tape may hold in memory while its writer catches up


def _same_layout(old: list[np.ndarray], new: tuple[np.ndarray, ...]) -> bool:
    """Whether ``old`` can take ``new`` in place (same count, shapes and dtypes)."""
    return len(old) == len(new) and all(
        o.shape == n.shape and o.dtype == n.dtype for o, n in zip(old, new)
    )


def _save(f: Any, a: np.ndarray) -> None:
    """``a`` (C-contiguous) written to the open file ``f`` in ``.npy`` format straight from its
    memory. ``np.save`` copies an array into fresh bytes first (``tobytes``) unless ``f`` is a
    plain reader or writer, which a file opened ``r+b`` is not: 8 MB of page faults per field."""
    fmt = np.lib.format
    fmt.write_array_header_1_0(f, fmt.header_data_from_array_1_0(a))
    f.write(np.ascontiguousarray(a).data.cast("B"))


class Tape:
    """States keyed by ``(shard, index)``, each a list of numpy arrays.

    Args:
        where: ``"host"`` (numpy arrays in this process's memory) or ``"disk"`` (one ``.npy``
            file per array under ``directory``).
        directory: for ``"disk"``: an existing folder to write into (default: a new temporary
            folder, removed when the tape is closed or collected). Files are overwritten by the
            next run of the same program; nothing else in the folder is touched.
    """

    def __init__(self, where: str = "host", directory: str | None = None) -> None:
        if where not in WHERE:
            raise ValueError(f"tape: where = {where!r}, expected one of {WHERE}")
        if directory is not None and where != "disk":
            raise ValueError("tape: a directory is only used with where='disk'")
        if directory is not None and not os.path.isdir(directory):
            raise ValueError(f"tape: directory {directory!r} does not exist")
        self.where = where
        self._own = where == "disk" and directory is None
        self.directory = tempfile.mkdtemp(prefix="sonotile-tape-") if self._own else directory
        self._mem: dict[tuple[int, int], list[np.ndarray]] = {}
        self._lock = threading.Lock()
        self.bytes_stored = 0  # largest total held at once in host memory [B]
        self._held = 0
        # disk: one writer thread for a state's first files (created, so slow to write), which
        # are written while the next steps compute; at most PENDING states wait in memory for
        # it. A state rewritten in place is written at once (:meth:`_store_disk`).
        self._writer = ThreadPoolExecutor(1, "sonotile-tape") if where == "disk" else None
        self._pending: dict[tuple[int, int], Future] = {}
        # copies handed to the writer come back here once written: a disk tape reuses them
        # instead of mapping a state's worth of fresh memory per store (page faults)
        self._spare: list[list[np.ndarray]] = []
        self._spare_lock = threading.Lock()  # not _lock: store holds that while it waits on a write
        #: (key, array number) -> (shape, dtype) of the files this tape has written
        self._written: dict[tuple[tuple[int, int], int], tuple[tuple[int, ...], str]] = {}

    def __repr__(self) -> str:
        where = self.where if self.where == "host" else f"disk:{self.directory}"
        return f"Tape({where})"

    def _path(self, key: tuple[int, int], i: int) -> str:
        assert self.directory is not None  # a disk tape's
        return os.path.join(self.directory, f"state-{key[0]}-{key[1]}-{i}.npy")

    def store(self, shard: np.ndarray, index: np.ndarray, *arrays: np.ndarray) -> np.int32:
        """Keep ``arrays`` under ``(shard, index)``; returns the token ``int32(0)``."""
        key = (int(shard), int(index))
        if self.where == "host":
            with self._lock:
                old = self._mem.get(key, [])
                if key in self._mem and _same_layout(old, arrays):
                    # the next run of a program: overwrite in place (fresh arrays would cost
                    # the page faults of a state's worth of new memory on every store)
                    for dst, a in zip(old, arrays):
                        np.copyto(dst, a)
                    return np.int32(0)
                self._mem[key] = [np.array(a, copy=True) for a in arrays]
                self._held += sum(a.nbytes for a in self._mem[key]) - sum(a.nbytes for a in old)
                self.bytes_stored = max(self.bytes_stored, self._held)
        else:
            self._store_disk(key, arrays)
        return np.int32(0)

    def _in_place(self, key: tuple[int, int], arrays: tuple[np.ndarray, ...]) -> bool:
        """Whether every file of ``key`` exists with the layout of ``arrays`` (written by this
        tape) and no write of ``key`` is pending."""
        return key not in self._pending and all(
            self._written.get((key, i)) == (a.shape, a.dtype.str) for i, a in enumerate(arrays)
        )

    def _store_disk(self, key: tuple[int, int], arrays: tuple[np.ndarray, ...]) -> None:
        if self._in_place(key, arrays):
            # overwriting in place: one copy (into the page cache) straight from the lent
            # buffers, now; a copy for the writer thread costs as long, then the writer's copy
            # competes with the program for the cores
            self._write_files(key, arrays)
            return
        with self._spare_lock:
            spare = self._spare.pop() if self._spare else None
        if spare is not None and _same_layout(spare, arrays):
            for dst, a in zip(spare, arrays):  # the callback's buffers are lent: copy
                np.copyto(dst, a)
            copies = spare
        else:
            copies = [np.array(a, copy=True) for a in arrays]
        with self._lock:
            while len(self._pending) >= PENDING:
                self._pending.pop(next(iter(self._pending))).result()
            assert self._writer is not None  # a disk tape's
            self._pending[key] = self._writer.submit(self._write, key, copies)

    def _write_files(self, key: tuple[int, int], arrays: Sequence[np.ndarray]) -> None:
        for i, a in enumerate(arrays):
            layout = (a.shape, a.dtype.str)
            # a file this tape wrote with the same layout is overwritten in place: truncating
            # it would free its pages and make the kernel allocate them again (3-5x slower)
            mode = "r+b" if self._written.get((key, i)) == layout else "wb"
            with open(self._path(key, i), mode) as f:
                _save(f, a)
            self._written[(key, i)] = layout

    def _write(self, key: tuple[int, int], arrays: list[np.ndarray]) -> None:
        self._write_files(key, arrays)
        with self._spare_lock:
            self._spare.append(arrays)

    def load_into(
        self, shard: np.ndarray, index: np.ndarray, token: np.ndarray, outs: list[np.ndarray]
    ) -> None:
        """:meth:`load` written into ``outs`` (arrays of the stored shapes and dtypes): a disk
        tape reads its files straight into them, with no array allocated in between."""
        if self.where == "host":
            for o, a in zip(outs, self.load(shard, index, token), strict=True):
                np.copyto(o, a)
            return
        key = (int(shard), int(index))
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is not None:
            pending.result()  # written (and a write error raised here)
        for i, o in enumerate(outs):
            path = self._path(key, i)
            if not os.path.exists(path):
                raise KeyError(f"tape: nothing stored under {key} in {self.directory}")
            with open(path, "rb") as f:
                fmt = np.lib.format
                v1 = fmt.read_magic(f) == (1, 0)
                header = fmt.read_array_header_1_0 if v1 else fmt.read_array_header_2_0
                shape, fortran, dtype = header(f)
                if shape != o.shape or dtype != o.dtype or fortran or not o.flags.c_contiguous:
                    raise ValueError(f"tape: {path} holds {dtype}{shape}, not {o.dtype}{o.shape}")
                if f.readinto(cast(Any, o).reshape(-1).view(np.uint8)) != o.nbytes:
                    raise ValueError(f"tape: {path} is shorter than its header says")

    def load(self, shard: np.ndarray, index: np.ndarray, token: np.ndarray) -> list[np.ndarray]:
        """The arrays stored under ``(shard, index)`` (``token``: the store's, for ordering)."""
        del token
        key = (int(shard), int(index))
        if self.where == "host":
            with self._lock:
                if key not in self._mem:
                    raise KeyError(f"tape: nothing stored under {key}")
                return self._mem[key]
        with self._lock:
            pending = self._pending.pop(key, None)
        if pending is not None:
            pending.result()  # written (and a write error raised here)
        out, i = [], 0
        while os.path.exists(self._path(key, i)):
            out.append(np.load(self._path(key, i), allow_pickle=False))
            i += 1
        if not out:
            raise KeyError(f"tape: nothing stored under {key} in {self.directory}")
        return out

    def close(self) -> None:
        """Drop what is stored (and the temporary folder of a ``"disk"`` tape made here)."""
        self._mem.clear()
        self._held = 0
        if self._writer is not None:
            for f in list(self._pending.values()):
                f.result()
            self._pending.clear()
        if self._own and self.directory and os.path.isdir(self.directory):
            shutil.rmtree(self.directory, ignore_errors=True)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - nothing to report to at collection time
            pass


def as_tape(tape: Tape | str | None) -> Tape | None:
    """``None``, a :class:`Tape`, or ``"host"`` / ``"disk"`` (a new tape of that kind)."""
    if tape is None or isinstance(tape, Tape):
        return tape
    if isinstance(tape, str):
        return Tape(tape)
    raise ValueError(f"tape = {tape!r}: expected None, 'host', 'disk' or a sonotile Tape")
