"""Initial value problem in 3-D: a ball of initial pressure, spherical spreading, a plane sensor.

Shows: k-Wave's example_ivp_3D_simulation: a ball of ``p0`` in a 3-D homogeneous medium, a
binary sensor mask on a plane (``p`` traces) and ``p_max_all`` over the whole volume. Physics:
a spherically symmetric pulse, ``p(r, t) = f(t - r / c) / r`` far from the ball: the peak
pressure times distance is constant. Key numbers: ``r p_max`` at the far point over that at the
near point of the sensor ray (should be 1), and the sound speed from the arrival times.

Run: ``python examples/ivp_3d.py [--quick] [--out gallery-out]``; about 10 s on 2 cores
(``--quick``: about 5 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save
from ivp_homogeneous_2d import leading_edge

import sonotile as st

C0 = 1500.0


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n = 48 if quick else 72
    dx = 1e-4
    grid = st.KWaveGrid((n, n, n), dx)
    c = n // 2
    p0 = 10.0 * st.make_ball((n, n, n), (c + 1, c + 1, c + 1), 2).astype(float)
    plane = np.zeros((n, n, n), bool)
    plane[c, 10:-10, 10:-10] = True  # the x = 0 plane through the ball, outside the PML
    res = st.simulate(grid, st.KWaveMedium(sound_speed=C0), st.KSource(p0=p0),
                      st.KSensor(mask=plane, record=("p", "p_max_all")), pml_size=10,
                      progress=False)  # fmt: skip
    p = np.asarray(res["p"])
    ny = n - 20
    traces = p.reshape(ny, ny, -1, order="F")  # (y, z, t) on the plane, k-Wave order
    ray = traces[ny // 2 :, ny // 2]  # along +y from the ball's centre
    r = (np.arange(ray.shape[0]) + 10 + ny // 2 - c) * dx  # distance of each ray point [m]
    near, far = 8, ray.shape[0] - 1
    ratio = (r[far] * ray[far].max()) / (r[near] * ray[near].max())
    t_arr = [leading_edge(res.t, ray[i]) for i in range(near, far + 1)]
    slope = np.polyfit(r[near : far + 1], t_arr, 1)[0]
    plot(grid, res, traces, r, ray, out)
    return {"spreading_ratio": float(ratio), "c_fit": float(1 / slope)}


def plot(grid, res, traces, r, ray, out) -> None:
    plt = pyplot()
    n, dx = grid.shape[0], grid.spacing[0]
    ax_mm = mm(n, dx)
    ext = [ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]]
    fig, ax = plt.subplots(1, 3, figsize=(12, 3.6))
    h = ax[0].imshow(np.asarray(res["p_max_all"])[:, :, n // 2], extent=ext, cmap="magma",
                     vmax=2.0)  # fmt: skip
    fig.colorbar(h, ax=ax[0], label="p_max_all [Pa]")
    ax[0].set(title="p_max_all, z = 0 [Pa]", xlabel="y [mm]", ylabel="x [mm]")
    k = int(np.argmax(ray[-1])) - 5
    h = ax[1].imshow(traces[:, :, k], cmap="RdBu_r", vmin=-0.5, vmax=0.5)
    fig.colorbar(h, ax=ax[1], label="p [Pa]")
    ax[1].set(title=f"sensor plane x = 0 at t = {res.t[k] * 1e6:.2f} us", xlabel="z", ylabel="y")
    ax[2].plot(r * 1e3, r * ray.max(axis=1) * 1e3, "o-", ms=3)
    ax[2].set(title="r p_max along +y", xlabel="r [mm]", ylabel="r p_max [Pa mm]", ylim=(0, None))
    save(fig, out, "ivp_3d")


if __name__ == "__main__":
    main(run, __doc__, "ivp_3d")
