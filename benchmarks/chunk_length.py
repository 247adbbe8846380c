"""What one call of the compiled time loop costs: time per step by steps per chunk.

    .venv/bin/python benchmarks/chunk_length.py --size 256 --case absorbing_nonlinear \
        --threads 2 --lengths 1,2,4,8 --rounds 3 [--out chunk_length.json]

Writes the bench case's input (``sonotile.bench.inprocess.write_input``) to a temporary file,
reads it as ``sonotile-kwave`` does, and runs the single-device engine's chunk program
(``engine.chunk`` on ``runner.padded_inputs``, the allocator and threads set as the entry
points set them) with chunks of each length, ~8 steps per sample, the lengths alternating
forwards and backwards between rounds. Prints the median time per step for each length and
the fixed cost per call differenced between the shortest and the longest length; with
``--out`` the figures go to a JSON file too. ``SONOTILE_MALLOC_TUNE=0`` shows the same with
glibc's allocator left alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--case", default="absorbing_nonlinear")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--lengths", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    lengths = sorted({int(x) for x in a.lengths.split(",")})
    if not lengths or lengths[0] < 1:
        ap.error(f"--lengths {a.lengths!r}: give positive step counts, e.g. 1,2,4,8")

    from sonotile.base import runtime

    runtime.enable_env()
    runtime.configure_threads(a.threads)
    import jax

    from sonotile.bench.inprocess import write_input
    from sonotile.kwave.reader import read_input
    from sonotile.solver import runner as rn

    per_sample = max(8, lengths[-1])
    steps = 1 + sum(lengths) + a.rounds * len(lengths) * 2 * per_sample
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.h5")
        write_input(path, a.case, a.size, steps)
        problem, _ = read_input(path)
    engine = rn.single_engine(problem)
    rs, _ = engine.start()
    state = {"carry": rs.carry, "n": rs.next_step}

    def call(m: int) -> float:
        n = state["n"]
        xs = rn.padded_inputs(problem, n, n + m, m)
        t = time.perf_counter()
        state["carry"], raw = engine.chunk(state["carry"], xs)
        jax.block_until_ready((state["carry"], raw))
        state["n"] = n + m
        return time.perf_counter() - t

    for m in lengths:  # compile (or load) each program once
        call(m)
    ms: dict[int, list[float]] = {m: [] for m in lengths}
    for r in range(a.rounds):
        for m in lengths if r % 2 == 0 else lengths[::-1]:
            calls = max(1, per_sample // m)
            ms[m].append(1e3 * sum(call(m) for _ in range(calls)) / (calls * m))
    med = {m: statistics.median(v) for m, v in ms.items()}
    lo, hi = lengths[0], lengths[-1]
    per_call = (med[lo] - med[hi]) / (1 / lo - 1 / hi) if hi > lo else float("nan")
    print(f"{a.case} {a.size}^3, threads {a.threads or 'default'}, {a.rounds} rounds")
    for m in lengths:
        each = [round(x, 1) for x in ms[m]]
        print(f"  {m:4d} steps per chunk: {med[m]:8.1f} ms per step  {each}")
    print(f"  fixed cost per call (differenced {lo} vs {hi}): {per_call:.0f} ms")
    if a.out:
        res = {"argv": sys.argv[1:], "ms_per_step": ms, "median": med, "per_call_ms": per_call,
               "load_average_1min": os.getloadavg()[0]}  # fmt: skip
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
