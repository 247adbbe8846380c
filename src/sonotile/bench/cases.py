"""Named test problems shared by tests, benchmarks and ``sonotile bench``."""

from __future__ import annotations

import numpy as np

from sonotile.model.grid import Grid
from sonotile.model.problem import MaskSource, Medium, Pml, Problem, Sensor, Sources


def heterogeneous_absorbing(
    n: int = 48,
    nt: int = 80,
    dtype: str = "float32",
    seed: int = 0,
    pml: int = 8,
    shape: tuple | None = None,
) -> Problem:
    """The 3-D heterogeneous absorbing nonlinear test problem on an ``n^3`` grid (or ``shape``).

    Smooth heterogeneity of c0, rho0, B/A and alpha_coeff plus a sphere of other tissue,
    power-law absorption (y = 1.5), PML 8, an additive pressure source (a disc, k-space
    filtered, ~200 kPa tone burst at 1.5 MHz) and a 2-point Dirichlet ux source; 60 sensors
    spread over the grid recording p, u, u_non_staggered, p_max, p_rms, p_max_all, p_final.
    """
    rng = np.random.default_rng(seed)
    dx = 1e-4
    shape = (n, n, n) if shape is None else tuple(int(k) for k in shape)
    x = [np.arange(k) / k for k in shape]
    X, Y, Z = np.meshgrid(*x, indexing="ij")
    # smooth heterogeneity plus a sphere of different tissue
    smooth = np.sin(2 * np.pi * X) * np.cos(2 * np.pi * Y) * np.sin(4 * np.pi * Z + 0.3)
    ball = ((X - 0.6) ** 2 + (Y - 0.45) ** 2 + (Z - 0.5) ** 2) < 0.15**2
    c0 = 1500 + 40 * smooth + 100 * ball
    rho0 = 1000 + 30 * smooth + 50 * ball
    bona = 6 + 2 * ball
    alpha = 0.75 + 0.5 * ball
    dt = 0.3 * dx / c0.max()
    g = Grid(shape, (dx,) * 3, dt, nt)
    med = Medium(c0, rho0, g, bona=bona, alpha_coeff=alpha, alpha_power=1.5, absorption="power_law")
    # a source disc near x = pml+2, a tone burst (strong enough to be nonlinear)
    f0 = 1.5e6
    t = np.arange(nt) * dt
    burst = np.sin(2 * np.pi * f0 * t) * np.exp(-(((t - 3 / f0) * f0 / 1.5) ** 2))
    nx, ny, nz = shape
    cy, cz = ny // 2, nz // 2
    r = max(2, min(ny, nz) // 8)
    pts = [
        (pml + 2, j, k)
        for j in range(ny)
        for k in range(nz)
        if (j - cy) ** 2 + (k - cz) ** 2 <= r * r
    ]
    p_idx = np.array(pts)
    p_sig = 2e5 * burst / (3 * 1500.0**2) * 2 * dt * 1500 / dx  # scaled additive, ~200 kPa
    u_idx = np.array([(nx // 2, ny // 3, 2 * nz // 3), (nx // 2 + 1, ny // 3, 2 * nz // 3)])
    u_sig = 0.05 * burst
    src = Sources(
        p=MaskSource(p_idx, p_sig, "additive", "source.p"),
        u=(MaskSource(u_idx, u_sig, "dirichlet", "source.ux"), None, None),
    )
    high = shape[0] - pml if len(set(shape)) == 1 else np.array(shape) - pml
    sidx = rng.integers(pml, high, size=(60, 3))
    sensor = Sensor(
        index=sidx, record=("p", "u", "u_non_staggered", "p_max", "p_rms", "p_max_all", "p_final")
    )
    return Problem(g, med, src, sensor, Pml((pml,) * 3, (2.0,) * 3), dtype)
