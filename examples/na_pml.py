"""Controlling the perfectly matched layer: how much its size and absorption reflect.

Shows: k-Wave's example_na_controlling_the_PML: the same 2-D pulse with ``pml_size`` and
``pml_alpha`` varied (PML outside the grid, ``pml_inside=False``, so the region of interest is
the same in every run), compared with a reference on a grid large enough that nothing comes
back within the run. Physics: the split-field PML damps each field component across its
thickness with an absorption ``alpha (c / dx) (x / size)^4`` [Np/s] (k-Wave's profile); too
little lets the wave through (it wraps round the periodic grid), too abrupt a rise reflects it.
Key numbers: the largest difference from the reference at a sensor after the wave has
reached the boundary, in dB of the direct pulse, for the default PML (20 points, alpha 2)
and for a weak one (alpha 0.1).

Run: ``python examples/na_pml.py [--quick] [--out gallery-out]``; about 15 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import fast, main, pyplot, save

import sonotile as st

C0 = 1500.0
CASES = ((20, 2.0), (10, 2.0), (20, 0.1), (20, 20.0))  # (pml_size, pml_alpha)


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (60, 1e-4) if quick else (160, 0.5e-4)  # n + 20 and n + 40: fast sizes
    dt = 0.3 * dx / C0
    nt = int(2.0 * n * dx / C0 / dt)

    def trace(size: int, pml: int, alpha: float) -> np.ndarray:
        grid = st.KWaveGrid((size, size), dx, dt=dt, nt=nt)
        c = size // 2 + 1
        p0 = st.make_disc((size, size), (c, c), 2).astype(float)
        sensor = st.KSensor(points=np.array([[size // 2 + n // 4, size // 2]]), record=("p",))
        opts = dict(pml_size=pml, pml_alpha=alpha, pml_inside=False, progress=False)
        res = st.simulate(grid, st.KWaveMedium(sound_speed=C0), st.KSource(p0=p0), sensor, **opts)
        return np.asarray(res["p"]).ravel()

    ref = trace(fast(5 * n, 20), 20, 2.0)
    t = np.arange(nt) * dt
    late = t > (n / 2 + 2) * dx / C0  # after the direct pulse, once the boundary is reached
    db = {}
    traces = {}
    for size, alpha in CASES:
        p = trace(n, size, alpha)
        traces[(size, alpha)] = p
        db[(size, alpha)] = 20 * np.log10(np.abs(p - ref)[late].max() / np.abs(ref).max())
    plot(t, ref, traces, db, out)
    return {"reflection_db_default": float(db[(20, 2.0)]),
            "reflection_db_alpha_0.1": float(db[(20, 0.1)])}  # fmt: skip


def plot(t, ref, traces, db, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.6))
    ax[0].plot(t * 1e6, ref, "k", lw=2, label="reference (large grid)")
    for (size, alpha), p in traces.items():
        ax[0].plot(t * 1e6, p, lw=1, label=f"size {size}, alpha {alpha:g}")
    ax[0].set(xlabel="t [us]", ylabel="p [Pa]", title="sensor trace")
    ax[0].legend(fontsize=7)
    labels = [f"{s}, {a:g}" for s, a in db]
    ax[1].bar(labels, list(db.values()))
    ax[1].set(xlabel="pml_size, pml_alpha", ylabel="[dB]", title="error after the boundary")
    save(fig, out, "na_pml")


if __name__ == "__main__":
    main(run, __doc__, "na_pml")
