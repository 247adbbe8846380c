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


# --------------------------------------------------------------------------- bench cases

#: the media of the bench cases (``sonotile bench``'s original two cases)
MEDIA = {
    "lossless": "homogeneous lossless (scalar c0, rho0)",
    "absorbing_nonlinear": "heterogeneous c0/rho0/BonA, power-law absorption y=1.5, B/A",
}

#: what drives the bench cases: an initial pressure, one point in either of k-Wave's additive
#: modes, or a linear array whose elements carry signals of their own
SOURCE_KINDS = {
    "ivp": "initial value problem: a ball of p0, 3 sensor points (photoacoustics)",
    "point_additive": "one pressure point, additive (k-space filtered, k-Wave's default)",
    "point_additive_no_correction": "one pressure point, additive without k-space correction",
    "array": "a linear array of up to 128 elements, one delayed, apodised signal per element",
}

#: every case of ``sonotile bench --whole_run``: ``{source kind}_{medium}``
WHOLE_RUN_CASES = {
    f"{s}_{m}": f"{SOURCE_KINDS[s]}; {MEDIA[m]}" for s in SOURCE_KINDS for m in MEDIA
}

#: elements of the ``array`` case at most, and its burst's centre frequency [Hz]
ARRAY_ELEMENTS, F0 = 128, 1e6
C_REF = 1500.0  # [m/s] the water sound speed the sources are scaled with


def split_case(case: str) -> tuple[str, str]:
    """``(source kind, medium)`` of a case name such as ``array_absorbing_nonlinear``."""
    for m in MEDIA:
        kind = case.removesuffix(f"_{m}")
        if kind != case and kind in SOURCE_KINDS:
            return kind, m
    raise ValueError(f"case {case!r}: expected one of {', '.join(WHOLE_RUN_CASES)}")


def bench_medium(medium: str, grid: Grid) -> Medium:
    """``lossless`` (water) or ``absorbing_nonlinear``: a ball and a layer of tissue in water
    (c0 [m/s], rho0 [kg/m^3], B/A fields), power-law absorption 0.75 dB/(MHz^y cm), y = 1.5."""
    if medium == "lossless":
        return Medium(C_REF, 1000.0, grid)
    n = grid.shape
    x, y, z = (np.arange(k)[s] - k / 2 for k, s in zip(n, _BROADCAST))  # float32 fields: fast
    ball, layer = (x**2 + y**2 + z**2) < (min(n) / 4) ** 2, z > n[2] / 8
    f = np.float32
    return Medium(
        np.where(ball, f(1650.0), np.where(layer, f(1540.0), f(C_REF))),
        np.where(ball, f(1150.0), np.where(layer, f(1050.0), f(1000.0))),
        grid, bona=np.where(ball, f(9.0), f(6.0)), alpha_coeff=0.75, alpha_power=1.5,
        absorption="power_law",
    )  # fmt: skip


_BROADCAST = ((slice(None), None, None), (None, slice(None), None), (None, None, slice(None)))


def burst(t: np.ndarray, f0: float = F0) -> np.ndarray:
    """A 1 kPa tone burst of 1.5 cycles' Gaussian width centred at 3 periods [Pa], at ``t`` [s]."""
    return 1e3 * np.sin(2 * np.pi * f0 * t) * np.exp(-(((t - 3 / f0) * f0 / 1.5) ** 2))


def bench_drive(kind: str, grid: Grid, pml: int) -> tuple[Sources, Sensor]:
    """The sources and sensor points of a source kind on ``grid`` (cubic, PML ``pml`` inside).

    Pressure signals are scaled as k-Wave scales an additive source, ``2 dt / (N c dx)`` with
    c = 1500 m/s. ``ivp``: a ball of 1 kPa p0 of radius n/8, 3 sensor points along x.
    ``point_*``: one point 2 cells inside the PML, 8 sensor points along x. ``array``: up to
    128 elements one cell wide along y at x = pml + 2, each n/16 cells high in z (at least 1),
    focused at the grid's centre (per-element delays) with a Hann apodisation: every element
    has a signal of its own (``p_source_many``); 8 sensor points along x.
    """
    n, dt, dx = grid.shape[0], grid.dt, grid.spacing[0]
    c = n // 2
    t = np.arange(grid.nt) * dt
    scale = 2 * dt / (grid.ndim * C_REF * dx)
    count = 3 if kind == "ivp" else 8
    xs = np.linspace(pml + 4, n - pml - 4, count).astype(np.int64)
    sensor = Sensor(index=np.stack([xs, np.full(count, c), np.full(count, c)], 1), record=("p",))
    if kind == "ivp":
        ax = np.arange(n) - c
        r2 = ax[:, None, None] ** 2 + ax[None, :, None] ** 2 + ax[None, None, :] ** 2
        return Sources(p0=np.where(r2 < (n / 8) ** 2, np.float32(1e3), np.float32(0))), sensor
    if kind.startswith("point_"):
        mode = kind.removeprefix("point_")
        src = MaskSource(np.array([[pml + 2, c, c]]), burst(t) * scale, mode)  # type: ignore[arg-type]
        return Sources(p=src), sensor
    if kind != "array":
        raise ValueError(f"source kind {kind!r}: expected one of {', '.join(SOURCE_KINDS)}")
    return Sources(p=array_source(grid, pml, scale)), sensor


def array_source(grid: Grid, pml: int, scale: float) -> MaskSource:
    """The ``array`` case's source: elements along y, one signal per grid point of each
    element (the element's delayed, apodised burst), points in k-Wave's index order."""
    n, dt, dx = grid.shape[0], grid.dt, grid.spacing[0]
    c, x0 = n // 2, pml + 2
    count = max(1, min(ARRAY_ELEMENTS, n - 2 * pml - 2))
    ys = c - count // 2 + np.arange(count)
    height = max(1, n // 16)
    zs = c - height // 2 + np.arange(height)
    dist = np.hypot((c - x0) * dx, (ys - c) * dx)  # element to focus [m]
    delay = (dist.max() - dist) / C_REF  # [s]: the farthest element fires first
    apod = np.hanning(count + 2)[1:-1]
    t = np.arange(grid.nt) * dt
    per_element = apod[None, :] * burst(t[:, None] - delay[None, :]) * scale  # (Nt, elements)
    y, z = np.meshgrid(np.arange(count), zs, indexing="ij")  # element, elevation
    index = np.stack([np.full(y.size, x0), ys[y.ravel()], z.ravel()], 1)
    signal = per_element[:, y.ravel()]
    order = np.lexsort(index.T)  # k-Wave's order: x fastest, then y, then z
    return MaskSource(index[order], signal[:, order], "additive", "source.p")


def bench_case_problem(case: str, n: int, steps: int) -> Problem:
    """A ``sonotile bench --whole_run`` case (:data:`WHOLE_RUN_CASES`) on an ``n^3`` grid of
    0.1 mm cells, CFL 0.3 at the medium's fastest sound speed, ``steps`` steps, PML of
    ``min(10, max(2, n // 8))`` points inside the grid."""
    kind, medium = split_case(case)
    dx = 1e-4
    dt = 0.3 * dx / (1650.0 if medium != "lossless" else C_REF)
    pml = min(10, max(2, n // 8))
    grid = Grid((n, n, n), (dx,) * 3, dt, steps)
    sources, sensor = bench_drive(kind, grid, pml)
    return Problem(grid, bench_medium(medium, grid), sources, sensor, Pml((pml,) * 3, (2.0,) * 3))
