"""Whole-field and cuboid records: the acoustic energy of a pulse, before and after it spreads.

Shows: a cuboid sensor (``KSensor(corners=...)``, k-Wave's opposing-corners mask) recording
``p`` over a block of the grid as a ``(Cx, Cy, Nt)`` movie, and whole-grid final fields
``p_final``, ``u_final`` (``ux_final``, ``uy_final``), of a smooth pulse of ``p0`` in 2-D.
Physics: lossless acoustics conserves ``E = sum(p^2 / (2 rho c^2) + rho |u|^2 / 2) dA``, all
potential at the start (``u = 0``) and shared equally between potential and kinetic energy in
an outgoing wave (``p = rho c u``). Key numbers: final over initial energy (1), and the kinetic
fraction at the end (about 1/2).

Run: ``python examples/sd_whole_field_energy.py [--quick] [--out gallery-out]``;
about 5 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C0, RHO0 = 1500.0, 1000.0


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (128, 1e-4) if quick else (256, 0.5e-4)
    dt = 0.3 * dx / C0
    pml = n // 8
    steps = int(0.27 * n * dx / C0 / dt)  # the front stays outside the PML
    grid = st.KWaveGrid((n, n), dx, dt=dt, nt=steps)
    x = np.arange(n) - n // 2
    p0 = 1e3 * np.exp(-(x[:, None] ** 2 + x[None, :] ** 2) / (n / 48) ** 2)  # [Pa]
    lo, hi = n // 2 - n // 4, n // 2 + n // 4 - 1
    sensor = st.KSensor(corners=[((lo, lo), (hi, hi))], record=("p", "p_final", "u_final"))
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0, density=RHO0), st.KSource(p0=p0),
                      sensor, pml_size=pml, smooth_p0=False, progress=False)  # fmt: skip
    e0 = np.sum(p0**2) / (2 * RHO0 * C0**2)
    pot = np.sum(np.asarray(res["p_final"]) ** 2) / (2 * RHO0 * C0**2)
    kin = RHO0 / 2 * sum(np.sum(np.asarray(res[f"u{a}_final"]) ** 2) for a in "xy")
    movie = np.asarray(res["p"][0])  # (Cx, Cy, Nt) on the cuboid
    plot(grid, movie, res, lo, hi, out)
    return {"energy_final_over_initial": float((pot + kin) / e0),
            "kinetic_fraction": float(kin / (pot + kin))}  # fmt: skip


def plot(grid, movie, res, lo, hi, out) -> None:
    plt = pyplot()
    ax_mm = mm(grid.shape[0], grid.spacing[0])
    fig, ax = plt.subplots(1, 4, figsize=(13, 3.2))
    ext = [ax_mm[lo], ax_mm[hi], ax_mm[hi], ax_mm[lo]]
    nt = movie.shape[-1]
    for a, k in zip(ax[:3], (0, nt // 3, 2 * nt // 3)):
        a.imshow(movie[:, :, k], extent=ext, cmap="RdBu_r", vmin=-100, vmax=100)
        a.set(title=f"cuboid p, t = {res.t[k] * 1e6:.2f} us", xlabel="y [mm]")
    ax[0].set_ylabel("x [mm]")
    full = [ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]]
    h = ax[3].imshow(res["p_final"], extent=full, cmap="RdBu_r", vmin=-100, vmax=100)
    ax[3].set(title="p_final (whole grid)", xlabel="y [mm]")
    fig.colorbar(h, ax=ax, label="p [Pa]")  # one scale for the four panels
    save(fig, out, "sd_whole_field_energy")


if __name__ == "__main__":
    main(run, __doc__, "sd_whole_field_energy")
