"""Cost of a gradient against a forward run of the same differentiable simulator.

Case: 3-D heterogeneous sound speed and density, power-law absorption, B/A, an initial pressure
ball, 64 sensor points on a line; loss = sum of squares of the recorded pressure; gradient with
respect to sound speed and density (fields). Reports, for the forward pass and the gradient
(``jax.value_and_grad``, forward included):

* the compiled programs' memory (``memory_analysis()``: arguments + outputs + temporaries);
* the wall time of a compiled call (median of ``--repeat`` alternating calls, after a warm-up).

"backward" = gradient time - forward time. Timings on a shared machine are noisy: compare the
ratios of one run. Example::

    .venv/bin/python benchmarks/gradient_cost.py --n 128 --nt 200
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def make_case(n: int, nt: int):
    import sonotile as st

    grid = st.KWaveGrid((n, n, n), 1e-4, dt=2e-8, nt=nt)
    x, y, z = np.meshgrid(*(np.arange(k) - k // 2 for k in grid.shape), indexing="ij")
    r2 = (x - n // 8) ** 2 + y**2 + z**2
    medium = st.KWaveMedium(
        sound_speed=1500 + 80 * np.exp(-r2 / (n / 6) ** 2),
        density=1000 + 60 * np.exp(-r2 / (n / 5) ** 2),
        alpha_coeff=0.75,
        alpha_power=1.5,
        BonA=6.0,
    )
    source = st.KSource(p0=1e5 * ((x + n // 4) ** 2 + y**2 + z**2 <= 9))
    pts = np.stack([np.full(64, n - 14), np.linspace(10, n - 11, 64).astype(int),
                    np.full(64, n // 2)], axis=1)  # fmt: skip
    sensor = st.KSensor(points=pts, record=("p",))
    return grid, medium, source, sensor


def memory_mb(compiled) -> float:
    m = compiled.memory_analysis()
    total = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    return (total - m.alias_size_in_bytes) / 2**20


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--chunk", default="auto", help="steps per checkpointed chunk, or none")
    ap.add_argument("--remat-step", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compile-only", action="store_true", help="memory only, no runs")
    a = ap.parse_args(argv)
    import jax
    import jax.numpy as jnp

    import sonotile as st

    chunk = None if a.chunk == "none" else (a.chunk if a.chunk == "auto" else int(a.chunk))
    sim = st.make_simulator(*make_case(a.n, a.nt), chunk=chunk, remat_step=a.remat_step)
    params = {k: sim.params[k] for k in ("sound_speed", "density")}

    def loss(p):
        return jnp.sum(sim(p)["p"] ** 2)

    fwd = jax.jit(loss)
    grad = jax.jit(jax.value_and_grad(loss))
    out = {"n": a.n, "nt": a.nt, "chunk": sim.static.chunk, "remat_step": a.remat_step}
    for name, f in (("forward", fwd), ("gradient", grad)):
        t0 = time.perf_counter()
        compiled = f.lower(params).compile()
        out[f"{name}_compile_s"] = time.perf_counter() - t0
        out[f"{name}_memory_mb"] = memory_mb(compiled)
    if a.compile_only:
        out["memory_ratio"] = out["gradient_memory_mb"] / out["forward_memory_mb"]
        print(json.dumps(out, indent=1))
        return out
    times = {"forward": [], "gradient": []}
    jax.block_until_ready(fwd(params))
    jax.block_until_ready(grad(params))
    for _ in range(a.repeat):
        for name, f in (("forward", fwd), ("gradient", grad)):
            t0 = time.perf_counter()
            jax.block_until_ready(f(params))
            times[name].append(time.perf_counter() - t0)
    tf, tg = (float(np.median(times[k])) for k in ("forward", "gradient"))
    out.update(forward_s=tf, gradient_s=tg, backward_over_forward=(tg - tf) / tf,
               gradient_over_forward=tg / tf,
               memory_ratio=out["gradient_memory_mb"] / out["forward_memory_mb"])  # fmt: skip
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
