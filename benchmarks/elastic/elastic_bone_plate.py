"""A focused beam through a tilted cortical-bone plate: fluid model vs elastic model.

When do I need the elastic model? 2-D (plane strain), 500 kHz, 10-cycle tone burst from an arc
(focal length 40 mm, aperture 40 mm: half-angle 30 deg) in water; a 3 mm cortical plate
(c_p 2800 m/s, rho 1850 kg/m^3, c_s 1400 m/s, or 1500 with ``--shear``) crosses the axis 12 mm
in front of the focus, tilted by 0-60 deg about that crossing. The same run with c_s = 0 in
the plate is the fluid model of bone (same scheme: sonotile's elastic model with no shear equals
its acoustic model without the k-space correction to round-off, tests/physics/
test_elastic_fluid.py). Lossless, to isolate what shear does. Reported per angle: the focal
pressure (largest ``p_max`` in the water beyond the plate within 8 mm of the water-only focus)
relative to the same beam without the plate, and the focal shift from that beam's focus [mm].

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_bone_plate.py [--angles 0,10,...] \
        [--shear 1400] [--figure docs/elastic-bone-plate.png]

Grid 240 x 240 points of 0.25 mm (12 points per wavelength in water, 11 per shear wavelength
at 1400 m/s; the plate 12 points thick at 0 deg), PML 16, 1940 steps (CFL 0.3 on 2800 m/s),
float32.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import sonotile as st

F0, C0, RHO0 = 5e5, 1500.0, 1000.0
CP, RHO_B = 2800.0, 1850.0
DX, NX, NY, PML, NT = 2.5e-4, 240, 240, 16, 1940
FOCUS = (180, 120)  # grid indices of the geometric focus
RADIUS, HALF_APERTURE = 160, 80  # [points]: 40 mm, aperture 40 mm (half-angle 30 deg)
PLATE_CENTRE, PLATE_HALF = 131.5, 6  # mid-plane between grid points: 12 points (3 mm) at 0 deg
CLEAR = 12  # [points] the plate keeps from the arc
SEARCH = 32  # [points] around the water-only focus searched for the maximum


def arc_depth(y: np.ndarray) -> np.ndarray:
    """x [points] of the arc at lateral index ``y`` (its edge's beyond the aperture)."""
    dy = np.clip(np.abs(y - FOCUS[1]), 0, HALF_APERTURE)
    return FOCUS[0] - np.sqrt(RADIUS**2 - dy**2)


def plate(angle_deg: float) -> np.ndarray:
    """The plate: points within ``PLATE_HALF`` of the line through (PLATE_CENTRE, axis) whose
    normal is tilted by ``angle_deg`` from the beam axis (x), at least ``CLEAR`` points beyond
    the arc (at 50-60 deg the plate would otherwise reach the source)."""
    t = np.radians(angle_deg)
    x, y = np.meshgrid(np.arange(NX), np.arange(NY), indexing="ij")
    band = np.abs((x - PLATE_CENTRE) * np.cos(t) + (y - FOCUS[1]) * np.sin(t)) < PLATE_HALF
    return band & (x > arc_depth(y) + CLEAR)


def arc() -> np.ndarray:
    """The source: an arc of radius ``RADIUS`` centred on the focus, ``|y| <= HALF_APERTURE``
    (one point per column)."""
    y = np.arange(-HALF_APERTURE, HALF_APERTURE + 1) + FOCUS[1]
    m = np.zeros((NX, NY), bool)
    m[np.round(arc_depth(y)).astype(int), y] = True
    return m


def run(angle_deg: float | None, shear: float) -> np.ndarray:
    """``p_max`` over the grid [Pa] (``angle_deg`` None: water only)."""
    cp, cs, rho = np.full((NX, NY), C0), np.zeros((NX, NY)), np.full((NX, NY), RHO0)
    if angle_deg is not None:
        b = plate(angle_deg)
        cp[b], cs[b], rho[b] = CP, shear, RHO_B
    dt = 0.3 * DX / CP
    nt = NT
    t = np.arange(nt) * dt
    n = 10 / F0
    sig = np.where(t < n, np.sin(2 * np.pi * F0 * t) * np.sin(np.pi * t / n) ** 2, 0.0)
    src = -1e5 * sig  # sxx = syy = -p: a pressure source of 100 kPa (additive)
    out = st.pstd_elastic_2d(
        st.KWaveGrid((NX, NY), DX, dt=dt, nt=nt), st.KWaveElasticMedium(cp, cs, rho),
        st.ElasticSource(sxx=src, syy=src, s_mask=arc()),
        st.KSensor(points=np.array([FOCUS]), record=("p_max_all",)),
        pml_size=PML,
    )  # fmt: skip
    return np.asarray(out["p_max_all"])


def focal(
    pmax: np.ndarray, angle_deg: float | None, centre: tuple[float, float] = FOCUS
) -> tuple[float, np.ndarray]:
    """Largest pressure in the water beyond the plate within ``SEARCH`` points of ``centre``,
    and where [points]."""
    x, y = np.meshgrid(np.arange(NX), np.arange(NY), indexing="ij")
    near = np.hypot(x - centre[0], y - centre[1]) <= SEARCH
    if angle_deg is not None:
        near &= ~plate(angle_deg) & (
            (x - PLATE_CENTRE) * np.cos(np.radians(angle_deg))
            + (y - FOCUS[1]) * np.sin(np.radians(angle_deg))
            > 0
        )
    v = np.where(near, pmax, -np.inf)
    i = np.unravel_index(np.argmax(v), v.shape)
    return float(pmax[i]), np.array(i, float)


def figure(
    path: str, angles: list[float], rows: list[dict], maps: dict, plate_map: np.ndarray,
    shear: float,
) -> None:  # fmt: skip
    """The two ``p_max`` maps (plate outlined), focal pressure and shift against tilt."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(10, 8.5), layout="constrained")
    ext = [0, NY * DX * 1e3, NX * DX * 1e3, 0]
    for a, (name, m) in zip(ax[0], maps.items()):
        im = a.imshow(m / 1e3, extent=ext, cmap="inferno")
        a.contour(np.arange(NY) * DX * 1e3, np.arange(NX) * DX * 1e3, plate_map, [0.5],
                  colors="c", linewidths=0.8)  # fmt: skip
        a.set_title(name)
        a.set_xlabel("y [mm]")
        a.set_ylabel("x [mm]")
        fig.colorbar(im, ax=a, label="p_max [kPa]")
    for key, lab in (("fluid", "fluid model (c_s = 0)"), ("elastic", f"elastic (c_s {shear:g})")):
        ax[1, 0].plot(angles, [r[key] for r in rows], "o-", label=lab)
        ax[1, 1].plot(angles, [r[key + "_shift"] for r in rows], "o-", label=lab)
    ax[1, 0].set_ylabel("focal pressure / without plate")
    ax[1, 1].set_ylabel("focal shift [mm]")
    for a in ax[1]:
        a.set_xlabel("plate tilt [deg]")
        a.grid(alpha=0.3)
        a.legend()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--angles", default="0,10,20,30,40,50,60")
    ap.add_argument("--shear", type=float, default=1400.0, help="plate's shear speed [m/s]")
    ap.add_argument("--figure", default=None, help="write the figure here (PNG)")
    ap.add_argument("--map-angle", type=float, default=40.0, help="angle of the maps shown")
    a = ap.parse_args(argv)
    angles = [float(v) for v in a.angles.split(",")]
    t0 = time.perf_counter()
    p_ref, at_ref = focal(run(None, 0.0), None)
    print(f"water only: focal p {p_ref / 1e3:.1f} kPa at x, y = {at_ref * DX * 1e3} mm")
    print(
        "| tilt | fluid p_f / water | elastic p_f / water | elastic / fluid | fluid shift "
        "[mm] | elastic shift [mm] |\n|---|---|---|---|---|---|"
    )
    rows, maps = [], {}
    for ang in angles:
        r: dict = {}
        for key, cs in (("fluid", 0.0), ("elastic", a.shear)):
            pm = run(ang, cs)
            p, at = focal(pm, ang, tuple(at_ref))
            r[key], r[key + "_shift"] = p / p_ref, float(np.hypot(*(at - at_ref)) * DX * 1e3)
            if ang == a.map_angle:
                maps[f"{key}, tilt {ang:g} deg"] = pm
        rows.append(r)
        print(f"| {ang:g} | {r['fluid']:.2f} | {r['elastic']:.2f} | "
              f"{r['elastic'] / r['fluid']:.2f} | {r['fluid_shift']:.1f} | "
              f"{r['elastic_shift']:.1f} |", flush=True)  # fmt: skip
    print(f"total {time.perf_counter() - t0:.0f} s")
    if a.figure and maps:
        figure(a.figure, angles, rows, maps, plate(a.map_angle).astype(float), a.shear)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
