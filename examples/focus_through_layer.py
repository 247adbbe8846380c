"""Optimise the per-element delays and amplitudes of a transducer array to maximise the pressure
at a target behind an aberrating layer.

Equation: k-Wave's first-order model (sonotile's step), 2-D, 96 x 96 points of 0.1 mm, water
with a 2.4 mm layer of random sound speed (1700-2400 m/s, a skull-like aberrator) between the
array and the target. A 16-element linear array (3 points per element, additive pressure
source) sends a 1.5 MHz 3-cycle burst; element e sends ``a_e s(t - tau_e)`` with the delay
applied as a band-limited Fourier shift, so the pressure is differentiable in ``tau_e`` and
``a_e``. Objective: the energy ``sum_t p(t)^2`` at the target point, with the amplitudes kept
at unit mean square. Start: geometric delays for a homogeneous water path (what an array
focuses with when it ignores the layer).

Run: ``.venv/bin/python examples/focus_through_layer.py [--iters 60]``; about a minute on 2
CPU cores. Prints the target energy for geometric focusing and for the optimised law.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import sonotile as st

N, DX, NT, F0 = 96, 1e-4, 500, 1.5e6
N_EL, PER_EL = 16, 3
TARGET = (78, 48)


def setup():
    grid = st.KWaveGrid((N, N), DX, dt=1.2e-8, nt=NT)
    rng = np.random.default_rng(3)
    c = np.full((N, N), 1500.0)
    layer = np.interp(np.arange(N), np.linspace(0, N, 12), rng.uniform(1700, 2400, 12))
    c[36:60, :] = layer[None, :]
    medium = st.KWaveMedium(sound_speed=c, density=1000.0, sound_speed_ref=2400.0)
    mask = np.zeros((N, N), bool)
    cols = 24 + np.arange(N_EL * PER_EL)
    mask[14, cols] = True
    t = np.arange(NT) * grid.dt
    n_burst = int(round(3 / F0 / grid.dt))
    burst = np.sin(2 * np.pi * F0 * t) * np.pad(np.hanning(n_burst), (0, NT - n_burst))
    source = st.KSource(p=np.tile(burst, (N_EL * PER_EL, 1)), p_mask=mask)
    sensor = st.KSensor(points=np.array([TARGET]), record=("p",))
    sim = st.make_simulator(grid, medium, source, sensor, pml_size=12)
    element = np.repeat(np.arange(N_EL), PER_EL)  # element of each source point (mask order)
    centres = np.array([[14, cols[element == e].mean()] for e in range(N_EL)]) * DX
    dist = np.hypot(*(np.array(TARGET) * DX - centres).T)
    geometric = (dist.max() - dist) / 1500.0  # [s]: the farthest element fires first
    return sim, jnp.asarray(burst, jnp.float32), element, geometric, grid.dt


def signals(burst, delays, amps, element, dt: float):
    """Per-point signals ``(Nsrc, Nt)``: the burst of each element shifted by its delay."""
    n = burst.shape[0]
    w = 2 * np.pi * np.fft.rfftfreq(n, dt)
    spec = jnp.fft.rfft(burst)[None, :] * jnp.exp(-1j * w[None, :] * delays[:, None])
    per_el = amps[:, None] * jnp.fft.irfft(spec, n=n)
    return 1e5 * per_el[element]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=60)
    a = ap.parse_args(argv)
    sim, burst, element, geometric, dt = setup()

    def energy(law):
        delays, amps = law
        amps = amps / jnp.sqrt(jnp.mean(amps**2))
        p = sim({"p": signals(burst, delays, amps, element, dt)})["p"]
        return jnp.sum(p**2)

    law = (jnp.asarray(geometric, jnp.float32), jnp.ones(N_EL, jnp.float32))
    e0 = float(jax.jit(energy)(law))
    step = jax.jit(jax.value_and_grad(energy))
    lr = (2e-8, 0.05)  # Adam steps: delays [s], amplitudes [-]
    m = jax.tree_util.tree_map(jnp.zeros_like, law)
    v = jax.tree_util.tree_map(jnp.zeros_like, law)
    t0 = time.perf_counter()
    for i in range(1, a.iters + 1):
        e, g = step(law)
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
        law = tuple(  # gradient ascent
            x + r * (mm / (1 - 0.9**i)) / (jnp.sqrt(vv / (1 - 0.999**i)) + 1e-30)
            for x, r, mm, vv in zip(law, lr, m, v)
        )
        if i == 1 or i % 10 == 0:
            print(f"iter {i:3d}  energy / geometric {float(e) / e0:6.3f}  "
                  f"{time.perf_counter() - t0:5.1f} s", flush=True)  # fmt: skip
    e1 = float(jax.jit(energy)(law))
    print(f"target energy: geometric delays {e0:.4e}, optimised {e1:.4e} ({e1 / e0:.2f}x)")
    print("delays [ns]:", np.round((np.asarray(law[0]) - geometric) * 1e9, 1).tolist())


if __name__ == "__main__":
    main()
