"""What deterministic mode's FFTW_ESTIMATE plans cost against the default measured ones: one
process per plan effort (the effort is fixed when the extension is loaded), run two at a time
so that both see the same neighbours.

    XDG_CACHE_HOME=/tmp/est SONOTILE_DETERMINISTIC=1 \
        .venv/bin/python benchmarks/performance/plan_effort.py &
    XDG_CACHE_HOME=/tmp/meas .venv/bin/python benchmarks/performance/plan_effort.py & wait

Each process builds the absorbing operators of an ``--n``³ grid on ``--threads`` threads, calls
the jitted gradient once (planning, from the folder's wisdom if any, and compiling: ``first_s``)
and then ``--rounds`` times (``min_ms``, ``med_ms``), and prints one JSON line with
:func:`sonotile.fft.fftw.describe`'s plan effort.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=40)
    a = p.parse_args()
    from sonotile.base import runtime

    runtime.configure_threads(a.threads)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from sonotile.fft import fftw
    from sonotile.spectral.operators import FourierOps

    t0 = time.perf_counter()
    ops = FourierOps.build((a.n,) * 3, (1e-4,) * 3, 1500.0, 2e-8, alpha_power=1.5)
    x = jnp.asarray(np.random.default_rng(0).random((a.n,) * 3), jnp.float32)
    grad = jax.jit(ops.grad)
    jax.block_until_ready(grad(x))
    first = time.perf_counter() - t0
    times = []
    for _ in range(a.rounds):
        t = time.perf_counter()
        jax.block_until_ready(grad(x))
        times.append(time.perf_counter() - t)
    info = fftw.describe()
    out = dict(plan=info.get("fftw_plan"), backend=info["fft_backend"], first_s=round(first, 2),
               min_ms=round(min(times) * 1e3, 1),
               med_ms=round(statistics.median(times) * 1e3, 1))  # fmt: skip
    print(json.dumps(out))


if __name__ == "__main__":
    main()
