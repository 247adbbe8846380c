"""Safe file handling for every command and API helper: which paths may be read and written,
unique temporary files renamed into place only when complete, the room reserved first, write
errors as one clear error, damaged inputs named in words, digests.

A command never writes through a path that is not a regular file (a device, a FIFO, a folder,
a symbolic link) nor over one of its inputs, never opens a temporary name another file
already has (each is created exclusively, named with the process id and a random token),
removes only the temporary files it created itself, and checks an input's kind before opening
it (a FIFO would block). The guarantees for users: ``docs/safety.md``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import shutil
import stat
import sys
import traceback
from collections.abc import Iterator, Sequence
from types import TracebackType

import h5py
import numpy as np

from sonotile.base import interrupt

#: Suffix of every temporary file of sonotile's (the tests look for it).
PARTIAL = "sonotile-partial"
#: Bytes of a dataset hashed at a time (slabs along its first axis).
SLAB_BYTES = 64 * 2**20


class OutputWriteError(OSError):
    """Writing an output or checkpoint file failed (full disk, I/O error)."""


#: Write errors HDF5 reported while h5py freed an object (no exception reaches the caller):
#: collected by :func:`hdf5_cleanup_errors`; :func:`commit` refuses to rename while any.
DEALLOC_ERRORS: list[str] = []


def _from_h5py_dealloc(tb: TracebackType | None) -> bool:
    frames = traceback.extract_tb(tb) if tb is not None else []
    return bool(frames) and "h5py" in frames[-1].filename and "dealloc" in frames[-1].name


@contextlib.contextmanager
def hdf5_cleanup_errors() -> Iterator[list[str]]:
    """While a run writes: errors h5py can only print (a dataset freed after a failed write
    tries to flush to a full disk) are collected instead of printed as tracebacks; the run's
    own error says what failed, and a run that saw one never commits its file."""
    DEALLOC_ERRORS.clear()
    hook, excepthook = sys.unraisablehook, sys.excepthook

    def unraisable(u: sys.UnraisableHookArgs) -> None:
        if isinstance(u.exc_value, Exception) and _from_h5py_dealloc(u.exc_traceback):
            DEALLOC_ERRORS.append(_why(u.exc_value))
            return
        hook(u)

    def printed(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        if isinstance(value, Exception) and _from_h5py_dealloc(tb):
            DEALLOC_ERRORS.append(_why(value))
            return
        excepthook(kind, value, tb)

    sys.unraisablehook, sys.excepthook = unraisable, printed
    try:
        yield DEALLOC_ERRORS
    finally:
        sys.unraisablehook, sys.excepthook = hook, excepthook
        DEALLOC_ERRORS.clear()  # they concern this run only


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):  # fmt: skip
        if test(mode):
            return name
    return "not a regular file"


def check_input_path(path: str, what: str = "input file") -> None:
    """Refuse an input that does not exist or is not a regular file (a FIFO would block)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} '{path}': cannot open as HDF5 (no such file)") from None
    except OSError as e:
        raise OSError(f"{what} '{path}': cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{what} '{path}': is {_kind(st.st_mode)}, expected a regular file")
    if not os.access(path, os.R_OK):
        raise OSError(f"{what} '{path}': is not readable")


def _name_max(folder: str) -> int:
    """The longest file name the filesystem of ``folder`` accepts [bytes] (255 where unknown)."""
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return 255


def same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file (the same path, a symlink or a hard link to it)."""
    if os.path.abspath(a) == os.path.abspath(b) or os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_distinct(named: Sequence[tuple[str, str | None]]) -> None:
    """Refuse two of the ``(name, path)`` pairs (inputs first, then outputs) naming one file."""
    given = [(n, p) for n, p in named if p]
    for i, (fa, a) in enumerate(given):
        for fb, b in given[i + 1 :]:
            if same_file(a, b):
                raise ValueError(f"{fb} '{b}' is the same file as {fa} '{a}': give another path")


def check_output_path(
    path: str, what: str = "output file", inputs: Sequence[tuple[str, str | None]] = ()
) -> None:
    """Refuse an output path that names a folder, a device, a FIFO, a socket or a symbolic
    link, that is one of ``inputs`` (``(name, path)`` pairs, compared by inode), whose name
    is too long for its filesystem, or whose folder does not exist or cannot be written:
    before any work starts."""
    if path.endswith(os.sep) or path.endswith("/"):
        raise OSError(f"{what} '{path}': ends with '/', give a file name")
    d = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(d):
        raise OSError(f"{what} '{path}': directory '{d}' does not exist")
    if not os.access(d, os.W_OK):
        raise OSError(f"{what} '{path}': directory '{d}' is not writable")
    size, limit = len(os.fsencode(os.path.basename(path))), _name_max(d)
    if size > limit:
        raise OSError(f"{what} '{path}': the name is {size} bytes, this filesystem allows {limit}")
    for name, p in inputs:
        if p and same_file(p, path):
            raise OSError(f"{what} '{path}' is the same file as {name} '{p}': give another path")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise OSError(f"{what} '{path}': cannot be checked ({e.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        raise OSError(
            f"{what} '{path}': is a symbolic link (to '{os.readlink(path)}'); sonotile does not "
            "write through links: give the target's own path, or another name"
        )
    if not stat.S_ISREG(st.st_mode):
        kind = _kind(st.st_mode)
        raise OSError(f"{what} '{path}': is {kind}; sonotile writes regular files only")


#: The first bytes of the formats an output may replace (HDF5: see :func:`check_replaces`).
SIGNATURES = {"PNG": b"\x89PNG\r\n\x1a\n"}


def check_replaces(path: str, what: str = "output file", kind: str = "HDF5") -> None:
    """Refuse an output path naming an existing file that is not a ``kind`` file ("HDF5",
    "PNG", "JSON"): a mistyped name for someone's document is not overwritten. Call after
    :func:`check_output_path` (a regular file is read, never a FIFO)."""
    if not os.path.isfile(path) or os.path.islink(path):
        return
    if kind == "HDF5":
        ok = h5py.is_hdf5(path)
    elif kind == "JSON":
        try:
            with open(path, "rb") as f:
                json.load(f)
            ok = True
        except (ValueError, UnicodeDecodeError):
            ok = False
    else:
        with open(path, "rb") as f:
            ok = f.read(len(SIGNATURES[kind])) == SIGNATURES[kind]
    if not ok:
        raise OSError(
            f"{what} '{path}': exists and is not in {kind} format; not overwritten: give another "
            "name, or remove it first"
        )


def check_output_folder(path: str, what: str = "output folder") -> None:
    """Refuse an output folder that is a symbolic link or something other than a folder, or,
    when it does not exist yet, whose parent is not a writable folder."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(os.path.abspath(path)) or "."
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
            raise OSError(f"{what} '{path}': '{parent}' is not a writable folder") from None
        return
    if stat.S_ISLNK(st.st_mode):
        raise OSError(
            f"{what} '{path}': is a symbolic link (to '{os.readlink(path)}'); give the "
            "folder's own path"
        )
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)
        raise OSError(f"{what} '{path}': is {kind}, expected a folder")
    if not os.access(path, os.W_OK):
        raise OSError(f"{what} '{path}': is not writable")


def token() -> str:
    """``<pid>-<random>`` of this run; in a job of several processes, process 0's (all
    processes must name the same temporary file)."""
    import jax

    words = np.frombuffer(os.urandom(8), np.uint32) & 0x7FFFFFFF
    mine = np.array([os.getpid() & 0x7FFFFFFF, *words], np.int32)
    tok = f"{int(mine[0])}-{int(mine[1]):08x}{int(mine[2]):08x}"
    if jax.process_count() > 1:
        from sonotile.base.processes import allgather

        tok = allgather(tok)[0]
    return tok


def temp_name(path: str, tok: str, suffix: str = "") -> str:
    """The temporary name of ``path`` for the run with token ``tok``, in the same folder:
    ``.<name>.<tok>.sonotile-partial<suffix>`` (``suffix`` for a writer that goes by the
    extension); where that would pass the folder's longest file name (``NAME_MAX``, 255 bytes),
    ``<name>`` is cut and ends in ``~`` and 8 hex digits of its SHA-256, so that a target whose
    own name is near that limit can still be written."""
    d, b = os.path.split(os.path.abspath(path))
    name = f".{b}.{tok}.{PARTIAL}{suffix}"
    limit = _name_max(d)
    if len(os.fsencode(name)) <= limit:
        return os.path.join(d, name)
    raw = os.fsencode(b)
    tail = f"~{hashlib.sha256(raw).hexdigest()[:8]}.{tok}.{PARTIAL}{suffix}"
    keep = max(0, limit - 1 - len(os.fsencode(tail)))
    return os.path.join(d, "." + os.fsdecode(raw[:keep]) + tail)


def local_token() -> str:
    """``<pid>-<random>``: a token no other writer (process or thread) has."""
    return f"{os.getpid()}-{os.urandom(8).hex()}"


def create_exclusive(tmp: str) -> None:
    """Create ``tmp`` empty, failing if any file already has that name (never clobbers)."""
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise OSError(f"temporary file '{tmp}' exists already: not overwritten") from None
    interrupt.OWN_TEMPORARY.add(tmp)  # a signal that ends the process removes it
    os.close(fd)


#: Room kept free besides what a write needs (HDF5 metadata, other writers) [bytes].
MARGIN = 2**20


def _fallocate(fd: int, nbytes: int) -> int:
    """Linux ``fallocate(fd, 0, 0, nbytes)``: 0, or the errno (no emulation by writing)."""
    import ctypes

    try:
        fn = ctypes.CDLL(None, use_errno=True).fallocate
    except (AttributeError, OSError):  # not Linux: no reservation, the room is checked
        return errno.ENOSYS
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return 0 if fn(fd, 0, 0, nbytes) == 0 else ctypes.get_errno()


def reserve(path: str, nbytes: int, what: str) -> bool:
    """Reserve the disk blocks of ``path`` up to ``nbytes`` (HDF5 then writes into them and
    truncates the file to its real end when it closes it), so that a full disk shows here,
    as one clear error, and not inside HDF5 (whose clean-up after a failed write can crash
    the process). False where the filesystem cannot reserve (then :func:`check_room`)."""
    fd = os.open(path, os.O_RDWR)
    try:
        err = _fallocate(fd, nbytes)
    finally:
        os.close(fd)
    if err == 0:
        return True
    if err in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
        raise OutputWriteError(
            f"writing the {what} failed ({os.strerror(err)}: it needs {nbytes / 2**20:.6g} MB, "
            f"{free / 2**20:.6g} MB are free); is the disk full? The {what} at its path, if "
            "any, was left as it was"
        )
    check_room(path, nbytes, what)
    return False


def check_room(path: str, nbytes: int, what: str) -> None:
    """Refuse a write of ``nbytes`` that the filesystem of ``path`` has no room for (where
    blocks cannot be reserved; another writer can still fill the disk in between)."""
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(path)) or ".").free
    if free < nbytes + MARGIN:
        raise OutputWriteError(
            f"writing the {what} failed (No space left on device: {nbytes / 2**20:.6g} MB to "
            f"write, {free / 2**20:.6g} MB free); is the disk full? The {what} at its path, "
            "if any, was left as it was"
        )


def fsync_path(path: str) -> None:
    """Flush a file's (or a folder's) data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def commit(tmp: str, path: str, what: str) -> None:
    """fsync ``tmp``, rename it over ``path`` (checked again: a regular file or nothing) and
    fsync the folder: the target is either its earlier content or the complete new one."""
    if DEALLOC_ERRORS:
        raise OutputWriteError(
            f"writing the {what} failed ({DEALLOC_ERRORS[0]}); is the disk full? The {what} "
            "at its path, if any, was left as it was"
        )
    with write_errors(what, tmp):
        fsync_path(tmp)
        check_output_path(path, what)
        os.replace(tmp, path)
        interrupt.OWN_TEMPORARY.discard(tmp)
        with contextlib.suppress(OSError):  # not every filesystem syncs folders
            fsync_path(os.path.dirname(os.path.abspath(path)) or ".")


def remove_own(tmp: str | None) -> None:
    """Remove a temporary file this run created (no other file is ever removed)."""
    if tmp is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        interrupt.OWN_TEMPORARY.discard(tmp)


@contextlib.contextmanager
def partial_file(
    path: str, what: str = "file", *, nbytes: int | None = None, suffix: str = "",
    inputs: Sequence[tuple[str, str | None]] = (),
) -> Iterator[str]:  # fmt: skip
    """The temporary name to write ``path`` under (created empty, exclusively, in its folder):
    fsynced and renamed into place when the block ends, removed when it fails; nothing
    half-written is left and an earlier file survives. ``nbytes``: the room reserved first
    (:func:`reserve`; a full disk fails before anything is written); ``suffix``: the
    temporary name's ending; ``inputs``: see :func:`check_output_path`. An error inside
    the block is the caller's to word (:func:`write_errors`)."""
    check_output_path(path, what, inputs)
    tmp = temp_name(path, local_token(), suffix)
    create_exclusive(tmp)
    try:
        if nbytes is not None:
            reserve(tmp, nbytes + MARGIN, f"{what} '{path}'")
        yield tmp
        commit(tmp, path, f"{what} '{path}'")
    finally:
        remove_own(tmp)  # gone once committed: renamed into place


def open_own_hdf5(tmp: str, mode: str) -> h5py.File:
    """``tmp``, a temporary file of this run (:func:`partial_file`; no other program opens
    it), opened in ``mode`` without HDF5's file lock. That lock (``flock``) belongs to the open
    file, which a child process forked meanwhile (``git`` for the provenance, a compiler, in
    any thread) holds until it execs: reopening the file just closed would find it locked."""
    return h5py.File(tmp, mode, locking=False)


@contextlib.contextmanager
def hdf5_output(path: str, what: str, nbytes: int,
                inputs: Sequence[tuple[str, str | None]] = ()) -> Iterator[h5py.File]:  # fmt: skip
    """A new HDF5 file for ``path`` to fill in the block: created under a temporary name
    (:func:`partial_file`), ``nbytes`` (an upper bound of the data) reserved on the disk
    before anything is written, renamed into place when the block ends. A failed write
    (a full disk, an I/O error) ends as one :class:`OutputWriteError` naming ``path``."""
    label = f"{what} '{path}'"
    with partial_file(path, what, inputs=inputs) as tmp, write_errors(label, path):
        with open_own_hdf5(tmp, "w"):
            pass
        reserve(tmp, nbytes + MARGIN, label)
        with open_own_hdf5(tmp, "r+") as f:
            yield f


def write_bytes(path: str, data: bytes, what: str = "file",
                inputs: Sequence[tuple[str, str | None]] = ()) -> None:  # fmt: skip
    """Write ``data`` to ``path`` through :func:`partial_file` (room reserved first)."""
    with partial_file(path, what, nbytes=len(data), inputs=inputs) as tmp:
        with write_errors(f"{what} '{path}'", path), open(tmp, "r+b") as f:
            f.write(data)
            f.truncate()


def save_npz(path: str, arrays: dict[str, np.ndarray], what: str = "file") -> None:
    """Write ``arrays`` to ``path`` as numpy's ``.npz`` through :func:`partial_file`."""
    need = sum(np.asarray(a).nbytes + 512 for a in arrays.values())
    with partial_file(path, what, nbytes=need) as tmp:
        with write_errors(f"{what} '{path}'", path), open(tmp, "r+b") as f:
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stubs: allow_pickle
            f.truncate()


def check_finite(name: str, value: np.ndarray, what: str) -> None:
    """Refuse NaN or Inf in a numeric array about to be written (``name`` in ``what``)."""
    a = np.asarray(value)
    if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
        bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
        raise ValueError(f"{what}: '{name}' holds {bad} NaN or Inf value(s); nothing written")


def hdf5_reason(e: BaseException) -> str:
    """What is wrong with an HDF5 file, in words, from h5py's error text."""
    text = str(e)
    for key, words in (
        ("file signature not found", "not an HDF5 file"),
        ("truncated file", "truncated (the file ends before its data)"),
        ("bad object header", "damaged (an unreadable object header)"),
        ("addr overflow", "damaged or truncated (data beyond its end)"),
        ("unable to lock file", "locked by another process"),
        ("Permission denied", "not readable (permission denied)"),
    ):  # fmt: skip
        if key.lower() in text.lower():
            return words
    return "unreadable (" + _why(e) + ")"


@contextlib.contextmanager
def open_hdf5(path: str, what: str = "input file") -> Iterator[h5py.File]:
    """``path`` opened read-only after :func:`check_input_path` (a FIFO is never opened),
    refusing data held in other files (:func:`refuse_links`); an error while opening or
    reading it (a missing dataset or attribute included) ends as one ``OSError`` naming the
    file and saying what is wrong."""
    check_input_path(path, what)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise OSError(f"{what} '{path}': {hdf5_reason(e)}") from None
    try:
        refuse_links(f)  # data in other files: a FIFO there would block
    except OSError as e:
        f.close()
        raise OSError(f"{what} '{path}': {str(e).removeprefix(f'{path}: ')}") from None
    try:
        with f:
            yield f
    except KeyError as e:
        raise OSError(f"{what} '{path}': {e.args[0] if e.args else e}") from None
    except (OSError, RuntimeError) as e:
        if f"'{path}'" in str(e):
            raise
        raise OSError(f"{what} '{path}': {hdf5_reason(e)}") from None


@contextlib.contextmanager
def write_errors(what: str, path: str) -> Iterator[None]:
    """Turn an HDF5 / OS error while writing into one :class:`OutputWriteError` line; a write
    error h5py could only print (:data:`DEALLOC_ERRORS`) ends the block the same way, before
    HDF5 is used again."""
    try:
        yield
        if DEALLOC_ERRORS:
            raise OSError(0, DEALLOC_ERRORS[0])
    except OutputWriteError:
        raise
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        why = _why(e)
        raise OutputWriteError(
            f"writing the {what} failed ({why}); is the disk full? The {what} at its path, if "
            "any, was left as it was"
        ) from None


def _slabs(d: h5py.Dataset) -> Iterator[np.ndarray]:
    """A dataset's values, slab by slab along its first axis (bounded memory)."""
    if d.shape is None:
        return
    if d.size == 0 or d.shape == ():
        yield np.asarray(d[()])
        return
    row = max(1, d.nbytes // max(d.shape[0], 1))
    step = max(1, SLAB_BYTES // row)
    for i in range(0, d.shape[0], step):
        yield np.asarray(d[i : i + step])


def _why(e: BaseException) -> str:
    """The system's reason for a failed write (HDF5's own text carries times and buffers)."""
    found = re.search(r"errno = (\d+)", str(e))
    code = e.errno if isinstance(e, OSError) and e.errno else int(found[1]) if found else 0
    if code:
        return os.strerror(code)
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def dataset_digest(d: h5py.Dataset) -> str:
    """SHA-256 of a dataset's dtype, shape and values, read slab by slab."""
    h = hashlib.sha256(f"{d.dtype.str}{d.shape}".encode())
    for slab in _slabs(d):
        h.update(np.ascontiguousarray(slab).tobytes())
    return h.hexdigest()


def rows_digest(d: h5py.Dataset, axis: int, rows: int) -> str:
    """SHA-256 of the first ``rows`` entries of a dataset along ``axis`` (the rows of a time
    series written so far), read slab by slab."""
    rows = min(rows, d.shape[axis])
    shape = list(d.shape)
    shape[axis] = rows
    h = hashlib.sha256(f"{d.dtype.str}{tuple(shape)}".encode())
    row_bytes = d.dtype.itemsize * math.prod(shape[:axis] + shape[axis + 1 :])
    step = max(1, SLAB_BYTES // max(row_bytes, 1))
    for i in range(0, rows, step):
        index = [slice(None)] * d.ndim
        index[axis] = slice(i, min(rows, i + step))
        h.update(np.ascontiguousarray(d[tuple(index)]).tobytes())
    return h.hexdigest()


def dataset_finite(d: h5py.Dataset) -> bool:
    """Whether a (numeric) dataset holds no NaN or Inf, read slab by slab."""
    if d.dtype.kind not in "fc":
        return True
    return all(bool(np.all(np.isfinite(s))) for s in _slabs(d))


def file_digest(f: h5py.File) -> str:
    """SHA-256 over every dataset of a file (sorted names, dtype, shape, values): what defines
    a run, independent of attributes such as the creation date."""
    names: list[str] = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    h = hashlib.sha256()
    for n in sorted(names):
        h.update(n.encode() + b"\0" + dataset_digest(f[n]).encode())
    return h.hexdigest()


def refuse_links(f: h5py.File) -> None:
    """Refuse external links, datasets stored in external raw files and virtual datasets: an
    input is one self-contained file (they could map a dataset onto any file)."""
    bad: list[str] = []

    def visit(name: str, link: h5py.HardLink | h5py.SoftLink | h5py.ExternalLink) -> None:
        if bad:
            return
        if isinstance(link, h5py.ExternalLink):
            bad.append(f"dataset '{name}': an external link to '{link.filename}:{link.path}'")
            return
        if isinstance(link, h5py.SoftLink):
            return  # resolved inside the file (checked as its target)
        obj = f.get(name)
        if isinstance(obj, h5py.Dataset):
            if obj.is_virtual:
                bad.append(f"dataset '{name}': a virtual dataset (data in other files)")
            elif obj.external:
                bad.append(f"dataset '{name}': stored in an external raw file")

    f.visititems_links(visit)
    if bad:
        raise OSError(
            f"{f.filename}: {bad[0]}; inputs must hold their data themselves (not followed)"
        )
