"""Time of one spectral operator ``irfftn(op * rfftn(f))`` on the FFTW backend, two ways.

    .venv/bin/python benchmarks/operator_floor.py --size 256 --threads 1 --applications 24

``conv``: one ``sonotile_fftw_conv`` call (plane transforms + one blocked pass along x);
``pair``: the R2C call, then the multiply-and-C2R call (3-D FFTW plans). Each is a compiled
``fori_loop`` applying the operator ``--applications`` times to its own output (the first
application also maps the loop's fresh buffers, so use enough of them); the two alternate for
``--rounds`` rounds in one process. Prints ms per application.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--applications", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    from sonotile.fft import fftw

    if not fftw.available():
        print(f"FFTW extension unavailable: {fftw.reason()}")
        return 1
    n, k = a.size, a.applications
    shape, half = (n, n, n), (n, n, n // 2 + 1)
    op = jnp.asarray(np.random.default_rng(0).random(half), jnp.float32)
    x = jnp.asarray(np.random.default_rng(1).standard_normal(shape), jnp.float32)

    @jax.jit
    def conv(x, op):
        return lax.fori_loop(0, k, lambda i, f: fftw.conv([f], op)[0], x)

    @jax.jit
    def pair(x, op):
        return lax.fori_loop(0, k, lambda i, f: fftw.c2r(fftw.r2c(f), shape, op), x)

    variants = {"conv": conv, "pair": pair}
    for f in variants.values():  # compile and plan outside the timing
        f(x, op).block_until_ready()
    ms = {name: [] for name in variants}
    for _ in range(a.rounds):
        for name, f in variants.items():
            t0 = time.perf_counter()
            f(x, op).block_until_ready()
            ms[name].append((time.perf_counter() - t0) / k * 1e3)
    print(f"{n}^3, FFTW threads {fftw.threads()}, {k} applications x {a.rounds} rounds, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for name, t in ms.items():
        print(f"  {name}: {statistics.median(t):7.1f} ms per operator (min {min(t):.1f}, "
              f"max {max(t):.1f})")  # fmt: skip
    r = [p / c for p, c in zip(ms["pair"], ms["conv"])]
    print(f"  speed conv / pair per round: median {statistics.median(r):.2f} "
          f"(min {min(r):.2f}, max {max(r):.2f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
