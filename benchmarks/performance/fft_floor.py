"""The FFT floor of one k-space step on CPU: a 3-D R2C + C2R pair, XLA vs FFTW vs pocketfft
vs sonotile's own transforms.

    .venv/bin/python benchmarks/performance/fft_floor.py --size 128 --repeats 5 [--threads 2] \
        [--fftw-lib libfftw3f.so.3,/path/to/libmkl_rt.so.3]

XLA: ``jnp.fft.rfftn`` + ``irfftn`` jitted, ``--pairs`` pairs per call inside ``lax.scan``
(dispatch amortised). FFTW: the system ``libfftw3f`` through ctypes (the library k-Wave's OMP
binary links), FFTW_MEASURE plans, threads from ``libfftw3f_omp``. pocketfft: ``scipy.fft``
with ``workers``. sonotile: the solver's FFTW extension (its planned transforms and, on
lengths and CPUs it covers, its own vector kernel) through the ``fftw`` backend, one operator
call per pair inside ``lax.scan`` as for XLA. They are timed round-robin (A B C D A B C D ...)
so that load from other processes hits all of them alike; the ratios of each round are
reported, against XLA (the yardstick shared by runs of other ``--fftw-lib`` libraries).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import statistics
import sys
import time

import numpy as np


def _threads_lib(lib, path: str):
    """The library holding ``fftwf_init_threads``: ``lib`` itself (MKL's FFTW3 interface) or
    FFTW's ``libfftw3f_omp`` / ``libfftw3f_threads`` next to it."""
    if hasattr(lib, "fftwf_init_threads"):
        return lib
    d = os.path.dirname(path)
    for name in ("libfftw3f_omp.so.3", "libfftw3f_threads.so.3"):
        try:
            return ctypes.CDLL(os.path.join(d, name) if d else name)
        except OSError:
            continue
    return None


def fftw_pair(n: int, threads: int, path: str = "libfftw3f.so.3"):
    """A callable running one R2C + C2R pair on an n^3 float32 array through the FFTW API of
    the library ``path`` (Debian's FFTW by default; another FFTW build, or MKL's
    ``libmkl_rt``), or None."""
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    thr = _threads_lib(lib, path)
    if thr is not None:
        thr.fftwf_init_threads()
        thr.fftwf_plan_with_nthreads(ctypes.c_int(threads))
    lib.fftwf_plan_dft_r2c_3d.restype = ctypes.c_void_p
    lib.fftwf_plan_dft_c2r_3d.restype = ctypes.c_void_p
    lib.fftwf_execute.argtypes = [ctypes.c_void_p]
    real = np.zeros((n, n, n), np.float32)
    back = np.zeros((n, n, n), np.float32)
    spec = np.zeros((n, n, n // 2 + 1), np.complex64)
    measure = 0
    ptr = ctypes.c_void_p
    r2c = lib.fftwf_plan_dft_r2c_3d(
        n, n, n, ptr(real.ctypes.data), ptr(spec.ctypes.data), ctypes.c_uint(measure)
    )
    c2r = lib.fftwf_plan_dft_c2r_3d(
        n, n, n, ptr(spec.ctypes.data), ptr(back.ctypes.data), ctypes.c_uint(measure)
    )
    real[...] = np.random.default_rng(0).standard_normal(real.shape)

    def run(pairs: int) -> None:
        for _ in range(pairs):
            lib.fftwf_execute(r2c)
            lib.fftwf_execute(c2r)

    run.keep = (real, back, spec)  # buffers must outlive the plans
    return run


def scanned(pair, n: int, pairs: int):
    """A callable running ``pairs`` applications of ``pair`` (one jitted ``lax.scan``, compiled
    here) to an n^3 float32 field."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    f = jax.jit(lambda x: lax.scan(lambda y, _: (pair(y), None), x, None, length=pairs)[0])
    x = jnp.asarray(np.random.default_rng(0).standard_normal((n, n, n)), jnp.float32)
    jax.block_until_ready(f(x))

    def run(_pairs: int) -> None:
        jax.block_until_ready(f(x))

    return run


def xla_pair(n: int, pairs: int):
    import jax.numpy as jnp

    return scanned(lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x), s=x.shape) * (1.0 / x.size), n, pairs)


def sonotile_pair(n: int, pairs: int):
    """One R2C + C2R pair per step of a scanned loop through the solver's FFTW backend, or None
    where its extension is not available."""
    import jax.numpy as jnp

    from sonotile.fft import backend

    if backend.resolve("fftw", "float32") == "xla":
        return None
    be = backend.get("fftw")
    one = jnp.ones((n, n, n // 2 + 1), jnp.float32)
    return scanned(lambda x: be.operator(x, one), n, pairs)


def scipy_pair(n: int, threads: int):
    try:
        import scipy.fft as sf
    except ImportError:
        return None
    x = np.random.default_rng(0).standard_normal((n, n, n)).astype(np.float32)

    def run(pairs: int) -> None:
        for _ in range(pairs):
            sf.irfftn(sf.rfftn(x, workers=threads), s=x.shape, workers=threads)

    return run


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument(
        "--fftw-lib",
        default="libfftw3f.so.3",
        help="libraries whose FFTW API is timed, comma-separated (e.g. an AVX-512 build of FFTW, "
        "or MKL's libmkl_rt.so.3), each in the same round-robin",
    )
    a = p.parse_args(argv)
    threads = a.threads or len(os.sched_getaffinity(0))
    if a.threads:
        from sonotile.base.runtime import configure_threads

        configure_threads(a.threads)
    n = a.size
    runners = {"xla": xla_pair(n, a.pairs)}
    libs = a.fftw_lib.split(",")
    names = {path: "fftw" if i == 0 else os.path.basename(path).split(".")[0]
             for i, path in enumerate(libs)}  # fmt: skip
    plan_s = {}
    for path in libs:
        t0 = time.perf_counter()
        pair = fftw_pair(n, threads, path)
        plan_s[names[path]] = time.perf_counter() - t0
        if pair is not None:
            runners[names[path]] = pair
    own = sonotile_pair(n, a.pairs)
    if own is not None:
        runners["sonotile"] = own
    sp = scipy_pair(n, threads)
    if sp is not None:
        runners["pocketfft"] = sp
    for r in runners.values():
        r(1)
    times = {k: [] for k in runners}
    for _ in range(a.repeats):
        for k, r in runners.items():
            t = time.perf_counter()
            r(a.pairs)
            times[k].append((time.perf_counter() - t) / a.pairs * 1e3)
    print(f"{n}^3 R2C+C2R pair, {threads} thread(s), {a.pairs} pairs x {a.repeats} rounds, "
          f"FFTW API from {', '.join(libs)}")  # fmt: skip
    print("FFTW_MEASURE planning: " + ", ".join(f"{k} {v:.2f} s" for k, v in plan_s.items()))
    for k, v in times.items():
        print(
            f"  {k:10s} median {statistics.median(v):7.2f} ms  (min {min(v):.2f}, max {max(v):.2f})"
        )
    for k in times:
        if k != "xla":
            r = [x / f for x, f in zip(times["xla"], times[k])]
            print(
                f"  XLA / {k} per round: median {statistics.median(r):.2f} "
                f"(min {min(r):.2f}, max {max(r):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
