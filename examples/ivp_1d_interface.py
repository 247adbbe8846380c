"""A 1-D pulse meets an interface: reflection and transmission coefficients.

Shows: k-Wave's example_ivp_1D_simulation: a 1-D grid, a smooth pulse of ``p0``, a medium of
two halves (water | 1800 m/s, 1500 kg/m^3), two sensor points. Physics: at normal incidence
``R = (Z2 - Z1) / (Z2 + Z1)`` and ``T = 2 Z2 / (Z2 + Z1)``, ``Z = rho c``; the pulse of ``p0``
splits into two halves of amplitude ``p0 / 2``. Key numbers: measured R and T over theory.

Run: ``python examples/ivp_1d_interface.py [--quick] [--out gallery-out]``; about 6 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, pyplot, save

import sonotile as st

C1, RHO1, C2, RHO2 = 1500.0, 1000.0, 1800.0, 1500.0


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (512, 5e-5) if quick else (1024, 2.5e-5)
    x = np.arange(n)
    mid, x0 = n // 2, n // 4  # interface, pulse centre [points]
    c = np.where(x < mid, C1, C2)
    rho = np.where(x < mid, RHO1, RHO2)
    p0 = np.exp(-(((x - x0) / (n / 128)) ** 2))  # a smooth pulse [Pa]
    before, after = n // 8, 7 * n // 8  # sensor points left of the source, beyond the interface
    dt = 0.3 * dx / C2
    grid = st.KWaveGrid((n,), dx, dt=dt, nt=int(0.75 * n * dx / C1 / dt))
    res = st.simulate(grid, st.KWaveMedium(sound_speed=c, density=rho), st.KSource(p0=p0),
                      st.KSensor(points=np.array([[before], [after]]), record=("p",)),
                      pml_size=20, smooth_p0=False, progress=False)  # fmt: skip
    p = np.asarray(res["p"])
    t_back = ((x0 - before) + 2 * (mid - x0)) * dx / C1  # reflection's arrival at `before`
    refl = p[0][res.t > 0.5 * (t_back + (x0 - before) * dx / C1)]  # after the direct pulse
    z1, z2 = RHO1 * C1, RHO2 * C2
    r_meas = refl[np.argmax(np.abs(refl))] / 0.5
    t_meas = p[1].max() / 0.5
    plot(x * dx, c, p0, res, out)
    return {"R_over_theory": float(r_meas / ((z2 - z1) / (z2 + z1))),
            "T_over_theory": float(t_meas / (2 * z2 / (z2 + z1)))}  # fmt: skip


def plot(xm, c, p0, res, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.4))
    ax[0].plot(xm * 1e3, p0, label="p0 [Pa]")
    ax[0].plot(xm * 1e3, c / c.max(), label="c / c_max")
    ax[0].set(xlabel="x [mm]", title="initial pressure and medium")
    ax[0].legend(loc="center right")
    for trace, label in zip(res["p"], ("left sensor: direct + reflected", "right: transmitted")):
        ax[1].plot(res.t * 1e6, trace, label=label)
    ax[1].set(xlabel="t [us]", ylabel="p [Pa]", title="sensor traces")
    ax[1].legend(loc="upper right")
    save(fig, out, "ivp_1d_interface")


if __name__ == "__main__":
    main(run, __doc__, "ivp_1d_interface")
