"""Power-law absorption and dispersion, measured from a broadband pulse.

Shows: k-Wave's example_na_modelling_absorption: a broadband 1-D pulse of ``p0`` through a
medium with ``alpha = alpha_0 f^y`` (``alpha_coeff`` [dB/(MHz^y cm)], ``alpha_power`` y = 1.5),
recorded at two points; the attenuation and phase speed from the ratio of their spectra; the
same with ``alpha_mode="no_dispersion"``. Physics: Treeby and Cox's fractional Laplacian terms
give ``alpha(f) = alpha_0 f^y`` and the Kramers-Kronig dispersion
``1/c(w) = 1/c0 + alpha_0 tan(pi y / 2) (w^(y-1) - w0^(y-1))`` (Np/m, rad/s units).
Key numbers: the fitted power y, the fitted ``alpha_0`` over the set one, and the phase-speed
rise from 2 to 6 MHz that the dispersion term adds (with it less without it) over the
Kramers-Kronig one.

Run: ``python examples/na_absorption.py [--quick] [--out gallery-out]``; about 7 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, pyplot, save

import sonotile as st

C0, A0, Y = 1500.0, 2.0, 1.5  # [m/s], [dB/(MHz^y cm)]
NP = 100 / (20 * np.log10(np.e))  # dB/cm -> Np/m


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (1024, 2.5e-5) if quick else (2048, 1.25e-5)
    dt = 0.3 * dx / C0
    x = np.arange(n)
    s0, s1, s2 = n // 4, 3 * n // 8, 5 * n // 8
    p0 = np.exp(-(((x - s0) * dx / 40e-6) ** 2))  # a 40 um pulse [Pa]
    grid = st.KWaveGrid((n,), dx, dt=dt, nt=int(0.5 * n * dx / C0 / dt))
    sensor = st.KSensor(points=np.array([[s1], [s2]]), record=("p",))
    spectra = {}
    for mode in (None, "no_dispersion"):
        medium = st.KWaveMedium(sound_speed=C0, alpha_coeff=A0, alpha_power=Y, alpha_mode=mode)
        p = np.asarray(st.simulate(grid, medium, st.KSource(p0=p0), sensor, smooth_p0=False,
                                   dtype="float64", progress=False)["p"])  # fmt: skip
        spectra[mode] = np.fft.rfft(p, n=4 * p.shape[1], axis=1)
    f = np.fft.rfftfreq(4 * grid.nt, dt)
    d = (s2 - s1) * dx
    band = (f > 1e6) & (f < 6e6)
    ratio = spectra[None][1] / spectra[None][0]
    alpha = -np.log(np.abs(ratio)) / d  # [Np/m]
    y_fit, log_a = np.polyfit(np.log(f[band] / 1e6), np.log(alpha[band]), 1)
    w = 2 * np.pi * f
    c_meas = phase_speed(ratio, w, d)[band]
    a_w = A0 * NP / (2 * np.pi * 1e6) ** Y  # [Np/m / (rad/s)^y]
    kk = 1 / (1 / C0 + a_w * np.tan(np.pi * Y / 2) * (w[band] ** (Y - 1)))
    i2, i6 = np.argmin(np.abs(f[band] - 2e6)), np.argmin(np.abs(f[band] - 6e6))
    nd = spectra["no_dispersion"][1] / spectra["no_dispersion"][0]
    c_nd = phase_speed(nd, w, d)[band]  # what the absorption alone does to the phase speed
    rise = ((c_meas[i6] - c_meas[i2]) - (c_nd[i6] - c_nd[i2])) / (kk[i6] - kk[i2])
    plot(f[band], alpha[band], c_meas, kk, c_nd, out)
    return {"y_fit": float(y_fit), "alpha0_fit_over_set": float(np.exp(log_a) / (A0 * NP)),
            "dispersion_over_kramers_kronig": float(rise)}  # fmt: skip


def phase_speed(ratio: np.ndarray, w: np.ndarray, d: float) -> np.ndarray:
    """Phase speed [m/s] over distance ``d`` [m] from the transfer function ``ratio`` at
    angular frequencies ``w`` [rad/s], the phase unwrapped from 0 Hz (zero there)."""
    phase = -np.unwrap(np.angle(ratio))
    with np.errstate(divide="ignore", invalid="ignore"):
        return w * d / phase


def plot(f, alpha, c_meas, kk, c_nd, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
    ax[0].plot(f / 1e6, alpha, label="measured")
    ax[0].plot(f / 1e6, A0 * NP * (f / 1e6) ** Y, "k:", label="alpha_0 f^y")
    ax[0].set(xlabel="f [MHz]", ylabel="alpha [Np/m]", title="attenuation")
    ax[0].legend(fontsize=8)
    ax[1].plot(f / 1e6, c_meas, label="measured")
    ax[1].plot(f / 1e6, kk - kk[0] + c_meas[0], "k:", label="Kramers-Kronig (shifted)")
    ax[1].plot(f / 1e6, c_nd, "--", label="alpha_mode='no_dispersion'")
    ax[1].set(xlabel="f [MHz]", ylabel="phase speed [m/s]", title="dispersion")
    ax[1].legend(fontsize=8)
    save(fig, out, "na_absorption")


if __name__ == "__main__":
    main(run, __doc__, "na_absorption")
