"""The unstacked step (XLA's FFT) against the stacked step (:mod:`sonotile.physics.acoustic.
stacked_step`, on cuFFT through XLA's FFI or its CPU stand-in) on the same input in one process:
loop time per step, the bytes each moves per grid point, and how far their fields drift apart.

:func:`counted_bytes` is the stacked step's byte count per grid point and step, pass by pass
(reads + writes; float32; a transform counted as one read of its input and one write of its
output, the least cuFFT can do: a 3-D transform of 256^3 takes more than one pass inside).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from sonotile.bench import stacked_run as sr
from sonotile.bench.inprocess import bench_problem
from sonotile.physics.acoustic import stacked_step as ss

#: bytes per grid point of one float32 field and of its complex64 half spectrum
R, H = 4, 4


def counted_bytes(absorbing: bool) -> dict[str, int]:
    """The stacked step's passes for the benchmark cases (``absorbing``: heterogeneous rho0,
    c0, B/A, power law with dispersion, ``dt/rho0_sg`` derived from rho0; else homogeneous
    lossless, every coefficient a number): bytes read + written per grid point."""
    passes = {
        "forward p": R + H,
        "grad multiply (P, kappa/N -> 3 spectra)": H + H // 2 + 3 * H,
        "inverse x3": 3 * H + 3 * R,
        "velocity update (dp, u, rho0 -> u)": 3 * R + 3 * R + (R if absorbing else 0) + 3 * R,
        "forward u x3": 3 * R + 3 * H,
        "div multiply (U, kappa/N -> 3 spectra)": 3 * H + H // 2 + 3 * H,
        "inverse x3 (div)": 3 * H + 3 * R,
        "density update (du, rho, rho0 -> rho)": 3 * R + 3 * R + (R if absorbing else 0) + 3 * R,
    }
    if absorbing:
        passes.update({
            "rho0 div u, sum rho -> (2, grid)": 3 * R + R + 3 * R + 2 * R,
            "forward x2": 2 * R + 2 * H,
            "power-law multiply (nabla1/N, nabla2/N)": 2 * H + 2 * (H // 2) + 2 * H,
            "inverse x2": 2 * H + 2 * R,
            "pressure (rho, B/A, c0^2, tau, 2 operator outputs -> p)": 3 * R + 3 * R + 2 * R + R,
        })  # fmt: skip
    else:
        passes["pressure (rho -> p)"] = 3 * R + R
    passes["total"] = sum(passes.values())
    return passes


def transform_check(fft: str, shape: tuple[int, ...] = (3, 12, 10, 9)) -> dict[str, float]:
    """The batched FFT ``fft`` against ``jnp.fft`` on random float32 data of ``shape`` (a
    batch of 3-D grids, odd last axis): the largest difference of the forward transform and of
    the unnormalised inverse, relative to the largest magnitude of the reference result."""
    from sonotile.fft import batched

    be = batched.get(fft)
    x = jax.numpy.asarray(np.random.default_rng(0).standard_normal(shape), np.float32)
    ref = jax.numpy.fft.rfftn(x, axes=(1, 2, 3))
    got = be.forward(x, 3)
    back = be.inverse(ref, shape[1:])

    def rel(a: Any, b: Any) -> float:
        a, b = np.asarray(a), np.asarray(b)
        return float(np.abs(a - b).max() / np.abs(b).max())

    return {"forward": rel(got, ref), "inverse": rel(back, np.asarray(x) * np.prod(shape[1:]))}


def _best_s(fresh: Any, run: Any, repeat: int = 2) -> float:
    """Seconds of the fastest of ``repeat`` calls ``run(fresh())`` (the start state copied
    before the clock starts: the loops donate it)."""
    best = float("inf")
    for _ in range(repeat):
        state = jax.block_until_ready(fresh())
        t0 = time.perf_counter()
        jax.block_until_ready(run(state))
        best = min(best, time.perf_counter() - t0)
    return best


def compare(
    case: str,
    n: int,
    steps: int,
    fft: str,
    profile: Callable[[Callable[[], Any]], dict] | None = None,
) -> dict:
    """Both steps on :func:`sonotile.bench.inprocess.bench_problem` ``(case, n, steps)`` (one
    pressure source point, additive): ms per step of each loop (best of two, compiled first),
    and the largest difference of their pressure and velocity after ``steps`` steps relative to
    the field's largest magnitude. ``fft``: the stacked step's FFT (``cufft``, ``xla``).
    ``profile``: called with each loop (a function of no arguments running all steps); what it
    returns (e.g. kernel times) goes to ``"profile"``."""
    t0 = time.perf_counter()
    s = sr.setup(bench_problem(case, n, steps), steps)
    c, ops, start = s.stacked(fft)
    r: dict[str, Any] = {"case": case, "n": n, "steps": steps, "fft": fft,
                         "setup_s": time.perf_counter() - t0}  # fmt: skip

    def ref(state: Any) -> Any:
        return sr.run_unstacked(state, s.xs, s.c, s.ops, s.phys)

    def new(state: Any) -> Any:
        return sr.run_stacked(state, s.xs, c, ops, s.phys)

    def fresh_ref() -> Any:
        return jax.tree.map(lambda a: a + 0, s.start)

    def fresh_new() -> Any:
        return jax.tree.map(lambda a: a + 0, start)

    t1 = time.perf_counter()
    a = ref(fresh_ref())
    b = ss.unstack_state(new(fresh_new()))
    r["first_runs_s"] = time.perf_counter() - t1
    diff = {}
    for name, x, y in (("p", a.p, b.p), *((f"u{i}", a.u[i], b.u[i]) for i in range(3))):
        x, y = np.asarray(x), np.asarray(y)
        peak = float(np.abs(x).max())
        diff[name] = float(np.abs(x - y).max()) / peak if peak else None
        if not (np.isfinite(x).all() and np.isfinite(y).all()):
            diff[name] = float("nan")
    r["max_rel_diff"] = diff
    del a, b
    r["xla_ms_per_step"] = 1e3 * _best_s(fresh_ref, ref) / steps
    r["stacked_ms_per_step"] = 1e3 * _best_s(fresh_new, new) / steps
    r["speedup"] = r["xla_ms_per_step"] / r["stacked_ms_per_step"]
    if profile is not None:
        r["profile"] = {"xla": profile(lambda: ref(fresh_ref())),
                        "stacked": profile(lambda: new(fresh_new()))}  # fmt: skip
    r["stacked_counted_bytes_per_point"] = counted_bytes(case != "lossless")["total"]
    one = jax.tree.map(lambda a: a[:1], s.xs)  # one step: XLA's counts are per program run
    xla = sr.run_unstacked.lower(s.start, one, s.c, s.ops, phys=s.phys).compile()
    r["xla_bytes_per_point"] = bytes_per_point(xla, s.start.p.size)
    r["hlo_ops"] = {
        "xla": hlo_ops(xla),
        "stacked": hlo_ops(sr.run_stacked.lower(start, one, c, ops, phys=s.phys).compile()),
    }
    return r


def hlo_ops(compiled: Any) -> dict[str, int]:
    """How many of each kind of instruction that moves data a compiled program holds, fused
    ones included (fusion: kernels XLA made; fft: XLA's transforms; custom-call: cuFFT's here)."""
    ops = re.findall(r"=\s*\S+\s+(\w[\w-]*)\(", compiled.as_text())
    kinds = ("fusion", "fft", "custom-call", "copy", "concatenate", "transpose")
    return {k: ops.count(k) for k in kinds}


def bytes_per_point(compiled: Any, points: int) -> float | None:
    """XLA's own count (cost analysis) of the bytes a compiled program accesses, per point."""
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    b = (cost or {}).get("bytes accessed")
    return float(b) / points if b else None
