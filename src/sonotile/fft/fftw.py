"""FFTW on the CPU as XLA custom calls: an FFT backend (:class:`FftwBackend`,
:class:`sonotile.fft.backend.Backend`) with fused spectral-operator kernels.

The C++ source (``csrc/fftw_ffi.cc``, shipped with the package) is compiled on first use, or by
``scripts/setup.sh``, with the system C++ compiler against jaxlib's FFI headers and a
single-precision FFTW shared library: Debian's ``libfftw3f`` (package ``libfftw3-dev`` /
``libfftw3-single3``) or the copy inside the pyFFTW wheel (``pip install pyfftw``). The
library goes to ``$XDG_CACHE_HOME/sonotile`` (default ``~/.cache/sonotile``), keyed by a hash
of the source, the headers, the compiler (path and ``--version``), the flags and the FFTW
library (its file and ``fftwf_version``), together with FFTW's wisdom file, so repeat runs
neither compile nor measure plans again. It is loaded only once its owner, mode and SHA-256
have been checked (:func:`sonotile.base.cachedir.ensure_library`); a build that fails the
check is compiled again. In deterministic mode (``Settings.deterministic``) plans come from
FFTW_ESTIMATE without wisdom and the backend never falls back; :func:`describe` says what
ran.

Where it cannot be built (no compiler, no FFTW, no jaxlib FFI headers) :func:`available`
returns False after one line on stderr and the operators use XLA's FFT. GPU runs always use
XLA's FFT (cuFFT). float64 runs use XLA's FFT (only ``fftwf`` is bound).

Settings (backend, plan effort, threads, native build, cache folder) come from
:class:`sonotile.base.config.Settings` (environment variables are its defaults).
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

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
_state: dict = {}  # "lib", "path", "reason", "threads", "noted"


def cache_dir() -> str:
    """Where the extension and FFTW's wisdom live (``Settings.cache_dir``)."""
    return config.current().cache_dir


def _source() -> str:
    """The extension's C++ source as one file: ``fftw_ffi.cc`` with ``vector_fft.h`` spliced in
    where it is included (the build compiles a copy in a temporary folder; the cache key is
    this text)."""
    csrc = resources.files("sonotile.fft").joinpath("csrc")
    main = csrc.joinpath("fftw_ffi.cc").read_text()
    include = '#include "vector_fft.h"'
    assert include in main, "fftw_ffi.cc no longer includes vector_fft.h"
    return main.replace(include, csrc.joinpath("vector_fft.h").read_text(), 1)


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
                ("sonotile_fftw_axis_diff", "SonotileFftwAxisDiff"),
                ("sonotile_fftw_axis_update", "SonotileFftwAxisUpdate"),
                ("sonotile_fftw_planes_c2r", "SonotileFftwPlanesC2R"),
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


def note_fallback() -> None:
    """One line on stderr, once per process: FFTW was wanted but XLA's FFT is used."""
    if not _state.get("noted"):
        _state["noted"] = True
        print(f"sonotile: FFTW unavailable, using XLA's FFT ({reason()})", file=sys.stderr)


def reset() -> None:
    """Forget the loaded state (tests)."""
    _state.clear()


def resolve(fft: str | None, dtype: str) -> str:
    """The backend to use: ``fftw`` on the CPU for float32 when the extension works, else xla
    (``fft`` ``"auto"``/None: :attr:`sonotile.base.config.Settings.fft` decides). In
    deterministic mode (``Settings.deterministic``) a CPU float32 run that would use FFTW
    raises :class:`RuntimeError` when the extension is unavailable, instead of using XLA's
    FFT. The backends resolved are recorded for :func:`describe`."""
    fft = fft or "auto"
    if fft == "auto":
        fft = config.current().fft
    if fft not in ("auto", "xla", "fftw"):
        raise ValueError(f"fft must be auto, xla or fftw, not {fft!r}")
    backend = _resolve(fft, dtype)
    _state.setdefault("used", set()).add(backend)
    return backend


def _resolve(fft: str, dtype: str) -> str:
    if fft == "xla":
        return "xla"
    import jax

    if jax.default_backend() != "cpu" or str(dtype) != "float32":
        return "xla"
    if available():
        return "fftw"
    if config.current().deterministic:
        raise RuntimeError(
            f"deterministic mode needs the FFTW extension, which is unavailable ({reason()}); "
            "fix that, or choose XLA's FFT explicitly (SONOTILE_FFT=xla)"
        )
    note_fallback()
    return "xla"


def describe() -> dict[str, str]:
    """What this process's FFTs ran on, for an output's provenance: ``fft_backend`` (the
    backends resolved so far, e.g. ``fftw``; ``none`` before any), ``deterministic`` (1/0),
    and where FFTW was loaded: ``fftw_plan`` (the planning effort used), ``fftw_wisdom`` (the
    wisdom file, or ``none``), ``fftw_threads``, ``fftw_version`` (``fftwf_version``),
    ``fftw_library`` (its file), ``fftw_extension`` and ``fftw_extension_sha256`` (the
    compiled extension); where XLA's FFT ran: ``xla_fft`` (jaxlib's version and platform)."""
    used = sorted(_state.get("used", ()))
    out = {
        "fft_backend": ",".join(used) or "none",
        "deterministic": "1" if config.current().deterministic else "0",
    }
    done = _state.get("configured")
    if "fftw" in used and done is not None and _state.get("path"):
        libs = find_library()
        so = _state["path"]
        out.update(
            fftw_plan=done["effort"],
            fftw_wisdom=done["wisdom"] or "none",
            fftw_threads=str(done["threads"]),
            fftw_version=library_version(libs[0]) if libs else "",
            fftw_library=libs[0] if libs else "",
            fftw_extension=os.path.basename(so),
            fftw_extension_sha256=_digest_of(so),
        )
    if "xla" in used:
        import jax
        import jaxlib

        out["xla_fft"] = f"jaxlib {jaxlib.__version__} on {jax.default_backend()}"
    return out


def _digest_of(so: str) -> str:
    try:
        with open(so + cachedir.DIGEST) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _epilogue_args(e: Epilogue) -> list[jax.Array]:
    import jax.numpy as jnp

    mode, old, m, s, G = e
    assert 1 <= mode <= 3 and (G is not None) == (mode >= 2), "epilogue: mode and field"
    args = [
        old,
        jnp.reshape(m, (-1,)).astype(jnp.float32),
        jnp.reshape(s, (1,)).astype(jnp.float32),
    ]
    return args + ([G.astype(jnp.float32)] if G is not None else [])


def conv(
    xs: Sequence[jax.Array],
    op: jax.Array | None = None,
    outs: Sequence[ConvOut] = ((0, None, None),),
    epilogues: Sequence[Epilogue | None] | None = None,
    op2: jax.Array | None = None,
) -> list[jax.Array]:
    """Spectral operators on 2-D / 3-D float32 grids of one shape, in one custom call.

    Output ``o`` of ``outs = ((src, axis, vec), ...)`` is ``irfftn(rfftn(xs[src]) * op *
    vec[k_axis])``: ``op`` real on the half spectrum and even along axis 0 (a function of
    ``|k|``: ``op[x] = op[X - x]``; only rows ``0 .. X // 2`` are read), or None; ``vec`` a 1-D
    complex vector along grid ``axis`` (its half length on the last axis), or ``axis`` and
    ``vec`` None. Outputs of one input share its forward transform (see ``sonotile_fftw_conv``
    in the C++ source).
    ``axis = "spectrum"`` (at most one per input) returns instead the complex64 half spectrum
    ``rfftn(xs[src]) * op / N`` transformed back along axis 0 only, for :func:`planes_c2r`.
    ``axis = "op2"`` (``vec`` None) returns ``irfftn(rfftn(xs[src]) * op2)``: a second real
    operator (even along axis 0, as ``op``) from the same forward transform.
    ``epilogues[o]``: an :data:`Epilogue` applied to output ``o`` (a real output along a grid
    axis), or None; its ``old`` field must not be that output's buffer (not donated).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = xs[0].shape
    half = (*shape[:-1], shape[-1] // 2 + 1)
    args = list(xs)
    if op is not None:
        args.append(jnp.broadcast_to(op, half).astype(jnp.float32))
    if any(a == "op2" for _, a, _ in outs):
        assert op2 is not None, "conv: an op2 output needs op2"
        args.append(jnp.broadcast_to(op2, half).astype(jnp.float32))
    vector = [a is not None and a not in ("spectrum", "op2") for _, a, _ in outs]
    for (_, _, v), w in zip(outs, vector):
        if w:
            assert v is not None, "conv: an output along a grid axis needs its vector"
            args.append(jnp.reshape(v, (-1,)).astype(jnp.complex64))
    epis = list(epilogues) if epilogues is not None else [None] * len(outs)
    assert len(epis) == len(outs), "conv: one epilogue (or None) per output"
    for e in epis:
        args += _epilogue_args(e) if e is not None else []
    out = [
        jax.ShapeDtypeStruct(half, jnp.complex64)
        if a == "spectrum"
        else jax.ShapeDtypeStruct(shape, jnp.float32)
        for _, a, _ in outs
    ]
    codes: dict[int | str | None, int] = {None: -1, "spectrum": -2, "op2": -3}
    return list(
        jax.ffi.ffi_call("sonotile_fftw_conv", out, vmap_method="sequential")(
            *args,
            has_op=int(op is not None),
            src=np.array([s for s, _, _ in outs], np.int64),
            axis=np.array([codes.get(a, a) for _, a, _ in outs], np.int64),
            epi=np.array([0 if e is None else e[0] for e in epis], np.int64),
        )
    )


def conv_sum(
    xs: Sequence[jax.Array],
    op: jax.Array | None,
    vecs: Sequence[tuple[int, jax.Array] | None],
) -> jax.Array:
    """``sum_j irfftn(rfftn(xs[j]) * op * vec_j[k_axis])`` on a 2-D / 3-D float32 grid, one call.

    ``op``: as in :func:`conv` (even along axis 0). ``vecs[j]``: ``(axis, vector)`` as in
    :func:`conv` (the half length on the last axis) or None. One inverse transform for the sum
    (``sonotile_fftw_conv_sum`` in the C++ source): the adjoint of the gradient in 4
    transforms' work where ``len(xs)`` :func:`conv` calls take 6.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = xs[0].shape
    half = (*shape[:-1], shape[-1] // 2 + 1)
    args = list(xs)
    if op is not None:
        args.append(jnp.broadcast_to(op, half).astype(jnp.float32))
    args += [jnp.reshape(v[1], (-1,)).astype(jnp.complex64) for v in vecs if v is not None]
    axis = np.array([-1 if v is None else v[0] for v in vecs], np.int64)
    out = jax.ShapeDtypeStruct(shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_conv_sum", out, vmap_method="sequential")
    return call(*args, has_op=int(op is not None), axis=axis)


def hermitian(vec: jax.Array, n: int, half: bool) -> jax.Array:
    """The complex64 vector a 1-D real operator ``irfft(rfft(x) * vec[: n // 2 + 1], n)`` takes
    in :func:`axis_diff`: its ``n // 2 + 1`` bins (``half``: the last axis), else all ``n`` of
    the full spectrum, ``vec[n - k] = conj(vec[k])``; the imaginary parts of bins 0 and ``n / 2``
    dropped (as an inverse real transform drops them)."""
    import jax.numpy as jnp

    h = jnp.reshape(vec, (-1,))[: n // 2 + 1].astype(jnp.complex64)
    if half:
        return h
    mid = h[1 : (n + 1) // 2]
    ends = [jnp.real(h[:1]).astype(jnp.complex64)]
    nyquist = [jnp.real(h[n // 2 :]).astype(jnp.complex64)] if n % 2 == 0 else []
    return jnp.concatenate([*ends, mid, *nyquist, jnp.conj(mid[::-1])])


def axis_kernel(like: jax.Array) -> bool:
    """True when :func:`axis_diff` takes fields like ``like``: float32, rank 3, the last axis
    even and >= 4."""
    import jax.numpy as jnp

    return (
        like.dtype == jnp.float32
        and like.ndim == 3
        and like.shape[2] % 2 == 0
        and (like.shape[2] >= 4)
    )


def axis_diff(xs: Sequence[jax.Array], outs: Sequence[tuple[int, int, jax.Array]]) -> list:
    """Operators along single axes of rank-3 float32 grids (:func:`axis_kernel`), one call.

    Output ``o`` of ``outs = ((src, axis, vec), ...)`` is ``irfft(rfft(xs[src], axis) *
    vec[: n // 2 + 1], n, axis)`` (``vec``: ``n`` or ``n // 2 + 1`` values along ``axis``):
    1-D transforms only, each output one pass each way over the grid
    (``sonotile_fftw_axis_diff`` in the C++ source). Not differentiable (see
    :func:`_axis_diff_vjp`)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = xs[0].shape
    k = 1 + max(s for s, _, _ in outs)
    vecs = [hermitian(v, shape[a], a == len(shape) - 1) for _, a, v in outs]
    out = [jax.ShapeDtypeStruct(shape, jnp.float32) for _ in outs]
    call = jax.ffi.ffi_call("sonotile_fftw_axis_diff", out, vmap_method="sequential")
    return list(
        call(
            *xs[:k],
            *vecs,
            src=np.array([s for s, _, _ in outs], np.int64),
            axis=np.array([a for _, a, _ in outs], np.int64),
        )
    )


#: One target of :func:`axis_update`: ``(old, m, terms)`` or ``(old, m, terms, (P, w))``: the
#: old field (or None: 0), the PML vectors per grid axis (or None: no damping),
#: ``((source, G), ...)`` (1 or 2 terms; G a grid, one value, or ``("mean", F, axis, s)``:
#: ``s / mean(F)`` with the next point along ``axis``, the last point ``F`` itself, as
#: :func:`sonotile.model.staggering.staggered_mean`) and ``w P`` added after (P a grid, w one
#: value)
AxisTarget = tuple[Any, ...]


def axis_update(
    srcs: Sequence[jax.Array], axis: int, vec: jax.Array, targets: Sequence[AxisTarget],
    after: Sequence[jax.Array] = (),
) -> list[jax.Array]:  # fmt: skip
    """Split-field updates from single-axis derivatives, in one call (rank-3 float32 grids,
    :func:`axis_kernel`): with ``d_s = irfft(rfft(srcs[s], axis) * vec[: n // 2 + 1], n,
    axis)`` (as :func:`axis_diff`), target ``(old, m, terms)`` becomes ``M (M old + sum G
    d_s)`` over its terms ``(s, G)``, ``M = m[axis] m[b] m[c]`` (the other axes in order; the
    PML along ``axis`` and the multi-axial one along the others); without ``m``, ``old + sum``
    (``old`` None: the sum); plus ``w P`` where given. ``after``: arrays the call waits for
    (not read). Each new field is written over its old one's buffer (XLA copies
    it first if it is still needed); no derivative is written to memory
    (``sonotile_fftw_axis_update`` in the C++ source). Not differentiable."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = srcs[0].shape
    f32 = jnp.float32
    args = [*srcs, hermitian(vec, shape[axis], axis == len(shape) - 1)]
    alias: dict[int, int] = {}
    coef_src: list[int] = []
    coef_axis: list[int] = []
    for t, (old, m, terms, *post) in enumerate(targets):
        if old is not None:
            alias[len(args)] = t
            args.append(old)
        if m is not None:
            args += [jnp.reshape(v, (-1,)).astype(f32) for v in m]
        for s, G in terms:
            coef_src.append(s)
            if isinstance(G, tuple):  # ("mean", field, axis, scale): scale / mean_axis(field)
                _, G, ax, scale = G
                coef_axis.append(ax)
                args += [
                    jnp.broadcast_to(G, shape).astype(f32),
                    jnp.reshape(scale, (1,)).astype(f32),
                ]
                continue
            coef_axis.append(-1)
            G = jnp.asarray(G, f32)
            args.append(jnp.reshape(G, (1,)) if G.size == 1 else jnp.broadcast_to(G, shape))
        if post:
            P, w = post[0]
            args += [jnp.broadcast_to(P, shape).astype(f32), jnp.reshape(w, (1,)).astype(f32)]
    out = [jax.ShapeDtypeStruct(shape, f32) for _ in targets]
    call = jax.ffi.ffi_call("sonotile_fftw_axis_update", out, input_output_aliases=alias,
                            vmap_method="sequential")  # fmt: skip
    return list(
        call(
            *args,
            *after,
            ndeps=len(after),
            axis=int(axis),
            nsrc=len(srcs),
            has_old=np.array([t[0] is not None for t in targets], np.int64),
            has_m=np.array([t[1] is not None for t in targets], np.int64),
            ncoef=np.array([len(t[2]) for t in targets], np.int64),
            coef_src=np.array(coef_src, np.int64),
            coef_axis=np.array(coef_axis, np.int64),
            has_post=np.array([len(t) > 3 for t in targets], np.int64),
        )
    )


def _axis_diff_vjp() -> Any:
    """:func:`axis_diff` with a reverse-mode rule: each output is a real circulant operator
    along its axis, whose adjoint is the same operator with ``conj(vec)``; an input's cotangent
    is the sum of its outputs' (one call for all). The vectors are constants."""
    if "axis_vjp" in _state:
        return _state["axis_vjp"]
    import jax
    import jax.numpy as jnp

    def run(xs: list, where: tuple, vecs: list) -> list:
        return axis_diff(xs, [(s, a, v) for (s, a), v in zip(where, vecs)])

    def fwd(xs: list, where: tuple, vecs: list) -> tuple[list, tuple]:
        return run(xs, where, vecs), (vecs, len(xs))

    def bwd(where: tuple, res: tuple, cts: list) -> tuple:
        vecs, n_in = res
        back = axis_diff(list(cts), [(o, a, jnp.conj(v)) for o, ((_, a), v) in
                                     enumerate(zip(where, vecs))])  # fmt: skip
        bars = [jnp.zeros_like(cts[0]) for _ in range(n_in)]
        for (s, _), b in zip(where, back):
            bars[s] = bars[s] + b
        return bars, [jnp.zeros_like(v) for v in vecs]

    f = jax.custom_vjp(run, nondiff_argnums=(1,))
    f.defvjp(fwd, bwd)
    _state["axis_vjp"] = f
    return f


def planes_c2r(
    spec: jax.Array,
    shape: Sequence[int],
    axis: int | None = None,
    vec: jax.Array | None = None,
    lo: int = 0,
    epilogue: Epilogue | None = None,
    update_axis: int | None = None,
) -> jax.Array:
    """``irfftn`` of a spectrum from :func:`conv` (``axis="spectrum"``) times the 1-D complex
    vector ``vec`` along grid ``axis`` (>= 1) or none: the transforms over the planes only.
    The output's planes are ``spec``'s planes ``lo .. lo + shape[0] - 1`` (``spec`` may have
    more planes: a padded box from :func:`xpass`). ``epilogue``: an :data:`Epilogue` applied
    to the result, written over its ``old`` field's buffer (XLA copies it first if the field
    is still needed); it updates along grid ``update_axis`` (default ``axis``; 0 for a
    derivative along x that the pass along x applied)."""
    import jax
    import jax.numpy as jnp

    args = [spec] + ([] if vec is None else [jnp.reshape(vec, (-1,)).astype(jnp.complex64)])
    alias = {}
    epi_axis = axis if update_axis is None else update_axis
    if epilogue is not None:
        assert epi_axis is not None, "planes_c2r: an epilogue needs its grid axis"
        alias = {len(args): 0}
        args += _epilogue_args(epilogue)
    out = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
    call = jax.ffi.ffi_call(
        "sonotile_fftw_planes_c2r", out, input_output_aliases=alias, vmap_method="sequential"
    )
    return call(
        *args,
        axis=-1 if axis is None else int(axis),
        lo=int(lo),
        epi=0 if epilogue is None else int(epilogue[0]),
        epi_axis=-1 if epi_axis is None else int(epi_axis),
    )


def _x_operands(
    half: tuple[int, ...], op: jax.Array | None, outs: Sequence[ConvOut]
) -> list[jax.Array]:
    """The operands after the boxes of an x-pass call: ``op`` on the box (if any), then each
    output's complex vector along axis 0 (if any)."""
    import jax.numpy as jnp

    extra = [] if op is None else [jnp.broadcast_to(op, half).astype(jnp.float32)]
    for _, a, v in outs:
        if a is not None:
            assert a == 0 and v is not None, "xpass: a vector runs along axis 0"
            extra.append(jnp.reshape(v, (-1,)).astype(jnp.complex64))
    return extra


def xpass(
    specs: Sequence[jax.Array],
    shape: Sequence[int],
    op: jax.Array | None = None,
    outs: Sequence[ConvOut] = ((0, None, None),),
    lo: int = 0,
    planes: int | None = None,
    inplace: bool = False,
    keep: tuple[int, int] | None = None,
) -> list[Any]:
    """The pass along axis 0 of :func:`conv` alone, on boxes whose planes are transformed.

    ``specs``: complex64 ``[X, plane half spectrum]`` boxes, each plane the unnormalised R2C
    of a plane of a real grid of ``shape`` (rank 2-3, ``shape[0] = X``). Output ``o`` of
    ``outs = ((src, axis, vec), ...)`` (``axis`` 0 with a complex ``vec`` of length X, or
    None) is planes ``lo .. lo + planes - 1`` (default all) of ``ifft(fft(specs[src], axis=0)
    * op * vec[k_x], axis=0) / prod(shape)``, complex64: :func:`planes_c2r` of it gives the real
    result ``irfftn(rfftn(x) * op * vec)`` on those planes. ``op``: real on the half spectrum,
    even along axis 0 (as in :func:`conv`).
    ``inplace``: output 0 is all X planes, written over ``specs[0]`` (XLA's buffer reused: the
    pass reads and writes the same memory); read its interior with ``planes_c2r(..., lo=lo)``.
    ``keep = (P, p)``: every output is the pair ``(full, others)`` of an all-to-all that keeps
    its own piece where it lies (``sonotile.parallel.mpi_ffi.transpose``): the X planes cut into
    P pieces along axis 0, stacked first: piece ``p`` written into ``full`` (``(P, X / P,
    ...)``; the other pieces left unwritten), the other pieces, in order, into ``others``
    (``(P - 1, X / P, ...)``).
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    half = tuple(specs[0].shape)
    args = list(specs) + _x_operands(half, op, outs)
    n = half[0] - lo if planes is None else planes
    out = [jax.ShapeDtypeStruct((n, *half[1:]), jnp.complex64) for _ in outs]
    if inplace:
        assert outs[0][0] == 0, "xpass: in place, output 0 is made from input 0"
        out[0] = jax.ShapeDtypeStruct(half, jnp.complex64)
    alias = {0: 0} if inplace else {}
    parts, mine = (1, -1) if keep is None else keep
    if keep is not None:
        assert not inplace and n == half[0] and half[0] % parts == 0 and 0 <= mine < parts
        piece = half[0] // parts
        full = jax.ShapeDtypeStruct((parts, piece, *half[1:]), jnp.complex64)
        rest = jax.ShapeDtypeStruct((parts - 1, piece, *half[1:]), jnp.complex64)
        out = [s for _ in out for s in (full, rest)]
    got = jax.ffi.ffi_call(
        "sonotile_fftw_xpass", out, input_output_aliases=alias, vmap_method="sequential"
    )(
        *args,
        dims=np.array(shape, np.int64),
        has_op=int(op is not None),
        lo=int(lo),
        pad=0,
        parts=int(parts),
        keep=int(mine),
        src=np.array([s for s, _, _ in outs], np.int64),
        axis=np.array([-1 if a is None else a for _, a, _ in outs], np.int64),
    )
    return list(got) if keep is None else list(zip(got[::2], got[1::2]))


def xpass_halo(
    mid: jax.Array,
    halos: tuple[jax.Array, jax.Array],
    bell: jax.Array,
    count: jax.Array | int,
    shape: Sequence[int],
    op: jax.Array | None = None,
    outs: Sequence[ConvOut] = ((0, None, None),),
    inplace: bool = False,
) -> list[jax.Array]:
    """:func:`xpass` of a box assembled from its parts while the pass reads it (no padded copy):
    ``[left | mid[:count] | right | zeros] * bell`` along axis 0, ``halos = (left, right)`` of
    ``ov`` planes each, ``mid`` of ``X - 2 ov`` planes (``shape[0] = X``; ``count``, traced or
    not, its real planes), ``bell`` real of length X. Every output is the interior planes
    ``ov .. X - ov - 1`` (complex64, ``mid``'s shape); ``inplace``: output 0 over ``mid``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    left, right = halos
    ov = left.shape[0]
    half = (shape[0], *mid.shape[1:])
    args = [mid, left, right, jnp.reshape(bell, (-1,)).astype(jnp.float32),
            jnp.reshape(jnp.asarray(count, jnp.int32), (1,))]  # fmt: skip
    args += _x_operands(half, op, outs)
    assert all(s == 0 for s, _, _ in outs), "xpass_halo: one input"
    out = [jax.ShapeDtypeStruct(mid.shape, jnp.complex64) for _ in outs]
    call = jax.ffi.ffi_call("sonotile_fftw_xpass", out, vmap_method="sequential",
                            input_output_aliases={0: 0} if inplace else {})  # fmt: skip
    return list(
        call(*args, dims=np.array(shape, np.int64), has_op=int(op is not None), lo=int(ov),
             pad=int(ov), parts=1, keep=-1, src=np.zeros(len(outs), np.int64),
             axis=np.array([-1 if a is None else a for _, a, _ in outs], np.int64))
    )  # fmt: skip


def r2c(x: jax.Array) -> jax.Array:
    """The half spectrum (last axis halved) of a float32 array of rank 1-3, unnormalised."""
    import jax
    import jax.numpy as jnp

    out = jax.ShapeDtypeStruct((*x.shape[:-1], x.shape[-1] // 2 + 1), jnp.complex64)
    return jax.ffi.ffi_call("sonotile_fftw_r2c", out, vmap_method="sequential")(x)


def c2r(
    spec: jax.Array,
    shape: Sequence[int],
    op: jax.Array | None = None,
    vec: jax.Array | None = None,
    axis: int = 0,
) -> jax.Array:
    """``irfftn(spec * op * vec[k_axis], s=shape)`` in one call: ``op`` real, half-spectrum
    shaped, or None; ``vec`` a 1-D complex vector along grid ``axis`` (its half length on the
    last axis), or None."""
    import jax
    import jax.numpy as jnp

    args = [spec]
    if op is not None:
        args.append(jnp.broadcast_to(op, spec.shape).astype(jnp.float32))
    if vec is not None:
        args.append(jnp.reshape(vec, (-1,)).astype(jnp.complex64))
    out = jax.ShapeDtypeStruct(tuple(shape), jnp.float32)
    return jax.ffi.ffi_call("sonotile_fftw_c2r", out, vmap_method="sequential")(
        *args, has_op=int(op is not None), has_vec=int(vec is not None), axis=axis
    )


def r2r_operator(f: jax.Array, op: jax.Array, kind: str, scale: float) -> jax.Array:
    """``scale * T(op * T(f))`` in one call, ``T`` the unnormalised DCT-I (``kind`` "dct1") or
    DST-I ("dst1") along every axis of a float32 array of rank 1-3 (FFTW's ``REDFT00`` /
    ``RODFT00``), ``op`` real and shaped like ``f``: the operator of
    :mod:`sonotile.fft.dtt`'s ``inverse(op * forward(f))`` with ``scale`` the inverse's
    ``1 / prod(periods)``."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    code = {"dct1": 0, "dst1": 1}[kind]
    out = jax.ShapeDtypeStruct(f.shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_r2r_op", out, vmap_method="sequential")
    return call(f, jnp.broadcast_to(op, f.shape).astype(jnp.float32), kind=code,
                scale=np.float32(scale))  # fmt: skip


def _trailing(axes: Sequence[int], ndim: int) -> int:
    """How many trailing axes ``axes`` names (they must be the last 1-3 of a rank <= 4 array)."""
    got = sorted(a % ndim for a in axes)
    k = len(got)
    if not 1 <= k <= 3 or ndim > 4 or got != list(range(ndim - k, ndim)):
        raise ValueError(f"axes {tuple(axes)}: 1-3 trailing axes of a rank <= 4 array expected")
    return k


def rfft_axes(x: jax.Array, axes: Sequence[int]) -> jax.Array:
    """``numpy.fft.rfftn(x, axes=axes)`` of a float32 array: complex64, the last axis halved to
    ``n // 2 + 1``, unnormalised; ``axes`` a trailing run (e.g. ``(2,)`` or ``(1, 2)`` of a
    3-D array), the leading axes a batch. One FFTW plan with all threads, or, for a batch of
    2-3 axes transforms (>= 2 per thread, e.g. the planes of an LFB block), groups of them in
    cache on 1-thread plans shared among the threads, as :func:`conv` transforms its planes."""
    import jax
    import jax.numpy as jnp

    k = _trailing(axes, x.ndim)
    out = jax.ShapeDtypeStruct((*x.shape[:-1], x.shape[-1] // 2 + 1), jnp.complex64)
    call = jax.ffi.ffi_call("sonotile_fftw_rfft_axes", out, vmap_method="sequential")
    return call(x.astype(jnp.float32), naxes=k)


def irfft_axes(
    X: jax.Array, n_last: int, axes: Sequence[int], scale: float | None = None
) -> jax.Array:
    """``numpy.fft.irfftn(X, s, axes=axes)`` of a complex64 half spectrum (``s``: the other
    transformed axes' lengths as they are, ``n_last`` points on the last): float32, times
    ``scale`` (default ``1 / prod(s)``, numpy's normalisation). The imaginary parts of the bins
    a real signal's spectrum has real (0 and Nyquist on the last axis) are ignored, as numpy."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    k = _trailing(axes, X.ndim)
    if X.shape[-1] != n_last // 2 + 1:
        raise ValueError(f"irfft_axes: {X.shape[-1]} bins on the last axis, not {n_last} // 2 + 1")
    shape = (*X.shape[:-1], int(n_last))
    if scale is None:
        scale = 1.0 / float(np.prod(shape[X.ndim - k :]))
    out = jax.ShapeDtypeStruct(shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_irfft_axes", out, vmap_method="sequential")
    return call(X.astype(jnp.complex64), naxes=k, scale=np.float32(scale))


def fft_axis(
    X: jax.Array, axis: int, inverse: bool = False, scale: float | None = None
) -> jax.Array:
    """``numpy.fft.fft`` (or ``ifft``) of a complex64 array (rank 1-4) along ``axis``, batched
    over the other axes, in place in the layout (strided, no transposes). The inverse is
    normalised by ``1 / n`` like numpy's; ``scale`` replaces that factor (1 on the forward)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if not 1 <= X.ndim <= 4:
        raise ValueError(f"fft_axis: rank 1-4 arrays, not {X.ndim}")
    axis = axis % X.ndim
    if scale is None:
        scale = 1.0 / X.shape[axis] if inverse and X.shape[axis] else 1.0
    out = jax.ShapeDtypeStruct(X.shape, jnp.complex64)
    call = jax.ffi.ffi_call("sonotile_fftw_fft_axis", out, vmap_method="sequential")
    return call(
        X.astype(jnp.complex64), axis=axis, sign=1 if inverse else -1, scale=np.float32(scale)
    )


def rfft_split(
    x: jax.Array, axes: Sequence[int], split_axis: int, pieces: int, keep: int | None = None
) -> Any:
    """:func:`rfft_axes` cut along ``split_axis`` (one of ``axes``) into ``pieces`` pieces,
    stacked first: shape ``(pieces, *spectrum shape with L on split_axis)``, ``L =
    ceil(s / pieces)`` for the spectrum's ``s`` points there, piece ``p`` holding indices ``[p L,
    p L + L)`` (zeros past ``s``). What an ``all_to_all`` that splits ``split_axis`` sends, made
    while each plane is in cache (no reordering pass).

    ``keep = p``: the pair ``(full, others)`` of an all-to-all that keeps its own piece where it
    lies (``sonotile.parallel.mpi_ffi.transpose``): piece ``p`` in ``full`` (the other pieces
    left unwritten), the others, in order, in ``others`` (``pieces - 1`` pieces)."""
    import jax
    import jax.numpy as jnp

    k = _trailing(axes, x.ndim)
    spec = [*x.shape[:-1], x.shape[-1] // 2 + 1]
    a = split_axis % x.ndim
    if a < x.ndim - k:
        raise ValueError(f"rfft_split: split axis {split_axis} is not among {tuple(axes)}")
    spec[a] = -(-spec[a] // pieces)
    out = [jax.ShapeDtypeStruct((pieces, *spec), jnp.complex64)]
    if keep is not None:
        assert 0 <= keep < pieces, f"rfft_split: keep {keep} of {pieces} pieces"
        out.append(jax.ShapeDtypeStruct((pieces - 1, *spec), jnp.complex64))
    call = jax.ffi.ffi_call("sonotile_fftw_rfft_split", out, vmap_method="sequential")
    mine = -1 if keep is None else keep
    got = call(x.astype(jnp.float32), naxes=k, q=a - (x.ndim - k), keep=mine)
    return got[0] if keep is None else tuple(got)


def irfft_join(
    X: jax.Array,
    shape: Sequence[int],
    axes: Sequence[int],
    split_axis: int,
    scale: float,
    axis: int | None = None,
    vec: jax.Array | None = None,
) -> jax.Array:
    """Inverse of :func:`rfft_split` times ``scale`` (``1 / prod(n)`` is numpy's ``irfftn``):
    the pieces ``X`` (``(pieces, *half spectrum with L on split_axis)``) joined along
    ``split_axis`` (entries past the spectrum's length ignored), transformed back to float32 of
    ``shape``: what an ``all_to_all`` that concatenates along ``split_axis`` receives, consumed
    without a reordering pass. ``vec``: a 1-D complex vector along grid ``axis`` (one of
    ``axes``; the whole spectrum's length there, ``n // 2 + 1`` on the last) multiplying the
    spectrum while the pieces are joined."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    shape = tuple(int(n) for n in shape)
    k = _trailing(axes, len(shape))
    a = split_axis % len(shape)
    if a < len(shape) - k or X.ndim != len(shape) + 1:
        raise ValueError(f"irfft_join: split axis {split_axis} is not among {tuple(axes)}")
    args = [X.astype(jnp.complex64)]
    vaxis = -1
    if vec is not None:
        assert axis is not None, "irfft_join: a vector needs its axis"
        vaxis = axis % len(shape) - (len(shape) - k)
        if vaxis < 0:
            raise ValueError(f"irfft_join: vector axis {axis} is not among {tuple(axes)}")
        args.append(jnp.reshape(vec, (-1,)).astype(jnp.complex64))
    out = jax.ShapeDtypeStruct(shape, jnp.float32)
    call = jax.ffi.ffi_call("sonotile_fftw_irfft_join", out, vmap_method="sequential")
    return call(*args, naxes=k, q=a - (len(shape) - k), scale=np.float32(scale), vaxis=vaxis)


def prepare(shape: tuple[int, ...]) -> bool:
    """Plan the transforms of a real grid ``shape`` now (see ``sonotile_fftw_prepare``)."""
    lib = load()
    if lib is None or not 1 <= len(shape) <= 3:
        return False
    dims = (ctypes.c_int64 * len(shape))(*shape)
    return bool(lib.sonotile_fftw_prepare(len(shape), dims))


def keep(x: jax.Array) -> jax.Array:
    """``x`` itself, materialised in memory at this point: a custom call aliasing its input,
    across which XLA cannot fuse (no data is moved)."""
    return keep_all([x])[0]


def keep_all(xs: Sequence[jax.Array]) -> list[jax.Array]:
    """The arrays ``xs`` themselves, all materialised before any of them is read after this
    point: one custom call aliasing each input to its output (no data is moved). XLA removes
    ``lax.optimization_barrier`` before it schedules a CPU program, so this is what orders
    work there (e.g. every field's transform before the first exchange)."""
    import jax

    outs = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in xs]
    call = jax.ffi.ffi_call(
        "sonotile_keep", outs, input_output_aliases={i: i for i in range(len(xs))},
        vmap_method="sequential",
    )  # fmt: skip
    return list(call(*xs))


@dataclass(frozen=True)
class FftwBackend:
    """FFTW as an FFT backend (:class:`sonotile.fft.backend.Backend` and
    :class:`~sonotile.fft.backend.SlabKernels`): float32 fields of rank 1-3. On 2-D / 3-D grids
    an operator is one :func:`conv` call (plane transforms and one pass along the outer axis,
    the operator applied inside; a gradient's components after the first from the spectrum
    that pass leaves, :func:`planes_c2r`); on 1-D grids an :func:`r2c` call and a
    multiply-and-C2R call. Several inputs' outputs along any axes: one :func:`conv` call
    (differentiable, :func:`_conv_vjp`).
    ``fuses_updates``: derivative outputs take split-field updates (:data:`Epilogue`)."""

    name: str = "fftw"
    fuses_updates: bool = True
    slab_kernels: bool = True

    def native(self, like: jax.Array) -> bool:
        import jax.numpy as jnp

        return like.dtype == jnp.float32 and 1 <= like.ndim <= 3

    def fused(self, like: jax.Array) -> bool:
        return self.native(like) and like.ndim >= 2

    def derivatives(
        self, f: jax.Array, op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue | None] | None = None,
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        epi = list(epilogues) if epilogues is not None else [None] * len(vecs)
        if not self.fused(f):
            assert all(e is None for e in epi), "fftw: updates on 2-D / 3-D grids only"
            spec = r2c(f)
            return tuple(c2r(spec, f.shape, op, v, axis=a) for a, v in enumerate(vecs))
        # the x component and the spectrum after the pass along x in one call, then each
        # other component from that spectrum: one derivative exists at a time
        first, spec = conv([f], op, [(0, 0, vecs[0]), (0, "spectrum", None)], [epi[0], None])
        rest = [planes_c2r(spec, f.shape, a, v, epilogue=epi[a]) for a, v in enumerate(vecs) if a]
        return (first, *rest)

    def operator(
        self, f: jax.Array, op: jax.Array | None, axis: int | None = None,
        vec: jax.Array | None = None, epilogue: Epilogue | None = None,
    ) -> jax.Array:  # fmt: skip
        if self.fused(f):
            return conv([f], op, [(0, axis if vec is not None else None, vec)], [epilogue])[0]
        assert epilogue is None, "fftw: updates on 2-D / 3-D grids only"
        return c2r(r2c(f), f.shape, op, vec, axis=axis or 0)

    def trig_operator(self, f: jax.Array, op: jax.Array, kind: str) -> jax.Array:
        from sonotile.fft import dtt

        scale = 1.0
        for n in f.shape:
            scale /= dtt.period(n, kind)
        return r2r_operator(f, op, kind, scale)

    def operator_sum(
        self, xs: Sequence[jax.Array], op: jax.Array | None, vecs: Sequence[jax.Array]
    ) -> jax.Array:  # fmt: skip
        assert self.fused(xs[0]), "fftw: summed operators on 2-D / 3-D grids"
        return conv_sum(list(xs), op, list(enumerate(vecs)))

    def two_operators(
        self, f: jax.Array, op: jax.Array | None, outs: Sequence[AxisVec], op2: jax.Array
    ) -> list[jax.Array]:  # fmt: skip
        if not self.fused(f):
            from sonotile.fft import xla

            return xla.BACKEND.two_operators(f, op, outs, op2)
        # outputs along x or with no vector from the call, the others (plane axes) from the
        # spectrum after the pass along x, one at a time (as ``derivatives``)
        direct = [o for o, (a, _) in enumerate(outs) if a is None or a == 0]
        planes = [o for o in range(len(outs)) if o not in direct]
        calls: list[ConvOut] = [(0, outs[o][0], outs[o][1]) for o in direct]
        calls += [(0, "op2", None)] + ([(0, "spectrum", None)] if planes else [])
        got = conv([f], op, calls, op2=op2)
        result: list[Any] = [None] * len(outs)
        for o, g in zip(direct, got):
            result[o] = g
        for o in planes:
            result[o] = planes_c2r(got[-1], f.shape, outs[o][0], outs[o][1])
        return [*result, got[len(direct)]]

    def operators(
        self, xs: Sequence[jax.Array], op: jax.Array | None,
        outs: Sequence[tuple[int, int | None, jax.Array | None]],
    ) -> list[jax.Array]:  # fmt: skip
        if not self.fused(xs[0]):
            from sonotile.fft import xla

            return xla.BACKEND.operators(xs, op, outs)
        where = tuple((s, a) for s, a, _ in outs)
        return _conv_vjp()(list(xs), op, where, [v for _, _, v in outs])

    def axis_kernel(self, like: jax.Array) -> bool:
        return axis_kernel(like)

    def axis_operators(
        self, xs: Sequence[jax.Array], outs: Sequence[tuple[int, int, jax.Array]]
    ) -> list[jax.Array]:  # fmt: skip
        if not axis_kernel(xs[0]):
            from sonotile.fft import xla

            return xla.BACKEND.axis_operators(xs, outs)
        where = tuple((s, a) for s, a, _ in outs)
        return _axis_diff_vjp()(list(xs), where, [v for _, _, v in outs])

    def axis_update(
        self, srcs: Sequence[jax.Array], axis: int, vec: jax.Array,
        targets: Sequence[AxisTarget], after: Sequence[jax.Array] = (),
    ) -> list[jax.Array]:  # fmt: skip
        return axis_update(srcs, axis, vec, targets, after)

    def along_axis(
        self, xs: Sequence[jax.Array], axis: int, vecs: Sequence[jax.Array]
    ) -> list[jax.Array]:  # fmt: skip
        from sonotile.fft import xla  # 1-D transforms: no FFTW kernel of their own

        return xla.BACKEND.along_axis(xs, axis, vecs)

    def rfftn(self, x: jax.Array) -> jax.Array:
        return r2c(x)

    def irfftn(self, X: jax.Array, shape: Sequence[int]) -> jax.Array:
        return c2r(X, shape)

    def rfft(self, x: jax.Array, axis: int) -> jax.Array:
        from sonotile.fft import xla

        return xla.BACKEND.rfft(x, axis)  # FFTW's 1-D transforms run fused (along_axis)

    def irfft(self, X: jax.Array, n: int, axis: int) -> jax.Array:
        from sonotile.fft import xla

        return xla.BACKEND.irfft(X, n, axis)

    def fft(self, X: jax.Array, axis: int) -> jax.Array:
        return fft_axis(X, axis)

    def ifft(self, X: jax.Array, axis: int) -> jax.Array:
        return fft_axis(X, axis, inverse=True)

    def keep(self, x: jax.Array) -> jax.Array:
        return keep(x)

    def keep_all(self, xs: Sequence[jax.Array]) -> list[jax.Array]:
        return keep_all(xs)

    def prepare(self, shape: tuple[int, ...]) -> None:
        prepare(shape)

    def describe(self) -> dict[str, str]:
        return {k: v for k, v in describe().items() if k.startswith("fftw")}

    # the slab decompositions' kernels (backend.SlabKernels): this module's functions
    def rfft_split(self, *args: Any, **kw: Any) -> Any:
        return rfft_split(*args, **kw)

    def irfft_join(self, *args: Any, **kw: Any) -> jax.Array:
        return irfft_join(*args, **kw)

    def xpass(self, *args: Any, **kw: Any) -> list[Any]:
        return xpass(*args, **kw)

    def xpass_halo(self, *args: Any, **kw: Any) -> list[jax.Array]:
        return xpass_halo(*args, **kw)

    def planes_c2r(self, *args: Any, **kw: Any) -> jax.Array:
        return planes_c2r(*args, **kw)

    def rfft_axes(self, x: jax.Array, axes: Sequence[int]) -> jax.Array:
        return rfft_axes(x, axes)


def _operators(xs: list, op: Any, outs: list) -> list:
    """:func:`conv`'s outputs ``outs``, those along grid axes >= 1 made by :func:`planes_c2r`
    from each input's spectrum after the pass along x (as a gradient's components): the
    pass along x back once per input, not once per output, and one such output made at a
    time. Outputs along axis 0 or without a vector come from the :func:`conv` call."""
    direct = [o for o, (_, a, _) in enumerate(outs) if a is None or a == 0]
    planes = [o for o in range(len(outs)) if o not in direct]
    srcs = sorted({outs[o][0] for o in planes})
    got = conv(xs, op, [outs[o] for o in direct] + [(i, "spectrum", None) for i in srcs])
    result: list[Any] = [None] * len(outs)
    for o, g in zip(direct, got):
        result[o] = g
    spectra = dict(zip(srcs, got[len(direct) :]))
    for o in planes:
        i, a, v = outs[o]
        result[o] = planes_c2r(spectra[i], xs[i].shape, a, v)
    return result


def _conv_vjp() -> Any:
    """:func:`conv` of real outputs along grid axes (no epilogues) with a reverse-mode rule
    (the custom call is opaque to JAX): each output is linear in its input with the kernel
    ``op vec``, half of a Hermitian-symmetric spectrum, so the adjoint of the outputs of one
    input is :func:`conv_sum` of their cotangents with ``conj(vec)``: one call per input. The
    operator and the vectors are constants (zero cotangents)."""
    if "conv_vjp" in _state:
        return _state["conv_vjp"]
    import jax
    import jax.numpy as jnp

    def run(xs: list, op: Any, where: list, vecs: list) -> list:
        return _operators(xs, op, [(s, a, v) for (s, a), v in zip(where, vecs)])

    def fwd(xs: list, op: Any, where: list, vecs: list) -> tuple[list, tuple]:
        return run(xs, op, where, vecs), (op, vecs, len(xs))

    def bwd(where: list, res: tuple, cts: list) -> tuple:
        op, vecs, n_in = res
        bars = []
        for i in range(n_in):
            mine = [o for o, (s, _) in enumerate(where) if s == i]
            pairs = [(where[o][1], jnp.conj(vecs[o])) for o in mine]
            bars.append(conv_sum([cts[o] for o in mine], op, pairs))
        zero = None if op is None else jnp.zeros_like(op)
        return bars, zero, [jnp.zeros_like(v) for v in vecs]

    f = jax.custom_vjp(run, nondiff_argnums=(2,))
    f.defvjp(fwd, bwd)
    _state["conv_vjp"] = f
    return f


#: The backend objects (:func:`sonotile.fft.backend.get`): with fused split-field updates, and
#: without (``Settings.fftw_updates`` off)
BACKEND = FftwBackend()
SEPARATE_UPDATES = FftwBackend(name="fftw-separate-updates", fuses_updates=False)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sonotile.fft.fftw``: build the extension now (scripts/setup.sh calls this)."""
    so = build(verbose=True)
    if so is None:
        print(f"sonotile: FFTW extension not built, XLA's FFT will be used ({reason()})")
        return 0
    print(f"sonotile: FFTW extension {so}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
