"""Plane-wave reflection and transmission at a water-solid interface at oblique incidence,
elastic model vs the analytic fluid-solid coefficients.

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_oblique.py 20:1 45:3 70:3 \
        [--shear 1800] [--scale 1] [--periods 40] [--transmitted] [--interface slip]

Each ``ANGLE:M`` runs a 2-D box periodic along y (one Fourier mode ``cos(k_y y)``, ``k_y = 2 pi
M / L_y``) with PML along x: a line stress source in the water at the frequency that makes the
angle ``asin(k_y c_1 / omega)``, switched on with a 15-period Hann ramp; at steady state the
pressure at two depths in the water is split into its incident and reflected waves (the water's
discrete wavenumber), giving ``R``. Analytic: ``R = (Z_p cos^2 2t_s + Z_s sin^2 2t_s - Z_1) /
(... + Z_1)``, ``Z = rho c / cos t`` (Brekhovskikh). ``--shear 0`` makes the solid a fluid (the
method's own check). ``--scale 2`` halves the grid spacing (same physical problem; 0.5 doubles
it); ``--pml 100`` thickens the PML (points at scale 1, scaled with the grid like the box: the
same physical layer at every ``--scale``; default 50); ``--cfl`` the time step (``c_p dt / dx``
of the solid, default 0.15); ``--interface slip`` the slip-aware fluid-solid interface
(default ``kwave``: k-Wave's scheme). ``--upper CP,CS,RHO``
puts a solid on the source side instead of water (welded solid-solid interface; analytic
coefficient from the continuity of u_x, u_y, sigma_xx and sigma_xy).

``--transmitted`` also records the particle velocity on planes of the solid and fits it with
the plane waves the solid can carry at that k_y (compressional and shear, leaving and, where
they propagate, returning from the PML; discrete wavenumbers), giving the transmitted
amplitudes ``T_P``, ``T_S``: particle-velocity amplitudes at the interface over the incident
wave's ``p_i / (rho_1 c_1)``, polarised along ``(k_x, k_y) / k`` (P) and ``(k_y, -k_x) / k``
(S), time factor ``exp(-i w t)``; closed form in :func:`coefficients`.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

C1, R1 = 1500.0, 1000.0  # water
CP, RHO2 = 3000.0, 1900.0  # solid


def _cosines(theta: float, cs: float) -> tuple[complex, complex]:
    """``cos`` of the transmitted compressional and shear angles (Snell; imaginary part >= 0
    beyond a critical angle: the evanescent wave decays into the solid)."""
    s1 = np.sin(theta)
    return np.sqrt(1 - (CP / C1 * s1) ** 2 + 0j), np.sqrt(1 - (cs / C1 * s1) ** 2 + 0j)


def coefficients(theta: float, cs: float) -> tuple[complex, complex, complex]:
    """Fluid-solid coefficients (Brekhovskikh), time factor ``exp(-i w t)``: ``R`` (reflected
    over incident pressure), ``T_P``, ``T_S`` (transmitted particle-velocity amplitudes over
    the incident wave's ``p_i / (rho_1 c_1)``, polarisations as the module docstring).
    ``D = Z_p cos^2 2t_s + Z_s sin^2 2t_s + Z_1``, ``R = (D - 2 Z_1) / D``,
    ``T_P = (rho_1 c_1 / rho_2 c_p) 2 Z_p cos 2t_s / D``,
    ``T_S = (rho_1 c_1 / rho_2 c_s) 2 Z_s sin 2t_s / D``."""
    cosp, coss = _cosines(theta, cs)
    ss = cs / C1 * np.sin(theta)
    z1, zp = R1 * C1 / np.cos(theta), RHO2 * CP / cosp
    zs = RHO2 * cs / coss if cs > 0 else 0.0
    c2, s2 = 1 - 2 * ss**2, 2 * ss * coss
    d = zp * c2**2 + zs * s2**2 + z1
    tp = R1 * C1 / (RHO2 * CP) * 2 * zp * c2 / d
    ts = R1 * C1 / (RHO2 * cs) * 2 * zs * s2 / d if cs > 0 else 0.0
    return complex((d - 2 * z1) / d), complex(tp), complex(ts)


def analytic(theta: float, cs: float) -> complex:
    """Fluid-solid reflection coefficient of the pressure (time factor exp(-i w t))."""
    return coefficients(theta, cs)[0]


def boundary_solution(theta: float, cs: float) -> tuple[complex, complex, complex]:
    """``R``, ``T_P``, ``T_S`` as :func:`coefficients`, from the boundary conditions directly:
    continuity of ``u_x`` and ``sigma_xx = -p``, ``sigma_xy = 0``, with the stress of a plane
    wave ``sigma_ij = -(lambda (k.v) d_ij + mu (k_i v_j + k_j v_i)) / w`` (velocity ``v``)."""
    w = 1.0
    k1, kp, ks = w / C1, w / CP, w / cs
    ky = k1 * np.sin(theta)
    kx1 = k1 * np.cos(theta)
    cosp, coss = _cosines(theta, cs)
    kxp, kxs = kp * cosp, ks * coss
    lam, mu = RHO2 * (CP**2 - 2 * cs**2), RHO2 * cs**2

    def stress(kx: complex, v: np.ndarray) -> tuple[complex, complex]:
        kv = kx * v[0] + ky * v[1]
        return -(lam * kv + 2 * mu * kx * v[0]) / w, -mu * (kx * v[1] + ky * v[0]) / w

    v_i = np.array([kx1, ky]) / k1 / (R1 * C1)  # incident, p = 1
    v_r = np.array([-kx1, ky]) / k1 / (R1 * C1)
    e_p, e_s = np.array([kxp, ky]) / kp, np.array([ky, -kxs]) / ks
    (pxx, pxy), (sxx, sxy) = stress(kxp, e_p), stress(kxs, e_s)
    m = np.array([[v_r[0], -e_p[0], -e_s[0]], [-1, -pxx, -sxx], [0, pxy, sxy]], complex)
    r, a, b = np.linalg.solve(m, np.array([-v_i[0], 1, 0], complex))
    return complex(r), complex(a * R1 * C1), complex(b * R1 * C1)


def energy_fluxes(theta: float, cs: float, r: complex, tp: complex, ts: complex) -> np.ndarray:
    """Normal energy fluxes of the reflected, transmitted P and transmitted S waves over the
    incident one (an evanescent wave carries none); they sum to 1."""
    cosp, coss = _cosines(theta, cs)
    inc = R1 * C1 * np.cos(theta)
    return np.array([abs(r) ** 2, RHO2 * CP * cosp.real / inc * abs(tp) ** 2,
                     RHO2 * cs * coss.real / inc * abs(ts) ** 2])  # fmt: skip


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


@dataclass
class Measured:
    """One run's figures: ``f`` [Hz], ``r``; with ``transmitted``: ``tp``, ``ts`` (as
    :func:`coefficients`) and ``back``: the largest wave returning from the solid's PML over
    the incident one (same units)."""

    f: float
    r: complex
    tp: complex | None = None
    ts: complex | None = None
    back: float | None = None


def _box(sc: float) -> dict[str, int]:
    """The box's sizes [points] at grid refinement ``sc``: grid ``nx, ny``, first solid plane
    ``xi``, source plane ``xs``, water sensor planes ``xa, xb``, PML ``pml``."""
    n = {k: int(round(v * sc)) for k, v in
         dict(nx=320, ny=64, xi=170, xs=60, xa=110, xb=117, pml=50).items()}  # fmt: skip
    n["xb"] = max(n["xb"], n["xa"] + 3)
    return n


def _kx(w: float, c: float, dt: float, ky: float) -> complex:
    """The normal wavenumber [rad/m] of a plane wave of speed ``c`` under leapfrog (``dt``),
    decaying along +x when evanescent."""
    k = 2 / (c * dt) * np.sin(w * dt / 2)
    return complex(np.sqrt(k**2 - ky**2 + 0j))


def _project(series: np.ndarray, ny: int, ky: float, dy: float, w: float, t: np.ndarray,
             shift: float = 0.0) -> np.ndarray:  # fmt: skip
    """Steady-state phasors of the ``exp(i (k_y y - w t))`` wave of records ``(ny * rows,
    steps)`` in k-Wave's mask order (x fastest), per row; ``shift``: the field's staggering
    along y [points]."""
    ph = series.reshape(ny, -1, t.size) @ np.exp(1j * w * t) * 2 / t.size
    return np.exp(-1j * ky * (np.arange(ny) + shift) * dy) @ ph / ny


def _solid_fit(ux: np.ndarray, uy: np.ndarray, rows: np.ndarray, x_i: float, dx: float,
               kxs: tuple[complex, complex], ky: float, k: tuple[float, float]
               ) -> tuple[np.ndarray, float]:  # fmt: skip
    """Least-squares amplitudes ``(A_P, A_S)`` at the interface ``x_i`` [m] of the outgoing
    waves in the solid from the phasors ``ux`` (at ``(row + 1/2) dx``) and ``uy`` (at ``row
    dx``), and the largest returning (propagating) wave's amplitude."""
    cols = []
    for j, (kx, kk) in enumerate(zip(kxs, k)):
        for sgn in (1, -1):
            if sgn < 0 and abs(kx.imag) > 0:
                continue  # an evanescent wave grows toward the PML: none returns
            e = np.array([sgn * kx, ky]) / kk if j == 0 else np.array([ky, -sgn * kx]) / kk
            col = [e[0] * np.exp(sgn * 1j * kx * ((rows + 0.5) * dx - x_i)),
                   e[1] * np.exp(sgn * 1j * kx * (rows * dx - x_i))]  # fmt: skip
            cols.append((j, sgn, np.concatenate(col)))
    mat = np.stack([c[2] for c in cols], 1)
    amp = np.linalg.lstsq(mat, np.concatenate([ux, uy]), rcond=None)[0]
    out = np.array([amp[[i for i, c in enumerate(cols) if c[:2] == (j, 1)][0]] for j in (0, 1)])
    back = max((abs(a) for a, c in zip(amp, cols) if c[1] < 0), default=0.0)
    return out, float(back)


def measured(
    theta: float, m: int, cs: float, sc: float, upper: tuple[float, float, float],
    periods: float = 40.0, transmitted: bool = False, pml: int | None = None,
    cfl: float = 0.15, interface: str = "kwave",
) -> Measured:  # fmt: skip
    """Frequency [Hz], the measured reflection coefficient and, with ``transmitted``, the
    transmitted amplitudes (see the module docstring); ``periods``: source periods after the
    first arrival's travel time; ``pml``: the PML's thickness [points at scale 1] (default 50;
    scaled with ``sc``; the box grows with it); ``cfl``: ``c_p dt / dx`` of the solid;
    ``interface``: ``pstd_elastic_2d``'s."""
    import jax

    import sonotile as st

    n, dx = _box(sc), 1e-4 / sc
    if pml is not None:  # the box grows by the extra PML on both sides
        pml = int(round(pml * sc))
        grow = pml - n["pml"]
        n = {k: v + {"nx": 2 * grow, "ny": 0}.get(k, grow) for k, v in n.items()} | {"pml": pml}
    nx, ny, xi = n["nx"], n["ny"], n["xi"]
    c1, cs1, r1 = upper
    ky = 2 * np.pi * m / (ny * dx)
    w = ky * c1 / np.sin(theta)
    period = 2 * np.pi / w
    cp, csf, rho = np.full((nx, ny), c1), np.full((nx, ny), cs1), np.full((nx, ny), r1)
    cp[xi:], csf[xi:], rho[xi:] = CP, cs, RHO2
    dt = cfl * dx / CP
    nt = int((periods * period + 2 * (xi - n["xs"]) * dx / (c1 * np.cos(theta))) / dt)
    t = np.arange(nt) * dt
    sig = np.sin(w * t) * (0.5 - 0.5 * np.cos(np.pi * np.clip(t / (15 * period), 0, 1)))
    mask = np.zeros((nx, ny), bool)
    mask[n["xs"], :] = True
    src = -np.cos(ky * np.arange(ny) * dx)[:, None] * sig[None, :]
    rows = np.array([n["xa"], n["xb"]])
    if transmitted:  # planes in the solid, denser near the interface (evanescent waves)
        off = np.array([3, 4, 5, 6, 8, 10, 13, 17, 22, 30, 40, 52, 66, 80, 90])
        rows = np.concatenate([rows, xi + np.unique(np.round(off * sc).astype(int))])
    sens = np.zeros((nx, ny), bool)
    sens[rows, :] = True
    last = int(round(10 * period / dt))
    with jax.enable_x64(True):
        out = st.pstd_elastic_2d(
            st.KWaveGrid((nx, ny), dx, dt=dt, nt=nt), st.KWaveElasticMedium(cp, csf, rho),
            st.ElasticSource(sxx=src, syy=src, s_mask=mask),
            st.KSensor(mask=sens, record=("p", "u") if transmitted else ("p",),
                       record_start_index=nt - last + 1),
            pml_size=(n["pml"], 0), dtype="float64", interface=interface,
        )  # fmt: skip
    tw = t[-last:]
    amp = _project(out["p"], ny, ky, dx, w, tw)[:2]  # rows xa, xb
    kx = _kx(w, c1, dt, ky)  # the upper medium's wavenumber under leapfrog
    x = rows[:2] * dx
    a, b = np.linalg.solve(np.stack([np.exp(1j * kx * x), np.exp(-1j * kx * x)], 1), amp)
    x_i = (xi - 0.5) * dx
    got = Measured(w / (2 * np.pi), complex(b / a * np.exp(-2j * kx * x_i)))
    if transmitted:
        late = np.exp(-0.5j * w * dt)  # u is recorded half a step before p
        ux = _project(out["ux"], ny, ky, dx, w, tw)[2:] * late
        uy = _project(out["uy"], ny, ky, dx, w, tw, shift=0.5)[2:] * late
        ks = (_kx(w, CP, dt, ky), _kx(w, cs, dt, ky))
        k = (2 / (CP * dt) * np.sin(w * dt / 2), 2 / (cs * dt) * np.sin(w * dt / 2))
        (tp, ts), back = _solid_fit(ux, uy, rows[2:], x_i, dx, ks, ky, k)
        v_i = a * np.exp(1j * kx * x_i) / (r1 * c1)  # incident velocity amplitude there
        got.tp, got.ts, got.back = complex(tp / v_i), complex(ts / v_i), back / abs(v_i)
    return got


def simulated(
    theta: float, m: int, cs: float, sc: float, upper: tuple[float, float, float],
    periods: float = 40.0,
) -> tuple[float, complex]:  # fmt: skip
    """Frequency [Hz] and the measured reflection coefficient (:func:`measured`)."""
    got = measured(theta, m, cs, sc, upper, periods)
    return got.f, got.r


def _line(deg: float, got: Measured, ref: complex, coef: tuple | None, secs: float,
          cs: float) -> str:  # fmt: skip
    """One case's report (with the transmitted waves: the measured coefficients' energy
    balance, :func:`energy_fluxes`)."""
    s = (f"{deg:5.1f} deg  {got.f / 1e6:5.2f} MHz  |R| {abs(got.r):.4f} (analytic "
         f"{abs(ref):.4f}, {abs(got.r) / abs(ref) - 1:+.1%})  phase {np.angle(got.r):+.3f} "
         f"({np.angle(ref):+.3f})")  # fmt: skip
    if coef is not None and got.tp is not None and got.ts is not None:
        for name, v, a in (("T_P", got.tp, coef[1]), ("T_S", got.ts, coef[2])):
            err = f"{abs(v) / abs(a) - 1:+.1%}" if abs(a) > 1e-9 else "-"
            s += (f"  |{name}| {abs(v):.4f} ({abs(a):.4f}, {err}) phase "
                  f"{np.angle(v):+.3f} ({np.angle(a):+.3f})")  # fmt: skip
        flux = energy_fluxes(np.radians(deg), cs, got.r, got.tp, got.ts).sum()
        s += f"  returning {got.back:.1e}  energy {flux:.4f}"
    return s + f"  {secs:.0f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+", help="ANGLE_DEGREES:M")
    ap.add_argument("--shear", type=float, default=1800.0, help="solid's shear speed [m/s]")
    ap.add_argument("--scale", type=float, default=1, help="grid refinement factor")
    ap.add_argument("--upper", default=None, help="CP,CS,RHO of a solid on the source side")
    ap.add_argument("--periods", type=float, default=40.0, help="run length [periods]")
    ap.add_argument("--transmitted", action="store_true", help="also fit T_P and T_S")
    ap.add_argument("--pml", type=int, default=None, help="PML thickness [points at scale 1]")
    ap.add_argument("--cfl", type=float, default=0.15, help="solid's c_p dt / dx")
    ap.add_argument("--interface", default="kwave", choices=("kwave", "slip"))
    a = ap.parse_args(argv)
    upper = (C1, 0.0, R1) if a.upper is None else tuple(float(v) for v in a.upper.split(","))
    for case in a.cases:
        deg, m = case.split(":")
        theta = np.radians(float(deg))
        t0 = time.perf_counter()
        tr = a.transmitted and a.upper is None
        got = measured(theta, int(m), a.shear, a.scale, upper, a.periods, tr, a.pml, a.cfl,  # type: ignore[arg-type]
                       a.interface)  # fmt: skip
        coef = coefficients(theta, a.shear) if a.upper is None else None
        ref = coef[0] if coef is not None else solid_solid(theta, 2 * np.pi * got.f, upper,  # type: ignore[arg-type]
                                                           a.shear)  # fmt: skip
        print(_line(float(deg), got, ref, coef, time.perf_counter() - t0, a.shear), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
