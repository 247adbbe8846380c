"""CPU time of one pencil slab shard's spectral operators per step, against the single-device
control: robust to other load on a shared machine (process CPU time, one core, one thread).

    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \
    JAX_PLATFORMS=cpu PYTHONPATH=src taskset -c 0 .venv/bin/python \
        benchmarks/pencil_ops_cpu.py pencil|control [--size 128] [--rounds 5]

``pencil``: shard 0 of a ``2 size`` x ``size`` x ``size`` grid on a mesh of 2 (the weak
scaling benchmark's case), the collectives replaced by local copies of the same size
(:class:`sonotile.parallel.collectives.LocalCopies`); ``control``: one ``size``³ device. Both
run the operators of a step of the absorbing case: ``grad(p)``, ``div(u)``, two fractional
Laplacians. Run the two codes to compare one after the other, alternating (issue #10).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.model.grid import Grid
from sonotile.model.problem import MaskSource, Medium, Pml, Problem, Sensor, Sources
from sonotile.parallel import collectives
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.pencil import PencilOps, pencil_constants
from sonotile.spectral.operators import FourierOps


def problem(shape):
    d = len(shape)
    g = Grid(shape, (1e-4,) * d, 2e-8, 10)
    med = Medium(1500.0, 1000.0, g, alpha_coeff=0.75, alpha_power=1.5, absorption="power_law")
    at = np.zeros((1, d), np.int64)
    return Problem(g, med, Sources(p=MaskSource(at, np.ones(10), "additive")), Sensor(index=at),
                   Pml((2,) * d, (2.0,) * d))  # fmt: skip


def step(ops, p, u):
    d = ops.div(u)
    s = d[0] + d[1] + d[2]
    out = [*ops.grad(p), ops.fractional(s, 1), ops.fractional(p, 2)]
    return sum(jnp.sum(x) for x in out)


def shard0(x, spec, n=2):
    """Shard 0's block of a constant sharded by ``spec`` over a mesh of ``n``."""
    if x is None or spec is None:
        return x
    for a, name in enumerate(spec):
        if name is not None:
            x = np.take(np.asarray(x), np.arange(x.shape[a] // n), axis=a)
    return jnp.asarray(x)


def compiled(which, n, p, u):
    if which == "control":
        g = problem((n,) * 3).grid
        ops = FourierOps.build(g.shape, g.spacing, 1500.0, g.dt, alpha_power=1.5)
        return jax.jit(lambda p, u: step(ops, p, u)).lower(p, u).compile()
    shape = (2 * n, n, n)
    arrays, specs, meta = pencil_constants(problem(shape), Blocks(shape, (2,)), False)
    kids = [
        tuple(shard0(x, s) for x, s in zip(a, sp)) if isinstance(a, tuple) else shard0(a, sp)
        for a, sp in zip(arrays, specs)
    ]
    ops = PencilOps(*kids, meta=meta)
    with collectives.using(collectives.LocalCopies({"a0": 2})):
        return jax.jit(lambda p, u: step(ops, p, u)).lower(p, u).compile()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("which", choices=("pencil", "control"))
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    p, *u = (jnp.asarray(rng.standard_normal((args.size,) * 3), jnp.float32) for _ in range(4))
    f = compiled(args.which, args.size, p, tuple(u))
    jax.block_until_ready(f(p, tuple(u)))
    best = float("inf")
    for _ in range(args.rounds):
        t0 = time.process_time()
        for _ in range(3):
            jax.block_until_ready(f(p, tuple(u)))
        best = min(best, (time.process_time() - t0) / 3)
    print(f"{args.which} {args.size}: {1e3 * best:.1f} CPU ms per step's operators")


if __name__ == "__main__":
    main()
