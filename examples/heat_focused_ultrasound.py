"""Focused-ultrasound heating: a CW acoustic field, the heat it deposits, temperature and dose.

Shows: k-Wave's example_diff_focused_ultrasound_heating in 2-D: a focused arc
(``KWaveArray.add_arc_element``) at 1 MHz in absorbing tissue (0.75 dB/(MHz^1.5 cm)), the
steady amplitude ``p_cw_amp_all``; the volume heat source ``Q = alpha p^2 / (rho c)``
(``sonotile.physics.heat.acoustic_heat_source``) into ``st.bioheat``, the functional form of
``KWaveDiffusion`` (JAX arrays), with a schedule of 10 s on, 10 s off (``sonication``); the
CEM43 thermal dose and the lesion (``cem43 >= 240 min``). The acoustics is linear, so the
field is scaled to a 2 MPa focal amplitude. Physics: at first the focus heats at
``Q / (rho C)``; diffusion and perfusion then limit the rise. Key numbers: the focal heating
rate over the first 50 ms over ``Q / (rho C)`` (1, less a little diffusion), the peak
temperature [degC] and the lesion area [mm^2].

Run: ``python examples/heat_focused_ultrasound.py [--quick] [--out gallery-out]``;
about 15 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st
from sonotile.physics.heat import acoustic_heat_source, sonication

C0, RHO0, F0, A0, Y, P_FOCUS = 1540.0, 1020.0, 1e6, 0.75, 1.5, 2e6
TISSUE = {"density": RHO0, "specific_heat": 3600.0, "thermal_conductivity": 0.5,
          "blood_density": 1060.0, "blood_specific_heat": 3617.0,
          "blood_perfusion_rate": 0.005, "blood_ambient_temperature": 37.0}  # fmt: skip


def acoustic(n: int, dx: float) -> tuple[st.KWaveGrid, np.ndarray]:
    """The steady CW amplitude [Pa] of a focused arc, scaled to ``P_FOCUS`` at its peak."""
    dt = 0.3 * dx / C0
    nt = int((n * dx / C0 + 5 / F0) / dt)
    grid = st.KWaveGrid((n, n), dx, dt=dt, nt=nt)
    radius = 0.6 * n * dx
    apex = np.array([-0.27 * n * dx, 0.0])
    karray = st.KWaveArray()
    karray.add_arc_element(apex, radius, 0.8 * radius, apex + [radius, 0.0])
    cw = st.create_cw_signals(np.arange(nt) * dt, F0, np.array([1e5]), 0.0)
    source = st.KSource(p_mask=karray.get_array_binary_mask(grid),
                        p=karray.get_distributed_source_signal(grid, cw))  # fmt: skip
    medium = st.KWaveMedium(sound_speed=C0, density=RHO0, alpha_coeff=A0, alpha_power=Y)
    sensor = st.KSensor(points=np.array([[n // 2, n // 2]]), record=("p_cw_all",), cw_frequency=F0)
    res = st.simulate(grid, medium, source, sensor, pml_size=12, progress=False)
    amp = np.asarray(res["p_cw_amp_all"])
    return grid, amp * P_FOCUS / amp[n // 3 :].max()  # the focal region, away from the arc


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (96, 0.25e-3) if quick else (160, 0.15e-3)
    grid, amp = acoustic(n, dx)
    q = np.asarray(acoustic_heat_source(amp, A0, Y, F0, RHO0, C0))
    q[: n // 3] = 0.0  # no heating in the source's own near field (as the scaling assumes)
    focus = np.unravel_index(np.argmax(q), q.shape)
    at_focus = np.zeros(q.shape, bool)
    at_focus[focus] = True
    nt, dt = 400, 0.05
    on = sonication(nt, dt, on=10.0)  # 10 s on, then 10 s off
    heat = st.bioheat(grid, TISSUE, {"T0": 37.0, "Q": q}, nt, dt, on=on, sensor=at_focus)
    trace = np.asarray(heat.sensor_data).ravel()  # focal temperature after each step [degC]
    rate = (trace[0] - 37.0) / dt / (q[focus] / (RHO0 * TISSUE["specific_heat"]))
    cem43, t_max = np.asarray(heat.cem43), np.asarray(heat.T_max)  # numpy from here
    plot(grid, amp, t_max, cem43, np.arange(1, nt + 1) * dt, trace, out)
    return {"heating_rate_over_q_rho_c": float(rate), "T_max_degC": float(t_max.max()),
            "lesion_area_mm2": float(np.sum(cem43 >= 240.0) * (dx * 1e3) ** 2)}  # fmt: skip


def plot(grid, amp, t_max, cem43, t, trace, out) -> None:
    plt = pyplot()
    ax_mm = mm(grid.shape[0], grid.spacing[0])
    ext = [ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]]
    fig, ax = plt.subplots(1, 4, figsize=(15, 3.4))
    panels = ((amp / 1e6, "p_cw_amp_all [MPa]", "magma"), (t_max, "T_max [degC]", "inferno"),
              (np.log10(cem43 + 1e-3), "log10 CEM43 [min]", "viridis"))  # fmt: skip
    for a, (field, title, cmap) in zip(ax, panels):
        im = a.imshow(field, extent=ext, cmap=cmap)
        fig.colorbar(im, ax=a, label=title)
        a.set(title=title, xlabel="y [mm]")
    ax[2].contour(cem43 >= 240, levels=[0.5], colors="w", extent=[*ext[:2], ext[3], ext[2]])
    ax[3].plot(t, trace)
    ax[3].set(title="focus", xlabel="t [s]", ylabel="T [degC]")
    ax[0].set_ylabel("x [mm]")
    save(fig, out, "heat_focused_ultrasound")


if __name__ == "__main__":
    main(run, __doc__, "heat_focused_ultrasound")
