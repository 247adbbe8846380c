"""sonotile's settings: one explicit, documented object.

Every setting has a default; the ``SONOTILE_*`` environment variables override defaults, and are
read here only (:meth:`Settings.from_env`). Front ends (``sonotile-kwave``, ``sonotile``
commands, ``simulate``) make the settings once and install them with :func:`configure`;
:class:`~sonotile.spectral.operators.FourierOps` records the FFT choices it was built with in its
static (hashable) part, so they are part of every compiled program's cache key.

Nothing here changes the process: :mod:`sonotile.base.runtime` applies the process-wide ones (XLA
flags, threads, compilation cache, allocator) when an entry point asks it to.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

PLAN_EFFORTS = ("estimate", "measure", "patient")
FFT_BACKENDS = ("auto", "xla", "fftw", "cufft")
STEPS = ("auto", "stacked", "plain")
TRANSPORTS = ("auto", "mpi", "xla")

#: What ``sonotile launch`` sets for each process it starts (read by :meth:`Settings.from_env`)
ENV_COORDINATOR = "SONOTILE_COORDINATOR"
ENV_NUM_PROCESSES = "SONOTILE_NUM_PROCESSES"
ENV_PROCESS_ID = "SONOTILE_PROCESS_ID"
ENV_LOCAL_DEVICES = "SONOTILE_LOCAL_DEVICE_IDS"
#: The collectives' transport of a multi-process run (``--transport``)
ENV_TRANSPORT = "SONOTILE_TRANSPORT"


def default_cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/sonotile`` or ``~/.cache/sonotile``."""
    env = os.environ if environ is None else environ
    return os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sonotile")


@dataclass(frozen=True)
class Settings:
    """How sonotile runs (not what it simulates). docs/settings.md is the reference table.

    Attributes:
        fft: FFT backend, ``"auto"`` (FFTW on a CPU for float32 when its extension builds; on a
            GPU sonotile's cuFFT calls where ``cufft_lib`` names their library; XLA's FFT
            otherwise), ``"xla"``, ``"fftw"`` or ``"cufft"``. Env: ``SONOTILE_FFT``.
        cufft_lib: the library of sonotile's cuFFT calls (built by
            ``benchmarks/gpu/build_cufft.sh``; ``""``: none). Env: ``SONOTILE_CUFFT_LIB``.
        step: the acoustic step of a single-device run: ``"auto"`` (``stacked`` on a GPU on
            sonotile's cuFFT calls where the problem allows it, else ``plain``), ``"stacked"``
            (split density and velocity each one ``(ndim, *grid)`` buffer inside the time
            loop, batched transforms; refused for velocity sources and transducers) or
            ``"plain"``. Env: ``SONOTILE_STEP``.
        fftw_plan: FFTW planning effort, ``estimate`` | ``measure`` | ``patient``
            (``measure`` plans the operators' batched 1-D transforms of planes of 128 x 128
            points and more with FFTW_PATIENT). Env: ``SONOTILE_FFTW_PLAN``.
        fftw_updates: on one device (and on LFB blocks split along x only) with FFTW on 2-D /
            3-D grids, the velocity and density updates are done inside the gradient's
            (divergence's) FFTW calls, plane by plane on all threads, instead of by XLA after
            them (on LFB blocks the density update of lossless media only).
            Env: ``SONOTILE_FFTW_UPDATES`` (1/0).
        fftw_native: the FFTW extension is compiled for the CPU it runs on (``-march=native``:
            its loops use every vector instruction the CPU has; the build is kept per CPU model
            and feature set, so a cache directory shared by different nodes holds one build for
            each), else for any CPU of its architecture. Env: ``SONOTILE_FFTW_NATIVE`` (1/0).
        fftw_avx512: with ``fftw_native``, the build may use AVX-512 where the CPU has it;
            off: ``-mno-avx512f``, so the extension's vector kernel runs on 256-bit AVX2
            vectors as on a CPU without AVX-512 (to measure that path on an AVX-512 machine).
            Env: ``SONOTILE_FFTW_AVX512`` (1/0).
        threads: CPU threads for XLA and FFTW (None: the CPUs of the affinity mask; ``-t``).
        compilation_cache: keep compiled programs in ``cache_dir/jax`` (time to first step).
            Env: ``SONOTILE_COMPILATION_CACHE`` (1/0).
        program_cache: with the compilation cache on, the single-device engine also keeps its
            programs whole, so a warm start does not trace them again
            (:mod:`sonotile.solver.programs`). Env: ``SONOTILE_PROGRAM_CACHE`` (1/0).
        cache_dir: the FFTW extension, FFTW wisdom and compiled programs. Env:
            ``XDG_CACHE_HOME`` (``$XDG_CACHE_HOME/sonotile``).
        cache_limit: bytes the compiled programs may take in ``cache_dir/jax``: beyond, the
            least recently used are removed (checked once a day; 0: no limit). Env:
            ``SONOTILE_CACHE_LIMIT`` (bytes, e.g. ``4e9``).
        malloc_tune: pin glibc's mmap threshold so freed grid-sized buffers return to the
            system (peak RSS). Env: ``SONOTILE_MALLOC_TUNE`` (1/0).
        xla_scheduler_off: switch XLA:CPU's concurrency-optimised scheduler off (less memory per
            grid point, same speed; ignored when ``XLA_FLAGS`` sets it already).
        memory_limit: memory a run may use [bytes], in place of the device's free memory in
            the check before a run (None: the device's). Env: ``SONOTILE_MEMORY_LIMIT``.
        transport: collectives of a multi-process run, ``auto`` (MPI where it can carry them,
            else XLA's), ``mpi`` or ``xla``. Env: ``SONOTILE_TRANSPORT``.
        mpicxx: the MPI C++ compiler for the MPI custom calls ("": ``mpicxx`` of the Python
            environment, else on PATH). Env: ``SONOTILE_MPICXX``.
        coordinator: ``host:port`` of process 0 of a multi-process job (set by ``sonotile
            launch``; under Open MPI 5's mpirun found through mpi4py unless set). Env:
            ``SONOTILE_COORDINATOR``.
        num_processes, process_id: the job's process count and this process's rank (set by
            ``sonotile launch``). Env: ``SONOTILE_NUM_PROCESSES``, ``SONOTILE_PROCESS_ID``.
        local_device_ids: the GPUs this process drives (set by ``sonotile launch``). Env:
            ``SONOTILE_LOCAL_DEVICE_IDS`` (comma-separated).
        local_rank: this process's rank among the job's processes on its machine (which CPUs
            it takes; default: the launcher's). Env: ``SONOTILE_LOCAL_RANK``.
        heartbeat_timeout: seconds after which the processes of a job end when one stopped
            answering. Env: ``SONOTILE_HEARTBEAT_TIMEOUT``.
        init_timeout: seconds the processes of a job wait for each other at the start. Env:
            ``SONOTILE_INIT_TIMEOUT``.
        deterministic: bit-identical results run after run on one machine with the same
            settings and threads: the FFT backend is fixed (a CPU float32 run fails when the
            FFTW extension is unavailable instead of using XLA's FFT) and FFTW plans with
            FFTW_ESTIMATE and no wisdom file (no timed planning); ``fftw_plan`` is ignored.
            :func:`sonotile.fft.backend.describe` says what ran. Env: ``SONOTILE_DETERMINISTIC``
            (1/0); ``sonotile-kwave --deterministic``.
        growth_check: stop a run whose energy rises with no source on (an instability) before
            it overflows, with :class:`~sonotile.solver.growth.SimulationGrowing`
            (:mod:`sonotile.solver.growth` states the rule). Env: ``SONOTILE_GROWTH_CHECK``
            (1/0).
    """

    fft: str = "auto"
    cufft_lib: str = ""
    step: str = "auto"
    fftw_plan: str = "measure"
    fftw_updates: bool = True
    fftw_native: bool = True
    fftw_avx512: bool = True
    threads: int | None = None
    compilation_cache: bool = True
    program_cache: bool = True
    cache_dir: str = ""
    cache_limit: int = 2 * 2**30
    malloc_tune: bool = True
    xla_scheduler_off: bool = True
    memory_limit: int | None = None
    transport: str = "auto"
    mpicxx: str = ""
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    local_device_ids: tuple[int, ...] | None = None
    local_rank: int | None = None
    heartbeat_timeout: int = 30
    init_timeout: int = 120
    deterministic: bool = False
    growth_check: bool = True

    def __post_init__(self) -> None:
        for name, value, allowed in (("fft", self.fft, FFT_BACKENDS),
                                     ("step", self.step, STEPS),
                                     ("fftw_plan", self.fftw_plan, PLAN_EFFORTS),
                                     ("transport", self.transport, TRANSPORTS)):  # fmt: skip
            if value not in allowed:
                raise SettingsError(f"{name} = {value!r}: expected one of {allowed}")
        if self.cache_limit < 0:
            raise SettingsError(f"cache_limit = {self.cache_limit}: expected bytes >= 0 (0: none)")
        if self.memory_limit is not None and self.memory_limit < 1:
            raise SettingsError(f"memory_limit = {self.memory_limit}: expected bytes > 0")
        for name, least in (("threads", 1), ("num_processes", 1), ("heartbeat_timeout", 1),
                            ("init_timeout", 1), ("process_id", 0), ("local_rank", 0)):  # fmt: skip
            value = getattr(self, name)
            if value is not None and value < least:
                raise SettingsError(f"{name} = {value}: expected an integer >= {least}")
        if self.local_device_ids is not None and min(self.local_device_ids, default=0) < 0:
            raise SettingsError(f"local_device_ids = {self.local_device_ids}: expected ids >= 0")
        if None not in (self.process_id, self.num_processes) and not (
            self.process_id < self.num_processes  # type: ignore[operator]
        ):
            raise SettingsError(
                f"process_id = {self.process_id}: expected 0..{self.num_processes - 1} "  # type: ignore[operator]
                f"(num_processes = {self.num_processes})"
            )
        if not self.cache_dir:
            object.__setattr__(self, "cache_dir", default_cache_dir())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Defaults, then ``SONOTILE_*`` variables, then ``overrides``. A variable set to a value
        outside its range raises :class:`SettingsError` naming it and what it may be."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = dict(cache_dir=default_cache_dir(env))
        for name, field, kind in VARIABLES:
            if env.get(name, "") != "":
                values[field] = parse(name, env[name], kind)
        values.update(overrides)
        try:
            return cls(**values)  # type: ignore[arg-type]  # checked in __post_init__
        except SettingsError as e:
            named = [n for n, f, _ in VARIABLES if str(e).startswith(f"{f} =") and n in env]
            raise SettingsError(f"{named[0]}: {e}" if named else str(e)) from None


class SettingsError(ValueError):
    """A setting (or ``SONOTILE_*`` variable) outside its allowed values."""


@dataclass(frozen=True)
class Count:
    """An integer variable of at least ``least``."""

    least: int


@dataclass(frozen=True)
class Bytes:
    """A number of bytes (``4e9`` allowed) of at least ``least``."""

    least: int


BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True,
              "0": False, "false": False, "no": False, "off": False}  # fmt: skip
#: A ``host:port`` variable (the coordinator).
HOST_PORT = "host:port"
#: The largest integer a variable may hold (C's int64).
INT_MAX = 2**63 - 1

#: ``(variable, Settings field, kind)``: every ``SONOTILE_*`` variable sonotile reads. Kinds:
#: ``bool``, ``str`` (any text), a tuple of allowed words, :class:`Count`, :class:`Bytes`,
#: ``tuple`` (comma-separated ids >= 0), :data:`HOST_PORT`.
VARIABLES: tuple[tuple[str, str, object], ...] = (
    ("SONOTILE_FFT", "fft", FFT_BACKENDS),
    ("SONOTILE_CUFFT_LIB", "cufft_lib", str),
    ("SONOTILE_STEP", "step", STEPS),
    ("SONOTILE_FFTW_PLAN", "fftw_plan", PLAN_EFFORTS),
    ("SONOTILE_FFTW_UPDATES", "fftw_updates", bool),
    ("SONOTILE_FFTW_NATIVE", "fftw_native", bool),
    ("SONOTILE_FFTW_AVX512", "fftw_avx512", bool),
    ("SONOTILE_COMPILATION_CACHE", "compilation_cache", bool),
    ("SONOTILE_PROGRAM_CACHE", "program_cache", bool),
    ("SONOTILE_CACHE_LIMIT", "cache_limit", Bytes(0)),
    ("SONOTILE_MALLOC_TUNE", "malloc_tune", bool),
    ("SONOTILE_MEMORY_LIMIT", "memory_limit", Bytes(1)),
    (ENV_TRANSPORT, "transport", TRANSPORTS),
    ("SONOTILE_MPICXX", "mpicxx", str),
    (ENV_COORDINATOR, "coordinator", HOST_PORT),
    (ENV_NUM_PROCESSES, "num_processes", Count(1)),
    (ENV_PROCESS_ID, "process_id", Count(0)),
    (ENV_LOCAL_DEVICES, "local_device_ids", tuple),
    ("SONOTILE_LOCAL_RANK", "local_rank", Count(0)),
    ("SONOTILE_HEARTBEAT_TIMEOUT", "heartbeat_timeout", Count(1)),
    ("SONOTILE_INIT_TIMEOUT", "init_timeout", Count(1)),
    ("SONOTILE_DETERMINISTIC", "deterministic", bool),
    ("SONOTILE_GROWTH_CHECK", "growth_check", bool),
)


def parse(name: str, text: str, kind: object) -> object:
    """``text`` of variable ``name`` as ``kind`` (see :data:`VARIABLES`), or
    :class:`SettingsError` naming the variable, the value and what it may be."""
    value, expected = _convert(text.strip(), kind)
    if expected:
        raise SettingsError(f"{name}={text!r}: expected {expected}")
    return value


def _convert(text: str, kind: object) -> tuple[object, str]:
    """``(value, "")``, or ``(None, what was expected)``."""
    if kind is bool:
        word = BOOL_WORDS.get(text.lower())
        return (word, "") if word is not None else (None, "1 or 0 (or true/false, yes/no, on/off)")
    if kind is str:
        return text, ""
    if isinstance(kind, tuple):
        return (text, "") if text in kind else (None, f"one of {', '.join(kind)}")
    if isinstance(kind, Count):
        n = _integer(text)
        ok = n is not None and kind.least <= n <= INT_MAX
        return (n, "") if ok else (None, f"an integer >= {kind.least}")
    if isinstance(kind, Bytes):
        n = _bytes(text)
        ok = n is not None and kind.least <= n <= INT_MAX
        return (n, "") if ok else (None, f"a number of bytes >= {kind.least}, e.g. 4e9")
    if kind is tuple:
        ids = [_integer(v.strip()) for v in text.split(",")]
        if all(i is not None and 0 <= i <= INT_MAX for i in ids):
            return tuple(ids), ""
        return None, "comma-separated integers >= 0, e.g. 0,1"
    host, _, port = text.rpartition(":")
    number = _integer(port)
    if host and number is not None and 1 <= number <= 65535:
        return text, ""
    return None, "host:port with a port of 1..65535, e.g. 10.0.0.1:1234"


def _integer(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _bytes(text: str) -> int | None:
    """A whole number of bytes from ``4e9`` or ``4000000000`` (finite), else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value != math.floor(value):
        return None
    return int(value)


_active: list[Settings] = []


def current() -> Settings:
    """The installed settings (from the environment, the first time nothing was installed;
    :class:`SettingsError` for a variable outside its range, before any work)."""
    if not _active:
        _active.append(Settings.from_env())
    return _active[0]


def configure(settings: Settings | None = None, **changes: Any) -> Settings:
    """Install ``settings`` (default: the current ones) with ``changes`` (attributes of
    :class:`Settings`, each of its own type); returns them."""
    new = replace(settings or current(), **changes)
    _active[:] = [new]
    return new


def describe(settings: Settings) -> str:
    """One line per setting (for ``--verbose`` and bug reports)."""
    return "\n".join(f"{f.name} = {getattr(settings, f.name)!r}" for f in fields(settings))
