"""Nonlinear propagation: second-harmonic growth of a plane wave against Fubini's solution.

Shows: k-Wave's example_na_modelling_nonlinearity: a 1 MHz, 2 MPa CW plane wave (1-D) in water
with ``BonA`` 0 (linear), 5 and 10; the fundamental and second harmonic along the path
(``extract_amp_phase`` on the recorded traces, last 4 periods). Physics: with
``beta = 1 + B/(2A)`` the shock distance is ``x_s = rho c^3 / (beta w p0)``; before it, Fubini's
solution gives harmonic amplitudes ``B_n = 2 J_n(n s) / (n s)``, ``s = x / x_s``, so
``p2 / p1 = J_2(2 s) / (2 J_1(s))``. Key numbers: the simulated ``p2 / p1`` at 20 mm over
Fubini's for B/A = 5 and for B/A = 10 (1), and ``p2 / p1`` of the linear run (0).

Run: ``python examples/na_nonlinearity.py [--quick] [--out gallery-out]``; about 7 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import fast, main, pyplot, save
from scipy.special import jv

import sonotile as st

C0, RHO0, F0, P0 = 1500.0, 1000.0, 1e6, 2e6


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    dx = 5e-5 if quick else 2.5e-5
    n = fast(int(round(26e-3 / dx)))  # PML inside
    dt = 0.3 * dx / C0  # 100 (200) samples per period
    src = int(round(2e-3 / dx))
    nt = int(round((24e-3 / C0 + 8 / F0) / dt))
    grid = st.KWaveGrid((n,), dx, dt=dt, nt=nt)
    mask = np.arange(n) == src
    cw = st.create_cw_signals(np.arange(nt) * dt, F0, np.array([P0]), 0.0, ramp_length=2)
    where = np.arange(src + int(2e-3 / dx), src + int(21e-3 / dx), int(1e-3 / dx))
    sensor = st.KSensor(points=where[:, None], record=("p",),
                        record_start_index=nt - int(round(4 / F0 / dt)) + 1)  # fmt: skip
    x = (where - src) * dx
    ratio = {}
    for bona in (0.0, 5.0, 10.0):
        medium = st.KWaveMedium(sound_speed=C0, density=RHO0, BonA=bona or None)
        p = np.asarray(st.simulate(grid, medium, st.KSource(p=cw, p_mask=mask), sensor,
                                   pml_size=int(1e-3 / dx), progress=False)["p"])  # fmt: skip
        a1 = st.extract_amp_phase(p, 1 / dt, F0, dim=1, window="Rectangular")[0]
        a2 = st.extract_amp_phase(p, 1 / dt, 2 * F0, dim=1, window="Rectangular")[0]
        ratio[bona] = np.ravel(a2 / a1)
    fubini = {b: fubini_ratio(x, b) for b in (5.0, 10.0)}
    plot(x, ratio, fubini, out)
    return {"p2_over_fubini_ba5": float(ratio[5.0][-1] / fubini[5.0][-1]),
            "p2_over_fubini_ba10": float(ratio[10.0][-1] / fubini[10.0][-1]),
            "linear_p2_over_p1": float(ratio[0.0][-1])}  # fmt: skip


def fubini_ratio(x: np.ndarray, bona: float) -> np.ndarray:
    """Fubini's ``p2 / p1`` at distances ``x`` [m] for a plane wave of amplitude ``P0``."""
    s = x * (1 + bona / 2) * 2 * np.pi * F0 * P0 / (RHO0 * C0**3)
    return jv(2, 2 * s) / (2 * jv(1, s))


def plot(x, ratio, fubini, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for bona, r in ratio.items():
        ax.plot(x * 1e3, r, "o-", ms=3, label=f"B/A = {bona:g}")
    for bona, r in fubini.items():
        ax.plot(x * 1e3, r, "k:", label=f"Fubini, B/A = {bona:g}")
    ax.set(xlabel="distance from the source [mm]", ylabel="p2 / p1",
           title="second harmonic of a 1 MHz, 2 MPa plane wave")  # fmt: skip
    ax.legend(fontsize=8)
    save(fig, out, "na_nonlinearity")


if __name__ == "__main__":
    main(run, __doc__, "na_nonlinearity")
