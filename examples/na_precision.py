"""Single against double precision: how far float32 results are from float64.

Shows: ``simulate(..., dtype="float32")`` (the default, as k-Wave's C++ solvers) and
``dtype="float64"`` (JAX's 64-bit mode switched on for the run) on the same 2-D heterogeneous,
absorbing, nonlinear problem: a disc of ``p0`` and a layer of tissue, traces on a line sensor.
Physics: none new: the two runs solve the same discrete equations, so their difference is the
round-off of single precision accumulated over the steps (relative ~1e-6 to 1e-5). Key
numbers: the relative L2 difference of the traces, the largest difference over the peak, and
the wall time of the float64 run over the float32 one (compilation included).

Run: ``python examples/na_precision.py [--quick] [--out gallery-out]``; about 10 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import time

import numpy as np
from _gallery import main, pyplot, save

import sonotile as st


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (96, 1e-4) if quick else (192, 0.5e-4)
    c = np.full((n, n), 1500.0)
    rho = np.full((n, n), 1000.0)
    c[n // 2 :], rho[n // 2 :] = 1560.0, 1060.0  # tissue below the middle
    medium = st.KWaveMedium(sound_speed=c, density=rho, alpha_coeff=0.75, alpha_power=1.5,
                            BonA=6.0)  # fmt: skip
    p0 = 1e6 * st.make_disc((n, n), (n // 3, n // 2 + 1), 4).astype(float)
    line = np.zeros((n, n), bool)
    line[3 * n // 4, 20:-20] = True
    res, secs = {}, {}
    for dtype in ("float32", "float64"):
        grid = st.KWaveGrid((n, n), dx)
        t0 = time.perf_counter()
        r = st.simulate(grid, medium, st.KSource(p0=p0), st.KSensor(mask=line, record=("p",)),
                        dtype=dtype, progress=False)  # fmt: skip
        res[dtype], secs[dtype] = np.asarray(r["p"], dtype=np.float64), time.perf_counter() - t0
        t = r.t
    diff = res["float32"] - res["float64"]
    rel = np.linalg.norm(diff) / np.linalg.norm(res["float64"])
    plot(t, res, diff, out)
    peak = np.abs(diff).max() / np.abs(res["float64"]).max()
    return {"relative_l2_difference": float(rel), "max_difference_over_peak": float(peak),
            "time_float64_over_float32": secs["float64"] / secs["float32"]}  # fmt: skip


def plot(t, res, diff, out) -> None:
    plt = pyplot()
    mid = res["float64"].shape[0] // 2
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.4))
    ax[0].plot(t * 1e6, res["float64"][mid] / 1e3, label="float64")
    ax[0].plot(t * 1e6, res["float32"][mid] / 1e3, "--", label="float32")
    ax[0].set(xlabel="t [us]", ylabel="p [kPa]", title="trace below the source")
    ax[0].legend(fontsize=8)
    ax[1].plot(t * 1e6, diff[mid])
    ax[1].set(xlabel="t [us]", ylabel="[Pa]", title="float32 - float64")
    save(fig, out, "na_precision")


if __name__ == "__main__":
    main(run, __doc__, "na_precision")
