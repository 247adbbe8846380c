"""Elastic waves: a water layer over a bone-like solid, compressional and shear waves.

Shows: k-Wave's example_ewp_layered_medium: ``st.simulate`` with a ``st.KWaveElasticMedium``
(water: shear speed 0; solid: ``c_p = 2900``, ``c_s = 1450 m/s``, ``rho = 1850 kg/m^3``), a
disc of initial pressure (``p0``) in the water, and ``u_split_field`` splitting the velocity in
the solid into its compressional (curl-free) and shear (divergence-free) parts: the spherical
wave hitting the interface sends a P and a slower S wave into the solid (and a head wave back
into the water). Physics: isotropic linear elasticity; at normal incidence a plane wave reflects
with ``R = (Z2 - Z1)/(Z2 + Z1)``, ``Z = rho c_p``. Key numbers: ``R`` from a plane pulse
(periodic across, one p0 band) over the theory; ``c_p`` from the delay of the transmitted pulse
between two depths in the solid; ``c_s`` fitted from the shear arrivals (half maximum of
``|u_s|``) along a line in the solid against Fermat's refracted travel times from the disc.

Run: ``python examples/ewp_layered_medium.py [--quick] [--out gallery-out]``; about 8 s on 2
cores (``--quick``: about 6 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C1, RHO1 = 1500.0, 1000.0  # water [m/s], [kg/m^3]
CP, CS, RHO2 = 2900.0, 1450.0, 1850.0  # bone-like solid


def layered(shape: tuple[int, int], xi: int) -> st.KWaveElasticMedium:
    """Water for rows ``< xi``, the solid from row ``xi`` on."""
    cp, cs, rho = np.full(shape, C1), np.zeros(shape), np.full(shape, RHO1)
    cp[xi:], cs[xi:], rho[xi:] = CP, CS, RHO2
    return st.KWaveElasticMedium(cp, cs, rho)


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    r, c_p = plane_wave()
    c_s, fig = point_source(96 if quick else 160, 2e-4 if quick else 1.2e-4)
    plot(*fig, out)
    z1, z2 = RHO1 * C1, RHO2 * CP
    return {"R_over_theory": r / ((z2 - z1) / (z2 + z1)), "c_p_fit_over_c_p": c_p / CP,
            "c_s_fit_over_c_s": c_s / CS}  # fmt: skip


def plane_wave() -> tuple[float, float]:
    """Reflection coefficient and compressional speed [m/s] of a plane pulse at normal incidence
    (periodic along y: no PML there)."""
    nx, ny, dx, xi = 256, 8, 1e-4, 128
    grid = st.KWaveGrid((nx, ny), dx)
    medium = layered((nx, ny), xi)
    grid.make_time(medium.sound_speed_compression, cfl=0.2,
                   t_end=(xi - 40) * dx / C1 + (nx - 20 - xi) * dx / CP)  # fmt: skip
    p0 = np.repeat(1e3 * np.exp(-(((np.arange(nx) - 50) / 3.0) ** 2))[:, None], ny, 1)  # [Pa]
    mask = np.zeros((nx, ny), bool)
    mask[[90, xi + 30, xi + 80], 0] = True
    res = st.simulate(grid, medium, st.KSource(p0=p0), st.KSensor(mask=mask, record=("p", "u")),
                      pml_size=(20, 0), smooth_p0=False, progress=False)  # fmt: skip
    p, ux, dt = np.asarray(res["p"][0]), np.asarray(res["ux"]), grid.dt
    after = int(((90 - 50) + 2 * (xi - 90) - 10) * dx / C1 / dt)  # before the echo, after the pulse
    incident, echo = p[:after].max(), p[after:][np.argmax(np.abs(p[after:]))]
    return float(echo / incident), 50 * dx / delay(ux[1], ux[2], dt)


def delay(a: np.ndarray, b: np.ndarray, dt: float) -> float:
    """Delay [s] of ``b`` after ``a`` from their cross-correlation (parabolic peak)."""
    cc = np.correlate(b, a, "full")
    k = int(np.argmax(cc))
    y0, y1, y2 = cc[k - 1 : k + 2]
    return float((k - (len(a) - 1) + 0.5 * (y0 - y2) / (y0 - 2 * y1 + y2)) * dt)


def fermat(src: np.ndarray, pts: np.ndarray, x_i: float, c2: float) -> np.ndarray:
    """Refracted travel times [s] from ``src`` (in the water) to ``pts`` (in the solid, speed
    ``c2``) through the plane ``x = x_i`` (the least time over crossing points)."""
    y = np.linspace(pts[:, 1].min() - 0.02, pts[:, 1].max() + 0.02, 20001)[None, :]
    t1 = np.hypot(x_i - src[0], y - src[1]) / C1
    t2 = np.hypot(pts[:, :1] - x_i, y - pts[:, 1:]) / c2
    return (t1 + t2).min(axis=1)


def point_source(n: int, dx: float) -> tuple[float, tuple]:
    """Shear speed [m/s] fitted from the shear arrivals of a disc source above the solid, and
    what the figure draws."""
    xi, step = int(0.35 * n), 2
    grid = st.KWaveGrid((n, n), dx)
    medium = layered((n, n), xi)
    src = np.array([xi - n // 8, n // 4])
    grid.make_time(medium.sound_speed_compression, cfl=0.2,
                   t_end=(n // 8) * dx / C1 + 0.8 * n * dx / CS)  # fmt: skip
    p0 = 1e3 * st.make_disc((n, n), tuple(int(v) + 1 for v in src), max(2, n // 40))
    mask = np.zeros((n, n), bool)
    mask[::step, ::step] = True
    res = st.simulate(grid, medium, st.KSource(p0=p0),
                      st.KSensor(mask=mask, record=("p", "u_split_field")),
                      pml_size=20, progress=False)  # fmt: skip
    m = n // step  # the mask's points in k-Wave's (column-major) order: [i + m j] -> [i, j]
    on_grid = lambda v: np.asarray(v).reshape(m, m, -1).transpose(1, 0, 2)  # noqa: E731
    us = on_grid(np.hypot(res["ux_split_s"], res["uy_split_s"]))
    up = on_grid(np.hypot(res["ux_split_p"], res["uy_split_p"]))
    p = on_grid(res["p"])
    col = (src[1] + n // 10) // step  # a line in the solid, inside the head waves' shadow
    rows = np.arange((xi + n // 5) // step, (n - 22) // step)  # S clear of the P wave
    pts = np.stack([rows * step, np.full(rows.size, col * step)], 1) * dx
    t_s = np.array([leading_edge(res.t, us[r, col]) for r in rows])
    x_i = (xi - 0.5) * dx  # the interface lies between the last water and first solid row
    speeds = np.linspace(0.8 * CS, 1.2 * CS, 401)
    spread = [np.std(t_s - fermat(src * dx, pts, x_i, c)) for c in speeds]
    snap = int(0.4 * grid.nt)
    fig = (n, dx, xi, step, p[..., snap], up[..., snap], us[..., snap], us.max(-1), pts,
           res.t[snap])  # fmt: skip
    return float(speeds[int(np.argmin(spread))]), fig


def leading_edge(t: np.ndarray, v: np.ndarray) -> float:
    """Time [s] at which ``v`` first reaches half its maximum (linear interpolation)."""
    half = 0.5 * v.max()
    i = int(np.argmax(v >= half))
    return float(t[i - 1] + (half - v[i - 1]) / (v[i] - v[i - 1]) * (t[i] - t[i - 1]))


def plot(n, dx, xi, step, p, up, us, us_max, pts, t_snap, out) -> None:
    plt = pyplot()
    k = 20 // step  # the PML (20 points) left out of the images
    ax_mm = mm(n, dx)[::step]
    ext = [ax_mm[k], ax_mm[-k - 1], ax_mm[-k - 1], ax_mm[k]]
    fig, ax = plt.subplots(1, 4, figsize=(15, 3.8))
    panels = [(p, "RdBu_r", f"p at {t_snap * 1e6:.1f} us [Pa]"),
              (up, "magma", "|u_p| (compressional) [m/s]"),
              (us, "magma", "|u_s| (shear) [m/s]"),
              (us_max, "magma", "max_t |u_s| [m/s]")]  # fmt: skip
    for a, (f, cmap, title) in zip(ax, panels):
        f = f[k:-k, k:-k]
        lim = np.abs(f).max()
        im = a.imshow(f, extent=ext, cmap=cmap, vmin=-lim if cmap == "RdBu_r" else 0, vmax=lim)
        a.axhline(ax_mm[0] + (xi - 0.5) * dx * 1e3, color="c", lw=0.8)
        a.set(title=title, xlabel="y [mm]")
        fig.colorbar(im, ax=a, shrink=0.8, label=title[title.rindex("[") :])
    ax[0].set_ylabel("x [mm] (water above the line, solid below)")
    ax[3].plot(pts[:, 1] * 1e3 + ax_mm[0], pts[:, 0] * 1e3 + ax_mm[0], "w.", ms=2)
    save(fig, out, "ewp_layered_medium")


if __name__ == "__main__":
    main(run, __doc__, "ewp_layered_medium")
