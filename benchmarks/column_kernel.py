"""sonotile's vector kernel against FFTW's plans for the operators' column transforms (the pass
along x, the planes' columns), in one process: the kernel is chosen per call, so the two
alternate on the same compiled programs.

    .venv/bin/python benchmarks/column_kernel.py [--sizes 128,160x128x128] [--threads 1] \\
        [--rounds 7]

For each grid: one ``fftw.conv`` call that applies a gradient-like operator (one input, an
operator, outputs with a vector along x and along the last axis: a forward transform, the pass
along x for two products, two inverse transforms), timed ``--rounds`` times per kernel,
alternating; the median and minimum per kernel [ms] and their ratio are printed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def _program(outs: list) -> Any:
    """The jitted call: (field, operator) -> the outputs ``outs``."""
    import jax

    from sonotile.fft import fftw

    return jax.jit(lambda x, k: fftw.conv([x], k, outs))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="128,160x128x128", help="grids: N (N^3) or AxBxC")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5, help="calls per timing")
    a = ap.parse_args(argv)
    from sonotile.base import config

    config.configure(threads=a.threads)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from sonotile.fft import fftw

    fftw.load()
    print(f"vector width {fftw.vector_width()} floats, {a.threads} thread(s)")
    rng = np.random.default_rng(0)
    for size in a.sizes.split(","):
        dims = [int(s) for s in size.split("x")]
        shape = tuple(dims * 3 if len(dims) == 1 else dims)
        half = (*shape[:-1], shape[-1] // 2 + 1)
        x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
        op = jnp.asarray(rng.random(half), jnp.float32)
        vx = np.exp(1j * rng.random(shape[0])).astype(np.complex64)
        vz = np.exp(1j * rng.random(half[-1])).astype(np.complex64)
        run = _program([(0, 0, vx), (0, len(shape) - 1, vz)])
        times: dict[str, list[float]] = {"fftw": [], "vector": []}
        for _ in range(a.rounds):
            for mode in times:
                config.configure(fftw_columns=mode)
                fftw._configure(fftw.load())
                jax.block_until_ready(run(x, op))  # plans made, caches warm
                t = time.perf_counter()
                for _ in range(a.calls):
                    jax.block_until_ready(run(x, op))
                times[mode].append((time.perf_counter() - t) / a.calls)
        med = {m: 1e3 * statistics.median(t) for m, t in times.items()}
        best = {m: 1e3 * min(t) for m, t in times.items()}
        kinds = "/".join(fftw.column_kernel(n) for n in shape[:2])
        ratio = med["fftw"] / med["vector"]
        print(f"{'x'.join(map(str, shape))} (columns of {shape[0]} / {shape[1]}: {kinds}): "
              f"fftw {med['fftw']:.2f} ms (min {best['fftw']:.2f}), vector {med['vector']:.2f} ms "
              f"(min {best['vector']:.2f}): fftw / vector {ratio:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
