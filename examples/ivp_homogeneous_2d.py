"""Initial value problem in a homogeneous 2-D medium, recorded on a Cartesian circle of sensors.

Shows: k-Wave's example_ivp_homogeneous_medium: two discs of initial pressure (``p0``) in water,
sensors on a circle given in metres (Cartesian points read off the grid by band-limited
interpolation), the field and the traces. Physics: ``dp/dt = -rho c^2 div u``,
``rho du/dt = -grad p`` from ``p(t=0) = p0``; a pulse reaches a sensor after ``|x_s - x_0| / c``.
Key numbers: the sound speed fitted from the arrival time (half maximum of the leading edge)
against distance to the larger disc (should be ``c = 1500 m/s``), and the spread of the fit's
residuals [s].

Run: ``python examples/ivp_homogeneous_2d.py [--quick] [--out gallery-out]``; about 4 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C0 = 1500.0


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (96, 1e-4) if quick else (128, 0.8e-4)
    grid = st.KWaveGrid((n, n), dx)
    big = st.make_disc((n, n), (n // 2 + 1 + n // 8, n // 2 + 1 + n // 8), n // 16)
    small = st.make_disc((n, n), (n // 2 + 1 - n // 5, n // 2 + 1 - n // 10), n // 32)
    p0 = 5.0 * big + 3.0 * small  # [Pa]
    radius = 0.33 * n * dx
    points = st.make_cart_circle(radius, 50)  # (2, 50) [m], origin at the grid centre
    sensor = st.KSensor(mask=points, record=("p", "p_max_all"))
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0, density=1000.0),
                      st.KSource(p0=p0), sensor, pml_size=10, progress=False)  # fmt: skip
    centre = (np.array([n // 8, n // 8]) * dx)[:, None]  # centre of the big disc [m]
    dist = np.hypot(*(points - centre))
    p = np.asarray(res["p"])
    t_peak = np.array([leading_edge(res.t, trace) for trace in p])
    near = dist < np.median(dist)  # the half of the ring nearer the big disc sees it first
    slope, icpt = np.polyfit(dist[near], t_peak[near], 1)
    resid = t_peak[near] - (slope * dist[near] + icpt)
    plot(grid, p0, res, points, out)
    return {"c_fit": float(1 / slope), "residual_rms_s": float(np.sqrt(np.mean(resid**2)))}


def leading_edge(t: np.ndarray, p: np.ndarray) -> float:
    """Time [s] at which ``p`` first reaches half its maximum (linear interpolation)."""
    half = 0.5 * p.max()
    i = int(np.argmax(p >= half))
    return float(t[i - 1] + (half - p[i - 1]) / (p[i] - p[i - 1]) * (t[i] - t[i - 1]))


def plot(grid, p0, res, points, out) -> None:
    plt = pyplot()
    n, dx = grid.shape[0], grid.spacing[0]
    ax_mm = mm(n, dx)
    ext = [ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.6))
    h = ax[0].imshow(p0, extent=ext, cmap="viridis")
    fig.colorbar(h, ax=ax[0], label="p0 [Pa]")
    ax[0].plot(points[1] * 1e3, points[0] * 1e3, "w.", ms=3)
    ax[0].set(title="p0 [Pa] and sensors", xlabel="y [mm]", ylabel="x [mm]")
    h = ax[1].imshow(res["p_max_all"], extent=ext, cmap="magma")
    fig.colorbar(h, ax=ax[1], label="p_max_all [Pa]")
    ax[1].set(title="p_max_all [Pa]", xlabel="y [mm]")
    h = ax[2].imshow(res["p"], aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1,
                     extent=[0, res.t[-1] * 1e6, res["p"].shape[0], 0])  # fmt: skip
    fig.colorbar(h, ax=ax[2], label="p [Pa]")
    ax[2].set(title="sensor traces [Pa]", xlabel="t [us]", ylabel="sensor")
    save(fig, out, "ivp_homogeneous_2d")


if __name__ == "__main__":
    main(run, __doc__, "ivp_homogeneous_2d")
