"""Plane-wave reflection from a water-solid interface at oblique incidence, elastic model vs the
analytic fluid-solid coefficient.

    PYTHONPATH=src .venv/bin/python benchmarks/elastic_oblique.py 20:1 45:3 70:3 \
        [--shear 1800] [--scale 1] [--periods 40]

Each ``ANGLE:M`` runs a 2-D box periodic along y (one Fourier mode ``cos(k_y y)``, ``k_y = 2 pi
M / L_y``) with PML along x: a line stress source in the water at the frequency that makes the
angle ``asin(k_y c_1 / omega)``, switched on with a 15-period Hann ramp; at steady state the
pressure at two depths in the water is split into its incident and reflected waves (the water's
discrete wavenumber), giving ``R``. Analytic: ``R = (Z_p cos^2 2t_s + Z_s sin^2 2t_s - Z_1) /
(... + Z_1)``, ``Z = rho c / cos t`` (Brekhovskikh). ``--shear 0`` makes the solid a fluid (the
method's own check). ``--scale 2`` halves the grid spacing (same physical problem).
``--upper CP,CS,RHO`` puts a solid on the source side instead of water (welded solid-solid
interface; analytic coefficient from the continuity of u_x, u_y, sigma_xx and sigma_xy).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

C1, R1 = 1500.0, 1000.0  # water
CP, RHO2 = 3000.0, 1900.0  # solid


def analytic(theta: float, cs: float) -> complex:
    """Fluid-solid reflection coefficient of the pressure (time factor exp(-i w t))."""
    s1 = np.sin(theta)
    sp, ss = CP / C1 * s1, cs / C1 * s1
    cosp, coss = np.sqrt(1 - sp**2 + 0j), np.sqrt(1 - ss**2 + 0j)
    z1, zp = R1 * C1 / np.cos(theta), RHO2 * CP / cosp
    zs = RHO2 * cs / coss if cs > 0 else 0.0
    num = zp * (1 - 2 * ss**2) ** 2 + zs * 4 * ss**2 * (1 - ss**2)
    return complex((num - z1) / (num + z1))


def solid_solid(theta: float, w: float, upper: tuple[float, float, float], cs: float) -> complex:
    """P-wave reflection coefficient of a welded interface between two solids (potentials)."""
    cp1, cs1, rho1 = upper
    ky = w / cp1 * np.sin(theta)

    def kx(c: float) -> complex:
        k = np.sqrt((w / c) ** 2 - ky**2 + 0j)
        return k if np.imag(k) >= 0 else -k

    def p_wave(a: complex, cp: float, c_s: float, rho: float) -> np.ndarray:
        mu, lam = rho * c_s**2, rho * cp**2 - 2 * rho * c_s**2
        return np.array([1j * a, 1j * ky, -lam * (w / cp) ** 2 - 2 * mu * a**2, -2 * mu * a * ky])

    def s_wave(b: complex, c_s: float, rho: float) -> np.ndarray:
        mu = rho * c_s**2
        return np.array([1j * ky, -1j * b, -2 * mu * b * ky, mu * (b**2 - ky**2)])

    cols = [p_wave(-kx(cp1), cp1, cs1, rho1), s_wave(-kx(cs1), cs1, rho1),
            -p_wave(kx(CP), CP, cs, RHO2), -s_wave(kx(cs), cs, RHO2)]  # fmt: skip
    rhs = -p_wave(kx(cp1), cp1, cs1, rho1)
    return complex(np.linalg.solve(np.stack(cols, 1), rhs)[0])


def simulated(
    theta: float, m: int, cs: float, sc: int, upper: tuple[float, float, float],
    periods: float = 40.0,
) -> tuple[float, complex]:  # fmt: skip
    """Frequency [Hz] and the measured reflection coefficient (see the module docstring);
    ``periods``: source periods after the first arrival's travel time."""
    import jax

    import sonotile as st

    nx, ny, dx = 320 * sc, 64 * sc, 1e-4 / sc
    xi, xs, xa, xb = 170 * sc, 60 * sc, 110 * sc, 117 * sc
    c1, cs1, r1 = upper
    ky = 2 * np.pi * m / (ny * dx)
    w = ky * c1 / np.sin(theta)
    period = 2 * np.pi / w
    cp, csf, rho = np.full((nx, ny), c1), np.full((nx, ny), cs1), np.full((nx, ny), r1)
    cp[xi:], csf[xi:], rho[xi:] = CP, cs, RHO2
    dt = 0.15 * dx / CP
    nt = int((periods * period + 2 * (xi - xs) * dx / (c1 * np.cos(theta))) / dt)
    t = np.arange(nt) * dt
    sig = np.sin(w * t) * (0.5 - 0.5 * np.cos(np.pi * np.clip(t / (15 * period), 0, 1)))
    prof = np.cos(ky * np.arange(ny) * dx)
    mask = np.zeros((nx, ny), bool)
    mask[xs, :] = True
    sens = np.zeros((nx, ny), bool)
    sens[xa, :] = sens[xb, :] = True
    src = -prof[:, None] * sig[None, :]
    with jax.enable_x64(True):
        p = st.pstd_elastic_2d(
            st.KWaveGrid((nx, ny), dx, dt=dt, nt=nt), st.KWaveElasticMedium(cp, csf, rho),
            st.ElasticSource(sxx=src, syy=src, s_mask=mask), st.KSensor(mask=sens),
            pml_size=(50 * sc, 0), dtype="float64",
        )["p"]  # fmt: skip
    last = int(round(10 * period / dt))
    phase = np.exp(1j * w * t[-last:])
    amp = [(p[row::2, -last:] @ phase) @ prof * 2 / ny for row in (0, 1)]  # rows: xa, xb
    k = 2 / (c1 * dt) * np.sin(w * dt / 2)  # the upper medium's wavenumber under leapfrog
    kx = np.sqrt(k**2 - ky**2 + 0j)
    x = np.array([xa, xb]) * dx
    a, b = np.linalg.solve(np.stack([np.exp(1j * kx * x), np.exp(-1j * kx * x)], 1), amp)
    return w / (2 * np.pi), complex(b / a * np.exp(-2j * kx * (xi - 0.5) * dx))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+", help="ANGLE_DEGREES:M")
    ap.add_argument("--shear", type=float, default=1800.0, help="solid's shear speed [m/s]")
    ap.add_argument("--scale", type=int, default=1, help="grid refinement factor")
    ap.add_argument("--upper", default=None, help="CP,CS,RHO of a solid on the source side")
    ap.add_argument("--periods", type=float, default=40.0, help="run length [periods]")
    a = ap.parse_args(argv)
    upper = (C1, 0.0, R1) if a.upper is None else tuple(float(v) for v in a.upper.split(","))
    for case in a.cases:
        deg, m = case.split(":")
        theta = np.radians(float(deg))
        t0 = time.perf_counter()
        f, r = simulated(theta, int(m), a.shear, a.scale, upper, a.periods)  # type: ignore[arg-type]
        if a.upper is None:
            ra = analytic(theta, a.shear)
        else:
            ra = solid_solid(theta, 2 * np.pi * f, upper, a.shear)  # type: ignore[arg-type]
        print(f"{float(deg):5.1f} deg  {f / 1e6:5.2f} MHz  |R| {abs(r):.4f} (analytic "
              f"{abs(ra):.4f}, {abs(r) / abs(ra) - 1:+.1%})  phase {np.angle(r):+.3f} "
              f"({np.angle(ra):+.3f})  {time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
