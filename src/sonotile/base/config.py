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

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

PLAN_EFFORTS = ("estimate", "measure", "patient")
FFT_BACKENDS = ("auto", "xla", "fftw")
PLANE_TRANSFORMS = ("halves", "fftw")
COLUMN_TRANSFORMS = ("vector", "fftw")


def default_cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/sonotile`` or ``~/.cache/sonotile``."""
    env = os.environ if environ is None else environ
    return os.path.join(env.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sonotile")


@dataclass(frozen=True)
class Settings:
    """How sonotile runs (not what it simulates).

    Attributes:
        fft: FFT backend, ``"auto"`` (FFTW on a CPU for float32 when its extension builds, XLA's
            FFT otherwise and on GPUs), ``"xla"`` or ``"fftw"``. Env: ``SONOTILE_FFT``.
        fftw_plan: FFTW planning effort, ``estimate`` | ``measure`` | ``patient``
            (``measure`` plans the operators' batched 1-D transforms of planes of 128 x 128
            points and more with FFTW_PATIENT). Env:
            ``SONOTILE_FFTW_PLAN``.
        fftw_planes: how the FFTW backend transforms a 2-D plane whose rows have an even length
            (the planes of 3-D grids, LFB blocks and pencil slabs): ``halves`` (each row as a
            complex FFT of half its length, then the columns; faster) or ``fftw`` (FFTW's own
            2-D plans; for comparison). Same results to round-off. Env: ``SONOTILE_FFTW_PLANES``.
        fftw_columns: what runs the operators' batched 1-D FFTs down the columns of a block
            (the pass along x over the plane bins, and a plane's columns when it is transformed
            by halves): ``vector`` (sonotile's own kernel on the CPU's vectors, where the
            extension is built for AVX-512 or AVX2 with FMA and the column length factors into
            2, 3 and 5; FFTW's plans otherwise; 1.5-1.9x faster than them) or ``fftw``. Same
            results to round-off. Env: ``SONOTILE_FFTW_COLUMNS``.
        fftw_pool: FFTW's threads run on XLA's intra-op thread pool (else FFTW's own threads).
            Env: ``SONOTILE_FFTW_POOL`` (1/0).
        fftw_fused: each spectral operator as one FFTW call (else R2C / C2R calls). Env:
            ``SONOTILE_FFTW_FUSED`` (1/0).
        fftw_updates: in fused mode on one device (and on LFB blocks split along x only), the
            velocity update (and, lossless, the density update) is done inside the gradient's
            (divergence's) FFTW calls, plane by plane on all threads, instead of by XLA after
            them. Env: ``SONOTILE_FFTW_UPDATES`` (1/0).
        fftw_grouped: a gradient's inverse transforms in one call (R2C / C2R mode only). Env:
            ``SONOTILE_FFTW_GROUP`` (1/0).
        fftw_concurrent: independent transforms of one call run side by side. Env:
            ``SONOTILE_FFTW_CONCURRENT`` (1/0).
        fftw_native: the FFTW extension is compiled for the CPU it runs on (``-march=native``:
            its loops use every vector instruction the CPU has; the build is kept per CPU model
            and feature set, so a cache directory shared by different nodes holds one build for
            each), else for any CPU of its architecture. Env: ``SONOTILE_FFTW_NATIVE`` (1/0).
        lfb_planes: LFB blocks split along x only transform their planes before the overlap
            exchange (FFTW; same results, less FFT work). Env: ``SONOTILE_LFB_PLANES`` (1/0).
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
        hugepages: the programs (``sonotile-kwave``, ``sonotile``) start themselves again once
            with glibc's ``glibc.malloc.hugetlb=1`` tunable (transparent huge pages for large
            blocks: XLA's per-call temporaries are faulted in 2 MiB pages instead of 4 KiB ones)
            unless ``GLIBC_TUNABLES`` names it already. Env: ``SONOTILE_HUGEPAGES`` (1/0).
        xla_scheduler_off: switch XLA:CPU's concurrency-optimised scheduler off (less memory per
            grid point, same speed; ignored when ``XLA_FLAGS`` sets it already).
        memory_limit: memory a run may use [bytes], in place of the device's free memory in
            the check before a run (None: the device's). Env: ``SONOTILE_MEMORY_LIMIT``.
        deterministic: bit-identical results run after run on one machine with the same
            settings and threads: the FFT backend is fixed (a CPU float32 run fails when the
            FFTW extension is unavailable instead of using XLA's FFT) and FFTW plans with
            FFTW_ESTIMATE and no wisdom file (no timed planning); ``fftw_plan`` is ignored.
            :func:`sonotile.fft.fftw.describe` says what ran. Env: ``SONOTILE_DETERMINISTIC``
            (1/0); ``sonotile-kwave --deterministic``.
    """

    fft: str = "auto"
    fftw_plan: str = "measure"
    fftw_planes: str = "halves"
    fftw_columns: str = "vector"
    fftw_pool: bool = True
    fftw_fused: bool = True
    fftw_updates: bool = True
    fftw_grouped: bool = False
    fftw_concurrent: bool = False
    fftw_native: bool = True
    lfb_planes: bool = True
    threads: int | None = None
    compilation_cache: bool = True
    program_cache: bool = True
    cache_dir: str = ""
    cache_limit: int = 2 * 2**30
    malloc_tune: bool = True
    hugepages: bool = True
    xla_scheduler_off: bool = True
    memory_limit: int | None = None
    deterministic: bool = False

    def __post_init__(self) -> None:
        if self.fft not in FFT_BACKENDS:
            raise ValueError(f"fft = {self.fft!r}: expected one of {FFT_BACKENDS}")
        if self.fftw_plan not in PLAN_EFFORTS:
            raise ValueError(f"fftw_plan = {self.fftw_plan!r}: expected one of {PLAN_EFFORTS}")
        if self.fftw_planes not in PLANE_TRANSFORMS:
            raise ValueError(
                f"fftw_planes = {self.fftw_planes!r}: expected one of {PLANE_TRANSFORMS}"
            )
        if self.fftw_columns not in COLUMN_TRANSFORMS:
            raise ValueError(
                f"fftw_columns = {self.fftw_columns!r}: expected one of {COLUMN_TRANSFORMS}"
            )
        if self.cache_limit < 0:
            raise ValueError(f"cache_limit = {self.cache_limit}: expected bytes >= 0 (0: none)")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads = {self.threads}: expected a positive number")
        if not self.cache_dir:
            object.__setattr__(self, "cache_dir", default_cache_dir())

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, **overrides: str | bool | int | None
    ) -> Settings:
        """Defaults, then ``SONOTILE_*`` variables, then ``overrides``."""
        env = os.environ if environ is None else environ

        def flag(name: str, default: bool) -> bool:
            return env.get(name, "1" if default else "0") not in ("0", "", "false", "no")

        values: dict[str, object] = dict(
            fft=env.get("SONOTILE_FFT", "auto"),
            fftw_plan=env.get("SONOTILE_FFTW_PLAN", "measure"),
            fftw_planes=env.get("SONOTILE_FFTW_PLANES") or "halves",
            fftw_columns=env.get("SONOTILE_FFTW_COLUMNS") or "vector",
            fftw_pool=flag("SONOTILE_FFTW_POOL", True),
            fftw_fused=flag("SONOTILE_FFTW_FUSED", True),
            fftw_updates=flag("SONOTILE_FFTW_UPDATES", True),
            fftw_grouped=flag("SONOTILE_FFTW_GROUP", False),
            fftw_concurrent=flag("SONOTILE_FFTW_CONCURRENT", False),
            fftw_native=flag("SONOTILE_FFTW_NATIVE", True),
            lfb_planes=flag("SONOTILE_LFB_PLANES", True),
            compilation_cache=flag("SONOTILE_COMPILATION_CACHE", True),
            program_cache=flag("SONOTILE_PROGRAM_CACHE", True),
            cache_dir=default_cache_dir(env),
            malloc_tune=flag("SONOTILE_MALLOC_TUNE", True),
            hugepages=flag("SONOTILE_HUGEPAGES", True),
            deterministic=flag("SONOTILE_DETERMINISTIC", False),
        )
        if env.get("SONOTILE_CACHE_LIMIT"):
            values["cache_limit"] = int(float(env["SONOTILE_CACHE_LIMIT"]))
        if env.get("SONOTILE_MEMORY_LIMIT"):
            values["memory_limit"] = int(float(env["SONOTILE_MEMORY_LIMIT"]))
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]  # checked in __post_init__

    def fft_mode(self) -> str:
        """The FFTW options that change compiled programs, as a static tag (``fused``,
        ``grouped``, ``concurrent``)."""
        tags = [t for t, on in (("unfused", not self.fftw_fused), ("grouped", self.fftw_grouped),
                                ("concurrent", self.fftw_concurrent),
                                ("separate-updates", not self.fftw_updates)) if on]  # fmt: skip
        return "-".join(tags)


_active: list[Settings] = []


def current() -> Settings:
    """The installed settings (from the environment, the first time nothing was installed)."""
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
