"""How sonotile-kwave and k-Wave's OMP solver scale with threads, as whole processes.

:func:`sweep` writes one k-Wave input file per case and runs both programs on it at each thread
count (``-t N``, ``OMP_NUM_THREADS=N``), the order of the two alternating from one run to the
next (:func:`sonotile.bench.whole.run_order`), thread counts ascending. Each run records its own
time-loop timer per step (``simulation_phase_execution_time`` / steps: k-Wave's excludes its
FFTW planning; sonotile's includes loading the compiled step from the cache, which untimed
warm-up runs fill at one and at the most threads: XLA's program differs only between one
thread and more), the pre-processing phase (FFTW planning: k-Wave plans every run, sonotile at
a thread count its wisdom has no plans for yet), the whole process's wall and CPU time, and
its peak RSS. :func:`efficiency` gives each program's speed-up over its own one-thread run and
its parallel efficiency ``t(1) / (N t(N))``, and the k-Wave / sonotile ratio per count.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from sonotile.bench.inprocess import write_input
from sonotile.bench.whole import run_order, run_process, simulation_phase_s

TOOLS = ("kwave", "sonotile")


def command(tool: str, kwave: str | None, path: str, out: str, threads: int) -> list[str]:
    """One program's command line at ``threads`` threads (pressure at the sensors)."""
    flags = ["-i", path, "-o", out, "-p", "-t", str(threads)]
    if tool == "kwave":
        return [str(kwave), *flags]
    return [sys.executable, "-m", "sonotile.kwave.cli", *flags]


def one_run(tool: str, kwave: str | None, path: str, threads: int, env: dict, steps: int) -> dict:
    """A whole process of ``tool`` on ``path``: loop time per step [ms], wall and CPU [s],
    peak RSS [bytes]; the output file is removed."""
    out = path + f".{tool}.out.h5"
    run = run_process(command(tool, kwave, path, out, threads),
                      {**env, "OMP_NUM_THREADS": str(threads)})  # fmt: skip
    run["loop_s"] = simulation_phase_s(out)
    run["loop_ms_per_step"] = 1e3 * run["loop_s"] / steps
    run["preprocessing_s"] = preprocessing_s(out)
    os.remove(out)
    return run


def preprocessing_s(path: str) -> float | None:
    """The output file's ``pre-processing_phase_execution_time`` [s] (FFTW planning: k-Wave's
    every run, sonotile's where its wisdom has no plan for this thread count), if present."""
    import h5py

    with h5py.File(path, "r") as f:
        v = f.attrs.get("pre-processing_phase_execution_time")
    if v is None:
        return None
    return float((v.decode() if isinstance(v, bytes) else str(v)).strip().rstrip("s"))


def sweep(
    kwave: str | None,
    cases: list[str],
    n: int,
    steps: int,
    threads: list[int],
    workdir: str,
    env: dict,
    deadline: float | None = None,
    on_row: Callable[[dict], None] | None = None,
) -> dict[str, Any]:
    """Both programs (sonotile alone when ``kwave`` is None) on each case at each thread count;
    runs stop once ``time.perf_counter()`` passes ``deadline`` (the rows so far are kept)."""
    tools = [t for t in TOOLS if t == "sonotile" or kwave]
    rows: list[dict] = []
    res: dict[str, Any] = {"grid": [n] * 3, "steps": steps, "threads": threads, "cases": cases,
                           "tools": tools, "rows": rows, "complete": False}  # fmt: skip
    paths = {}
    for case in cases:
        paths[case] = os.path.join(workdir, f"{case}_{n}.h5")
        t0 = time.perf_counter()
        write_input(paths[case], case, n, steps)
        res.setdefault("write_input_s", {})[case] = time.perf_counter() - t0

    def late() -> bool:
        return deadline is not None and time.perf_counter() > deadline

    for case in cases:  # fills the FFTW extension, its wisdom and the compiled programs
        for t in sorted({min(threads), max(threads)}):
            if late():
                return res
            one_run("sonotile", None, paths[case], t, env, steps)
    i = 0
    for t in sorted(threads):
        for case in cases:
            for tool in run_order(i) if len(tools) == 2 else tools:
                if late():
                    return res
                row = {"case": case, "threads": t, "tool": tool}
                row.update(one_run(tool, kwave, paths[case], t, env, steps))
                rows.append(row)
                if on_row is not None:
                    on_row(res)
            i += 1
    res["complete"] = True
    res["efficiency"] = efficiency(rows)
    return res


def efficiency(rows: list[dict]) -> dict[str, Any]:
    """Per case and program: per thread count the loop time per step [ms], whole wall [s], peak
    RSS [bytes], speed-up over one thread and parallel efficiency ``t(1) / (N t(N))`` of the loop
    and of the wall time; per count the ratio k-Wave / sonotile of both (> 1: sonotile faster)."""
    out: dict[str, Any] = {}
    for case in dict.fromkeys(r["case"] for r in rows):
        per: dict[str, Any] = {}
        for tool in TOOLS:
            runs = {r["threads"]: r for r in rows if r["case"] == case and r["tool"] == tool}
            if not runs:
                continue
            base = runs.get(1)
            per[tool] = {}
            for t, r in sorted(runs.items()):
                cell = {"loop_ms_per_step": r["loop_ms_per_step"], "wall_s": r["wall_s"],
                        "peak_rss_bytes": r["peak_rss_bytes"]}  # fmt: skip
                if base is not None:
                    for key, name in (("loop_ms_per_step", "loop"), ("wall_s", "wall")):
                        if r[key] > 0 and base[key] > 0:  # k-Wave's timer: 10 ms steps
                            cell[f"{name}_speedup"] = base[key] / r[key]
                            cell[f"{name}_efficiency"] = base[key] / (t * r[key])
                per[tool][str(t)] = cell
        if "kwave" in per and "sonotile" in per:
            per["kwave_over_sonotile"] = {
                t: {key: per["kwave"][t][key] / s[key] for key in ("loop_ms_per_step", "wall_s")
                    if s[key] > 0 and per["kwave"][t][key] > 0}
                for t, s in per["sonotile"].items() if t in per["kwave"]
            }  # fmt: skip
        out[case] = per
    return out
