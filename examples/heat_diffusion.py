"""Bioheat diffusion (k-Wave's kWaveDiffusion) against the exact Green's-function solution.

Shows: k-Wave's example_diff_homogeneous_medium_diffusion and _source: ``KWaveDiffusion`` in
2-D with a hot Gaussian start, blood perfusion and a Gaussian heat source ``Q`` [W/m^3],
heated for 10 s (``take_time_step``), then the source switched off (``kdiff.Q = None``) for
10 s of cooling, with a sensor at the centre; ``bioheat_exact`` gives the analytic field.
Physics: Pennes' ``rho C dT/dt = k lap T - rho_b w_b C_b (T - Ta) + Q``; for a homogeneous
medium the k-space step is exact in time. Key numbers: the largest difference from
``bioheat_exact`` after heating (degC, relative to the rise) and the peak temperature [degC].

Run: ``python examples/heat_diffusion.py [--quick] [--out gallery-out]``; about 6 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

TISSUE = {"density": 1079.0, "specific_heat": 3540.0, "thermal_conductivity": 0.52,
          "blood_density": 1060.0, "blood_specific_heat": 3617.0,
          "blood_perfusion_rate": 0.01, "blood_ambient_temperature": 37.0}  # fmt: skip


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (64, 0.5e-3) if quick else (128, 0.25e-3)
    grid = st.KWaveGrid((n, n), dx)
    x = (np.arange(n) - n // 2) * dx
    r2 = x[:, None] ** 2 + x[None, :] ** 2
    t0 = 37.0 + 3.0 * np.exp(-r2 / (2e-3) ** 2)  # [degC]
    q = 2e6 * np.exp(-r2 / (1.5e-3) ** 2)  # [W/m^3]
    centre = np.zeros((n, n), bool)
    centre[n // 2, n // 2] = True
    kdiff = st.KWaveDiffusion(grid, TISSUE, {"T0": t0, "Q": q}, centre)
    steps, dt = 100, 0.1
    kdiff.take_time_step(steps, dt)  # 10 s heating
    heated = kdiff.T.copy()
    rho_c = TISSUE["density"] * TISSUE["specific_heat"]
    diffusivity = TISSUE["thermal_conductivity"] / rho_c
    perfusion = (
        TISSUE["blood_density"]
        * TISSUE["blood_perfusion_rate"]
        * TISSUE["blood_specific_heat"]
        / rho_c
    )
    exact = st.bioheat_exact(t0, q / rho_c, (diffusivity, perfusion, 37.0), dx, steps * dt)
    kdiff.Q = None
    kdiff.take_time_step(steps, dt)  # 10 s cooling
    err = np.abs(heated - exact).max() / (exact.max() - 37.0)
    plot(grid, heated, kdiff, steps, dt, out)
    return {"error_vs_exact": float(err), "T_peak_degC": float(kdiff.T_max.max())}


def plot(grid, heated, kdiff, steps, dt, out) -> None:
    plt = pyplot()
    ax_mm = mm(grid.shape[0], grid.spacing[0])
    ext = [ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.4))
    im = ax[0].imshow(heated, extent=ext, cmap="inferno")
    fig.colorbar(im, ax=ax[0], label="T [degC]")
    ax[0].set(title="T after 10 s heating [degC]", xlabel="y [mm]", ylabel="x [mm]")
    im = ax[1].imshow(kdiff.T, extent=ext, cmap="inferno")
    fig.colorbar(im, ax=ax[1], label="T [degC]")
    ax[1].set(title="T after 10 s cooling [degC]", xlabel="y [mm]")
    t = np.arange(1, 2 * steps + 1) * dt
    ax[2].plot(t, np.ravel(kdiff.sensor_data))
    ax[2].axvline(steps * dt, color="k", ls=":")
    ax[2].set(title="centre", xlabel="t [s]", ylabel="T [degC]")
    save(fig, out, "heat_diffusion")


if __name__ == "__main__":
    main(run, __doc__, "heat_diffusion")
