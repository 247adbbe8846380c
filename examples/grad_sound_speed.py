"""A differentiable simulation: the sensitivity of a recorded signal to the sound speed.

Shows: ``make_simulator`` (the simulation as a JAX function of the medium and sources) and
``jax.grad`` through it: the gradient of the energy ``J = sum_t p(t)^2`` recorded at one point
with respect to the whole sound-speed field, from one forward and one backward (adjoint) pass,
in float64; checked against central finite differences of two more runs along a direction
``v`` (a smooth blob between source and sensor). Physics: the gradient is the adjoint-state
sensitivity kernel, concentrated in the first Fresnel zone between source and receiver (k-Wave's
example_pr_2D_adjoint computes the same adjoint by hand). Key numbers: ``<grad J, v>`` over
the finite difference (1), and the kernel's share within the first Fresnel zone.

Run: ``python examples/grad_sound_speed.py [--quick] [--out gallery-out]``; about 13 s on 2 cores
(``--quick``: about 6 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st

C0 = 1500.0


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        return _run(quick, out)
    finally:
        jax.config.update("jax_enable_x64", previous)


def _run(quick: bool, out: str | None) -> dict:
    n, dx = (64, 1e-4) if quick else (128, 0.5e-4)
    dt = 0.3 * dx / C0
    src, rec = np.array([n // 4, n // 2]), np.array([3 * n // 4, n // 2])
    grid = st.KWaveGrid((n, n), dx, dt=dt, nt=int(0.75 * n * dx / C0 / dt))
    p0 = st.make_disc((n, n), tuple(src + 1), 2).astype(float)
    medium = st.KWaveMedium(sound_speed=np.full((n, n), C0))
    sensor = st.KSensor(points=rec[None, :], record=("p",))
    sim = st.make_simulator(grid, medium, st.KSource(p0=p0), sensor, pml_size=10,
                            dtype="float64")  # fmt: skip

    def energy(c):
        return jnp.sum(sim({"sound_speed": c})["p"] ** 2)

    c = jnp.full((n, n), C0)
    g = np.asarray(jax.grad(energy)(c))
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    v = np.exp(-((i - n / 2) ** 2 + (j - n / 2 - 2) ** 2) / (n / 16) ** 2)  # [m/s] per unit
    eps = 1.0
    fd = (energy(c + eps * v) - energy(c - eps * v)) / (2 * eps)
    # first Fresnel zone: path excess below half a wavelength at the pulse's centre frequency
    path = np.hypot(i - src[0], j - src[1]) + np.hypot(i - rec[0], j - rec[1]) - (rec - src)[0]
    lam = C0 / 1.5e6 / dx  # [points], the disc's spectrum peaks near 1.5 MHz
    share = np.abs(g)[path < lam / 2].sum() / np.abs(g).sum()
    plot(grid, g, src, rec, out)
    return {"grad_over_finite_difference": float(np.sum(g * v) / float(fd)),
            "kernel_share_first_fresnel": float(share)}  # fmt: skip


def plot(grid, g, src, rec, out) -> None:
    plt = pyplot()
    n, dx = grid.shape[0], grid.spacing[0]
    ax_mm = mm(n, dx)
    fig, ax = plt.subplots(figsize=(5.2, 4))
    lim = np.abs(g).max()
    im = ax.imshow(g, cmap="RdBu_r", vmin=-lim, vmax=lim,
                   extent=[ax_mm[0], ax_mm[-1], ax_mm[-1], ax_mm[0]])  # fmt: skip
    for (x, y), m in ((src, "o"), (rec, "v")):
        ax.plot((y - n // 2) * dx * 1e3, (x - n // 2) * dx * 1e3, "k" + m)
    fig.colorbar(im, ax=ax, label="dJ/dc, J = sum of p^2 [Pa^2 s/m]")
    ax.set(title="dJ/dc (source o, sensor v)", xlabel="y [mm]", ylabel="x [mm]")
    save(fig, out, "grad_sound_speed")


if __name__ == "__main__":
    main(run, __doc__, "grad_sound_speed")
