"""Keeping sonotile's cache directory bounded: JAX's compiled programs and old builds.

JAX writes one file per compiled program (``<name>-<hash>-cache``) and never removes any
unless it is given a size limit (which needs the ``filelock`` package); every grid shape, step
count and sonotile version adds programs, and every sonotile version its own build of the FFTW
extension and of the MPI extension (both compiled by :func:`compile_library`).
:func:`prune_daily` removes the least recently used programs once the directory is over a limit
(at most one scan per day: one ``stat`` per process start otherwise), and :func:`prune_builds`
removes builds unused for a month. Removing a file another process is reading is safe (it keeps
its open copy; a program removed before it is opened is compiled again).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

#: the file whose modification time says when the directory was last scanned
STAMP = ".sonotile-pruned"
#: seconds between scans
SCAN_EVERY = 86400.0
#: pruning leaves the directory at this fraction of its limit (not at the limit: so that the
#: next few programs do not trigger another scan at once)
KEEP_FRACTION = 0.8


def _last_use(st: os.stat_result) -> float:
    """When a file was last read or written [s since the epoch] (atime moves at most daily on
    ``relatime`` mounts, not at all on ``noatime`` ones: then it is the write time)."""
    return max(st.st_atime, st.st_mtime)


def prune(directory: str, limit: int) -> list[str]:
    """Remove the least recently used files of ``directory`` (not its subdirectories or the
    stamp) until they take at most ``KEEP_FRACTION * limit`` bytes, when they take more than
    ``limit``. Returns the names removed; ``limit <= 0``: nothing."""
    if limit <= 0:
        return []
    entries = []
    try:
        with os.scandir(directory) as it:
            for e in it:
                if e.name != STAMP and e.is_file(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    entries.append((_last_use(st), st.st_size, e.name))
    except FileNotFoundError:
        return []
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return []
    removed = []
    for _, size, name in sorted(entries):  # oldest use first
        if total <= KEEP_FRACTION * limit:
            break
        try:
            os.remove(os.path.join(directory, name))
        except FileNotFoundError:  # another process pruned it
            pass
        total -= size
        removed.append(name)
    return removed


def prune_daily(directory: str, limit: int, now: float | None = None) -> list[str]:
    """:func:`prune` at most once per :data:`SCAN_EVERY` seconds (a stamp file in
    ``directory`` records the last scan); never fails (a cache that cannot be pruned is still
    a cache). Returns the names removed."""
    if limit <= 0:
        return []
    now = time.time() if now is None else now
    stamp = os.path.join(directory, STAMP)
    try:
        if now - os.stat(stamp).st_mtime < SCAN_EVERY:
            return []
    except FileNotFoundError:
        pass
    except OSError:
        return []
    try:
        os.makedirs(directory, exist_ok=True)
        with open(stamp, "a"):
            pass
        os.utime(stamp, (now, now))
        return prune(directory, limit)
    except OSError:
        return []


def prune_builds(
    directory: str, keep: str, pattern: tuple[str, str], max_age: float = 30 * 86400.0
) -> list[str]:
    """Remove the files ``<prefix>*<suffix>`` (``pattern``) of ``directory`` other than
    ``keep`` that were last used more than ``max_age`` seconds ago (old builds of the FFTW
    extension; :func:`touch` marks a build used). Returns the names removed."""
    prefix, suffix = pattern
    now = time.time()
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    for name in names:
        path = os.path.join(directory, name)
        if not (name.startswith(prefix) and name.endswith(suffix)) or path == keep:
            continue
        try:
            if now - os.stat(path).st_mtime > max_age:
                os.remove(path)
                removed.append(name)
        except OSError:
            pass
    return removed


def touch(path: str) -> None:
    """Mark ``path`` used now (its modification time), if it can be."""
    try:
        os.utime(path)
    except OSError:
        pass


def compile_library(
    source: str, so: str, commands: Callable[[str, str], list[list[str]]], label: str = ""
) -> subprocess.CompletedProcess[str]:
    """Compile the C++ ``source`` into the shared library ``so`` (atomically: a rename; other
    processes see the old state or the whole library). ``commands(cc, out)`` lists the compiler
    commands to try in turn (source path, output path); the first that succeeds is installed.
    Returns the last command's process (``returncode`` != 0: nothing installed). ``label``:
    print each command to stderr under that name."""
    name = os.path.basename(so).split("_")[0]
    with tempfile.TemporaryDirectory() as d:
        cc, out = os.path.join(d, f"{name}.cc"), os.path.join(d, f"{name}.so")
        with open(cc, "w") as fh:
            fh.write(source)
        r = subprocess.CompletedProcess([], 1, "", "no compiler command")
        for cmd in commands(cc, out):
            if label:
                print(f"sonotile: building {label}:", " ".join(cmd), file=sys.stderr)
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode == 0:
                part = f"{so}.{os.getpid()}"
                shutil.copy(out, part)
                os.replace(part, so)
                break
    return r
