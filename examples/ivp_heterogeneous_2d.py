"""Initial value problem in a heterogeneous 2-D medium: a fast, dense slab delays and reflects.

Shows: k-Wave's example_ivp_heterogeneous_medium: sound speed and density given as fields
(a slab of 1800 m/s, 1200 kg/m^3 in water), a disc of ``p0``, a binary line sensor (k-Wave's
``makeLine``) behind the slab; the same run without the slab for comparison. Physics: along the
slab's normal the pulse gains ``L (1/c1 - 1/c2)`` over the water path (a slab of thickness
``L``). Key numbers: the measured time advance on the axis [s] and its ratio to that formula.

Run: ``python examples/ivp_heterogeneous_2d.py [--quick] [--out gallery-out]``; about 6 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save
from ivp_homogeneous_2d import leading_edge

import sonotile as st

C1, C2, RHO2 = 1500.0, 1800.0, 1200.0


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (96, 1e-4) if quick else (160, 0.6e-4)
    grid = st.KWaveGrid((n, n), dx)
    x0, s0, s1, xs = n // 5, 2 * n // 5, 3 * n // 5, 4 * n // 5  # source, slab, sensor rows
    c = np.full((n, n), C1)
    rho = np.full((n, n), 1000.0)
    c[s0:s1], rho[s0:s1] = C2, RHO2
    p0 = st.make_disc((n, n), (x0 + 1, n // 2 + 1), 3).astype(float)
    line = st.make_line((n, n), (xs + 1, 16), (xs + 1, n - 15))
    sensor = st.KSensor(mask=line, record=("p",))
    runs = {}
    media = {"slab": (c, rho), "water": (np.full_like(c, C1), np.full_like(rho, 1e3))}
    dt = 0.3 * dx / C2
    for name, (cc, rr) in media.items():
        g = st.KWaveGrid((n, n), dx, dt=dt, nt=int(n * dx / C1 / dt))  # one crossing in water
        runs[name] = st.simulate(g, st.KWaveMedium(sound_speed=cc, density=rr), st.KSource(p0=p0),
                                 sensor, pml_size=12, progress=False)  # fmt: skip
    mid = int(line.sum()) // 2  # the sensor point on the source's axis
    t_slab = leading_edge(runs["slab"].t, np.asarray(runs["slab"]["p"])[mid])
    t_water = leading_edge(runs["water"].t, np.asarray(runs["water"]["p"])[mid])
    advance = t_water - t_slab
    expected = (s1 - s0) * dx * (1 / C1 - 1 / C2)
    plot(grid, c, runs, out)
    return {"advance_s": float(advance), "advance_over_theory": float(advance / expected)}


def plot(grid, c, runs, out) -> None:
    plt = pyplot()
    n, dx = grid.shape[0], grid.spacing[0]
    ax_mm = mm(n, dx)
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.6))
    h = ax[0].imshow(c, extent=[ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]], cmap="gray")
    fig.colorbar(h, ax=ax[0], label="sound speed [m/s]")
    ax[0].set(title="sound speed [m/s] (slab), disc source", xlabel="y [mm]", ylabel="x [mm]")
    lim = max(np.abs(r["p"]).max() for r in runs.values())  # one scale for both runs
    for a, name in zip(ax[1:], ("water", "slab")):
        r = runs[name]
        h = a.imshow(r["p"], aspect="auto", cmap="RdBu_r", vmin=-lim, vmax=lim,
                     extent=[0, r.t[-1] * 1e6, r["p"].shape[0], 0])  # fmt: skip
        a.set(title=f"line sensor, {name}", xlabel="t [us]", ylabel="sensor point")
    fig.colorbar(h, ax=ax[1:], label="pressure [Pa]")
    save(fig, out, "ivp_heterogeneous_2d")


if __name__ == "__main__":
    main(run, __doc__, "ivp_heterogeneous_2d")
