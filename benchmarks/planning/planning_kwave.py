"""A sonication plan's corrected beam run by k-Wave's C++ solver and by sonotile on the same
exported k-Wave input file: focal pressure and focal point compared.

Problem: the phantom (seed 0) at ``--ct-mm``, a target 30 mm above the head's centre entered
13 degrees off the vertical, ``--transducer`` (default ``array:128:64:64:4``) at ``--f0`` with
``--ppw`` points per wavelength, the drive phase-conjugated through the skull
(``sonotile.planning.plan``); then ``write_kwave_input`` writes that drive's forward run, and
``kspaceFirstOrder-OMP`` and ``sonotile-kwave`` each run it with ``--p_max_all -s S`` (the
maximum over the last 4 periods). Compared within 15 mm of the target: the peak [%] and its
grid point; also the plan's own steady-state amplitude (``p_cw``) against k-Wave's maximum.

Run (2 shared cores: about 6 minutes at the defaults, most of it k-Wave's)::

    PYTHONPATH=src .venv/bin/python benchmarks/planning/planning_kwave.py --out /tmp/plan-kwave
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np

import sonotile.planning as sp
from sonotile.planning.acoustics import find_focus
from sonotile.planning.export import write_kwave_input

KWAVE = "/work/kwave-omp/kspaceFirstOrder-OMP"


def run(cmd: list[str], log: str) -> float:
    """Run a command, its output to ``log``; the wall time [s]."""
    t = time.perf_counter()
    with open(log, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - t


def read_pmax(path: str, pml: tuple[int, ...]) -> np.ndarray:
    """``p_max_all`` [Pa] of a k-Wave output file, ``(x, y, z)``, PML cropped."""
    with h5py.File(path, "r") as f:
        a = np.asarray(f["p_max_all"]).transpose(2, 1, 0)
    return a[tuple(slice(p, n - p) for p, n in zip(pml, a.shape))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--f0", type=float, default=250e3)
    ap.add_argument("--ppw", type=float, default=4.0)
    ap.add_argument("--ct-mm", type=float, default=1.0)
    ap.add_argument("--transducer", default="array:128:64:64:4")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="planning-kwave")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    n = [int(np.ceil(2 * s / args.ct_mm)) for s in (80.0, 96.0, 84.0)]
    ct = sp.head_phantom(tuple(n), args.ct_mm, seed=0)
    target = np.array([0.0, 10.0, 30.0])
    d = np.array([0.2, 0.1, 1.0]) / np.linalg.norm([0.2, 0.1, 1.0])
    settings = sp.PlanSettings(frequency=args.f0, points_per_wavelength=args.ppw, duration=1.0)
    p = sp.plan(ct, target, target + 70 * d, args.transducer, settings, progress=print)
    path = os.path.join(args.out, "plan_in.h5")
    start = write_kwave_input(p, path)
    out = {"grid": list(p.grid.shape), "plan_p_cw": p.summary["focus"]}
    for code, cmd in (
        ("kwave", [KWAVE, "-t", str(args.threads)]),
        ("sonotile", [os.path.join(os.path.dirname(sys.executable), "sonotile-kwave")]),
    ):
        o = os.path.join(args.out, f"plan_{code}.h5")
        secs = run(cmd + ["-i", path, "-o", o, "--p_max_all", "-s", str(start)], o + ".log")
        f = find_focus(read_pmax(o, p.grid.pml_size), p.grid, target)
        out[code] = {**f.as_dict(), "time_s": secs}
        print(f"{code:8s} peak {f.peak_pa / 1e3:8.2f} kPa at {np.round(f.position_mm, 2)} mm, "
              f"{secs:.0f} s")  # fmt: skip
    k, s = out["kwave"], out["sonotile"]
    out["peak_difference_percent"] = 100 * (s["peak_pa"] / k["peak_pa"] - 1)
    out["position_difference_mm"] = float(
        np.linalg.norm(np.subtract(s["position_mm"], k["position_mm"]))
    )
    out["plan_p_cw_over_kwave_p_max"] = p.summary["focus"]["peak_pa"] / k["peak_pa"]
    print(json.dumps({key: out[key] for key in out if "difference" in key or "over" in key}))
    with open(os.path.join(args.out, "planning_kwave.json"), "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
