"""Process set-up for runs: JAX's persistent compilation cache and the host allocator.

Compilation cache (time to first step): ``~/.cache/sonotile/jax``.

:func:`enable_env` is called by the entry points (``sonotile-kwave`` and the ``sonotile``
commands, through :func:`configure_threads`), :func:`prepare` by the Python API (``simulate``,
``simulate_many``, ``make_simulator``) before its first run; importing sonotile changes nothing.
What they do follows the installed :class:`sonotile.base.config.Settings`. Programs
that took at least :data:`MIN_COMPILE_S` (0.05 s) to compile are stored (JAX's own size limit
would need the ``filelock`` package; :mod:`.cachedir` prunes them); a second run of the
same problem shape loads them instead of compiling. Nothing is changed when the user set a
cache directory (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``);
``SONOTILE_COMPILATION_CACHE=0`` disables it.

Host allocator (peak RSS): glibc raises its mmap threshold after large blocks are freed, so
later grid-sized buffers (numpy arrays, XLA's buffers) come from the heap and freed ones stay
resident. :func:`fix_malloc` pins the threshold at 4 MiB: grid-sized blocks are always
mapped and returned to the system when freed. ``SONOTILE_MALLOC_TUNE=0`` leaves it alone.

Huge pages (time per chunk of steps): the programs start themselves again once with glibc's
``glibc.malloc.hugetlb=1`` (:func:`restart_with_hugepages`), so the blocks XLA maps afresh for
every call of the compiled loop are faulted in 2 MiB pages.
``GLIBC_TUNABLES=glibc.malloc.hugetlb=0`` leaves the allocator alone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from types import FrameType

from sonotile.base import cachedir, config, interrupt

#: programs that compile in less [s] are not kept in the persistent cache. A 128^3 time-loop
#: chunk compiles in ~0.13 s on the 2-core EPYC: at 0.2 s every run compiled its chunks again
#: (0.26 s of a 128^3 run's start).
MIN_COMPILE_S = 0.05

# XLA options of the time-loop programs. XLA:CPU's concurrency-optimised scheduler orders
# independent work (e.g. the d inverse transforms of a gradient) to run side by side, which
# keeps all their outputs alive at once: 16 instead of 8 B/point of temporaries in the
# lossless step, and no faster. Other backends ignore the option.
STEP_COMPILER_OPTIONS = {"xla_cpu_enable_concurrency_optimized_scheduler": False}
_done: list[str] = []


def cache_path() -> str:
    """JAX's persistent compilation cache: ``<Settings.cache_dir>/jax``."""
    return os.path.join(config.current().cache_dir, "jax")


SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler"
#: XLA's GPU kernels without run-to-run variation (atomics); ignored on CPUs
DETERMINISTIC_FLAG = "--xla_gpu_deterministic_ops"


def set_xla_flags() -> None:
    """sonotile's XLA:CPU options, through ``XLA_FLAGS`` (XLA reads it once, when JAX creates
    its CPU client, so this acts only if that has not happened yet; ``import sonotile`` calls
    it). XLA:CPU's concurrency-optimised scheduler orders independent work (the d inverse
    transforms of a gradient) to run side by side and so keeps all their outputs alive: 16
    instead of 8 B/point of temporaries in the lossless step, and no faster. It is switched
    off unless ``XLA_FLAGS`` already sets it. In deterministic mode
    (``Settings.deterministic``) GPUs use deterministic kernels (:data:`DETERMINISTIC_FLAG`;
    scatter-adds otherwise sum in a varying order)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if config.current().xla_scheduler_off and SCHEDULER_FLAG not in flags:
        flags = f"{flags} {SCHEDULER_FLAG}=false".strip()
    if config.current().deterministic and DETERMINISTIC_FLAG not in flags:
        flags = f"{flags} {DETERMINISTIC_FLAG}=true".strip()
    if flags:
        os.environ["XLA_FLAGS"] = flags


M_MMAP_THRESHOLD = -3  # glibc mallopt parameter
MMAP_THRESHOLD = 4 * 1024 * 1024


def fix_malloc() -> None:
    """Pin glibc's mmap threshold (see above); no-op elsewhere or when disabled."""
    if "malloc" in _done or not config.current().malloc_tune:
        return
    _done.append("malloc")
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(MMAP_THRESHOLD))
    except (OSError, AttributeError):
        pass


#: glibc's tunable for transparent huge pages in malloc (glibc >= 2.35)
HUGETLB = "glibc.malloc.hugetlb"
THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"


def hugepages_env(environ: Mapping[str, str], libc: str, thp_mode: str) -> dict[str, str] | None:
    """The environment to start a program again with so that glibc's malloc asks for
    transparent huge pages (``GLIBC_TUNABLES`` plus ``glibc.malloc.hugetlb=1``), or None when
    there is nothing to gain: the tunable already named (by the user, e.g. ``=0`` to keep
    4 KiB pages, or by the start before), a C library other than glibc >= 2.35 (``libc``:
    ``os.confstr("CS_GNU_LIBC_VERSION")``, e.g. ``"glibc 2.36"``) or the kernel's huge pages
    off (``thp_mode``: the contents of :data:`THP_MODE`, ``"... [never]"``).

    Why: XLA:CPU allocates each chunk's temporaries (8-20 B per grid point) afresh for every
    call of the compiled loop, mapped by glibc and faulted in page by page; with 4 KiB pages
    that took ~30 ms per call at 128^3 and ~150 ms at 256^3 on the 2-core EPYC, with 2 MiB
    pages a few ms."""
    tunables = environ.get("GLIBC_TUNABLES", "")
    if HUGETLB in tunables or "[never]" in thp_mode:
        return None
    name, _, version = libc.partition(" ")
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return None
    if name != "glibc" or (major, minor) < (2, 35):
        return None
    return dict(environ, GLIBC_TUNABLES=":".join(t for t in (tunables, f"{HUGETLB}=1") if t))


def restart_with_hugepages() -> None:
    """Start this program again in its own process (``os.execve``: same pid, same arguments,
    before any work) with :func:`hugepages_env`'s environment, when that is not None. glibc
    reads its tunables only when a process starts, so an entry point calls this first thing;
    ``GLIBC_TUNABLES=glibc.malloc.hugetlb=0`` turns it off. Costs one more interpreter start
    (30-70 ms)."""
    if sys.platform != "linux" or not getattr(sys, "orig_argv", None) or not sys.executable:
        return
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
        with open(THP_MODE) as f:
            mode = f.read()
    except (OSError, ValueError):
        return
    env = hugepages_env(os.environ, libc, mode)
    if env is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    # argv[0] the interpreter's full path: a bare "python3" would make the new interpreter
    # look itself up on PATH, and it could find one outside this environment
    argv = [sys.executable, *sys.orig_argv[1:]]
    try:
        os.execve(sys.executable, argv, env)
    except OSError:
        return


def hugepages_state() -> str:
    """How this process's malloc pages its large blocks (for ``--verbose``)."""
    if HUGETLB + "=1" in os.environ.get("GLIBC_TUNABLES", ""):
        return f"transparent huge pages ({HUGETLB}=1)"
    return "4 KiB pages (glibc's default)"


def enable_env() -> None:
    """The compilation cache through environment variables, before JAX is imported (entry
    points; kept under :attr:`~sonotile.base.config.Settings.cache_limit`,
    :func:`sonotile.base.cachedir.prune_daily`), :func:`set_xla_flags` and :func:`fix_malloc`."""
    set_xla_flags()
    fix_malloc()
    if not config.current().compilation_cache:
        return
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    cachedir.prune_daily(cache_path(), config.current().cache_limit)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache_path()
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", str(MIN_COMPILE_S))


def enable() -> None:
    """Turn on the persistent compilation cache once per process (idempotent), and
    :func:`fix_malloc`."""
    fix_malloc()
    if "cache" in _done or not config.current().compilation_cache:
        return
    _done.append("cache")
    import jax

    if getattr(jax.config, "jax_compilation_cache_dir", None):
        return
    try:
        os.makedirs(cache_path(), exist_ok=True)
        cachedir.prune_daily(cache_path(), config.current().cache_limit)
        jax.config.update("jax_compilation_cache_dir", cache_path())
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    except (OSError, AttributeError):
        pass


def configure_cpu_devices(n: int | None) -> None:
    """Ask XLA for ``n`` virtual CPU devices (read once, before JAX is imported)."""
    if not n:
        return
    if "jax" in sys.modules:
        import jax

        if jax.device_count() == n or len(jax.devices("cpu")) == n:
            return
        raise ValueError(f"--cpu_devices {n}: JAX is already initialised in this process")
    flags = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


#: The launchers' variables that give a process's rank among the job's processes on its machine,
#: first found wins (after ``Settings.local_rank``, then ``Settings.process_id``: ``sonotile
#: launch`` starts all its processes on one machine).
LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


def local_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's rank among the job's processes on this machine (0 when alone):
    ``Settings.local_rank`` (set it for independent runs side by side), else
    ``Settings.process_id``, else the launcher's (``environ``: instead of the installed settings
    and ``os.environ``)."""
    settings = config.current() if environ is None else config.Settings.from_env(environ)
    for mine in (settings.local_rank, settings.process_id):
        if mine is not None:
            return mine
    env = os.environ if environ is None else environ
    for name in LOCAL_RANK_VARS:
        if env.get(name, "").isdigit():
            return int(env[name])
    return 0


def cpu_slice(cpus: list[int], threads: int, rank: int | None = None) -> list[int]:
    """The ``threads`` CPUs of ``cpus`` (the allowed ones) for local process ``rank``:
    consecutive groups, wrapping around when the processes ask for more CPUs than there are
    (a launcher that already bound each process to its cores leaves one group: unchanged)."""
    rank = local_rank() if rank is None else rank
    k = max(1, min(threads, len(cpus)))
    start = (rank * k) % len(cpus)
    return [cpus[(start + i) % len(cpus)] for i in range(k)]


def configure_threads(threads: int | None, pin: bool = True) -> None:
    """Run on ``threads`` CPU threads: XLA's and FFTW's (call before JAX is imported).

    XLA sizes its thread pools from the process's CPU affinity mask (there is no thread-count
    flag), so the mask is cut to ``threads`` of the allowed CPUs — the ``local_rank()``-th
    group of them, so that the processes of a job on one machine do not share a core; with
    one thread XLA's Eigen pool is switched off too. FFTW's plans get ``threads`` threads
    (``Settings.threads``). ``pin=False`` leaves the mask alone (one thread chosen for a small
    grid: independent runs side by side must not all land on the first CPU). Also points JAX's
    persistent compilation cache at ``~/.cache/sonotile/jax``.
    """
    enable_env()
    if not threads:
        return
    config.configure(threads=threads)
    try:
        if pin:
            os.sched_setaffinity(0, cpu_slice(sorted(os.sched_getaffinity(0)), threads))
    except (AttributeError, OSError):
        pass
    if threads == 1:
        # (a bare "intra_op_parallelism_threads=1" here used to end XLA's flag parsing, so
        # flags appended later, e.g. by --cpu_devices in a child process, were ignored)
        flags = os.environ.get("XLA_FLAGS", "")
        if "--xla_cpu_multi_thread_eigen" not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()


@contextlib.contextmanager
def cpus_restored() -> Iterator[None]:
    """Give the calling thread back its CPU affinity on leaving (a command run in-process, e.g.
    ``sonotile.kwave.cli.main([... "-t", "1"])``, must not leave its caller on one core)."""
    try:
        saved = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            try:
                os.sched_setaffinity(0, saved)
            except OSError:
                pass


def install_stop_handlers(flag: dict) -> dict:
    """SIGTERM/SIGINT set ``flag['stop']`` (the run checkpoints, or fails, between chunks of
    steps); a second signal raises :class:`~sonotile.base.interrupt.Interrupted` (a
    KeyboardInterrupt) at once. Returns the previous handlers."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if flag.get("stop"):
            raise interrupt.Interrupted(signum)
        flag["stop"] = True
        flag["signal"] = signum

    previous = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread: no signal handling
            pass
    return previous


def restore_handlers(previous: dict) -> None:
    for sig, h in previous.items():
        signal.signal(sig, h)


def prepare() -> None:
    """What the Python API does before its first run: sonotile's XLA flags if JAX has not
    started its CPU client yet (they would be ignored after), the host allocator and the
    compilation cache, all as the installed :class:`sonotile.base.config.Settings` say."""
    if not _backends_started():
        set_xla_flags()
    enable()


def _backends_started() -> bool:
    """Whether JAX has created its clients (JAX has no public call for it; where its private
    one is missing, False: setting ``XLA_FLAGS`` after the start is harmless, only unread)."""
    try:
        from jax._src import xla_bridge
    except ImportError:
        return False
    started = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(started()) if callable(started) else False


def host_memory_available() -> int | None:
    """Memory this process may still use [bytes]: the smallest of :func:`memory_limits`, else
    None."""
    return host_memory_limit()[0]


def host_memory_limit(
    cgroup_root: str = "/sys/fs/cgroup", proc: str = "/proc"
) -> tuple[int | None, str]:
    """The smallest of :func:`memory_limits` [bytes] and what it is (for messages), or
    ``(None, "host RAM unknown")``."""
    limits = memory_limits(cgroup_root, proc)
    if not limits:
        return None, "host RAM unknown"
    return min(limits)


def memory_limits(
    cgroup_root: str = "/sys/fs/cgroup", proc: str = "/proc"
) -> list[tuple[int, str]]:
    """Each known bound on what this process may still allocate, ``(bytes, what)``: the host's
    ``MemAvailable`` (``<proc>/meminfo``); each memory cgroup of the process and its ancestors
    (containers, Slurm): v2 ``memory.max`` minus ``memory.current``, v1
    ``memory.limit_in_bytes`` minus ``memory.usage_in_bytes``, both plus the inactive file
    pages (``memory.stat``; the kernel reclaims them first); and ``RLIMIT_AS`` (``ulimit -v``)
    minus the address space in use (``VmSize``). Linux; elsewhere only ``RLIMIT_AS``."""
    out = []
    free = _proc_field(os.path.join(proc, "meminfo"), "MemAvailable:")
    if free is not None:
        out.append((free, "host RAM available (MemAvailable)"))
    out += _cgroup_limits(cgroup_root, os.path.join(proc, "self", "cgroup"))
    out += _address_space_limit(os.path.join(proc, "self", "status"))
    return out


def _address_space_limit(status: str) -> list[tuple[int, str]]:
    """``RLIMIT_AS``'s soft limit minus the ``VmSize`` of ``status`` (``/proc/self/status``)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY or soft < 0:
            return []
    except (ImportError, OSError, ValueError):
        return []
    used = _proc_field(status, "VmSize:") or 0
    what = f"address space left under RLIMIT_AS (ulimit -v {soft // 1024})"
    return [(max(0, soft - used), what)]


#: a v1 cgroup's limit at or above this is no limit (the kernel reports 2^63 - 4096)
CGROUP_V1_NO_LIMIT = 2**62


def _cgroup_limits(root: str, self_cgroup: str) -> list[tuple[int, str]]:
    """The memory cgroup bounds of the process's cgroups (``self_cgroup``: the lines
    ``id:controllers:path`` of ``/proc/self/cgroup``) and of their ancestors under ``root``."""
    try:
        with open(self_cgroup) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        ident, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if ident == "0" and controllers == "":  # v2, unified
            base, files = root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):  # v1
            base = os.path.join(root, "memory")
            files = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        else:
            continue
        parts = [p for p in path.split("/") if p and p != ".."]
        for k in range(len(parts), -1, -1):  # the process's own cgroup, then its ancestors
            found = _cgroup_bound(os.path.join(base, *parts[:k]), *files)
            if found is not None:
                out.append(found)
    return out


def _cgroup_bound(
    folder: str, limit_file: str, usage_file: str, inactive: str
) -> tuple[int, str] | None:
    """``(limit - usage + inactive file pages, what)`` of one cgroup folder, or None without a
    limit there."""
    try:
        with open(os.path.join(folder, limit_file)) as fh:
            text = fh.read().strip()
        if text == "max" or int(text) >= CGROUP_V1_NO_LIMIT:
            return None
        limit = int(text)
        with open(os.path.join(folder, usage_file)) as fh:
            usage = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    reclaimable = 0
    try:
        with open(os.path.join(folder, "memory.stat")) as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == inactive:
                    reclaimable = int(value)
    except (OSError, ValueError):
        pass
    free = max(0, limit - usage + min(reclaimable, usage))
    where = os.path.join(folder, limit_file)
    return free, f"memory left under the cgroup limit ({where} = {limit / 2**20:.0f} MB)"


def peak_rss_bytes(pid: int | str = "self") -> int | None:
    """Peak resident memory (``VmHWM``) of a process [bytes] (Linux), else None."""
    return _proc_field(f"/proc/{pid}/status", "VmHWM:")


def _proc_field(path: str, key: str) -> int | None:
    """A ``key: N kB`` line of a /proc file, in bytes."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
