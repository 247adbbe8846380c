"""A continuous-wave source and its steady-state amplitude and phase over the grid.

Shows: k-Wave's CW workflow (``createCWSignals`` with a start-up ramp, then ``extractAmpPhase``):
a 1 MHz CW pressure source at one point in 2-D, recorded as ``p_cw_all`` (amplitude and phase
at ``cw_frequency`` over the grid, computed during the run) and as traces read by
``extract_amp_phase``. Physics: the 2-D outgoing wave ``p ~ H0(k r)``: phase ``-k r`` with
``k = 2 pi f / c``, amplitude ``~ r^(-1/2)``. Key numbers: wavelength fitted from the phase over
the wavelength ``c / f``, and the fitted amplitude decay exponent (-0.5).

Run: ``python examples/tvsp_cw_amp_phase.py [--quick] [--out gallery-out]``; about 9 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C0, F0 = 1500.0, 1e6


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (128, 1e-4) if quick else (192, 0.75e-4)
    dt = 0.3 * dx / C0
    nt = int((0.75 * n * dx / C0 + 6 / F0) / dt)  # the far corner, then 6 steady periods
    grid = st.KWaveGrid((n, n), dx, dt=dt, nt=nt)
    mask = np.zeros((n, n), bool)
    mask[n // 2, n // 2] = True
    signal = st.create_cw_signals(np.arange(nt) * dt, F0, np.array([1.0]), 0.0, ramp_length=2)
    line = np.array([[n // 2, j] for j in range(n // 2 + 4, n - 16)])  # along +y, off the source
    sensor = st.KSensor(points=line, record=("p", "p_cw_all"), cw_frequency=F0, cw_periods=3)
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0), st.KSource(p=signal, p_mask=mask),
                      sensor, pml_size=16, progress=False)  # fmt: skip
    amp, phase = np.asarray(res["p_cw_amp_all"]), np.asarray(res["p_cw_phase_all"])
    r = (line[:, 1] - n // 2) * dx
    ph = np.unwrap(phase[n // 2, line[:, 1]])
    k_fit = -np.polyfit(r, ph, 1)[0]
    decay = np.polyfit(np.log(r), np.log(amp[n // 2, line[:, 1]]), 1)[0]
    window = res.t > res.t[-1] - 3 / F0  # the same last 3 periods, from the traces
    amp_x, _, _ = st.extract_amp_phase(np.asarray(res["p"])[:, window], 1 / dt, F0)
    plot(grid, amp, phase, r, amp_x, out)
    return {
        "wavelength_over_c_f": float(2 * np.pi / k_fit / (C0 / F0)),
        "decay_exponent": float(decay),
    }


def plot(grid, amp, phase, r, amp_x, out) -> None:
    plt = pyplot()
    n = grid.shape[0]
    ax_mm = mm(n, grid.spacing[0])
    ext = [ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.6))
    ref = amp[n // 2, n // 2 + 8]  # 8 points from the source
    h = ax[0].imshow(20 * np.log10(amp / ref + 1e-6), extent=ext, cmap="viridis", vmin=-12,
                     vmax=3)  # fmt: skip
    fig.colorbar(h, ax=ax[0], label="amplitude [dB re the reference]")
    ax[0].set(title="p_cw_amp_all [dB]", xlabel="y [mm]", ylabel="x [mm]")
    h = ax[1].imshow(phase, extent=ext, cmap="twilight")
    fig.colorbar(h, ax=ax[1], label="phase [rad]")
    ax[1].set(title="p_cw_phase_all [rad]", xlabel="y [mm]")
    line_amp = amp[n // 2, n // 2 + np.rint(r / grid.spacing[0]).astype(int)]
    scale = np.sqrt(r / r[0]) / line_amp[0]
    ax[2].plot(r * 1e3, line_amp * scale, label="p_cw_amp_all")
    ax[2].plot(r * 1e3, np.ravel(amp_x) * scale, "--", label="extract_amp_phase(p)")
    ax[2].set(title="amplitude x sqrt(r), along +y", xlabel="r [mm]", ylim=(0.8, 1.2))
    ax[2].legend(fontsize=8)
    save(fig, out, "tvsp_cw_amp_phase")


if __name__ == "__main__":
    main(run, __doc__, "tvsp_cw_amp_phase")
