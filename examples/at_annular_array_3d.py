"""A focused annular array in 3-D: phases that move the focus, against O'Neil's annulus solution.

Shows: k-Wave's example_at_focused_annular_array_3D: three annuli of one spherical bowl
(``KWaveArray.add_annular_array``), each driven by its own CW signal (``create_cw_signals``
with per-element amplitude and phase), combined on the grid by
``get_distributed_source_signal``; the PML outside the grid. Physics: the on-axis field is the
sum of O'Neil's solutions of the annuli, each with its velocity and phase; phases
``phi_i = k d_i`` (``d_i`` the distance from annulus ``i`` to a point beyond the geometric
focus) push the focus deeper. Key numbers: simulated over analytic peak amplitude, the largest
on-axis difference (fraction of the peak) and the focus depth over the analytic one.

Run: ``python examples/at_annular_array_3d.py [--quick] [--out gallery-out]``; about 11 s on 2 cores
(``--quick``: about 6 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import fast, main, pyplot, save

import sonotile as st

C0, RHO0, F0, AMP = 1500.0, 1000.0, 1e6, 1e5


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    dx, radius = (0.5e-3, 10e-3) if quick else (0.375e-3, 15e-3)
    rp, edge = int(round(radius / dx)), 8
    nx, ny = fast(edge + rp + 20, 8), fast(rp + 2 * edge, 8)  # PML of 8 outside
    dt = 0.5 * dx / C0
    nt = int((nx * dx / C0 + 4 / F0) / dt)
    grid = st.KWaveGrid((nx, ny, ny), dx, dt=dt, nt=nt)
    apex = np.array([(edge - nx // 2) * dx, 0.0, 0.0])
    diameters = np.array([(0.0, 0.4), (0.4, 0.7), (0.7, 1.0)]) * radius
    karray = st.KWaveArray(bli_tolerance=0.05, upsampling_rate=4)
    karray.add_annular_array(apex, radius, diameters, apex + [radius, 0, 0])
    a = diameters.mean(axis=1) / 2  # mid aperture radius of each annulus [m]
    depth = radius - np.sqrt(radius**2 - a**2)  # its distance in front of the apex [m]
    target = 1.3 * radius
    phases = np.mod(2 * np.pi * F0 / C0 * np.hypot(target - depth, a), 2 * np.pi)
    cw = st.create_cw_signals(np.arange(nt) * dt, F0, np.full(3, AMP), phases)
    source = st.KSource(p_mask=karray.get_array_binary_mask(grid),
                        p=karray.get_distributed_source_signal(grid, cw))  # fmt: skip
    axis = np.array([[i, ny // 2, ny // 2] for i in range(edge, nx)])
    sensor = st.KSensor(points=axis, record=("p_cw",), cw_frequency=F0)
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0, density=RHO0), source, sensor,
                      pml_size=8, pml_inside=False, progress=False)  # fmt: skip
    z = (axis[:, 0] - edge) * dx
    sim = np.asarray(res["p_cw_amp"]).ravel()
    u = np.full(3, AMP / (RHO0 * C0))
    ref = np.abs(st.focused_annulus_oneil(radius, diameters, u, phases, F0, C0, RHO0, z))
    flat = np.abs(st.focused_annulus_oneil(radius, diameters, u, np.zeros(3), F0, C0, RHO0, z))
    front = z >= C0 / F0
    plot(z, sim, ref, flat, out)
    return {"peak_over_oneil": float(sim[front].max() / ref.max()),
            "axis_error": float(np.max(np.abs(sim - ref)[front]) / ref.max()),
            "focus_depth_over_oneil": float(z[np.argmax(sim)] / z[np.argmax(ref)])}  # fmt: skip


def plot(z, sim, ref, flat, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    ax.plot(z * 1e3, sim / 1e3, label="sonotile, phased annuli")
    ax.plot(z * 1e3, ref / 1e3, "k:", label="O'Neil, phased annuli")
    ax.plot(z * 1e3, flat / 1e3, "--", color="gray", label="O'Neil, in phase")
    ax.set(xlabel="distance from the apex [mm]", ylabel="amplitude [kPa]", title="beam axis")
    ax.legend(fontsize=8)
    save(fig, out, "at_annular_array_3d")


if __name__ == "__main__":
    main(run, __doc__, "at_annular_array_3d")
