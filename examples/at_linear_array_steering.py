"""Steering a linear array: per-element delays tilt the beam.

Shows: k-Wave's example_tvsp_steering_linear_array / example_at_linear_array_transducer in
2-D: 11 line elements (``KWaveArray.add_line_element``, off-grid) of a 0.3 mm pitch fire a
1.5 MHz tone burst with delays ``tau_i = i pitch sin(theta) / c`` (``tone_burst``'s
``signal_offset``, in samples), the beam recorded as ``p_rms`` on a Cartesian arc and as
``p_max_all``. Physics: the delays tilt the emitted wavefront by ``theta``. Key numbers: the
measured beam angle [deg] for a 20 deg steer, and the difference from 20 deg.

Run: ``python examples/at_linear_array_steering.py [--quick] [--out gallery-out]``;
about 8 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C0, F0, STEER = 1500.0, 1.5e6, 20.0
N_EL, PITCH, WIDTH = 11, 0.3e-3, 0.25e-3


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (128, 1e-4) if quick else (224, 0.6e-4)
    dt = 0.3 * dx / C0
    x_a = -0.35 * n * dx  # the array's line [m], near the top of the grid
    radius = 0.7 * n * dx
    grid = st.KWaveGrid((n, n), dx, dt=dt, nt=int((radius / C0 + 5 / F0) / dt))
    karray = st.KWaveArray(bli_tolerance=0.05, upsampling_rate=10)
    centres = (np.arange(N_EL) - (N_EL - 1) / 2) * PITCH
    for yc in centres:
        karray.add_line_element((x_a, yc - WIDTH / 2), (x_a, yc + WIDTH / 2))
    delays = (centres - centres.min()) * np.sin(np.radians(STEER)) / C0  # [s]
    offsets = np.rint(delays / dt).astype(int)
    signals = st.tone_burst(1 / dt, F0, 3, signal_offset=offsets)
    source = st.KSource(p_mask=karray.get_array_binary_mask(grid),
                        p=karray.get_distributed_source_signal(grid, signals))  # fmt: skip
    arc_r = 0.65 * n * dx  # beyond the near field (aperture^2 / (4 lambda) = 2.7 mm)
    angles = np.radians(np.linspace(-45, 45, 91))
    arc = np.stack([x_a + arc_r * np.cos(angles), arc_r * np.sin(angles)])
    arc = arc[:, np.abs(arc[1]) < 0.5 * n * dx - 16 * dx]  # the part inside the grid
    sensor = st.KSensor(mask=arc, record=("p_rms", "p_max_all"))
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0), source, sensor, pml_size=12,
                      progress=False)  # fmt: skip
    rms = np.asarray(res["p_rms"]).ravel()
    theta = np.degrees(np.arctan2(arc[1], arc[0] - x_a))
    i = int(np.argmax(rms))
    j = slice(max(i - 2, 0), i + 3)  # the peak by a parabola through its neighbours
    c2, c1, _ = np.polyfit(theta[j], rms[j], 2)
    beam = -c1 / (2 * c2)
    plot(grid, res, theta, rms, out)
    return {"beam_angle_deg": float(beam), "steer_error_deg": float(beam - STEER)}


def plot(grid, res, theta, rms, out) -> None:
    plt = pyplot()
    ax_mm = mm(grid.shape[0], grid.spacing[0])
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    pm = np.asarray(res["p_max_all"])
    h = ax[0].imshow(20 * np.log10(pm / pm.max() + 1e-6), vmin=-30, cmap="viridis",
                     extent=[ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]])  # fmt: skip
    fig.colorbar(h, ax=ax[0], label="p_max_all [dB re max]")
    ax[0].set(title=f"p_max_all [dB], steered {STEER:.0f} deg", xlabel="y [mm]", ylabel="x [mm]")
    ax[1].plot(theta, rms / rms.max())
    ax[1].axvline(STEER, color="k", ls=":")
    ax[1].set(xlabel="angle [deg]", ylabel="p_rms / max", title="beam on the arc")
    save(fig, out, "at_linear_array_steering")


if __name__ == "__main__":
    main(run, __doc__, "at_linear_array_steering")
