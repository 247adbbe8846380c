"""Optimised drives (least peak skull rise at the focal pressure) on the phantom and on a
second skull, and the optimised drive run by k-Wave's C++ solver and by ``sonotile-kwave``.

Problem: the phantom (``--head phantom``: :class:`HeadShape` defaults, seed 0) or a second
skull (``--head second``: :data:`SECOND`, seed :data:`SECOND_SEED`) at ``--ct-mm``, the
target and entry of ``planning_aberration.py`` (30 mm above the head's centre, 13 degrees off
the vertical), ``array:128:64:64:4`` at ``--f0`` with ``--ppw`` points per wavelength, scaled
to 1 MPa at the focus, 10 s of heating; ``plan(..., optimize=OptimizeSettings(groups=...))``.
Printed and written (``--out``, JSON) per head: the conjugated and optimised focal pressure,
the focus's distance from the target and its uncertainty, the -6 dB volume and its ratio, the
peak skull rise and where, its reduction, the side lobe, the acoustic power, the binding
limits, the optimiser's predicted figures against the forward re-simulation's (relative
differences), the time of each stage and the trade-off curve.

With ``--kwave BINARY`` the optimised drive is exported (``write_kwave_input(p, path,
drive=(p.optimized.amplitude, p.optimized.phase))``, the plan's run length, ``-p`` recorded
within the search sphere and over the skull) and run by BINARY (``kspaceFirstOrder-OMP``,
``--threads``) and by ``sonotile-kwave``, each ``-i in.h5 -o out.h5 -p --p_max_all -s START``.
Compared on the search sphere and the skull: the steady-state amplitude (the DFT over the
last 3 periods, as the plan's ``p_cw``) and the maximum over the last 4 periods (the maximum
of the samples: below the amplitude by up to ``1 - cos(pi / steps per period)``), of each
solver against the other and against the optimiser's figures (``p.optimized.p_amp`` and the
predicted focal pressure): the focal peak, the peak skull pressure and the largest difference
anywhere there (relative to the largest amplitude); ``p_max_all`` of the two solvers over the
whole grid. ``--settle S`` runs the plan (optimiser, export) with ``RunSettings(
settle_periods=S)``; ``--settle-extra K`` runs the exported drive K periods longer and gives
the steady-state amplitude at each period after the plan's end against the last: how far from
steady the plan's run ends.

Run (2 shared cores; the lead's case is the default, 1 mm at 500 kHz; a coarse check)::

    PYTHONPATH=src .venv/bin/python benchmarks/planning/planning_optimize.py \\
        --ct-mm 2 --f0 300e3 --ppw 2.5 --groups 8 --head both \\
        --kwave /work/kwbin/kspaceFirstOrder-OMP --out /tmp/opt/optimize.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from typing import Any

import h5py
import numpy as np

import sonotile.planning as sp
from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.planning.acoustics import RunSettings, find_focus
from sonotile.planning.chain import Plan
from sonotile.planning.export import write_kwave_input
from sonotile.planning.optimize import OptimizeSettings
from sonotile.planning.phantom import HeadShape
from sonotile.planning.tissue import TRABECULAR

#: the second skull: narrower, thicker and more uneven than the phantom's
SECOND = HeadShape(semi_axes_mm=(66.0, 84.0, 72.0), thickness_mm=8.0, thickness_variation=0.45)
#: its thickness pattern and bone texture
SECOND_SEED = 7
HEADS = {"phantom": (HeadShape(), 0), "second": (SECOND, SECOND_SEED)}
TRANSDUCER = "array:128:64:64:4"
TARGET = np.array([0.0, 10.0, 30.0])
DIRECTION = np.array([0.2, 0.1, 1.0]) / np.linalg.norm([0.2, 0.1, 1.0])


def rel(a: float | None, b: float | None) -> float | None:
    """``a / b - 1`` (None where either is missing or ``b`` is 0)."""
    return None if a is None or b is None or b == 0 else float(a / b - 1)


def figures(p: Plan) -> dict[str, Any]:
    """The optimised drive's figures next to the conjugated plan's (JSON-able)."""
    s, o = p.summary, p.summary["optimized"]
    cf, of = s["focus"], o["focus"]
    pred, res = o["predicted"], o["resimulated"]
    return {
        "conjugated": {
            "focal_pressure_pa": cf["peak_pa"], "error_mm": cf["error_mm"],
            "uncertainty_mm": s["exposure"]["focus_uncertainty_mm"],
            "volume_mm3": cf["volume_mm3"], "skull_rise_K": s["heat"]["skull_rise_K"],
            "skull_peak_mm": s["heat"]["skull_peak_mm"],
            "side_lobe_ratio": s["exposure"]["side_lobe_ratio"],
            "power_w": o["conjugated"]["power_w"]},
        "optimized": {
            "focal_pressure_pa": of["peak_pa"], "error_mm": of["error_mm"],
            "peak_voxel_error_mm": of["peak_voxel_error_mm"],
            "uncertainty_mm": o["exposure"]["focus_uncertainty_mm"],
            "volume_mm3": of["volume_mm3"], "volume_ratio": of["volume_mm3"] / cf["volume_mm3"],
            "skull_rise_K": o["heat"]["skull_rise_K"], "skull_peak_mm": o["heat"]["skull_peak_mm"],
            "skull_rise_reduction": o["skull_rise_reduction"],
            "side_lobe_ratio": o["exposure"]["side_lobe_ratio"],
            "side_lobe_mm": o["exposure"]["side_lobe_mm"],
            "power_w": o["drive"]["power_w"], "max_amplitude_pa": o["drive"]["max_amplitude_pa"],
            "binding": o["limits"]["binding"], "limits": o["limits"]},
        "predicted_vs_resimulated": {
            "predicted_focal_pressure_pa": pred["focal_pressure_pa"],
            "resimulated_focal_pressure_pa": res["focal_pressure_pa"],
            "focal_pressure": rel(pred["focal_pressure_pa"], res["focal_pressure_pa"]),
            "predicted_skull_rise_K": pred["skull_rise_K"],
            "program_skull_rise_K": pred["program_skull_rise_K"],
            "resimulated_skull_rise_K": res["skull_rise_K"],
            "skull_rise": rel(pred["skull_rise_K"], res["skull_rise_K"]),
            "program_skull_rise": rel(pred["program_skull_rise_K"], res["skull_rise_K"]),
            "max_field_difference": res["max_field_difference"],
            "basis_linearity_error": o["basis"]["linearity_error"]},
        "basis": o["basis"], "hotspots": o["hotspots"], "rounds": o["rounds"],
        "timings_s": {"plan": p.timings, "optimized": o["timings_s"]},
        "trade_off": o["trade_off"],
        "grid": list(p.grid.shape), "spacing_mm": p.grid.spacing_mm,
    }  # fmt: skip


def run_solver(cmd: list[str], log: str) -> float:
    """Run a command, its output to ``log``; the wall time [s]."""
    t = time.perf_counter()
    with open(log, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - t


def read_output(inp: str, out: str, pml: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray]:  # fmt: skip
    """From a k-Wave output file: ``p_max_all`` [Pa] ``(x, y, z)`` with the PML cropped, ``p``
    ``(points, steps)`` and the points' interior grid indices ``(points, 3)``."""
    with h5py.File(inp, "r") as f:
        n = tuple(int(np.asarray(f[k]).ravel()[0]) for k in ("Nx", "Ny", "Nz"))
        index = np.asarray(f["sensor_mask_index"]).ravel().astype(np.int64) - 1
    ijk = np.stack(np.unravel_index(index, n, order="F"), axis=1) - np.asarray(pml)
    with h5py.File(out, "r") as f:
        pmax = np.asarray(f["p_max_all"]).transpose(2, 1, 0)
        raw = np.asarray(f["p"]).reshape(-1, index.size).T  # (points, steps)
    crop = tuple(slice(q, m - q) for q, m in zip(pml, pmax.shape))
    return pmax[crop], raw, ijk


def dft_amplitude(raw: np.ndarray, per_period: int, end: int, periods: int = 3) -> np.ndarray:
    """The steady-state amplitude [Pa] of each row of ``raw`` by the single-bin DFT over the
    ``periods`` whole periods ending at sample ``end`` (exclusive)."""
    m = periods * per_period
    w = np.exp(-2j * np.pi * np.arange(m) / per_period)
    return np.abs(raw[:, end - m : end].astype(np.float64) @ w) * 2 / m


def compare(a: np.ndarray, b: np.ndarray, sphere: np.ndarray, skull: np.ndarray,
            peak_a: float, peak_b: float) -> dict[str, float | None]:  # fmt: skip
    """Relative differences of ``a`` against ``b`` (values on the compared points): focal
    peak (given), peak skull pressure and the largest difference on the points (over the
    largest of ``b``)."""
    return {"focal_peak": rel(peak_a, peak_b),
            "skull_peak": rel(float(a[skull].max()), float(b[skull].max())),
            "max_difference": float(np.max(np.abs(a - b)) / np.max(b)),
            "max_difference_sphere": float(np.max(np.abs(a[sphere] - b[sphere]))
                                           / np.max(b[sphere]))}  # fmt: skip


def kwave_check(p: Plan, run: RunSettings, args: argparse.Namespace,
                folder: str) -> dict[str, Any]:  # fmt: skip
    """The optimised drive exported and run by k-Wave's binary and ``sonotile-kwave``,
    compared with each other and with the optimiser's figures."""
    o, g = p.optimized, p.grid
    assert o is not None
    ijk = np.indices(g.shape, dtype=np.float32)
    d = np.linalg.norm(ijk - np.reshape(g.target_index, (3, 1, 1, 1)), axis=0) * g.spacing_mm
    mask = (d <= p.settings.search_mm) | (p.maps.labels >= TRABECULAR)
    extra = args.settle_extra
    longer = dataclasses.replace(run, settle_periods=run.settle_periods + extra)
    path = os.path.join(folder, "optimized_in.h5")
    clock = time.perf_counter()
    start = write_kwave_input(p, path, record_periods=4 + extra, run=longer,
                              drive=(o.amplitude, o.phase), sensor_mask=mask)  # fmt: skip
    with h5py.File(path, "r") as f:
        nt, dt = int(np.asarray(f["Nt"]).ravel()[0]), float(np.asarray(f["dt"]).ravel()[0])
    per_period = int(round(1 / (p.settings.frequency * dt)))
    out: dict[str, Any] = {"nt": nt, "steps_per_period": per_period, "start": start,
                           "settle_periods": run.settle_periods, "settle_extra": extra,
                           "points_compared": int(mask.sum()),
                           "time_s": {"export": time.perf_counter() - clock}}  # fmt: skip
    sonotile_kwave = os.path.join(os.path.dirname(sys.executable), "sonotile-kwave")
    fields = {}
    for code, cmd in (("kwave", [args.kwave, "-t", str(args.threads)]),
                      ("sonotile", [sonotile_kwave])):  # fmt: skip
        o_path = os.path.join(folder, f"optimized_{code}.h5")
        cmd = cmd + ["-i", path, "-o", o_path, "-p", "--p_max_all", "-s", str(start)]
        out["time_s"][code] = run_solver(cmd, o_path + ".log")
        fields[code] = read_output(path, o_path, g.pml_size)
    (kmax, kraw, pts), (smax, sraw, pts2) = fields["kwave"], fields["sonotile"]
    assert np.array_equal(pts, pts2)
    at = tuple(pts.T)
    sphere, skull = mask[at] & (d[at] <= p.settings.search_mm), p.maps.labels[at] >= TRABECULAR
    steps = kraw.shape[1]
    end_plan = steps - extra * per_period  # the plan's run ends here

    def on_grid(values: np.ndarray) -> np.ndarray:
        full = np.zeros(g.shape, np.float64)
        full[at] = values
        return full

    def peak(values: np.ndarray) -> float:
        return find_focus(on_grid(values), g, p.target, p.settings.search_mm).peak_pa

    target = (o.p_amp[at].astype(np.float64), o.focus.peak_pa)
    amp, mx = {}, {}
    for code, raw in (("kwave", kraw), ("sonotile", sraw)):
        amp[code] = dft_amplitude(raw, per_period, end_plan)
        mx[code] = np.abs(raw[:, end_plan - 4 * per_period : end_plan]).max(axis=1)
    peaks = {c: peak(amp[c]) for c in amp} | {f"{c}_max": peak(mx[c]) for c in mx}
    out["focal_peak_pa"] = {**peaks, "optimizer_forward": o.focus.peak_pa,
                            "optimizer_predicted": p.summary["optimized"]["predicted"][
                                "focal_pressure_pa"]}  # fmt: skip
    out["skull_peak_pa"] = {"kwave": float(amp["kwave"][skull].max()),
                            "sonotile": float(amp["sonotile"][skull].max()),
                            "optimizer_forward": float(target[0][skull].max())}  # fmt: skip
    out["steady_state"] = {
        "sonotile_vs_kwave": compare(amp["sonotile"], amp["kwave"], sphere, skull,
                                     peaks["sonotile"], peaks["kwave"]),
        "kwave_vs_optimizer": compare(amp["kwave"], target[0], sphere, skull,
                                      peaks["kwave"], target[1]),
        "sonotile_vs_optimizer": compare(amp["sonotile"], target[0], sphere, skull,
                                         peaks["sonotile"], target[1]),
        "kwave_vs_predicted": {"focal_peak": rel(peaks["kwave"],
                                                 out["focal_peak_pa"]["optimizer_predicted"])},
    }  # fmt: skip
    out["max_last_4_periods"] = {
        "sonotile_vs_kwave": compare(mx["sonotile"], mx["kwave"], sphere, skull,
                                     peaks["sonotile_max"], peaks["kwave_max"]),
        "kwave_vs_optimizer": compare(mx["kwave"], target[0], sphere, skull,
                                      peaks["kwave_max"], target[1]),
        "sampling_bound": float(1 - np.cos(np.pi / per_period)),
        "p_max_all_whole_grid_sonotile_vs_kwave": float(np.max(np.abs(smax - kmax))
                                                        / np.max(kmax)),
    }  # fmt: skip
    if extra:  # the steady-state amplitude at each period after the plan's end
        last = amp_k = dft_amplitude(kraw, per_period, steps)
        curve = []
        for j in range(extra + 1):
            amp_k = dft_amplitude(kraw, per_period, end_plan + j * per_period)
            curve.append({"settle_periods": run.settle_periods + j,
                          "max_difference_vs_last": float(np.max(np.abs(amp_k - last))
                                                          / np.max(last)),
                          "focal_peak_vs_last": rel(peak(amp_k), peak(last)),
                          "skull_peak_vs_last": rel(float(amp_k[skull].max()),
                                                    float(last[skull].max()))})  # fmt: skip
        out["settling"] = curve
    return out


def report(name: str, f: dict[str, Any]) -> None:
    """Print a head's figures."""
    c, o, pr = f["conjugated"], f["optimized"], f["predicted_vs_resimulated"]
    print(f"\n== {name}: grid {f['grid']} at {f['spacing_mm']:.3g} mm")
    for k, v in (("conjugated", c), ("optimised", o)):
        u = np.round(v["uncertainty_mm"], 2).tolist()
        print(f"{k:10s} focus {v['focal_pressure_pa'] / 1e6:.4g} MPa, {v['error_mm']:.2f} mm "
              f"from the target (+- {u} mm), -6 dB {v['volume_mm3']:.1f} mm^3,"
              f" skull rise {v['skull_rise_K']:.3g} K at {np.round(v['skull_peak_mm'], 1)} "
              f"mm, side lobe {v['side_lobe_ratio']:.3f}, power {v['power_w']:.3g} W")  # fmt: skip
    print(f"volume ratio {o['volume_ratio']:.3f}, skull rise reduction "
          f"{o['skull_rise_reduction']:.3f}, binding limits {o['binding']}")  # fmt: skip
    print("predicted vs re-simulated:", json.dumps(pr))
    print("timings [s]:", json.dumps(f["timings_s"]))
    t = f["trade_off"]
    for q, a, b in zip(t["focal_pressure_pa"], t["optimized_skull_rise_K"],
                       t["conjugated_skull_rise_K"]):  # fmt: skip
        print(f"  trade-off {q / 1e6:6.3f} MPa: optimised {a if a is None else round(a, 4)} K, "
              f"conjugated {b if b is None else round(b, 4)} K")  # fmt: skip
    k = f.get("kwave")
    if k:
        print("k-Wave focal peak [Pa]:", json.dumps(k["focal_peak_pa"]))
        print("steady state:", json.dumps(k["steady_state"]))
        print("max over 4 periods:", json.dumps(k["max_last_4_periods"]))
        for row in k.get("settling", []):
            print("  settling", json.dumps(row))


def save(result: dict[str, Any], path: str) -> None:
    """Write ``result`` as JSON."""
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1)


def stamped(start: float) -> Any:
    """A progress printer: each line after the seconds since ``start``."""
    return lambda m: print(f"[{time.perf_counter() - start:7.1f} s] {m}", flush=True)


def trade_off_figure(result: dict[str, Any], path: str) -> None:
    """Peak skull rise against focal pressure, conjugated and optimised, each head's plans
    marked, as a PNG (the figure of docs/planning.md)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads = [h for h in ("phantom", "second") if h in result]
    fig, axs = plt.subplots(1, len(heads), figsize=(5 * len(heads), 4), squeeze=False)
    for ax, name in zip(axs[0], heads):
        t = result[name]["trade_off"]
        mpa = np.asarray(t["focal_pressure_pa"]) / 1e6
        for key, label in (("conjugated_skull_rise_K", "phase-conjugated"),
                           ("optimized_skull_rise_K", "optimised")):  # fmt: skip
            y = np.array([np.nan if v is None else v for v in t[key]], dtype=float)
            ax.plot(mpa, y, label=label)
        for key, mark, label in (("conjugated", "o", "phase-conjugated plan"),
                                 ("optimized", "s", "optimised plan")):  # fmt: skip
            pt = t[key]
            ax.plot(pt["focal_pressure_pa"] / 1e6, pt["skull_rise_K"], mark, ms=8, label=label)
        ax.set_xlabel("focal pressure [MPa]")
        ax.set_ylabel("peak skull temperature rise [K]")
        ax.set_title(f"{name} skull", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ct-mm", type=float, default=1.0)
    ap.add_argument("--f0", type=float, default=500e3)
    ap.add_argument("--ppw", type=float, default=3.0)
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--head", choices=("phantom", "second", "both"), default="phantom")
    ap.add_argument("--kwave", metavar="BINARY", help="k-Wave's kspaceFirstOrder-OMP")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--settle", type=float, default=RunSettings().settle_periods,
                    help="RunSettings.settle_periods of the plan and the export")  # fmt: skip
    ap.add_argument("--settle-extra", type=int, default=0,
                    help="run the exported drive this many periods longer")  # fmt: skip
    ap.add_argument("--out", default="planning-optimize.json", metavar="FILE.json")
    ap.add_argument("--figure", metavar="FILE.png", help="the trade-off curves as a PNG")
    ap.add_argument("--checkpoint", metavar="FILE.npz",
                    help="stop on SIGINT/SIGTERM keeping the finished runs (one FILE per head: "
                    "FILE-<head>.npz); the same command goes on from there (then timings_s "
                    "are the last call's only)")  # fmt: skip
    args = ap.parse_args()
    folder = os.path.splitext(args.out)[0] + "-files"
    os.makedirs(folder, exist_ok=True)
    run = RunSettings(settle_periods=args.settle)
    n = [int(np.ceil(2 * s / args.ct_mm)) for s in (80.0, 96.0, 84.0)]
    result: dict[str, Any] = {"settings": {k: v for k, v in vars(args).items()}}
    for name in ("phantom", "second") if args.head == "both" else (args.head,):
        head, seed = HEADS[name]
        ct = sp.head_phantom(tuple(n), args.ct_mm, seed=seed, head=head)
        settings = sp.PlanSettings(frequency=args.f0, points_per_wavelength=args.ppw,
                                   focal_pressure=1e6, duration=10.0)  # fmt: skip
        cp = None
        if args.checkpoint:
            cp = Checkpoint(os.path.splitext(args.checkpoint)[0] + f"-{name}.npz")
        try:
            p = sp.plan(ct, TARGET, TARGET + 70 * DIRECTION, TRANSDUCER, settings, run=run,
                        optimize=OptimizeSettings(groups=args.groups), checkpoint=cp,
                        progress=stamped(time.perf_counter()))  # fmt: skip
        except RunStopped as e:
            print(f"{name}: stopped: {e}")
            return
        f = figures(p)
        f["head"] = {"seed": seed, **dataclasses.asdict(head)}
        result[name] = f
        save(result, args.out)
        if args.kwave:
            os.makedirs(os.path.join(folder, name), exist_ok=True)
            f["kwave"] = kwave_check(p, run, args, os.path.join(folder, name))
        save(result, args.out)
        report(name, f)
    if args.figure:
        trade_off_figure(result, args.figure)
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
