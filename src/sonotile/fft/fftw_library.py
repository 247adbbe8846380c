"""The FFTW extension: compiled, loaded and configured once per process.

The C++ source (``csrc/``, shipped with the package) is compiled on first use, or by
``scripts/setup.sh``, with the system C++ compiler against jaxlib's FFI headers and a
single-precision FFTW shared library: Debian's ``libfftw3f`` (package ``libfftw3-dev`` /
``libfftw3-single3``) or the copy inside the pyFFTW wheel (``pip install pyfftw``). The
library goes to ``$XDG_CACHE_HOME/sonotile`` (default ``~/.cache/sonotile``), keyed by a hash
of the sources, the headers, the compiler (path and ``--version``), the flags and the FFTW
library (its file and ``fftwf_version``), together with FFTW's wisdom file, so repeat runs
neither compile nor measure plans again. It is loaded only once its owner, mode and SHA-256
have been checked (:func:`sonotile.base.cachedir.ensure_library`); a build that fails the
check is compiled again. In deterministic mode (``Settings.deterministic``) plans come from
FFTW_ESTIMATE without wisdom; :func:`details` says what ran.

Where it cannot be built (no compiler, no FFTW, no jaxlib FFI headers) :func:`available`
returns False and :func:`reason` says why. Settings (plan effort, threads, native build, cache
folder) come from :class:`sonotile.base.config.Settings`.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING

from sonotile.base import cachedir, config
from sonotile.fft import interface

if TYPE_CHECKING:  # jax is imported when a transform is first made
    import jax

#: ``(source, axis, vector)`` of one output of :func:`conv`
ConvOut = tuple[int, "int | str | None", "jax.Array | None"]
#: a split-field update applied to an operator's output (``apply_epilogue`` in the C++ source)
Epilogue = interface.Epilogue
AxisVec = interface.AxisVec

_EFFORT = {"estimate": 0, "measure": 1, "patient": 2}
_state: dict = {}  # "lib", "path", "reason", "configured"


def cache_dir() -> str:
    """Where the extension and FFTW's wisdom live (``Settings.cache_dir``)."""
    return config.current().cache_dir


#: The extension's C++ sources (``csrc/``), in the order they are compiled as one translation
#: unit: the shared header, then each part (see ``fftw_common.h``).
SOURCES = ("fftw_common.h", "fftw_grid.cc", "fftw_plans.cc", "fftw_conv.cc", "fftw_axis.cc",
           "fftw_slabs.cc", "fftw_ffi.cc")  # fmt: skip


def _source() -> str:
    """The extension's C++ source as one file: :data:`SOURCES` in order, ``vector_fft.h``
    spliced in where the header includes it and the parts' own includes of the header dropped
    (the build compiles a copy in a temporary folder; the cache key is this text, so it covers
    every file)."""
    csrc = resources.files("sonotile.fft").joinpath("csrc")
    header, *parts = (csrc.joinpath(name).read_text() for name in SOURCES)
    include = '#include "vector_fft.h"'
    assert include in header, "fftw_common.h no longer includes vector_fft.h"
    texts = [header.replace(include, csrc.joinpath("vector_fft.h").read_text(), 1)]
    own = f'#include "{SOURCES[0]}"'
    for name, text in zip(SOURCES[1:], parts):
        assert own in text, f"{name} does not include {SOURCES[0]}"
        texts.append("\n".join(line for line in text.split("\n") if line.strip() != own))
    return "\n".join(texts)


def _lib_dirs() -> list[str]:
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += [os.path.join(sys.prefix, "lib"), "/usr/local/lib", "/usr/lib64", "/usr/lib"]
    dirs += sorted(glob.glob("/usr/lib/*-linux-gnu"))
    dirs += ["/opt/homebrew/lib", "/usr/local/opt/fftw/lib"]
    return dirs


def find_library() -> tuple[str, str | None] | None:
    """``(libfftw3f, libfftw3f_threads or None)`` paths: the system's, else pyFFTW's."""
    for d in _lib_dirs():
        for ext in (".so.3", ".so", ".3.dylib", ".dylib"):
            main = os.path.join(d, "libfftw3f" + ext)
            if os.path.exists(main):
                thr = [os.path.join(d, f"libfftw3f_{t}{ext}") for t in ("threads", "omp")]
                thr = [t for t in thr if os.path.exists(t)]
                return main, (thr[0] if thr else None)
    try:
        import importlib.util

        spec = importlib.util.find_spec("pyfftw")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin:
        libs = os.path.join(os.path.dirname(os.path.dirname(spec.origin)), "pyfftw.libs")
        found = glob.glob(os.path.join(libs, "libfftw3f-*.so*"))
        thr = glob.glob(os.path.join(libs, "libfftw3f_omp-*.so*"))
        if found:
            return found[0], (thr[0] if thr else None)
    return None


def cpu_signature(cpuinfo: str = "/proc/cpuinfo") -> str:
    """What a ``-march=native`` build depends on: the CPU's model and features (Linux:
    ``/proc/cpuinfo``'s first processor, not its clock; elsewhere the platform's machine and
    processor)."""
    import platform

    keys = ("vendor_id", "cpu family", "model", "model name", "flags", "Features", "CPU part")
    try:
        with open(cpuinfo) as fh:
            first = fh.read().split("\n\n")[0]
        lines = [ln for ln in first.splitlines() if ln.split(":")[0].strip() in keys]
    except OSError:
        lines = []
    text = "\n".join(lines) or f"{platform.machine()} {platform.processor()}"
    return "native " + hashlib.sha256(text.encode()).hexdigest()[:16]


def build(verbose: bool = False) -> str | None:
    """Path of the compiled extension (compiling it if needed), or None with ``reason()`` set."""
    if "path" in _state:
        return _state["path"]
    path = None
    try:
        path = _build(verbose)
    except Exception as e:  # anything unexpected: keep XLA's FFT
        _state["reason"] = f"build error: {e}"
    _state["path"] = path
    return path


def _build(verbose: bool) -> str | None:
    found = _toolchain()
    if isinstance(found, str):
        _state["reason"] = found
        return None
    inc, libs, cxx = found
    src = _source()
    commands = _commands(inc, libs, cxx)
    key = _build_key(src, inc, libs, cxx, commands("<source>", "<library>"))
    so = os.path.join(cache_dir(), f"fftw_ffi_{cachedir.key_tag(key)}.so")
    try:
        r = cachedir.ensure_library(src, so, commands, "the FFTW extension" if verbose else "")
    except cachedir.UnsafeCache as e:
        _state["reason"] = str(e)
        return None
    if r.returncode != 0:
        _state["reason"] = f"compiling the FFTW extension failed: {r.stderr.strip()[-400:]}"
        return None
    cachedir.prune_builds(cache_dir(), so, ("fftw_ffi_", ".so"))  # other versions' builds
    return so


def _toolchain() -> tuple[str, tuple[str, str | None], str] | str:
    """``(jaxlib's FFI include folder, FFTW's libraries, C++ compiler)``, or why not."""
    try:
        import jax.ffi

        inc = jax.ffi.include_dir()
    except (ImportError, AttributeError) as e:
        return f"no jaxlib FFI headers ({e})"
    if not os.path.exists(os.path.join(inc, "xla", "ffi", "api", "ffi.h")):
        return f"no xla/ffi/api/ffi.h under {inc}"
    libs = find_library()
    if libs is None:
        return "no libfftw3f found (apt install libfftw3-dev, or pip install pyfftw)"
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        return "no C++ compiler (g++ / c++)"
    return inc, libs, cxx


def _commands(
    inc: str, libs: tuple[str, str | None], cxx: str
) -> Callable[[str, str], list[list[str]]]:
    """The compiler commands to try in turn, ``(source, output) -> [command, ...]``."""
    main, thr = libs
    rpaths = sorted({os.path.dirname(main)} | ({os.path.dirname(thr)} if thr else set()))
    native = config.current().fftw_native
    march = ["-march=native"] + ([] if config.current().fftw_avx512 else ["-mno-avx512f"])

    def commands(cc: str, out: str) -> list[list[str]]:
        cmd = [cxx, "-O3", "-std=c++17", "-shared", "-fPIC", f"-I{inc}", cc, "-o", out]
        # RPATH (not RUNPATH): also searched for the FFTW libraries' own dependencies, e.g. the
        # libgomp-<hash>.so that pyFFTW's wheel ships next to its libfftw3f_omp
        cmd += [p for p in (thr, main) if p] + [f"-Wl,-rpath,{r}" for r in rpaths]
        cmd += ["-Wl,--disable-new-dtags", "-lpthread"]
        # a compiler without -march=native builds the portable extension
        return [cmd[:1] + march + cmd[1:], cmd] if native else [cmd]

    return commands


def _build_key(
    src: str, inc: str, libs: tuple[str, str | None], cxx: str, commands: list[list[str]]
) -> list[str]:
    """What a build depends on: the source, jaxlib's headers, the compiler (its path and
    ``--version``), the commands (flags), the CPU (native builds) and FFTW (each library
    file's identity and ``fftwf_version``)."""
    import jaxlib

    native = cpu_signature() if config.current().fftw_native else "portable"
    key = [src, inc, jaxlib.__version__, cxx, cachedir.compiler_version(cxx), native]
    key += [" ".join(c) for c in commands]
    key += [cachedir.file_identity(p) for p in libs if p] + [library_version(libs[0])]
    return key


def library_version(path: str) -> str:
    """FFTW's own version string (``fftwf_version``, e.g. ``fftw-3.3.10-sse2-avx``) of the
    library file ``path``, or "" where it cannot be read."""
    try:
        lib = ctypes.CDLL(path)
        text = ctypes.cast(ctypes.addressof(ctypes.c_char.in_dll(lib, "fftwf_version")),
                           ctypes.c_char_p).value  # fmt: skip
    except (OSError, ValueError):
        return ""
    return text.decode(errors="replace") if text else ""


def default_threads() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def load() -> ctypes.CDLL | None:
    """Build, load and register the custom calls once per process; None if unavailable."""
    if "lib" in _state:
        return _state["lib"]
    lib = None
    so = build()
    if so is not None:
        try:
            import jax

            lib = ctypes.CDLL(so)
            i = ctypes.c_int
            lib.sonotile_fftw_configure.argtypes = [i, i, ctypes.c_char_p]
            lib.sonotile_fftw_prepare.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
            for name, sym in (
                ("sonotile_fftw_r2c", "SonotileFftwR2C"),
                ("sonotile_fftw_c2r", "SonotileFftwC2R"),
                ("sonotile_fftw_r2r_op", "SonotileFftwR2ROp"),
                ("sonotile_fftw_conv", "SonotileFftwConv"),
                ("sonotile_fftw_conv_sum", "SonotileFftwConvSum"),
                ("sonotile_fftw_div_density", "SonotileFftwDivDensity"),
                ("sonotile_fftw_axis_diff", "SonotileFftwAxisDiff"),
                ("sonotile_fftw_axis_update", "SonotileFftwAxisUpdate"),
                ("sonotile_fftw_planes_c2r", "SonotileFftwPlanesC2R"),
                ("sonotile_fftw_plane_source", "SonotileFftwPlaneSource"),
                ("sonotile_fftw_xpass", "SonotileFftwXPass"),
                ("sonotile_keep", "SonotileKeep"),
                ("sonotile_fftw_rfft_axes", "SonotileFftwRfftAxes"),
                ("sonotile_fftw_irfft_axes", "SonotileFftwIrfftAxes"),
                ("sonotile_fftw_fft_axis", "SonotileFftwFftAxis"),
                ("sonotile_fftw_rfft_split", "SonotileFftwRfftSplit"),
                ("sonotile_fftw_irfft_join", "SonotileFftwIrfftJoin"),
            ):
                jax.ffi.register_ffi_target(
                    name, jax.ffi.pycapsule(getattr(lib, sym)), platform="cpu"
                )
        except Exception as e:
            _state["reason"] = f"loading the FFTW extension failed: {e}"
            lib = None
    _state["lib"] = lib
    if lib is not None:
        _configure(lib)
    return lib


def plan_effort() -> str:
    """FFTW's planning effort for this process: ``estimate`` in deterministic mode
    (``Settings.deterministic``), else ``Settings.fftw_plan``."""
    s = config.current()
    return "estimate" if s.deterministic else s.fftw_plan


def _configure(lib: ctypes.CDLL) -> None:
    """Threads, effort and wisdom file (none in deterministic mode: wisdom measured earlier
    would choose the plans, and FFTW_ESTIMATE plans with the same cost model every run)."""
    s = config.current()
    effort = plan_effort()
    wisdom = os.path.join(cache_dir(), f"fftwf_wisdom_{os.uname().nodename}.txt")
    wisdom = "" if s.deterministic else wisdom
    _state["configured"] = {"effort": effort, "wisdom": wisdom, "threads": threads()}
    lib.sonotile_fftw_configure(threads(), _EFFORT[effort], wisdom.encode())


def threads() -> int:
    """FFTW's threads: ``Settings.threads``, else the affinity mask's CPUs."""
    return config.current().threads or default_threads()


def available() -> bool:
    return load() is not None


def column_kernel(n: int) -> str:
    """What runs the operators' batched ``n``-point transforms down the columns of a block (the
    pass along x over ``n`` planes; the columns of planes of ``n`` rows): ``"vector"``
    (sonotile's kernel, ``csrc/vector_fft.h``: built for AVX-512 or AVX2 with FMA, ``n`` a
    product of ``sizes.KERNEL_PRIMES``, 2 to 19) or ``"fftw"`` (FFTW's plans); ``""`` without
    the extension."""
    lib = load()
    if lib is None:
        return ""
    fn = lib.sonotile_fftw_vector_columns
    fn.argtypes = [ctypes.c_int64]
    return "vector" if fn(n) else "fftw"


def vector_width() -> int:
    """Floats per vector of that kernel in this build of the extension (0: not built in)."""
    lib = load()
    return int(lib.sonotile_fftw_vector_width()) if lib is not None else 0


def reason() -> str | None:
    """Why the extension is unavailable (None if it is available or was not tried)."""
    return _state.get("reason")


def reset() -> None:
    """Forget the loaded state (tests)."""
    _state.clear()


def details() -> dict[str, str]:
    """Where FFTW ran, for an output's provenance (empty before it was configured):
    ``fftw_plan`` (the planning effort used), ``fftw_wisdom`` (the wisdom file, or ``none``),
    ``fftw_threads``, ``fftw_version`` (``fftwf_version``), ``fftw_library`` (its file),
    ``fftw_extension`` and ``fftw_extension_sha256`` (the compiled extension)."""
    done = _state.get("configured")
    if done is None or not _state.get("path"):
        return {}
    libs = find_library()
    so = _state["path"]
    return {
        "fftw_plan": done["effort"],
        "fftw_wisdom": done["wisdom"] or "none",
        "fftw_threads": str(done["threads"]),
        "fftw_version": library_version(libs[0]) if libs else "",
        "fftw_library": libs[0] if libs else "",
        "fftw_extension": os.path.basename(so),
        "fftw_extension_sha256": _digest_of(so),
    }


def summary() -> str:
    """What an output's provenance says of FFTW: its plan effort and threads."""
    mode = ", deterministic" if config.current().deterministic else ""
    return f"fftw (plan effort {plan_effort()}, {threads()} threads{mode})"


def versions() -> str:
    """The FFTW library the extension links (``""`` where there is none)."""
    libs = find_library() if available() else None
    return library_version(libs[0]) if libs else ""


def _digest_of(so: str) -> str:
    try:
        with open(so + cachedir.DIGEST) as fh:
            return fh.read().strip()
    except OSError:
        return ""
