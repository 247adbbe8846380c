"""A focused bowl through a tilted cortical-bone plate in 3-D: fluid model vs elastic model.

The 3-D counterpart of ``benchmarks/elastic/elastic_bone_plate.py`` (read that one first), on a grid
twice as coarse and a source three quarters its size to fit a 2-core machine: 500 kHz,
10-cycle tone burst from a spherical bowl (``st.make_bowl``; radius of curvature 30 mm,
aperture 30 mm: half-angle 30 deg, as the 2-D arc) in water; a 3 mm cortical plate (c_p 2800
m/s, rho 1850 kg/m^3, c_s 1400 m/s or ``--shear``) crosses the axis 8.75 mm in front of
the focus (its mid-plane between two points: 6 points thick at 0 deg), tilted by 0-60 deg about
the z axis (perpendicular to the beam) through that crossing. The fluid model of bone is the same
run with c_s = 0 in the plate. Lossless. Reported per angle: focal pressure (largest ``p_max``
in the water beyond the plate within 8 mm of the water-only focus, outside the PML) relative
to the water-only beam, and the focal shift [mm].

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_bone_plate_3d.py \
        [--angles 0,30,...] [--shear 1400] [--fine] [--figure docs/elastic-bone-plate-3d.png]

Grid 100 x 84 x 84 points of 0.5 mm (6 points per wavelength in water, 5.6 per shear
wavelength at 1400 m/s; the plate 6 points thick), PML 10 inside, CFL 0.3 on 2800 m/s, float32;
``--fine``: 0.375 mm (135 x 112 x 112).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import sonotile as st

F0, C0, RHO0 = 5e5, 1500.0, 1000.0
CP, RHO_B = 2800.0, 1850.0
DX, NX, NY, PML, NT = 5e-4, 100, 84, 10, 960
FOCUS = (72, 42, 42)  # grid indices of the geometric focus
RADIUS, HALF_APERTURE = 60, 30  # [points]: 30 mm, aperture 30 mm (half-angle 30 deg)
PLATE_CENTRE, PLATE_HALF = 54.5, 3  # the plate's mid-plane crosses the axis at x = 54.5:
# between points, so that it is 6 points thick at 0 deg (3 mm; on average at any tilt)
CLEAR = 6  # [points] the plate keeps from the bowl
SEARCH = 16  # [points] around the water-only focus searched for the maximum


def use_fine_grid() -> None:
    """Switch to the same geometry on a grid of 0.375 mm (135 x 112 x 112, PML 14, 1280
    steps; the plate 8 points thick, its mid-plane 8.8 mm in front of the focus)."""
    global DX, NX, NY, PML, NT, FOCUS, RADIUS, HALF_APERTURE, PLATE_CENTRE, PLATE_HALF
    global CLEAR, SEARCH
    DX, NX, NY, PML, NT = 3.75e-4, 135, 112, 14, 1280
    FOCUS, RADIUS, HALF_APERTURE = (96, 56, 56), 80, 40
    PLATE_CENTRE, PLATE_HALF, CLEAR, SEARCH = 72.5, 4, 8, 21


def _coords() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Index grids x, y, z of the ``(NX, NY, NY)`` grid."""
    return np.meshgrid(np.arange(NX), np.arange(NY), np.arange(NY), indexing="ij")


def bowl_depth(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """x [points] of the bowl at lateral indices ``y, z`` (its rim's beyond the aperture)."""
    r = np.clip(np.hypot(y - FOCUS[1], z - FOCUS[2]), 0, HALF_APERTURE)
    return FOCUS[0] - np.sqrt(RADIUS**2 - r**2)


def plate(angle_deg: float) -> np.ndarray:
    """The plate: points within ``PLATE_HALF`` of the plane through (PLATE_CENTRE, axis) whose
    normal is tilted by ``angle_deg`` from the beam axis (x) towards y, at least ``CLEAR``
    points beyond the bowl."""
    t = np.radians(angle_deg)
    x, y, z = _coords()
    band = np.abs((x - PLATE_CENTRE) * np.cos(t) + (y - FOCUS[1]) * np.sin(t)) < PLATE_HALF
    return band & (x > bowl_depth(y, z) + CLEAR)


def bowl() -> np.ndarray:
    """The source: a staircase spherical bowl, apex on the axis ``RADIUS`` before the focus."""
    apex = (FOCUS[0] - RADIUS + 1, FOCUS[1] + 1, FOCUS[2] + 1)  # 1-based
    focus = tuple(f + 1 for f in FOCUS)
    return st.make_bowl((NX, NY, NY), apex, RADIUS, 2 * HALF_APERTURE + 1, focus)


def run(
    angle_deg: float | None, shear: float, nt: int = NT, interface: str = "kwave"
) -> np.ndarray:
    """``p_max`` over the grid [Pa] (``angle_deg`` None: water only); ``interface``: the
    elastic model's fluid-solid interfaces (``"kwave"`` or ``"slip"``)."""
    shape = (NX, NY, NY)
    cp, cs, rho = np.full(shape, C0), np.zeros(shape), np.full(shape, RHO0)
    if angle_deg is not None:
        b = plate(angle_deg)
        cp[b], cs[b], rho[b] = CP, shear, RHO_B
    dt = 0.3 * DX / CP
    t = np.arange(nt) * dt
    n = 10 / F0
    sig = np.where(t < n, np.sin(2 * np.pi * F0 * t) * np.sin(np.pi * t / n) ** 2, 0.0)
    src = -1e5 * sig  # sxx = syy = szz = -p: a pressure source of 100 kPa (additive)
    out = st.pstd_elastic_3d(
        st.KWaveGrid(shape, DX, dt=dt, nt=nt), st.KWaveElasticMedium(cp, cs, rho),
        st.ElasticSource(sxx=src, syy=src, szz=src, s_mask=bowl()),
        st.KSensor(points=np.array([FOCUS]), record=("p_max_all",)),
        pml_size=PML, interface=interface,
    )  # fmt: skip
    return np.asarray(out["p_max_all"])


def focal(
    pmax: np.ndarray, angle_deg: float | None, centre: tuple[float, ...] | None = None
) -> tuple[float, np.ndarray]:
    """Largest pressure in the water beyond the plate within ``SEARCH`` points of ``centre``
    and outside the PML, and where [points]."""
    centre = FOCUS if centre is None else centre
    x, y, z = _coords()
    near = np.sqrt((x - centre[0]) ** 2 + (y - centre[1]) ** 2 + (z - centre[2]) ** 2) <= SEARCH
    for a, n in ((x, NX), (y, NY), (z, NY)):
        near &= (a >= PML) & (a < n - PML)
    if angle_deg is not None:
        t = np.radians(angle_deg)
        near &= ~plate(angle_deg) & (
            (x - PLATE_CENTRE) * np.cos(t) + (y - FOCUS[1]) * np.sin(t) > 0
        )
    v = np.where(near, pmax, -np.inf)
    i = np.unravel_index(np.argmax(v), v.shape)
    return float(pmax[i]), np.array(i, float)


def figure(
    path: str, angles: list[float], rows: list[dict], maps: dict, plate_map: np.ndarray,
    shear: float,
) -> None:  # fmt: skip
    """The two ``p_max`` maps in the plane z = axis (plate outlined), focal pressure and shift
    against tilt."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 2, figsize=(9, 8), layout="constrained")
    ext = [0, NY * DX * 1e3, NX * DX * 1e3, 0]
    for a, (name, m) in zip(ax[0], maps.items()):
        im = a.imshow(m / 1e3, extent=ext, cmap="inferno")
        a.contour(np.arange(NY) * DX * 1e3, np.arange(NX) * DX * 1e3, plate_map, [0.5],
                  colors="c", linewidths=0.8)  # fmt: skip
        a.set_title(name + " (plane z = axis)")
        a.set_xlabel("y [mm]")
        a.set_ylabel("x [mm]")
        fig.colorbar(im, ax=a, label="p_max [kPa]")
    for key, lab in (("fluid", "fluid model (c_s = 0)"), ("elastic", f"elastic (c_s {shear:g})")):
        done = [(g, r) for g, r in zip(angles, rows) if key in r]
        ax[1, 0].plot([g for g, _ in done], [r[key] for _, r in done], "o-", label=lab)
        ax[1, 1].plot([g for g, _ in done], [r[key + "_shift"] for _, r in done], "o-", label=lab)
    ax[1, 0].set_ylabel("focal pressure / without plate")
    ax[1, 1].set_ylabel("focal shift [mm]")
    for a in ax[1]:
        a.set_xlabel("plate tilt [deg]")
        a.grid(alpha=0.3)
        a.legend()
    fig.savefig(path, dpi=80)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--angles", default="0,20,30,40,50,60")
    ap.add_argument("--shear", type=float, default=1400.0, help="plate's shear speed [m/s]")
    ap.add_argument("--figure", default=None, help="write the figure here (PNG)")
    ap.add_argument("--map-angle", type=float, default=40.0, help="angle of the maps shown")
    ap.add_argument("--nt", type=int, default=NT, help="time steps (fewer: a timing run)")
    ap.add_argument("--fine", action="store_true", help="0.375 mm instead of 0.5 mm")
    ap.add_argument("--interface", default="kwave", choices=("kwave", "slip"),
                    help="the elastic runs' fluid-solid interfaces")  # fmt: skip
    a = ap.parse_args(argv)
    if a.fine:
        use_fine_grid()
        a.nt = NT if a.nt == 960 else a.nt
    angles = [float(v) for v in a.angles.split(",")]
    t0 = time.perf_counter()
    p_ref, at_ref = focal(run(None, 0.0, a.nt), None)
    print(f"water only: focal p {p_ref / 1e3:.1f} kPa at x, y, z = {at_ref * DX * 1e3} mm "
          f"({time.perf_counter() - t0:.0f} s)")  # fmt: skip
    print(
        "| tilt | fluid p_f / water | elastic p_f / water | elastic / fluid | fluid shift "
        "[mm] | elastic shift [mm] |\n|---|---|---|---|---|---|"
    )
    rows: list[dict] = []
    maps = {}
    for ang in angles:
        r: dict = {}
        rows.append(r)
        for key, cs in (("fluid", 0.0), ("elastic", a.shear)):
            pm = run(ang, cs, a.nt, a.interface)
            p, at = focal(pm, ang, tuple(at_ref))
            r[key], r[key + "_shift"] = p / p_ref, float(np.linalg.norm(at - at_ref) * DX * 1e3)
            if ang == a.map_angle:
                maps[f"{key}, tilt {ang:g} deg"] = pm[:, :, FOCUS[2]]
        el = time.perf_counter() - t0
        print(f"| {ang:g} | {r['fluid']:.2f} | {r['elastic']:.2f} | "
              f"{r['elastic'] / r['fluid']:.2f} | {r['fluid_shift']:.1f} | "
              f"{r['elastic_shift']:.1f} | ({el:.0f} s)", flush=True)  # fmt: skip
        if a.figure and len(maps) == 2:  # rewritten after each angle: a partial run has one
            pl = plate(a.map_angle)[:, :, FOCUS[2]].astype(float)
            figure(a.figure, angles[: len(rows)], rows, maps, pl, a.shear)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
