"""Throughput of many small runs: ``sonotile batch`` against one ``sonotile-kwave`` process per
run, as a user would run them (whole processes, same inputs, default threads).

    .venv/bin/python benchmarks/performance/batch_throughput.py --runs 64 --size 64 --steps 300 \
        --rounds 2 --json bench-results/batch.json

Writes ``--runs`` k-Wave inputs (heterogeneous absorbing nonlinear, the source moved along x
from run to run), then per round runs them one after another with ``sonotile-kwave`` and as one
``sonotile batch``, alternating which goes first; prints simulations per hour of each and their
ratio per round, checks that both wrote the same datasets, and writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

from sonotile.bench.inprocess import write_input


def make_inputs(folder: Path, runs: int, size: int, steps: int) -> None:
    """``runs`` inputs that differ in where the source is (same grid: one compiled step)."""
    write_input(str(folder / "template.h5"), "absorbing_nonlinear", size, steps)
    with h5py.File(folder / "template.h5", "a") as f:
        index = int(f["p_source_index"][()].reshape(-1)[0])
        # the bench writes the signal in Pa; k-Wave files hold it scaled the way k-Wave scales
        # an additive pressure source (2 dt / (N c0 dx), c0 = 1500 m/s at the source)
        dt, dx = float(f["dt"][()].ravel()[0]), float(f["dx"][()].ravel()[0])
        f["p_source_input"][...] *= 2 * dt / (3 * 1500.0 * dx)
    for i in range(runs):
        p = folder / f"run{i:03d}.h5"
        shutil.copy(folder / "template.h5", p)
        with h5py.File(p, "a") as f:
            f["p_source_index"][...] = np.full((1, 1, 1), index + (i % (size // 4)), np.uint64)
    (folder / "template.h5").unlink()


def sequential(folder: Path, out: Path) -> float:
    """One ``sonotile-kwave`` process per input; wall time [s]."""
    out.mkdir(parents=True, exist_ok=True)
    exe = [sys.executable, "-m", "sonotile.kwave.cli"]
    t0 = time.perf_counter()
    for p in sorted(folder.glob("*.h5")):
        subprocess.run(exe + ["-i", str(p), "-o", str(out / p.name)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - t0


def batched(folder: Path, out: Path, per_run: str) -> float:
    """One ``sonotile batch``; wall time [s]."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "sonotile.batch.cli", str(folder), "--out", str(out),
         "--devices_per_run", per_run], check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - t0


def same_outputs(a: Path, b: Path) -> bool:
    for p in sorted(a.glob("*.h5")):
        with h5py.File(p, "r") as f, h5py.File(b / p.name, "r") as g:
            if not np.array_equal(f["p"][()], g["p"][()]):
                return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=64)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--devices_per_run", default="auto")
    ap.add_argument("--json", default="bench-results/batch.json")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sonotile-batch-bench-"))
    inputs = work / "inputs"
    inputs.mkdir()
    make_inputs(inputs, a.runs, a.size, a.steps)
    rounds = []
    for r in range(a.rounds):
        order = ("seq", "batch") if r % 2 == 0 else ("batch", "seq")
        t = {}
        for what in order:
            out = work / f"{what}{r}"
            t[what] = (sequential(inputs, out) if what == "seq"
                       else batched(inputs, out, a.devices_per_run))  # fmt: skip
        ok = same_outputs(work / f"seq{r}", work / f"batch{r}")
        row = {"seq_s": t["seq"], "batch_s": t["batch"], "ratio": t["seq"] / t["batch"],
               "seq_per_hour": 3600 * a.runs / t["seq"],
               "batch_per_hour": 3600 * a.runs / t["batch"], "same_outputs": ok}  # fmt: skip
        rounds.append(row)
        print(
            f"round {r + 1}: sequential {row['seq_per_hour']:.0f}/h ({t['seq']:.1f} s), batch "
            f"{row['batch_per_hour']:.0f}/h ({t['batch']:.1f} s): {row['ratio']:.2f}x, "
            f"outputs {'identical' if ok else 'DIFFER'}", flush=True,
        )  # fmt: skip
    report = {
        "command": " ".join(sys.argv), "runs": a.runs, "size": a.size, "steps": a.steps,
        "machine": {"cpus": os.cpu_count(), "processor": platform.processor(),
                    "load": os.getloadavg()},
        "rounds": rounds,
    }  # fmt: skip
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(report, indent=1))
    shutil.rmtree(work)
    return 0 if all(r["same_outputs"] for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
