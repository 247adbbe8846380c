"""Transcranial benchmarks BM1-BM3 of Aubry et al. (JASA 152:1003, 2022), bowl source: sonotile
against k-Wave's C++ solver on the same k-Wave input file.

Problem (PH1, the focused bowl): 500 kHz continuous wave, bowl of radius of curvature 64 mm
and aperture 64 mm driven with a normal velocity of 0.04 m/s, represented as an off-grid
pressure source of amplitude ``rho0 c0 u0`` = 60 kPa (a :class:`sonotile.KWaveArray` bowl,
BLI tolerance 0.05, upsampling 10). Axial axis x, the bowl's apex ``APEX_MM`` behind the
domain's first plane of interest. Layers are planes normal to x, counted from the apex:

* BM1: water.
* BM2: cortical bone 30-36.5 mm.
* BM3: skin 26-30 mm, cortical 30-31.5 mm, trabecular 31.5-35.5 mm, cortical 35.5-36.5 mm,
  brain beyond.

Absorption: the paper gives each medium's attenuation at 500 kHz; here k-Wave's power law
with ``y = 2`` (no dispersion: ``tan(pi y / 2) = 0``, so each sound speed is exactly the
tabulated one) and ``alpha_0 = alpha(0.5 MHz) / 0.5^2``: the stated attenuation at the source
frequency.

Each case is written once (``sonotile.kwave.writer.write_input``) and run by both codes with
``--p_max_all -s S`` (the maximum over the last ``RECORD_PERIODS`` periods, after the field is
steady). Compared as the paper does (its ``computeDifferenceMetrics``): focal pressure (peak
beyond the bone's exit plane) [%], focal position [mm], -6 dB focal sizes along x, y, z
through the peak [mm]. The paper's grid is 0.5 mm; ``--dx`` sets ours.

Run (about 1 core-minute per case and code at 1 mm, ~16x that at 0.5 mm)::

    nice .venv/bin/python benchmarks/accuracy/transcranial.py --dx 1e-3 --out /tmp/tc \
        --plots docs/img
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

import sonotile as st
from sonotile.api import Options, build_problem
from sonotile.kwave.writer import write_input

KWAVE = "/work/kwave-omp/kspaceFirstOrder-OMP"
F0 = 500e3  # [Hz]
ROC, APERTURE = 64e-3, 64e-3  # [m]
U0 = 0.04  # normal velocity [m/s]
AXIAL, LATERAL = 120e-3, 74e-3  # domain beyond the apex, lateral width [m]
APEX_MM = 4.0  # water behind the bowl's apex [mm]
T_END, RECORD_PERIODS = 110e-6, 6  # [s], periods recorded at the end
CFL = 0.3
EXIT_MM = 36.5  # bone exit plane, from the apex [mm]

#           c [m/s]  rho [kg/m^3]  alpha at 500 kHz [dB/cm]
MEDIA = {
    "water": (1500.0, 1000.0, 0.0),
    "skin": (1610.0, 1090.0, 0.2),
    "cortical": (2800.0, 1850.0, 4.0),
    "trabecular": (2300.0, 1700.0, 8.0),
    "brain": (1560.0, 1040.0, 0.3),
}
LAYERS = {  # (medium, start [mm], end [mm]) from the apex; water elsewhere
    "BM1": [],
    "BM2": [("cortical", 30.0, 36.5)],
    "BM3": [
        ("skin", 26.0, 30.0),
        ("cortical", 30.0, 31.5),
        ("trabecular", 31.5, 35.5),
        ("cortical", 35.5, 36.5),
        ("brain", 36.5, 1e9),
    ],
}


def nice_pml(n: int, lo: int = 8, hi: int = 24) -> int:
    """PML thickness in [lo, hi] making ``n + 2 pml`` have only factors 2, 3, 5."""
    for p in range(lo, hi + 1):
        m = n + 2 * p
        for f in (2, 3, 5):
            while m % f == 0:
                m //= f
        if m == 1:
            return p
    return lo


def case_input(name: str, dx: float) -> tuple:
    """(grid, medium, source, sensor, options, apex index) of one benchmark at spacing dx [m]."""
    nx = int(round((AXIAL + APEX_MM * 1e-3) / dx))
    ny = int(round(LATERAL / dx))
    apex = int(round(APEX_MM * 1e-3 / dx))
    x_mm = (np.arange(nx) - apex) * dx * 1e3  # axial distance from the apex [mm]
    c, rho, alpha = (np.full((nx, ny, ny), v) for v in MEDIA["water"])
    for med, a, b in LAYERS[name]:
        sel = (x_mm >= a - 1e-9) & (x_mm < b - 1e-9)
        for arr, v in zip((c, rho, alpha), MEDIA[med]):
            arr[sel] = v
    dt_max = CFL * dx / c.max()
    ppp = int(np.ceil(1 / (F0 * dt_max)))  # whole steps per period, dt <= the CFL step
    dt = 1 / (F0 * ppp)
    nt = int(round(T_END / dt))
    kgrid = st.KWaveGrid((nx, ny, ny), dx, dt=dt, nt=nt)
    x_apex = (apex - nx // 2) * dx
    karray = st.KWaveArray(bli_tolerance=0.05, upsampling_rate=10, single_precision=True)
    karray.add_bowl_element((x_apex, 0.0, 0.0), ROC, APERTURE, (x_apex + ROC, 0.0, 0.0))
    amp = MEDIA["water"][1] * MEDIA["water"][0] * U0  # [Pa]
    sig = st.create_cw_signals(kgrid.t, F0, np.array([amp]), np.array([0.0]), ramp_length=2)
    source = st.KSource(
        p_mask=karray.get_array_binary_mask(kgrid),
        p=karray.get_distributed_source_signal(kgrid, sig),
    )
    medium = st.KWaveMedium(sound_speed=c, density=rho, alpha_coeff=alpha / 0.5**2, alpha_power=2.0)
    focus = np.zeros((nx, ny, ny), bool)
    focus[apex + int(round(ROC / dx)), ny // 2, ny // 2] = True
    sensor = st.KSensor(mask=focus, record=("p",))
    pml = (nice_pml(nx), nice_pml(ny), nice_pml(ny))
    options = Options(pml_size=pml, pml_inside=False, smooth_p0=False)
    return kgrid, medium, source, sensor, options, apex, ppp


def run(cmd: list[str], log: str) -> float:
    """Run a command, its output to ``log``; the wall time [s]."""
    t = time.perf_counter()
    with open(log, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=True)
    return time.perf_counter() - t


def read_pmax(path: str, pml: tuple) -> np.ndarray:
    """``p_max_all`` [Pa] of a k-Wave output file, ``(x, y, z)``, PML cropped."""
    with h5py.File(path, "r") as f:
        a = np.asarray(f["p_max_all"]).transpose(2, 1, 0)
    return a[tuple(slice(p, n - p) for p, n in zip(pml, a.shape))]


def fwhm(profile: np.ndarray, i: int, dx: float) -> float:
    """Width [m] where ``profile`` stays above half its value at ``i`` (linear interpolation
    of the two crossings), as the benchmark's ``fwhm2`` does for the -6 dB size."""
    half = profile[i] / 2
    lo = i
    while lo > 0 and profile[lo - 1] > half:
        lo -= 1
    hi = i
    while hi < profile.size - 1 and profile[hi + 1] > half:
        hi += 1
    left = lo - 1 + (half - profile[lo - 1]) / (profile[lo] - profile[lo - 1]) if lo > 0 else lo
    right = (
        hi + (profile[hi] - half) / (profile[hi] - profile[hi + 1]) if hi < profile.size - 1 else hi
    )
    return (right - left) * dx


def focal_metrics(field: np.ndarray, exit_index: int, dx: float) -> dict:
    """Peak beyond the exit plane [Pa], its index, and -6 dB sizes through it [m]."""
    masked = field.copy()
    masked[:exit_index] = 0
    idx = np.unravel_index(int(np.argmax(masked)), field.shape)
    sizes = [
        fwhm(field[(slice(None),) + idx[1:]], idx[0], dx),
        fwhm(field[idx[0], :, idx[2]], idx[1], dx),
        fwhm(field[idx[0], idx[1], :], idx[2], dx),
    ]
    return {"peak": float(field[idx]), "index": [int(i) for i in idx], "size_6dB": sizes}


def compare(ref: np.ndarray, other: np.ndarray, exit_index: int, dx: float) -> dict:
    """The paper's difference metrics of ``other`` against ``ref`` (here k-Wave)."""
    a, b = focal_metrics(ref, exit_index, dx), focal_metrics(other, exit_index, dx)
    diff = np.abs(ref - other)
    diff[:exit_index] = 0
    return {
        "kwave": a,
        "sonotile": b,
        "focal_pressure_pct": 100 * abs(b["peak"] - a["peak"]) / a["peak"],
        "focal_position_mm": 1e3 * dx * float(np.linalg.norm(np.subtract(a["index"], b["index"]))),
        "size_6dB_mm": [1e3 * (p - q) for p, q in zip(a["size_6dB"], b["size_6dB"])],
        "linf_pct": 100 * float(diff.max() / ref.max()),
    }


def plot(name: str, ref: np.ndarray, other: np.ndarray, apex: int, dx: float, out: str) -> None:
    """x-y plane through the peak: k-Wave, sonotile, and their difference (% of k-Wave's max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = int(np.unravel_index(int(np.argmax(ref[apex + 40 :])), ref[apex + 40 :].shape)[2])
    x = (np.arange(ref.shape[0]) - apex) * dx * 1e3
    y = (np.arange(ref.shape[1]) - ref.shape[1] // 2) * dx * 1e3
    ext = (y[0], y[-1], x[-1], x[0])
    fig, axs = plt.subplots(1, 3, figsize=(11, 5.5), constrained_layout=True)
    diff = 100 * np.abs(other[:, :, k] - ref[:, :, k]) / ref.max()
    for ax, img, title, unit in (
        (axs[0], ref[:, :, k] / 1e3, f"{name}: k-Wave", "kPa"),
        (axs[1], other[:, :, k] / 1e3, f"{name}: sonotile", "kPa"),
        (axs[2], diff, "|difference|", "% of k-Wave max"),
    ):
        im = ax.imshow(img, extent=ext, aspect="equal", cmap="viridis")
        ax.set_xlabel("y [mm]")
        ax.set_ylabel("x (axial, from apex) [mm]")
        ax.set_title(title)
        fig.colorbar(im, ax=ax, label=unit, shrink=0.8)
    fig.savefig(out, dpi=80)
    plt.close(fig)


def run_case(name: str, args) -> dict:
    dx = args.dx
    kgrid, medium, source, sensor, options, apex, ppp = case_input(name, dx)
    problem, _ = build_problem(kgrid, medium, source, sensor, options)
    path = os.path.join(args.out, f"{name}_in.h5")
    write_input(path, problem, f"transcranial benchmark {name} dx={dx}")
    start = kgrid.nt - RECORD_PERIODS * ppp + 1
    flags = ["--p_max_all", "-s", str(start)]
    pml = problem.pml.size
    outs, times = {}, {}
    for code, cmd in (
        ("kwave", [KWAVE, "-t", str(args.threads)]),
        ("sonotile", [os.path.join(os.path.dirname(sys.executable), "sonotile-kwave")]),
    ):
        o = os.path.join(args.out, f"{name}_{code}.h5")
        times[code] = run(cmd + ["-i", path, "-o", o] + flags, o + ".log")
        outs[code] = read_pmax(o, pml)
    exit_index = apex + int(round(EXIT_MM * 1e-3 / dx))
    m = compare(outs["kwave"], outs["sonotile"], exit_index, dx)
    m.update(
        case=name, dx=dx, grid=list(problem.grid.shape), nt=kgrid.nt, dt=kgrid.dt, time_s=times
    )
    if args.plots:
        plot(name, outs["kwave"], outs["sonotile"], apex, dx, f"{args.plots}/tc_{name}.png")
    np.save(
        os.path.join(args.out, f"{name}_fields.npy"), np.stack([outs["kwave"], outs["sonotile"]])
    )
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dx", type=float, default=1e-3, help="grid spacing [m] (paper: 0.5e-3)")
    ap.add_argument("--cases", default="BM1,BM2,BM3")
    ap.add_argument("--out", default="/tmp/transcranial")
    ap.add_argument("--plots", default=None, help="folder for one PNG per case")
    ap.add_argument("--threads", type=int, default=2, help="k-Wave's -t")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.cases.split(","):
        m = run_case(name, args)
        print(json.dumps(m), flush=True)


if __name__ == "__main__":
    main()
