"""Directivity of a finite element, by reciprocity: a line element's far-field pattern.

Shows: k-Wave's example_sd_directivity_modelling_2D asks how a sensor of finite width weighs
waves from different angles; by reciprocity that is the pattern the same element radiates. A
2 mm line element (``KWaveArray.add_line_element``, off-grid, band-limited) driven at 1.5 MHz,
recorded as ``p_cw`` on a Cartesian ring in its far field. Physics: a uniform line of length
``L`` radiates ``|sinc(k L sin(theta) / 2)|`` (theta from its normal), first null at
``sin(theta) = lambda / L``. Key numbers: the first null's angle over ``arcsin(lambda / L)``,
and the largest deviation of the pattern from the sinc within the main lobe.

Run: ``python examples/sd_directivity.py [--quick] [--out gallery-out]``; about 8 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C0, F0, L = 1500.0, 1.5e6, 2e-3


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx, radius = (128, 1e-4, 4.5e-3) if quick else (224, 0.75e-4, 6.5e-3)
    dt = 0.3 * dx / C0
    nt = int((radius / C0 + 8 / F0) / dt)
    grid = st.KWaveGrid((n, n), dx, dt=dt, nt=nt)
    karray = st.KWaveArray(bli_tolerance=0.05, upsampling_rate=10)
    karray.add_line_element((0.0, -L / 2), (0.0, L / 2))  # along y; its normal is x
    cw = st.create_cw_signals(np.arange(nt) * dt, F0, np.array([1.0]), 0.0, ramp_length=2)
    source = st.KSource(p_mask=karray.get_array_binary_mask(grid),
                        p=karray.get_distributed_source_signal(grid, cw))  # fmt: skip
    ring = st.make_cart_circle(radius, 181, arc_angle=np.pi)  # the half ring on the -x side
    sensor = st.KSensor(mask=ring, record=("p_cw", "p_max_all"), cw_frequency=F0)
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0), source, sensor, pml_size=16,
                      progress=False)  # fmt: skip
    theta = np.arcsin(np.clip(ring[1] / radius, -1, 1))  # angle from the element's normal
    amp = np.asarray(res["p_cw_amp"]).ravel()
    amp = amp / amp[np.argmin(np.abs(theta))]
    k = 2 * np.pi * F0 / C0
    theory = np.abs(np.sinc(k * L * np.sin(theta) / (2 * np.pi)))
    null_th = np.arcsin(C0 / F0 / L)
    side = (theta > 0) & (theta < 1.5 * null_th)
    null = theta[side][np.argmin(amp[side])]
    lobe = np.abs(theta) < 0.8 * null_th
    plot(grid, res, theta, amp, theory, out)
    return {"null_angle_over_theory": float(null / null_th),
            "main_lobe_deviation": float(np.max(np.abs(amp - theory)[lobe]))}  # fmt: skip


def plot(grid, res, theta, amp, theory, out) -> None:
    plt = pyplot()
    ax_mm = mm(grid.shape[0], grid.spacing[0])
    fig = plt.figure(figsize=(10, 3.8))
    a = fig.add_subplot(1, 2, 1)
    pm = np.asarray(res["p_max_all"])
    h = a.imshow(20 * np.log10(pm / pm.max() + 1e-6), vmin=-30, cmap="viridis",
                 extent=[ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]])  # fmt: skip
    fig.colorbar(h, ax=a, label="p_max_all [dB re max]")
    a.set(title="p_max_all [dB], 2 mm line element", xlabel="y [mm]", ylabel="x [mm]")
    a = fig.add_subplot(1, 2, 2)
    a.plot(np.degrees(theta), 20 * np.log10(amp + 1e-6), label="simulated (p_cw on the ring)")
    a.plot(np.degrees(theta), 20 * np.log10(theory + 1e-6), "k:", label="|sinc(k L sin / 2)|")
    a.set(xlabel="angle from the normal [deg]", ylabel="[dB]", ylim=(-40, 3))
    a.legend(fontsize=8)
    save(fig, out, "sd_directivity")


if __name__ == "__main__":
    main(run, __doc__, "sd_directivity")
