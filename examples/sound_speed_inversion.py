"""Sound-speed inversion of a 2-D phantom from a ring of sensors (gradient descent with Adam).

Equation: k-Wave's linear lossless first-order model (sonotile's step), 2-D, 64 x 64 points of
0.2 mm; 8 initial-pressure sources (small discs) on a ring of radius 5 mm fire one at a time
(``jax.vmap`` over ``p0``), each recorded by the 120 sensor points of the same ring for 200
steps. The "measured" data are simulated with the true phantom (an inverse crime: same model,
no noise); the estimate starts from water (1500 m/s) and follows the gradient of the squared
data misfit with respect to the sound-speed field inside the ring.

Run: ``.venv/bin/python examples/sound_speed_inversion.py [--iters 200] [--out PNG]``; about
3-5 minutes for 200 iterations on 2 CPU cores. Writes a PNG (phantom, estimate, misfit) to
``gallery-out/differentiable_inversion.png`` (``--out docs/differentiable_inversion.png``
remakes the figure of docs/differentiable.md).
"""

from __future__ import annotations

import argparse
import io
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

import sonotile as st
from sonotile.base import files

N, DX, NT = 64, 2e-4, 200
C_WATER = 1500.0


def phantom(x, y):
    """True sound speed [m/s]: two inclusions in water."""
    c = np.full(x.shape, C_WATER)
    c[(x - 1e-3) ** 2 + (y + 1e-3) ** 2 < (1.6e-3) ** 2] = 1580.0
    c[(x + 1.6e-3) ** 2 + (y - 1.2e-3) ** 2 < (1.0e-3) ** 2] = 1440.0
    return c


def setup():
    grid = st.KWaveGrid((N, N), DX, dt=3e-8, nt=NT)
    idx = np.arange(N) - N // 2
    x, y = np.meshgrid(idx * DX, idx * DX, indexing="ij")
    r = np.hypot(x, y)
    ring = np.abs(r - 5e-3) < DX / 2
    angles = np.arange(8) * 2 * np.pi / 8
    p0s = np.stack([1e5 * (np.hypot(x - 5e-3 * np.cos(a), y - 5e-3 * np.sin(a)) < 3 * DX)
                    for a in angles])  # fmt: skip
    medium = st.KWaveMedium(sound_speed=np.full((N, N), C_WATER), sound_speed_ref=1600.0)
    source = st.KSource(p0=p0s[0])
    sensor = st.KSensor(mask=ring, record=("p",))
    sim = st.make_simulator(grid, medium, source, sensor, pml_size=10, smooth_p0=True)
    inside = r < 4.4e-3
    return sim, phantom(x, y), jnp.asarray(p0s, jnp.float32), jnp.asarray(inside)


def adam(grad_fn, x, iters: int, lr: float, log):
    m = v = jnp.zeros_like(x)
    b1, b2 = 0.9, 0.999
    for i in range(1, iters + 1):
        loss, g = grad_fn(x)
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        x = x - lr * (m / (1 - b1**i)) / (jnp.sqrt(v / (1 - b2**i)) + 1e-12)
        log(i, float(loss))
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--lr", type=float, default=2.0, help="Adam step [m/s]")
    ap.add_argument(
        "--out",
        default="gallery-out/differentiable_inversion.png",
        help="the figure (PNG; its folder is made; default %(default)s)",
    )
    a = ap.parse_args(argv)
    sim, c_true, p0s, inside = setup()

    def data(c):  # (8 sources, 120 sensors, NT)
        return jax.vmap(lambda p0: sim({"sound_speed": c, "p0": p0})["p"])(p0s)

    measured = jax.jit(data)(jnp.asarray(c_true, jnp.float32))
    scale = jnp.sum(measured**2)

    @jax.jit
    def misfit(dc):
        return jnp.sum((data(C_WATER + jnp.where(inside, dc, 0.0)) - measured) ** 2) / scale

    losses, t0 = [], time.perf_counter()

    def log(i, loss):
        losses.append(loss)
        if i == 1 or i % 25 == 0:
            print(f"iter {i:4d}  misfit {loss:.3e}  {time.perf_counter() - t0:6.1f} s", flush=True)

    dc = adam(jax.jit(jax.value_and_grad(misfit)), jnp.zeros((N, N), jnp.float32), a.iters,
              a.lr, log)  # fmt: skip
    est = np.asarray(C_WATER + jnp.where(inside, dc, 0.0))
    err = np.abs(est - c_true)[np.asarray(inside)]
    print(f"sound speed error inside the ring: mean {err.mean():.1f} m/s, max {err.max():.1f} m/s")
    plot(c_true, est, losses, a.out)


def plot(c_true, est, losses, out: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(12, 3.6))
    ext = [-N / 2 * DX * 1e3, N / 2 * DX * 1e3] * 2
    for k, (img, title) in enumerate(((c_true, "phantom"), (est, "estimate"))):
        h = ax[k].imshow(img.T, origin="lower", extent=ext, vmin=1420, vmax=1600, cmap="RdBu_r")
        ax[k].set(title=f"{title} [m/s]", xlabel="x [mm]", ylabel="y [mm]")
        fig.colorbar(h, ax=ax[k], label="sound speed [m/s]")
    ax[2].semilogy(np.arange(1, len(losses) + 1), losses)
    ax[2].set(title="relative data misfit", xlabel="Adam iteration")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    files.write_bytes(out, image.getvalue(), "figure")  # a temporary file renamed into place
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
