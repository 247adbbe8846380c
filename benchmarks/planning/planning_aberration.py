"""A whole sonication plan on the synthetic head with a 128-element array: aberration
correction through the phantom skull, heating and dose, the report written.

Problem: the phantom (seed 0) at ``--ct-mm`` (default 1 mm), properties by ``aubry2003``; a
target 30 mm above the head's centre entered 13 degrees off the vertical; ``--transducer``
(default ``array:128:64:64:4``: 128 discs of 4 mm on a cap of radius 64 mm and aperture 64 mm,
focused on the target); CW at ``--f0`` with ``--ppw`` points per wavelength; 10 s of heating
scaled to 1 MPa at the focus. Runs (``sonotile.planning.plan``): the water path, the
geometric (uncorrected) drive through the skull, a point source at the target recorded at the
elements, the phase-conjugated drive aimed past the target by the water beam's focal offset
and re-aimed by its own focus's offset up to ``--refocus`` times (default 2; 0: aimed at the
target itself); then heat and dose. Prints the foci (peak, distance from the target of the
fitted peak and of the peak grid point, -6 dB volume), the correction's gain, the
transmission loss against water, the -6 dB volume over water's, each re-aiming pass, the
temperatures and the time of each stage.

Run (on 2 shared cores, loaded by other work: minutes at 250 kHz, 4 points per wavelength,
and at 500 kHz, 3 points per wavelength; most of an hour at 0.5 mm and 500 kHz,
``--f0 500e3 --ppw 6``, a 168 x 168 x 196 grid with the PML)::

    PYTHONPATH=src .venv/bin/python benchmarks/planning/planning_aberration.py --f0 500e3 --ppw 3
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import sonotile.planning as sp
from sonotile.planning.outputs import prepare_output


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--f0", type=float, default=250e3)
    ap.add_argument("--ppw", type=float, default=4.0)
    ap.add_argument("--ct-mm", type=float, default=1.0)
    ap.add_argument("--transducer", default="array:128:64:64:4")
    ap.add_argument("--out", default="planning-aberration")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--refocus", type=int, default=2, help="re-aims of the corrected drive")
    args = ap.parse_args()
    prepare_output(args.out, args.force)
    n = [int(np.ceil(2 * s / args.ct_mm)) for s in (80.0, 96.0, 84.0)]
    ct = sp.head_phantom(tuple(n), args.ct_mm, seed=0)
    target = np.array([0.0, 10.0, 30.0])
    d = np.array([0.2, 0.1, 1.0]) / np.linalg.norm([0.2, 0.1, 1.0])
    settings = sp.PlanSettings(frequency=args.f0, points_per_wavelength=args.ppw,
                               focal_pressure=1e6, duration=10.0,
                               refocus=args.refocus)  # fmt: skip
    start = time.perf_counter()
    p = sp.plan(ct, target, target + 70 * d, args.transducer, settings,
                progress=lambda m: print(f"[{time.perf_counter() - start:7.1f} s] {m}",
                                         flush=True))  # fmt: skip
    sp.write_plan(p, args.out, force=args.force)
    s, b = p.summary, p.summary["beams_at_source_pressure"]
    print(f"grid {p.grid.shape} (+PML {p.grid.total_shape}) at {p.grid.spacing_mm:.3g} mm")
    for name in ("water", "uncorrected", "corrected"):
        f = b[name]
        if f:
            print(f"{name:12s} peak {f['peak_pa'] / 1e3:8.1f} kPa, {f['error_mm']:5.2f} mm from "
                  f"the target (peak grid point {f['peak_voxel_error_mm']:5.2f} mm), -6 dB "
                  f"volume {f['volume_mm3']:7.1f} mm^3")  # fmt: skip
    print(json.dumps({k: b[k] for k in b if k not in ("water", "uncorrected", "corrected")}))
    c, w = b["corrected"], b["water"]
    if c:
        shift = np.linalg.norm(np.subtract(c["position_mm"], w["position_mm"]))
        print(f"corrected focus {shift:.2f} mm from the water focus")
    print(json.dumps({"heat": s["heat"], "timings_s": s["timings_s"]}))
    print(f"total {time.perf_counter() - start:.1f} s; report in {args.out}/")


if __name__ == "__main__":
    main()
