"""A focused bowl transducer in 3-D (KWaveArray) against O'Neil's analytic solution.

Shows: k-Wave's example_at_focused_bowl_3D: an off-grid bowl (``KWaveArray.add_bowl_element``,
band-limited interpolation, no staircasing) driven with a 1 MHz CW pressure, the steady-state
amplitude ``p_cw`` on the beam axis and ``p_cw_all`` over the grid, the PML outside the grid
(``pml_inside=False``). Physics: O'Neil's on-axis field of a spherical cap with uniform normal
velocity ``u = p_source / (rho c)``; the focal gain ``p_focus / (rho c u) ~ k h`` (``h`` the
cap's depth). Key numbers: simulated over O'Neil's peak amplitude, and the largest on-axis
difference from O'Neil (fraction of the peak), from one wavelength in front of the bowl.

Run: ``python examples/at_focused_bowl_3d.py [--quick] [--out gallery-out]``; about 12 s on 2 cores
(``--quick``: about 5 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import fast, main, mm, pyplot, save

import sonotile as st

C0, RHO0, F0, AMP = 1500.0, 1000.0, 1e6, 1e5


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    dx, radius = (0.5e-3, 10e-3) if quick else (0.375e-3, 15e-3)
    rp = int(round(radius / dx))
    edge = 8  # points between the bowl and the grid edge (the interpolant's stencil)
    nx, ny = fast(edge + rp + 16, 8), fast(rp + 2 * edge, 8)  # PML of 8 outside
    dt = 0.5 * dx / C0
    nt = int((nx * dx / C0 + 4 / F0) / dt)
    grid = st.KWaveGrid((nx, ny, ny), dx, dt=dt, nt=nt)
    apex = np.array([(edge - nx // 2) * dx, 0.0, 0.0])
    karray = st.KWaveArray(bli_tolerance=0.05, upsampling_rate=4)
    karray.add_bowl_element(apex, radius, radius, apex + [radius, 0, 0])  # R = D
    cw = st.create_cw_signals(np.arange(nt) * dt, F0, np.array([AMP]), 0.0)
    source = st.KSource(p_mask=karray.get_array_binary_mask(grid),
                        p=karray.get_distributed_source_signal(grid, cw))  # fmt: skip
    axis = np.array([[i, ny // 2, ny // 2] for i in range(edge, nx)])
    sensor = st.KSensor(points=axis, record=("p_cw", "p_cw_all"), cw_frequency=F0)
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0, density=RHO0), source, sensor,
                      pml_size=8, pml_inside=False, progress=False)  # fmt: skip
    z = (axis[:, 0] - edge) * dx  # distance from the apex [m]
    sim = np.asarray(res["p_cw_amp"]).ravel()
    ref, _, _ = st.focused_bowl_oneil(radius, radius, AMP / (RHO0 * C0), F0, C0, RHO0, z)
    front = z >= C0 / F0
    err = np.max(np.abs(sim - ref)[front]) / ref.max()
    plot(grid, res, z, sim, ref, out)
    return {"peak_over_oneil": float(sim[front].max() / ref.max()), "axis_error": float(err)}


def plot(grid, res, z, sim, ref, out) -> None:
    plt = pyplot()
    nx, ny, _ = grid.shape
    dx = grid.spacing[0]
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
    amp = np.asarray(res["p_cw_amp_all"])[:, :, ny // 2]
    ext = [mm(nx, dx)[0], mm(nx, dx)[-1], mm(ny, dx)[-1], mm(ny, dx)[0]]
    h = ax[0].imshow(amp.T / 1e3, cmap="magma", aspect="equal", extent=ext)
    fig.colorbar(h, ax=ax[0], label="amplitude [kPa]")
    ax[0].set(title="p_cw_amp_all, z = 0 [kPa]", xlabel="x [mm]", ylabel="y [mm]")
    ax[1].plot(z * 1e3, sim / 1e3, label="sonotile (KWaveArray bowl)")
    ax[1].plot(z * 1e3, ref / 1e3, "k:", label="O'Neil")
    ax[1].set(xlabel="distance from the apex [mm]", ylabel="amplitude [kPa]", title="beam axis")
    ax[1].legend(fontsize=8)
    save(fig, out, "at_focused_bowl_3d")


if __name__ == "__main__":
    main(run, __doc__, "at_focused_bowl_3d")
