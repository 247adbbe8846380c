"""Acoustic intensity of a plane wave in an absorbing medium.

Shows: the ``I``/``I_avg`` records (k-Wave's ``sensor.record = {'I_avg'}``: pressure times
particle velocity, the velocity shifted to the pressure's time), with ``p_rms``, for a 3 MHz
CW plane wave in a power-law absorbing medium (0.75 dB/(MHz^1.5 cm)); a PML only across the
beam (``pml_size=(16, 0)``: the grid is periodic along y, so a full-width line source makes a
plane wave). Physics: ``I_avg = p_rms^2 / (rho c)`` for a plane wave, and it decays as
``exp(-2 alpha x)``, ``alpha = 0.75 f^1.5`` dB/cm converted to Np/m. Key numbers:
``I_avg rho c / p_rms^2`` (1) and the fitted attenuation over ``alpha`` (1).

Run: ``python examples/sd_intensity.py [--quick] [--out gallery-out]``; about 8 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, pyplot, save

import sonotile as st

C0, RHO0, F0, A0, Y = 1500.0, 1000.0, 3e6, 0.75, 1.5


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (256, 5e-5) if quick else (512, 2.5e-5)
    dt = 0.3 * dx / C0
    nt = int((n * dx / C0 + 8 / F0) / dt)
    grid = st.KWaveGrid((n, 16), dx, dt=dt, nt=nt)
    mask = np.zeros(grid.shape, bool)
    mask[20, :] = True
    cw = st.create_cw_signals(np.arange(nt) * dt, F0, np.array([1e5]), 0.0, ramp_length=2)
    points = np.array([[i, 8] for i in range(30, n - 20, 4)])
    sensor = st.KSensor(
        points=points, record=("p_rms", "I_avg"), record_start_index=nt - int(4 / F0 / dt)
    )
    medium = st.KWaveMedium(sound_speed=C0, density=RHO0, alpha_coeff=A0, alpha_power=Y)
    res = st.simulate(grid, medium, st.KSource(p=cw, p_mask=mask), sensor, pml_size=(16, 0),
                      progress=False)  # fmt: skip
    x = (points[:, 0] - 20) * dx
    ix, prms = np.asarray(res["Ix_avg"]).ravel(), np.asarray(res["p_rms"]).ravel()
    alpha = A0 * (F0 / 1e6) ** Y * 100 / (20 * np.log10(np.e))  # [Np/m]
    fit = -np.polyfit(x, np.log(ix), 1)[0] / 2
    plot(x, ix, prms, alpha, out)
    return {"I_rho_c_over_p_rms2": float(np.median(ix * RHO0 * C0 / prms**2)),
            "alpha_fit_over_alpha": float(fit / alpha)}  # fmt: skip


def plot(x, ix, prms, alpha, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    ax[0].semilogy(x * 1e3, ix, label="Ix_avg")
    ax[0].semilogy(x * 1e3, prms**2 / (RHO0 * C0), "--", label="p_rms^2 / (rho c)")
    ax[0].semilogy(x * 1e3, ix[0] * np.exp(-2 * alpha * (x - x[0])), "k:", label="exp(-2 alpha x)")
    ax[0].set(xlabel="x [mm]", ylabel="[W/m^2]", title="intensity of a 3 MHz plane wave")
    ax[0].legend(fontsize=8)
    ax[1].plot(x * 1e3, ix * RHO0 * C0 / prms**2)
    ax[1].set(xlabel="x [mm]", title="I_avg rho c / p_rms^2", ylim=(0.9, 1.1))
    save(fig, out, "sd_intensity")


if __name__ == "__main__":
    main(run, __doc__, "sd_intensity")
