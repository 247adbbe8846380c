"""The elastic scheme at a planar water-solid interface, solved in the frequency domain: the
reflection coefficient the time-domain model settles to, in seconds, for a convergence study
and for trial interface treatments.

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_interface_modes.py \
        [--angles 35,40,45,50] [--scales 0.5,1,2,4] [--freq 1e6] [--shear 1800] \
        [--mu harmonic|arithmetic] [--density arithmetic|harmonic] \
        [--slip continue,drop | --slip model]

One ``exp(i (k_y y - w t))`` mode of sonotile's (and k-Wave's) semi-discrete elastic scheme in
2-D: ``u_x`` and ``sigma_xy`` at ``x + dx/2``, ``u_y``, ``sigma_xx``, ``sigma_yy`` on the grid
points, the x derivatives the model's staggered Fourier derivatives (``i k exp(+-i k dx/2)`` on
a real FFT, as matrices), the y derivatives ``i k_y`` (a resolved mode: the spectral derivative
is exact), the density averaged linearly onto the ``u_x`` points and the shear modulus
harmonically onto the ``sigma_xy`` points (0 next to the water), as the model. The split-field
PML is a complex stretching of x in the frequency domain (``d/dx -> d/dx / (1 + i s(x)/w)``);
here a thick, smooth one (reflection below 1e-6), so that what is measured is the interface.
Time is exact (the leapfrog's dispersion changes ``|R|`` by < 1e-4 at CFL 0.3:
``elastic_oblique.py --cfl``). A stress source in the water, the pressure at two
planes split into incident and reflected waves, ``R`` referred to the interface at
``(x_i - 1/2) dx`` as in ``elastic_oblique.py``, against its analytic coefficient.

Trials (not the model's behaviour): ``--mu arithmetic``: the mean of the four neighbours on the
shear-stress points (``mu_s / 2`` on the interface's); ``--density harmonic`` on the ``u_x``
points; ``--slip continue``: the solid's shear strain ``d u_y / dx`` taken from the solid's
``u_y`` continued into the water (quadratic extrapolation of its first three points, tapered to
0 over 8 points) instead of the water's ``u_y``; ``--slip drop``: the water's ``u_y`` without
``d sigma_xy / dx`` (a fluid carries no shear stress). ``--slip model``: the model's
``interface="slip"`` (:mod:`sonotile.physics.elastic.slip`: the continuation ``C`` of
``continue`` built by the model, and the velocity update its transpose ``C^T d sigma_xy /
dx``, which drops the water's term and folds it back onto the solid).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import numpy as np

C1, R1 = 1500.0, 1000.0  # water
CP, RHO2 = 3000.0, 1900.0  # solid


def staggered_diff(n: int, dx: float, shift: int) -> np.ndarray:
    """The model's staggered Fourier derivative along a periodic axis of ``n`` points as a
    matrix [1/m]: ``irfft(i k exp(shift i k dx / 2) rfft(f))``."""
    k = 2 * np.pi * np.fft.rfftfreq(n, dx)
    op = 1j * k * np.exp(shift * 0.5j * k * dx)
    return np.fft.irfft(op[:, None] * np.fft.rfft(np.eye(n), axis=0), n, axis=0)


def _continuation(n: int, ni: int) -> np.ndarray:
    """``u_y`` of the solid (points ``>= ni``) continued into the water: quadratic
    extrapolation of the first three solid points, tapered to 0 over 8 points."""
    c = np.eye(n)
    c[:ni, :] = 0
    for j in range(1, 9):
        t = float(j)  # the water point ni - j; the solid points at 0, 1, 2
        lagrange = [(t + 1) * (t + 2) / 2, -t * (t + 2), t * (t + 1) / 2]
        c[ni - j, ni : ni + 3] = np.cos(np.pi * j / 18) ** 2 * np.array(lagrange)
    return c


def _model_slip(solid: np.ndarray) -> np.ndarray:
    """The model's continuation of ``u_y`` along x (:mod:`sonotile.physics.elastic.slip`) on
    the x line of the solid mask ``solid`` (grid points), as a matrix ``C``: the solid's shear
    strain is ``D+ C u_y``, the velocity update ``C^T D- sigma_xy``."""
    from sonotile.physics.elastic import slip

    grid = np.repeat(solid[:, None], 2, 1)  # a 2-D grid uniform along y
    su = slip.solid_velocity(grid, 1)
    dst, src, w = slip.line_gather(su, 0)
    c = np.diag(su[:, 0].astype(float))
    for k, i in enumerate(dst):
        if i % 2 == 0:  # column 0
            np.add.at(c[i // 2], src[k] // 2, w[k])
    return c


def _media(n: int, ni: int, cs: float, mu_avg: str, rho_avg: str) -> dict[str, np.ndarray]:
    """``lam``, ``mu`` on the grid points, ``mu_sg`` on the shear-stress points, ``rho`` on the
    grid points and ``rho_sg`` on the ``u_x`` points (the last point keeps its own value)."""
    water = np.arange(n) < ni
    rho = np.where(water, R1, RHO2)
    mu = np.where(water, 0.0, RHO2 * cs**2)
    lam = rho * np.where(water, C1, CP) ** 2 - 2 * mu
    a, b = mu[:-1], mu[1:]
    if mu_avg == "harmonic":
        pos = (a > 0) & (b > 0)
        mu_sg = np.where(pos, 2 * a * b / np.where(pos, a + b, 1.0), 0.0)
    else:
        mu_sg = 0.5 * (a + b)
    ra, rb = rho[:-1], rho[1:]
    rho_sg = 0.5 * (ra + rb) if rho_avg == "arithmetic" else 2 * ra * rb / (ra + rb)
    return {"lam": lam, "mu": mu, "rho": rho, "mu_sg": np.append(mu_sg, mu[-1]),
            "rho_sg": np.append(rho_sg, rho[-1])}  # fmt: skip


def reflection(theta: float, cs: float = 1800.0, sc: float = 1.0, freq: float = 1e6,
               mu_avg: str = "harmonic", rho_avg: str = "arithmetic",
               slip: tuple[str, ...] = ()) -> complex:  # fmt: skip
    """The scheme's steady-state reflection coefficient of the pressure at incidence ``theta``
    [rad] and frequency ``freq`` [Hz] on a grid of spacing ``0.1 mm / sc`` (water 7 mm, solid
    6 mm, PML 3 mm each side); time factor ``exp(-i w t)``."""
    dx = 1e-4 / sc
    npml, nw, ns = (int(round(v / dx)) for v in (3e-3, 7e-3, 6e-3))
    n, ni = 2 * npml + nw + ns, npml + nw
    w = 2 * np.pi * freq
    ky = w / C1 * np.sin(theta)
    m = _media(n, ni, cs, mu_avg, rho_avg)

    def stretch(x: np.ndarray) -> np.ndarray:
        depth = np.maximum(np.maximum(npml - x, x - (n - 1 - npml)), 0) / npml
        return 1 + 1j * 80 * C1 / (npml * dx) * depth**3 / w

    x = np.arange(n, dtype=float)
    dp = staggered_diff(n, dx, +1) / stretch(x + 0.5)[:, None]
    dm = staggered_diff(n, dx, -1) / stretch(x)[:, None]
    dp_uy = dp @ _continuation(n, ni) if "continue" in slip else dp
    dm_sxy = dm * (x >= ni)[:, None] if "drop" in slip else dm
    if "model" in slip:  # the model's interface="slip" (sonotile.physics.elastic.slip)
        cu = _model_slip(m["mu"] > 0)
        dp_uy, dm_sxy = dp @ cu, cu.T @ dm
    eye, zero, iky, iw = np.eye(n), np.zeros((n, n)), 1j * ky, -1j * w
    diag = np.diag
    # unknowns u_x, u_y, sigma_xx, sigma_yy, sigma_xy; rows: the five equations of motion
    a = np.block([
        [iw * diag(m["rho_sg"]), zero, -dp, zero, -iky * eye],
        [zero, iw * diag(m["rho"]), zero, -iky * eye, -dm_sxy],
        [-diag(m["lam"] + 2 * m["mu"]) @ dm, -iky * diag(m["lam"]), iw * eye, zero, zero],
        [-diag(m["lam"]) @ dm, -iky * diag(m["lam"] + 2 * m["mu"]), zero, iw * eye, zero],
        [-iky * diag(m["mu_sg"]), -diag(m["mu_sg"]) @ dp_uy, zero, zero, iw * eye],
    ])  # fmt: skip
    rhs = np.zeros(5 * n, complex)
    xs = npml + int(round(2e-3 / dx))
    rhs[2 * n + xs] = rhs[3 * n + xs] = 1.0
    sol = np.linalg.solve(a, rhs)
    p = -(sol[2 * n : 3 * n] + sol[3 * n : 4 * n]) / 2
    rows = np.array([npml + int(round(5e-3 / dx)), npml + int(round(5.7e-3 / dx))])
    kx = np.sqrt((w / C1) ** 2 - ky**2 + 0j)
    xr = rows * dx
    inc, ref = np.linalg.solve(np.stack([np.exp(1j * kx * xr), np.exp(-1j * kx * xr)], 1), p[rows])
    return complex(ref / inc * np.exp(-2j * kx * (ni - 0.5) * dx))


def _analytic(theta: float, cs: float) -> complex:
    """``benchmarks/elastic/elastic_oblique.py``'s closed-form fluid-solid coefficient."""
    path = Path(__file__).resolve().parent / "elastic_oblique.py"
    spec = importlib.util.spec_from_file_location("elastic_oblique", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return complex(mod.coefficients(theta, cs)[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--angles", default="35,40,45,50", help="degrees, comma-separated")
    ap.add_argument("--scales", default="0.5,1,2", help="grid refinements (0.1 mm / scale)")
    ap.add_argument("--freq", type=float, default=1e6, help="frequency [Hz]")
    ap.add_argument("--shear", type=float, default=1800.0, help="solid's shear speed [m/s]")
    ap.add_argument("--mu", default="harmonic", choices=("harmonic", "arithmetic"))
    ap.add_argument("--density", default="arithmetic", choices=("arithmetic", "harmonic"))
    ap.add_argument("--slip", default="", help="trials: continue, drop (comma-separated); model")
    a = ap.parse_args(argv)
    slip = tuple(s for s in a.slip.split(",") if s)
    for sc in (float(s) for s in a.scales.split(",")):
        cells = []
        for deg in (float(d) for d in a.angles.split(",")):
            th = np.radians(deg)
            r = reflection(th, a.shear, sc, a.freq, a.mu, a.density, slip)
            ref = _analytic(th, a.shear)
            cells.append(f"{deg:g} deg {abs(r) / abs(ref) - 1:+.2%} ({np.angle(r / ref):+.3f} rad)")
        print(f"dx {0.1 / sc:.3g} mm: " + "  ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
