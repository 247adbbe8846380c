"""Weak scaling 1 -> 2 processes (1 device, 1 thread each) through the k-Wave command line.

One process runs the heterogeneous absorbing nonlinear case (``sonotile.bench.cases``) on an
``N x N x N`` grid; two processes (``sonotile launch -n 2``) run it on ``2N x N x N`` with
``--decomposition pencil|lfb --mesh 2``. Runs alternate (A B A B ...); the time per step is
k-Wave's ``simulation_phase_execution_time`` attribute of each output divided by the steps.
Efficiency = t(1 process) / t(2 processes) (1.0 is perfect weak scaling).

    .venv/bin/python benchmarks/weak_scaling.py --size 64 --steps 30 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import h5py

from sonotile.bench.cases import heterogeneous_absorbing
from sonotile.kwave.writer import write_input


def seconds(out: str) -> float:
    with h5py.File(out) as f:
        return float(f.attrs["simulation_phase_execution_time"].decode().strip().rstrip("s"))


def run(cmd: list[str]) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--decompositions", default="pencil,lfb")
    ap.add_argument("--overlap", type=int, default=16)
    ap.add_argument("--json", default="weak-scaling.json")
    a = ap.parse_args(argv)
    bindir = os.path.dirname(sys.executable)
    kw = os.path.join(bindir, "sonotile-kwave")
    st = os.path.join(bindir, "sonotile")
    n = a.size
    with tempfile.TemporaryDirectory() as tmp:
        one, two = os.path.join(tmp, "one.h5"), os.path.join(tmp, "two.h5")
        write_input(one, heterogeneous_absorbing(n, a.steps + 1), "weak scaling, 1 process")
        write_input(two, heterogeneous_absorbing(n, a.steps + 1, shape=(2 * n, n, n)),
                    "weak scaling, 2 processes")  # fmt: skip
        out = os.path.join(tmp, "out.h5")
        base = ["-t", "1", "-r", "100", "--benchmark", str(a.steps)]
        results = {}
        for dec in a.decompositions.split(","):
            t1, t2 = [], []
            extra = ["--decomposition", dec, "--mesh", "2"]
            if dec == "lfb":
                extra += ["--overlap", str(a.overlap)]
            for _ in range(a.repeats):
                run([kw, "-i", one, "-o", out, *base])
                t1.append(seconds(out) / a.steps)
                run([st, "launch", "-n", "2", "--cpu_devices", "1", "--", kw, "-i", two,
                     "-o", out, *base, *extra])  # fmt: skip
                t2.append(seconds(out) / a.steps)
            eff = [x / y for x, y in zip(t1, t2)]
            results[dec] = {"ms_1proc": [1e3 * x for x in t1], "ms_2proc": [1e3 * x for x in t2],
                            "efficiency_median": statistics.median(eff),
                            "efficiency_range": [min(eff), max(eff)]}  # fmt: skip
            print(f"{dec:7s} 1 proc {1e3 * min(t1):8.1f} ms/step   2 procs {1e3 * min(t2):8.1f} "
                  f"ms/step   efficiency {statistics.median(eff):.2f} "
                  f"({min(eff):.2f}-{max(eff):.2f})")  # fmt: skip
    with open(a.json, "w") as f:
        json.dump({"size": n, "steps": a.steps, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
