"""The planning tools end to end on the synthetic head: CT phantom -> tissue properties -> a
bowl placed from a target and an entry point -> a beam-aligned grid -> fluid simulations in
water and through the skull -> the focal pressure, focal position and transmission, and the
skull run's maximum pressure written as NIfTI over the phantom CT.

Problem: the phantom at 1 mm (seed 0), properties by ``--mapping`` (default ``aubry2003``) at
``--f0`` (default 250 kHz); a bowl of radius of curvature and aperture 64 mm focused on a
target 30 mm above the head's centre, entered 10-20 degrees off the vertical; an additive
pressure source of 60 kPa, CW; the maximum pressure over the last 4 periods of 160 us. Water
run: the same grid filled with water, its peak checked against O'Neil's on-axis solution (which
peaks before the geometric focus). The focus is the maximum from 30 mm before the target on.

Run (2 cores: about a minute at 250 kHz, 4 points per wavelength)::

    PYTHONPATH=src .venv/bin/python benchmarks/planning/planning_phantom.py --out /tmp/plan
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import sonotile as st
import sonotile.planning as sp


def bowl_source(kgrid, grid, pose, target, f0):
    """A 64 mm bowl at the pose, focused on the target, CW at 60 kPa (additive)."""
    karray = st.KWaveArray(bli_tolerance=0.05, upsampling_rate=4)
    apex, focus = grid.kwave_points(pose.position)[:, 0], grid.kwave_points(target)[:, 0]
    karray.add_bowl_element(apex, 64e-3, 64e-3, focus)
    sig = st.create_cw_signals(kgrid.t, f0, np.array([60e3]), np.array([0.0]))
    return st.KSource(
        p_mask=karray.get_array_binary_mask(kgrid),
        p=karray.get_distributed_source_signal(kgrid, sig),
        p_mode="additive",
    )


def run(medium, grid, pose, target, f0):
    """Maximum pressure over the last 4 periods [Pa] on the grid's interior, and the time."""
    dx = grid.spacing_mm * 1e-3
    kgrid = st.KWaveGrid(grid.shape, dx)
    kgrid.dt = 0.3 * dx / float(np.max(medium.sound_speed))
    kgrid.nt = int(160e-6 / kgrid.dt)
    start = kgrid.nt - int(4 / f0 / kgrid.dt)
    sensor = st.KSensor(
        mask=np.ones(grid.shape, bool), record=("p_max_all",), record_start_index=start
    )
    t = time.perf_counter()
    res = st.simulate(kgrid, medium, bowl_source(kgrid, grid, pose, target, f0), sensor,
                      **grid.options())  # fmt: skip
    return np.asarray(res["p_max_all"]), time.perf_counter() - t


def focus(p, grid):
    """The maximum's grid index, from 30 mm before the target on."""
    k0 = max(0, grid.target_index[2] - int(30 / grid.spacing_mm))
    i, j, k = np.unravel_index(p[:, :, k0:].argmax(), p[:, :, k0:].shape)
    return (int(i), int(j), int(k + k0))


def oneil_peak_shift(f0: float, c0: float = 1500.0, radius: float = 64e-3, aperture=64e-3):
    """How far before the geometric focus the on-axis pressure peaks [mm] (O'Neil 1949)."""
    a, k = aperture / 2, 2 * np.pi * f0 / c0
    h = radius - np.sqrt(radius**2 - a**2)
    z = np.linspace(radius / 3, 1.4 * radius, 400001)
    p = np.abs(2 / (1 - z / radius)) * np.abs(np.sin(k / 2 * (np.sqrt((z - h) ** 2 + a**2) - z)))
    return float((radius - z[p.argmax()]) * 1e3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--f0", type=float, default=250e3)
    ap.add_argument("--ppw", type=float, default=4.0)
    ap.add_argument("--mapping", default="aubry2003")
    ap.add_argument("--out", default="planning-phantom")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    ct = sp.head_phantom((160, 196, 170), 1.0, seed=0)
    maps = sp.tissue_properties(ct.hu, args.mapping, frequency=args.f0)
    target = np.array([0.0, 10.0, 30.0])
    entry = target + 70 * np.array([0.2, 0.1, 1.0]) / np.linalg.norm([0.2, 0.1, 1.0])
    pose = sp.Pose.from_target_entry(target, entry, focal_length_mm=64.0)
    grid = sp.beam_grid(pose, target, args.f0, points_per_wavelength=args.ppw)
    print(f"grid {grid.shape} (+PML {grid.total_shape}), {grid.spacing_mm:.2f} mm")
    on_grid = sp.resample_maps(maps, ct, grid)
    water = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    out = {}
    for name, medium in (("water", water), ("skull", sp.kwave_medium(on_grid))):
        p, secs = run(medium, grid, pose, target, args.f0)
        i = focus(p, grid)
        out[name] = (p, p[i], grid.world(i))
        shift = np.linalg.norm(grid.world(i) - target)
        print(f"{name}: focal p {p[i] / 1e3:.1f} kPa at {grid.world(i).round(1)} mm "
              f"({shift:.1f} mm from the target), {secs:.1f} s")  # fmt: skip
    print(f"O'Neil's water peak: {oneil_peak_shift(args.f0):.1f} mm before the target")
    print(f"transmission (skull / water focal pressure): {out['skull'][1] / out['water'][1]:.3f}")
    path = os.path.join(args.out, "p_max_skull.nii.gz")
    sp.write_nifti(path, sp.to_image(out["skull"][0], grid, ct), ct,
                   provenance=on_grid.provenance, description="p_max [Pa]")  # fmt: skip
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
