"""A small 2-D case for gradient tests: heterogeneous, absorbing, nonlinear, with p0, an
additive pressure source and an additive velocity source, sensors on a ring."""

from __future__ import annotations

import numpy as np

#: central finite-difference step per parameter, relative to the parameter's largest value:
#: truncation error ~h^2 (sound speed and density enter most nonlinearly), round-off ~eps/h
FD_STEP = {"sound_speed": 1e-6, "density": 1e-6, "alpha_coeff": 1e-4, "BonA": 1e-3,
           "p0": 1e-6, "p": 1e-3, "ux": 1e-4}  # fmt: skip


def make_case(n: int = 32, nt: int = 40):
    """``(kgrid, medium, source, sensor)`` of the user API on an ``n x n`` grid."""
    import sonotile as st

    grid = st.KWaveGrid((n, n), 1e-4, dt=2e-8, nt=nt)
    x, y = np.meshgrid(*(np.arange(k) - k // 2 for k in grid.shape), indexing="ij")
    medium = st.KWaveMedium(
        sound_speed=1500 + 100 * np.exp(-((x - 3) ** 2 + y**2) / 30),
        density=1000 + 50 * np.exp(-((x + 3) ** 2 + y**2) / 20),
        alpha_coeff=0.75 + 0.1 * (y > 0),
        alpha_power=1.5,
        BonA=6.0 + (x > 0),
    )
    pm = np.zeros(grid.shape, bool)
    pm[n // 4, n // 2 - 4 : n // 2 + 4] = True
    source = st.KSource(
        p0=1e5 * np.exp(-(x**2 + y**2) / 6),
        p=1e4 * np.sin(np.arange(30) * 0.3),
        p_mask=pm,
        ux=0.1 * np.ones(25),
        u_mask=pm,
    )
    ring = np.abs(np.hypot(x, y) - n / 3) < 0.5
    sensor = st.KSensor(mask=ring, record=("p",))
    return grid, medium, source, sensor


def fd_errors(sim, seed: int = 0) -> dict:
    """Relative difference of ``jax.grad`` and central finite differences of a random linear
    functional of the recorded pressure, along a random direction of each parameter."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    p0 = sim.params
    w = jnp.asarray(rng.standard_normal(sim()["p"].shape))

    def loss(p):
        return jnp.sum(sim(p)["p"] * w)

    g = jax.jit(jax.grad(loss))(p0)
    out = {}
    for k, v0 in p0.items():
        v = jnp.asarray(rng.standard_normal(v0.shape)) * jnp.max(jnp.abs(v0))
        h = FD_STEP[k]
        fd = (loss({**p0, k: v0 + h * v}) - loss({**p0, k: v0 - h * v})) / (2 * h)
        ad = jnp.sum(g[k] * v)
        out[k] = float(abs(fd - ad) / abs(fd))
    return out
