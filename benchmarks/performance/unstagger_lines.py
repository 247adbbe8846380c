"""Where the line path of non-staggered sensor velocity stops paying: one component shifted
whole (``FourierOps.unstagger`` then a gather, XLA's FFT) against the lines through ``L``
points (:func:`sonotile.solver.sensors.line_samples`), on an ``n^3`` grid, alternating.

    PYTHONPATH=src .venv/bin/python benchmarks/performance/unstagger_lines.py --n 128 --axis 0 2

Prints ms per call of each and the share of the grid the lines cover; the crossover sets
:data:`sonotile.solver.sensors.LINE_SHARE`.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.solver import sensors as sens
from sonotile.spectral.operators import FourierOps


def timed(f: object, u: jax.Array, reps: int) -> float:
    """Median wall time of ``f(u)`` [ms]."""
    jax.block_until_ready(f(u))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(u))
        ts.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--axis", type=int, nargs="+", default=[0, 2])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    n, shape = args.n, (args.n,) * 3
    sens.LINE_SHARE = 1.0  # every line count takes the line path here
    ops = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 1e-8, unstagger=True, fft="xla")
    u = jax.random.normal(jax.random.PRNGKey(0), shape)
    rng = np.random.default_rng(0)
    for axis in args.axis:
        for lines in (64, n * n // 16, n * n // 8, n * n // 4, n * n // 2, n * n):
            others = rng.choice(n * n, lines, replace=False)
            pts = np.insert(np.stack(np.unravel_index(others, (n, n)), 1), axis, n // 2, axis=1)
            name = f"u{'xyz'[axis]}_non_staggered"
            lay = sens.SensorLayout(pts, (), (name,), (), (), (), 0, 3, None, None,
                                    sens.line_plans(pts, [name], shape, None))  # fmt: skip
            idx = tuple(jnp.asarray(pts[:, a]) for a in range(3))

            def whole(v: jax.Array, axis: int = axis, idx: tuple = idx) -> jax.Array:
                return ops.unstagger(v, axis)[idx]

            def line(v: jax.Array, lay: sens.SensorLayout = lay, name: str = name) -> jax.Array:
                return sens.line_samples([v] * 3, lay, ())[name]

            tw, tl = [], []
            for _ in range(2):  # alternate
                tw.append(timed(jax.jit(whole), u, args.reps))
                tl.append(timed(jax.jit(line), u, args.reps))
            w, ln = min(tw), min(tl)
            print(f"axis {axis} lines {lines:6d} share {lines / (n * n):.3f}: whole "
                  f"{w:7.2f} ms  lines {ln:7.2f} ms  ratio {ln / w:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
