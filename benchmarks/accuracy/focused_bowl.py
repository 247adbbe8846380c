"""Focused bowl in water against O'Neil's analytic field: k-Wave's own check, full size.

k-Wave's example ``at_focused_bowl_3D``: bowl of radius of curvature R = 30 mm and aperture
D = 30 mm, 1 MHz continuous wave, 3 points per wavelength, CFL 0.5 (6 steps per period), an
off-grid :class:`sonotile.KWaveArray` bowl with BLI tolerance 0.01 and upsampling 4, amplitude
from the last 3 periods (:func:`sonotile.extract_amp_phase`). Reports the largest on-axis
error (from one wavelength in front of the apex) as % of the analytic focal amplitude, the
focal amplitude ratio, and the largest error of the normalised lateral profile across the focus
against ``|2 J1(v) / v|`` over its main lobe and out to its second zero.

Run (grid 96 x 90 x 90 + a 10-point PML outside, 266 steps; about a minute on 2 cores)::

    nice .venv/bin/python benchmarks/accuracy/focused_bowl.py            # R = D = 30 mm
    nice .venv/bin/python benchmarks/accuracy/focused_bowl.py --radius 15e-3 --diameter 15e-3
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import sonotile as st

F0, C, RHO = 1e6, 1500.0, 1000.0


def run(radius: float, diameter: float, margin: int, axial: float, lateral: float) -> dict:
    """One bowl run; errors against O'Neil (see the module docstring)."""
    ppw, cfl = 3, 0.5
    dx = C / (ppw * F0)
    ppp = round(ppw / cfl)
    dt = 1 / (ppp * F0)
    nx, ny = margin + int(round(axial / dx)), int(round(lateral / dx))
    nt = int(round((nx * dx * 1.2 / C + 6 / F0) / dt))
    kgrid = st.KWaveGrid((nx, ny, ny), dx, dt=dt, nt=nt)
    x0 = (margin - nx // 2) * dx
    t0 = time.perf_counter()
    ka = st.KWaveArray(bli_tolerance=0.01, upsampling_rate=4)
    ka.add_bowl_element((x0, 0, 0), radius, diameter, (x0 + radius, 0, 0))
    sig = st.create_cw_signals(kgrid.t, F0, np.array([1e6]), np.array([0.0]))
    source = st.KSource(
        p_mask=ka.get_array_binary_mask(kgrid), p=ka.get_distributed_source_signal(kgrid, sig)
    )
    t_source = time.perf_counter() - t0
    focus, c = margin + int(round(radius / dx)), ny // 2
    axis = np.stack([np.arange(nx), np.full(nx, c), np.full(nx, c)], 1)
    across = np.stack([np.full(ny, focus), np.arange(ny), np.full(ny, c)], 1)
    sensor = st.KSensor(
        points=np.concatenate([axis, across]), record=("p",), record_start_index=nt - 3 * ppp + 1
    )
    t0 = time.perf_counter()
    res = st.simulate(
        kgrid, st.KWaveMedium(sound_speed=C, density=RHO), source, sensor,
        pml_inside=False, pml_size=10, quiet=True,
    )  # fmt: skip
    t_run = time.perf_counter() - t0
    amp, _, _ = st.extract_amp_phase(res["p"], 1 / dt, F0, dim=1)
    z, r = (np.arange(nx) - margin) * dx, (np.arange(ny) - c) * dx
    ref_ax, ref_lat, _ = st.focused_bowl_oneil(radius, diameter, 1e6 / (RHO * C), F0, C, RHO, z, r)
    front = z >= C / F0 - 1e-9  # beyond one wavelength from the apex
    v = 2 * np.pi * F0 / C * (diameter / 2) * np.abs(r) / radius
    lat = np.abs(amp[nx:] / amp[nx:].max() - ref_lat / ref_lat.max())
    return {
        "radius": radius, "diameter": diameter, "grid": [nx, ny, ny], "nt": nt,
        "mask_points": int(source.p_mask.sum()),
        "axial_max_error_pct": 100 * float(np.max(np.abs(amp[:nx] - ref_ax)[front]) / ref_ax.max()),
        "focal_ratio": float(amp[:nx].max() / ref_ax.max()),
        "lateral_main_lobe_error_pct": 100 * float(np.max(lat[v < 3.83])),
        "lateral_to_2nd_zero_error_pct": 100 * float(np.max(lat[v < 7.02])),
        "source_s": round(t_source, 1), "simulate_s": round(t_run, 1),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--radius", type=float, default=30e-3, help="[m]")
    ap.add_argument("--diameter", type=float, default=30e-3, help="[m]")
    ap.add_argument("--margin", type=int, default=16, help="grid points behind the apex")
    ap.add_argument("--axial", type=float, default=None, help="[m] beyond the apex (R + 8 mm)")
    ap.add_argument("--lateral", type=float, default=None, help="[m] (D + 15 mm)")
    a = ap.parse_args()
    axial = a.axial or a.radius + 8e-3
    lateral = a.lateral or a.diameter + 15e-3
    print(json.dumps(run(a.radius, a.diameter, a.margin, axial, lateral)))


if __name__ == "__main__":
    main()
