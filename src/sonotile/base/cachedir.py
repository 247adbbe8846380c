"""Keeping sonotile's cache directory bounded: JAX's compiled programs and old builds.

JAX writes one file per compiled program (``<name>-<hash>-cache``) and never removes any
unless it is given a size limit (which needs the ``filelock`` package); every grid shape, step
count and sonotile version adds programs, and every sonotile version its own build of the FFTW
extension and of the MPI extension (both compiled by :func:`compile_library` and loaded
only after :func:`ensure_library` has verified them: owner, mode and SHA-256).
:func:`prune_daily` removes the least recently used programs once the directory is over a limit
(at most one scan per day: one ``stat`` per process start otherwise), and :func:`prune_builds`
removes builds unused for a month. Removing a file another process is reading is safe (it keeps
its open copy; a program removed before it is opened is compiled again).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

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

    def old_build(name: str) -> bool:
        path = os.path.join(directory, name)
        return name.startswith(prefix) and name.endswith(suffix) and path != keep

    removed = _remove_stale(directory, old_build, max_age, time.time(), os.stat)
    for name in removed:
        for extra in (DIGEST, ".lock"):
            with contextlib.suppress(OSError):
                os.remove(os.path.join(directory, name) + extra)
    return removed


def touch(path: str) -> None:
    """Mark ``path`` used now (its modification time), if it can be."""
    try:
        os.utime(path)
    except OSError:
        pass


# --------------------------------------------------------------------- compiled extensions
#
# A build is trusted only when all of these hold, checked before every load: the cache folder
# is a real folder owned by this user (or root) and writable by nobody else; the library and
# its digest file (``<so>.sha256``) are regular files (not links) owned by this user (or root)
# and writable by nobody else; and the library's SHA-256 equals the digest. Anything else (a
# truncated or tampered library, a planted one, a leftover of a crashed build) is built again
# and installed over it. Builds are installed under a lock (``<so>.lock``): whole, fsynced, by
# rename, so concurrent first runs compile once and never see half a library.

#: the ending of a library's digest file
DIGEST = ".sha256"
#: temporaries (``<file>.<pid>``, ``<file>.tmp<pid>``) of processes that are gone are removed
#: once they are this old [s] (younger ones may belong to a process on another machine
#: sharing the folder)
STALE_AFTER = 60.0


def _trusted_owners() -> tuple[int, int]:
    """Who may own cached builds: this user, and root (who can change anything anyway)."""
    return (os.geteuid(), 0)


class UnsafeCache(OSError):
    """The cache folder (or a file in it) could be changed by someone else."""


def check_folder(directory: str) -> None:
    """Create ``directory`` (mode 0700) if missing; raise :class:`UnsafeCache` unless it is a
    folder (not a link) owned by this user (or root) and not writable by group or others."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCache(f"cache folder {directory} is not a folder (a link?)")
    if st.st_uid not in _trusted_owners():
        raise UnsafeCache(
            f"cache folder {directory} belongs to user id {st.st_uid}, not to this user "
            f"({os.geteuid()}): set XDG_CACHE_HOME to a folder of your own"
        )
    if st.st_mode & 0o022:
        raise UnsafeCache(
            f"cache folder {directory} is writable by others (mode "
            f"{stat.S_IMODE(st.st_mode):03o}): run 'chmod go-w {directory}' or set "
            "XDG_CACHE_HOME to a folder of your own"
        )


def _private_file(path: str) -> bool:
    """``path`` is a regular file (not a link) of this user (or root), writable by nobody
    else."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    trusted = st.st_uid in _trusted_owners()
    return stat.S_ISREG(st.st_mode) and trusted and not st.st_mode & 0o022


def digest(path: str) -> str:
    """SHA-256 of a file's contents (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verified(so: str) -> bool:
    """The library ``so`` can be loaded: it and its digest file are private files of this
    user (see above) and its SHA-256 is the recorded one."""
    if not (_private_file(so) and _private_file(so + DIGEST)):
        return False
    try:
        with open(so + DIGEST) as fh:
            want = fh.read().strip()
        return len(want) == 64 and digest(so) == want
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def prune_temporaries(directory: str, now: float | None = None) -> list[str]:
    """Remove the temporaries ``<name>.<pid>`` / ``<name>.tmp<pid>`` (half-written libraries,
    digests and FFTW wisdom) whose process is no longer running, once older than
    :data:`STALE_AFTER`. Returns the names removed."""

    def dead_temporary(name: str) -> bool:
        pid = (name.rsplit(".", 1)[-1] if "." in name else "").removeprefix("tmp")
        return pid.isdigit() and int(pid) > 0 and not _pid_alive(int(pid))

    now = time.time() if now is None else now
    return _remove_stale(directory, dead_temporary, STALE_AFTER, now, os.lstat)


def _remove_stale(
    directory: str,
    wanted: Callable[[str], bool],
    max_age: float,
    now: float,
    stat: Callable[[str], os.stat_result],
) -> list[str]:
    """Remove the files of ``directory`` whose name is ``wanted`` and whose modification time
    (``stat``) is more than ``max_age`` seconds before ``now``; the names removed."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        if not wanted(name):
            continue
        path = os.path.join(directory, name)
        try:
            if now - stat(path).st_mtime > max_age:
                os.remove(path)
                removed.append(name)
        except OSError:
            pass
    return removed


def _write_synced(path: str, data: bytes, mode: int) -> None:
    """Write ``data`` to the new file ``path`` (not following links) and fsync it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags, mode)
    try:
        os.fchmod(fd, mode)  # whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def install(built: str, so: str) -> None:
    """Install the library file ``built`` as ``so`` with its digest: each written whole and
    fsynced under a temporary name, then renamed into place (digest first; a reader between
    the two renames sees a mismatch and waits for the lock), then the folder fsynced."""
    with open(built, "rb") as fh:
        data = fh.read()
    part, part_digest = f"{so}.{os.getpid()}", f"{so}{DIGEST}.{os.getpid()}"
    _write_synced(part, data, 0o755)
    _write_synced(part_digest, hashlib.sha256(data).hexdigest().encode() + b"\n", 0o644)
    os.replace(part_digest, so + DIGEST)
    os.replace(part, so)
    _fsync_folder(os.path.dirname(os.path.abspath(so)))


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """An exclusive lock on ``path`` (created; ``flock``) while inside; without a lock where
    the file system has none."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError:
        fd = -1
    try:
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                pass
        yield
    finally:
        if fd >= 0:
            os.close(fd)


def compile_library(
    source: str, so: str, commands: Callable[[str, str], list[list[str]]], label: str = ""
) -> subprocess.CompletedProcess[str]:
    """Compile the C++ ``source`` into the shared library ``so`` and :func:`install` it.
    ``commands(cc, out)`` lists the compiler commands to try in turn (source path, output
    path); the first that succeeds is installed. Returns the last command's process
    (``returncode`` != 0: nothing installed). ``label``: print each command to stderr under
    that name."""
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
                install(out, so)
                break
    return r


def ensure_library(
    source: str, so: str, commands: Callable[[str, str], list[list[str]]], label: str = ""
) -> subprocess.CompletedProcess[str]:
    """A :func:`verified` library at ``so``: the cached one, else compiled and installed
    (:func:`compile_library`) under the folder's lock, so that concurrent processes compile
    once. Raises :class:`UnsafeCache` for a folder others can write to. Returns the
    compilation's process, or one with return code 0 and args ``["cached"]``."""
    directory = os.path.dirname(os.path.abspath(so))
    check_folder(directory)
    prune_temporaries(directory)  # one listing: crashed installs, FFTW's half-written wisdom
    if verified(so):
        touch(so)  # in use: kept by prune_builds
        return subprocess.CompletedProcess(["cached"], 0, "", "")
    with locked(so + ".lock"):
        if verified(so):  # installed meanwhile by another process
            return subprocess.CompletedProcess(["cached"], 0, "", "")
        return compile_library(source, so, commands, label)


def compiler_version(cxx: str) -> str:
    """What ``cxx --version`` prints (part of a build's key; "" if it cannot be run)."""
    try:
        r = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (r.stdout + r.stderr).strip()


def file_identity(path: str) -> str:
    """A library file as part of a build's key: its real path, size and modification time
    (another installed version, another key)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real} {st.st_size} {st.st_mtime_ns}"


def key_tag(parts: list[str]) -> str:
    """The 16 hex digits that name a build: SHA-256 of its key's ``parts``."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
