"""Time-varying point sources in 2-D: a pressure source (monopole) and a velocity source (dipole).

Shows: k-Wave's example_tvsp_homogeneous_medium_monopole and _dipole: a tone burst
(``tone_burst``) driven at one grid point as a pressure source ``p`` (additive) and as an
x-velocity source ``ux``; ``p_rms`` on a Cartesian ring of sensors. Physics: a monopole
radiates equally in every direction; a point force (dipole) radiates ``p ~ cos(theta)``, with
a null across its axis. Key numbers: the monopole's max/min over the ring (1 for isotropy) and
the dipole pattern's largest deviation from ``|cos theta|`` (as a fraction of its maximum).

Run: ``python examples/tvsp_monopole_dipole.py [--quick] [--out gallery-out]``; about 6 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C0, F0 = 1500.0, 1e6


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (96, 1e-4) if quick else (160, 0.75e-4)
    dt = 0.3 * dx / C0
    grid = st.KWaveGrid(
        (n, n), dx, dt=dt, nt=int((0.3 * n * dx / C0 + 4 / F0) / dt)
    )  # past the ring
    burst = st.tone_burst(1 / dt, F0, 3)[0]
    mask = np.zeros((n, n), bool)
    mask[n // 2, n // 2] = True
    ring = st.make_cart_circle(0.3 * n * dx, 72)
    theta = np.arctan2(ring[1], -ring[0])  # angle from the -x axis, as the ring is laid out
    sensor = st.KSensor(mask=ring, record=("p_rms", "p_max_all"))
    medium = st.KWaveMedium(sound_speed=C0)
    sources = {"monopole": st.KSource(p=burst, p_mask=mask),
               "dipole": st.KSource(ux=burst / (1000.0 * C0), u_mask=mask)}  # fmt: skip
    res = {k: st.simulate(grid, medium, s, sensor, pml_size=12, progress=False)
           for k, s in sources.items()}  # fmt: skip
    mono = np.asarray(res["monopole"]["p_rms"]).ravel()
    dip = np.asarray(res["dipole"]["p_rms"]).ravel()
    dev = np.max(np.abs(dip / dip.max() - np.abs(np.cos(theta))))
    plot(grid, res, theta, mono, dip, out)
    return {"monopole_max_over_min": float(mono.max() / mono.min()), "dipole_vs_cos": float(dev)}


def plot(grid, res, theta, mono, dip, out) -> None:
    plt = pyplot()
    ax_mm = mm(grid.shape[0], grid.spacing[0])
    ext = [ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]]
    fig = plt.figure(figsize=(12, 3.8))
    for i, k in enumerate(("monopole", "dipole")):
        a = fig.add_subplot(1, 3, i + 1)
        h = a.imshow(res[k]["p_max_all"], extent=ext, cmap="magma",
                     vmax=np.percentile(res[k]["p_max_all"], 99))  # fmt: skip
        fig.colorbar(h, ax=a, label="p_max_all [Pa]")
        a.set(title=f"{k}: p_max_all", xlabel="y [mm]", ylabel="x [mm]")
    a = fig.add_subplot(1, 3, 3, projection="polar")
    a.plot(theta, mono / mono.max(), label="monopole")
    a.plot(theta, dip / dip.max(), label="dipole")
    a.plot(theta, np.abs(np.cos(theta)), "k:", label="|cos|")
    a.legend(loc="lower left", fontsize=7)
    save(fig, out, "tvsp_monopole_dipole")


if __name__ == "__main__":
    main(run, __doc__, "tvsp_monopole_dipole")
