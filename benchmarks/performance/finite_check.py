"""What the per-chunk NaN/Inf check of the time loop costs.

    .venv/bin/python benchmarks/performance/finite_check.py --size 96 --steps 40 --chunk 10 \
        --rounds 10

Runs the bench case (``sonotile.bench.inprocess.bench_problem``) through
``runner.run_engine`` with ``check_finite`` on and off, the order alternating between rounds,
in chunks of ``--chunk`` steps (shorter chunks than a run's, which last about a second: the
check's largest share), on one thread. Prints the time per step of each, their ratio, and the
check alone (``finite.state_finite`` of the state) per call.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--case", default="absorbing_nonlinear")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    from sonotile.base import runtime

    runtime.configure_threads(a.threads)
    from sonotile.bench.inprocess import bench_problem
    from sonotile.solver import finite, runner

    engine = runner.single_engine(bench_problem(a.case, a.size, a.steps))
    times: dict[bool, list[float]] = {True: [], False: []}
    for r in range(a.rounds + 1):  # round 0 compiles and is not counted
        for on in (True, False) if r % 2 == 0 else (False, True):
            t = time.perf_counter()
            runner.run_engine(engine, chunk=a.chunk, progress=False, check_finite=on)
            if r:
                times[on].append((time.perf_counter() - t) / a.steps * 1e3)
    for on in (True, False):
        print(f"check_finite={on}: {statistics.median(times[on]):.2f} ms/step (median), "
              f"min {min(times[on]):.2f}")  # fmt: skip
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    print(f"on / off: {ratio:.3f} (median), {min(times[True]) / min(times[False]):.3f} (min)")
    state = engine.start()[0].carry[0]
    bool(finite.state_finite(state))
    alone = []
    for _ in range(20):
        t = time.perf_counter()
        bool(finite.state_finite(state))
        alone.append(time.perf_counter() - t)
    print(f"the check alone: {statistics.median(alone) * 1e3:.2f} ms per chunk")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
