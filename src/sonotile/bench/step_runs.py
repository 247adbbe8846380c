"""``sonotile-kwave`` as whole processes with each step and FFT on one input file.

Each variant (:data:`VARIANTS`) is a setting of ``SONOTILE_STEP`` and ``SONOTILE_FFT``: the plain
step and the stacked step (:mod:`sonotile.physics.acoustic.stacked_step`), each on XLA's FFT and
on sonotile's cuFFT calls (:mod:`sonotile.fft.cufft`; those variants only where a library is
named). :func:`sweep` runs every variant twice, alternating variants: first with an empty
compilation cache of its own (``cold``: tracing and compiling included), then with that cache
filled (``warm``: the time loop as a user's second run meets it); an untimed run with the
compilation cache off comes first, so that what the cache folder holds besides programs (the
FFTW extension, its wisdom) is made before any timed run. Per run: wall and CPU time,
peak RSS, the loop's own timer per step (``simulation_phase_execution_time`` / steps), and what
ran (the output's ``sonotile_decomposition`` and ``sonotile_fft`` attributes); per variant the
largest difference of each recorded dataset from the plain step's output, relative to that
dataset's peak.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from sonotile.bench.whole import run_process, simulation_phase_s

#: variant -> the settings it runs with (environment variables)
VARIANTS: dict[str, dict[str, str]] = {
    "plain": {"SONOTILE_STEP": "plain", "SONOTILE_FFT": "xla"},
    "stacked": {"SONOTILE_STEP": "stacked", "SONOTILE_FFT": "xla"},
    "plain_cufft": {"SONOTILE_STEP": "plain", "SONOTILE_FFT": "cufft"},
    "stacked_cufft": {"SONOTILE_STEP": "stacked", "SONOTILE_FFT": "cufft"},
}
#: what each run records (k-Wave flags) and compares between variants
FLAGS = ("--p_raw", "--p_final")
DATASETS = ("p", "p_final")


def variants(cufft_lib: str | None) -> list[str]:
    """The variants to run: the cuFFT ones only where ``cufft_lib`` names an existing file."""
    with_cufft = bool(cufft_lib) and os.path.exists(str(cufft_lib))
    return [v for v in VARIANTS if with_cufft or "cufft" not in v]


def what_ran(path: str) -> dict[str, str]:
    """The output's ``sonotile_decomposition`` (``..., stacked step`` for the stacked one) and
    ``sonotile_fft`` attributes."""
    import h5py

    out = {}
    with h5py.File(path, "r") as f:
        for key in ("sonotile_decomposition", "sonotile_fft"):
            v = f.attrs.get(key)
            out[key.removeprefix("sonotile_")] = v.decode() if isinstance(v, bytes) else str(v)
    return out


def max_rel_diff(ref: str, got: str) -> dict[str, float]:
    """Per dataset of :data:`DATASETS`: ``max |got - ref| / max |ref|`` (NaN where not finite)."""
    import h5py
    import numpy as np

    out = {}
    with h5py.File(ref, "r") as a, h5py.File(got, "r") as b:
        for name in DATASETS:
            x, y = np.asarray(a[name], np.float64), np.asarray(b[name], np.float64)
            peak = float(np.abs(x).max())
            diff = float(np.abs(x - y).max()) / peak if peak else float("nan")
            out[name] = diff if np.isfinite(diff) else float("nan")
    return out


def one_run(path: str, out: str, env: dict, steps: int) -> dict[str, Any]:
    """One ``sonotile-kwave`` process on ``path`` writing ``out``: times, peak RSS, what ran;
    ``error`` instead where it failed."""
    cmd = [sys.executable, "-m", "sonotile.kwave.cli", "-i", path, "-o", out, *FLAGS]
    try:
        run: dict[str, Any] = run_process(cmd, env)
    except RuntimeError as e:
        return {"error": str(e)[-1500:]}
    run["loop_s"] = simulation_phase_s(out)
    run["loop_ms_per_step"] = 1e3 * run["loop_s"] / steps
    run.update(what_ran(out))
    return run


def sweep(
    path: str, steps: int, names: list[str], workdir: str, env: dict,
    on_row: Callable[[dict], None] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every variant of ``names`` on ``path``, cold then warm (see the module docstring);
    ``on_row(result)`` after each run. The outputs are removed."""
    env = {**env, "XDG_CACHE_HOME": os.path.join(workdir, "cache")}  # cold means cold
    runs: dict[str, dict[str, Any]] = {v: {} for v in names}
    res: dict[str, Any] = {"steps": steps, "variants": names, "runs": runs}
    outs = {v: os.path.join(workdir, f"{v}.h5") for v in names}
    prime = {**env, **VARIANTS["plain"], "SONOTILE_COMPILATION_CACHE": "0"}
    res["prime"] = one_run(path, outs["plain"], prime, steps)
    for phase in ("cold", "warm"):
        for v in names:
            t0 = time.perf_counter()
            runs[v][phase] = one_run(path, outs[v], {**env, **VARIANTS[v]}, steps)
            runs[v][phase]["process_s"] = time.perf_counter() - t0
            if on_row is not None:
                on_row(res)
    ok = [v for v in names if os.path.exists(outs[v])]
    if "plain" in ok:
        res["max_rel_diff_vs_plain"] = {v: max_rel_diff(outs["plain"], outs[v]) for v in ok}
    for v in names:
        warm = runs[v].get("warm", {})
        if "loop_ms_per_step" in warm and "loop_ms_per_step" in runs["plain"].get("warm", {}):
            res.setdefault("plain_over", {})[v] = (
                runs["plain"]["warm"]["loop_ms_per_step"] / warm["loop_ms_per_step"]
            )
    for out in outs.values():
        if os.path.exists(out):
            os.remove(out)
    return res
