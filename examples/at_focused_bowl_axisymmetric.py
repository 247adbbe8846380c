"""A focused bowl on an axisymmetric grid against O'Neil's analytic solution.

Shows: k-Wave's example_at_focused_bowl_AS: a single-element bowl as an off-grid arc about the
axis (``KWaveArray(axisymmetric=True).add_arc_element``) on a 2-D (axial x radial) grid run with
``st.simulate(..., axisymmetric=True, radial_symmetry="WSWA")``, driven with a 1 MHz CW
pressure; the steady-state amplitude ``p_cw_amp_all`` over the grid (drawn mirrored about the
axis) and on the axis. Physics: the axisymmetric model is the 3-D field of the bowl for the cost
of a 2-D run; O'Neil's on-axis field of a spherical cap with uniform normal velocity
``u = p_source / (rho c)``. A small CFL (0.1, k-Wave's example 0.05) keeps the time-stepping
error near 1 %. Key numbers: the largest on-axis difference from O'Neil (fraction of its focal
amplitude), from one wavelength in front of the bowl, and the depth of the simulated focal peak
over O'Neil's.

Run: ``python examples/at_focused_bowl_axisymmetric.py [--quick] [--out gallery-out]``; about
7 s on 2 cores (``--quick``: about 5 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import fast, main, pyplot, save

import sonotile as st

C0, RHO0, F0, AMP, PML = 1500.0, 1000.0, 1e6, 1e6, 10


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    # quick: R = D = 15 mm, 3 points per wavelength, CFL 0.1; full: k-Wave's example size
    # R = D = 30 mm, 4 points per wavelength, CFL 0.05
    radius, ppw, cfl = (15e-3, 3, 0.1) if quick else (30e-3, 4, 0.05)
    dx, ppp, margin = C0 / (ppw * F0), round(ppw / cfl), 16
    dt = 1 / (ppp * F0)
    nx = fast(margin + round((radius + 8e-3) / dx), PML)
    ny = fast(round((radius / 2 + 9e-3) / dx) + PML) - PML  # radial: the PML on the outer edge
    nt = round((1.2 * nx * dx / C0 + 6 / F0) / dt)
    grid = st.KWaveGrid((nx, ny), dx, dt=dt, nt=nt)
    x0 = (margin - nx // 2) * dx  # the bowl's apex, on the axis y = 0
    karray = st.KWaveArray(bli_tolerance=0.01, upsampling_rate=10, axisymmetric=True)
    karray.add_arc_element((x0, 0.0), radius, radius, (x0 + radius, 0.0))  # R = D
    cw = st.create_cw_signals(grid.t, F0, np.array([AMP]), np.array([0.0]))
    source = st.KSource(p_mask=karray.get_array_binary_mask(grid),
                        p=karray.get_distributed_source_signal(grid, cw))  # fmt: skip
    sensor = st.KSensor(mask=np.ones((nx, ny), bool), record=("p_cw_all",), cw_frequency=F0)
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0, density=RHO0), source, sensor,
                      pml_inside=False, pml_size=PML, progress=False, axisymmetric=True,
                      radial_symmetry="WSWA")  # fmt: skip
    amp = np.asarray(res["p_cw_amp_all"]).reshape(nx, ny)
    z = (np.arange(nx) - margin) * dx  # distance from the apex along the axis [m]
    ref, _, _ = st.focused_bowl_oneil(radius, radius, AMP / (RHO0 * C0), F0, C0, RHO0, z)
    front = z >= C0 / F0 - 1e-9
    err = np.max(np.abs(amp[:, 0] - ref)[front]) / ref.max()
    zf, zf_ref = _peak_depth(z, amp[:, 0], front), _peak_depth(z, ref, front)
    plot(z, dx, amp, ref, zf, zf_ref, out)
    return {"axis_error": float(err), "focus_depth_over_oneil": zf / zf_ref,
            "peak_over_oneil": float(amp[front, 0].max() / ref.max())}  # fmt: skip


def _peak_depth(z: np.ndarray, a: np.ndarray, sel: np.ndarray) -> float:
    """Depth [m] of the largest of ``a`` over ``sel``, refined by a parabola through 3 samples."""
    i = int(np.flatnonzero(sel)[np.argmax(a[sel])])
    y0, y1, y2 = a[i - 1], a[i], a[i + 1]
    return float(z[i] + 0.5 * (y0 - y2) / (y0 - 2 * y1 + y2) * (z[1] - z[0]))


def plot(z: np.ndarray, dx: float, amp: np.ndarray, ref: np.ndarray, zf: float, zf_ref: float,
         out: str | None) -> None:  # fmt: skip
    """The amplitude [Pa] over the grid mirrored about the axis, and on the axis with O'Neil's."""
    plt = pyplot()
    full = np.concatenate([amp[:, :0:-1], amp], axis=1)  # mirrored about the axis y = 0
    ry = (amp.shape[1] - 1) * dx * 1e3
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
    im = ax[0].imshow(full.T / 1e6, cmap="magma", aspect="equal", origin="lower",
                      extent=[z[0] * 1e3, z[-1] * 1e3, -ry, ry])  # fmt: skip
    fig.colorbar(im, ax=ax[0], label="amplitude [MPa]")
    ax[0].set(title="p_cw_amp_all, mirrored about the axis", xlabel="axial distance from the "
              "apex [mm]", ylabel="radial [mm]")  # fmt: skip
    ax[1].plot(z * 1e3, amp[:, 0] / 1e6, label=f"sonotile (axisymmetric), focus {zf * 1e3:.2f} mm")
    ax[1].plot(z * 1e3, ref / 1e6, "k:", label=f"O'Neil, focus {zf_ref * 1e3:.2f} mm")
    ax[1].set(xlabel="distance from the apex [mm]", ylabel="amplitude [MPa]", title="beam axis")
    ax[1].legend(fontsize=8)
    save(fig, out, "at_focused_bowl_axisymmetric")


if __name__ == "__main__":
    main(run, __doc__, "at_focused_bowl_axisymmetric")
