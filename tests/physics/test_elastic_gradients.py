"""Gradients through the elastic loop: jax.grad with respect to the compressional and shear
speeds and the density (fields) against central finite differences, float64."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.api.elastic import execute
from sonotile.physics.elastic import ElasticMedium, build

N, DX = 20, 1e-4


def _loss_fn():
    rng = np.random.default_rng(0)
    cp = 2500 + 200 * rng.random((N, N))
    cs = 1000 + 200 * rng.random((N, N))
    cs[:, :6] = 0.0  # a fluid strip
    rho = 1800 + 100 * rng.random((N, N))
    medium = ElasticMedium(cp, cs, rho, (N, N), 2.0, 4.0)
    x = np.arange(N) - N / 2
    p0 = np.exp(-(x[:, None] ** 2 + (x[None, :] - 2) ** 2) / 4.0)
    pts = np.array([[4, 4], [15, 7], [10, 16]])
    dt = 0.2 * DX / 2700
    run = build(medium, (DX, DX), dt, 32, p0=p0, sensor_points=pts, record=("p", "u", "s"),
                pml_size=(4, 4), dtype="float64")  # fmt: skip

    def loss(values: dict) -> jax.Array:
        out = execute(run, values, chunk=16)
        return jnp.sum(out["p"] ** 2) + 1e12 * jnp.sum(out["ux"] ** 2) + jnp.sum(out["sxy"] ** 2)

    return loss, {"sound_speed_compression": cp, "sound_speed_shear": cs, "density": rho}


def test_gradients_match_finite_differences():
    with jax.enable_x64(True):
        loss, values = _loss_fn()
        base = {k: jnp.asarray(v) for k, v in values.items()}
        grads = jax.grad(loss)(base)
        rng = np.random.default_rng(1)
        for name, g in grads.items():
            direction = rng.standard_normal((N, N))
            if name == "sound_speed_shear":
                direction[:, :6] = 0.0  # the fluid strip stays fluid (0 is the domain's edge)
            h = 1e-5 * float(np.abs(values[name]).max())
            f = [float(loss({**base, name: base[name] + s * h * direction})) for s in (1, -1)]
            fd = (f[0] - f[1]) / (2 * h)
            ad = float(jnp.sum(g * direction))
            assert abs(ad) > 0, name
            assert abs(ad - fd) <= 1e-6 * abs(fd), name
