"""Dirichlet and additive pressure sources: what each emits, and what each does to a passing wave.

Shows: ``p_mode="dirichlet"`` (the pressure at the source points is set to the signal) against
``p_mode="additive"`` (the signal is added as a mass source, k-Wave's default), in 1-D: a
2 MHz tone burst at one point, and a pulse of ``p0`` arriving later at that point. Physics: in
1-D both emit ``s(t - |x| / c)`` each way (k-Wave scales the additive source by
``2 c dt / dx`` to make it so); an additive source is transparent, a Dirichlet point holds the
pressure to the (now zero) signal and reflects a passing pulse with ``R = -1`` (as k-Wave, a
source acts only while its signal lasts: the signal is zero-padded to the run's length).
Key numbers: the Dirichlet point's deviation from its signal, emitted amplitude additive /
Dirichlet (1), and the reflection coefficient of the Dirichlet point (-1).

Run: ``python examples/tvsp_dirichlet_additive.py [--quick] [--out gallery-out]``;
about 7 s on 2 cores
(``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, pyplot, save

import sonotile as st

C0, F0 = 1500.0, 2e6


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    n, dx = (512, 5e-5) if quick else (1024, 2.5e-5)
    dt = 0.3 * dx / C0
    grid = st.KWaveGrid((n,), dx, dt=dt, nt=int(0.55 * n * dx / C0 / dt))
    x = np.arange(n)
    src, left, right = n // 2, 3 * n // 8, 5 * n // 8
    p0 = np.exp(-(((x - n // 8) / (n / 128)) ** 2))  # [Pa]: its right-going half meets src
    burst = st.tone_burst(1 / dt, F0, 3)[0]
    signal = np.pad(burst, (0, grid.nt - burst.size))  # a source acts while its signal lasts
    mask = x == src
    sensor = st.KSensor(points=np.array([[left], [src], [right]]), record=("p",))
    res = {}
    for mode in ("additive", "dirichlet"):
        source = st.KSource(p0=p0, p=signal, p_mask=mask, p_mode=mode)
        res[mode] = np.asarray(st.simulate(grid, st.KWaveMedium(sound_speed=C0), source, sensor,
                                           pml_size=20, smooth_p0=False,
                                           progress=False)["p"])  # fmt: skip
    t = np.arange(grid.nt) * dt
    m = burst.size
    dir_err = np.max(np.abs(res["dirichlet"][1] - signal)) / np.abs(signal).max()
    emitted = (right - src) * dx / C0 + m * dt  # the burst has passed `right` by then
    early = t < emitted
    ratio = np.abs(res["additive"][2, early]).max() / np.abs(res["dirichlet"][2, early]).max()
    t_echo = (left - n // 8 + 2 * (src - left)) * dx / C0  # the echo's arrival at `left`
    late = t > t_echo - 0.5 * (src - left) * dx / C0
    echo = res["dirichlet"][0, late]
    plot(t, res, out)
    return {"dirichlet_error": float(dir_err), "emitted_additive_over_dirichlet": float(ratio),
            "dirichlet_reflection": float(echo[np.argmax(np.abs(echo))] / 0.5)}  # fmt: skip


def plot(t, res, out) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.4), sharey=True)
    for a, i, where in zip(ax, (0, 2), ("between pulse and source", "beyond the source")):
        for mode, style in (("additive", "-"), ("dirichlet", "--")):
            a.plot(t * 1e6, res[mode][i], style, label=mode)
        a.set(title=f"sensor {where}", xlabel="t [us]")
    ax[0].set_ylabel("p [Pa]")
    ax[0].legend()
    save(fig, out, "tvsp_dirichlet_additive")


if __name__ == "__main__":
    main(run, __doc__, "tvsp_dirichlet_additive")
