"""Step time of the solver with XLA's FFT vs FFTW's operator calls.

    .venv/bin/python benchmarks/fft_backends.py --size 128 --steps 20 --rounds 6 \
        --case lossless --threads 1 [--variants xla,fftw]

``fftw``: one call per operator (``sonotile_fftw_conv``); ``xla``: XLA's FFT.
Each variant is the whole ``sonotile bench`` case (same input file, same ``runner.run_chunk``)
compiled under its own settings; the runs
alternate round-robin in one process and the speed of each variant relative to ``xla`` is
given per round (median, min, max), with CPU time / wall time and the compiled memory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

#: each variant's settings (:class:`sonotile.base.config.Settings` attributes)
VARIANTS = {"xla": {"fft": "xla"}, "fftw": {"fft": "fftw"}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--case", default="lossless")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--variants", default="xla,fftw")
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
    import numpy as np

    from sonotile.base import config
    from sonotile.bench.inprocess import SonotileCase, write_input
    from sonotile.fft import fftw

    names = [v.strip() for v in a.variants.split(",")]
    cases = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.h5")
        write_input(path, a.case, a.size, a.steps)
        for name in names:
            old = config.current()
            config.configure(**VARIANTS[name])
            try:
                cases[name] = SonotileCase(path, a.steps)
            finally:
                config.configure(old)
            print(f"  {name}: ops.fft={cases[name].cp.ops.fft}, first step after "
                  f"{cases[name].first_step_s:.2f} s", flush=True)  # fmt: skip

    def final_p(sc):
        carry, _ = sc.compiled(sc._carry(), sc.xs, sc.cp.consts, sc.cp.ops, sc.cp.index)
        return np.asarray(carry[0].p)

    ref = final_p(cases[names[0]])
    rel = {
        k: float(np.max(np.abs(final_p(c) - ref)) / max(np.max(np.abs(ref)), 1e-30))
        for k, c in cases.items()
    }
    times = {k: [] for k in cases}
    cpu = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k, sc in cases.items():
            t = sc.run()
            times[k].append(t / a.steps * 1e3)
            cpu[k].append(sc.last_cpu_s / t)
    print(
        f"{a.case} {a.size}^3, {a.steps} steps x {a.rounds} rounds, threads {a.threads} "
        f"(FFTW {fftw.threads()}), load {os.getloadavg()[0]:.1f}"
    )
    for k, t in times.items():
        m = cases[k].memory
        print(
            f"  {k:10s} {statistics.median(t):7.1f} ms/step (min {min(t):.1f}, max {max(t):.1f})"
            f"  CPU/wall {statistics.median(cpu[k]):.2f}"
            f"  compiled {m.get('peak_bytes', 0) / a.size**3:.1f} B/pt"
            f"  max rel diff of p vs {names[0]}: {rel[k]:.1e}"
        )
    for k in names[1:]:
        r = [x / f for x, f in zip(times[names[0]], times[k])]
        print(
            f"  speed {k}/{names[0]} per round: median {statistics.median(r):.2f} "
            f"(min {min(r):.2f}, max {max(r):.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
