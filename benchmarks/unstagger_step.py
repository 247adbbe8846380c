"""The step of ``heterogeneous_absorbing`` (60 points recording ``u_non_staggered``) with the
line path against the whole-grid shift (``LINE_SHARE = 0``, the old path), alternating A B / B A
in one process; ``--floor`` adds the step not recording ``u_non_staggered``.

    PYTHONPATH=src .venv/bin/python benchmarks/unstagger_step.py --n 128 --floor
    PYTHONPATH=src .venv/bin/python benchmarks/unstagger_step.py --n 128 --lfb 2 --steps 5

``--lfb P``: LFB on ``P`` virtual CPU devices (overlap 16), grid ``(P n, n, n)``. Prints wall and
CPU (``getrusage``) ms per step, and the median of the per-round ratios to the old path.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sys
import time
from typing import Any

import numpy as np


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def build(variant: str, args: argparse.Namespace) -> list[Any]:
    """``[chunk, carry, xs]`` of one variant, compiled (one chunk run)."""
    import jax

    from sonotile.bench.cases import heterogeneous_absorbing
    from sonotile.solver import runner
    from sonotile.solver import sensors as sens

    n, shape = args.n, (args.lfb * args.n, args.n, args.n) if args.lfb else None
    pb = heterogeneous_absorbing(n, nt=args.steps * (args.rounds + 2), shape=shape)
    if variant == "floor":
        rec = tuple(r for r in pb.sensor.record if r != "u_non_staggered")
        pb = dataclasses.replace(pb, sensor=dataclasses.replace(pb.sensor, record=rec))
    sens.LINE_SHARE = 0.0 if variant == "old" else 0.125
    if args.lfb:
        from sonotile.parallel.engine import decomposed_engine

        eng = decomposed_engine(pb, "lfb", (args.lfb,), overlap=16)
    else:
        eng = runner.single_engine(pb)
    print(variant, eng.describe, "lines:", [f for f, _ in eng.layout.lines], flush=True)
    rs, _ = eng.start()
    xs = runner.step_inputs(pb, 0, args.steps)
    carry, _ = eng.chunk(rs.carry, xs)
    jax.block_until_ready(carry)
    return [eng.chunk, carry, xs]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--lfb", type=int, default=0)
    ap.add_argument("--floor", action="store_true")
    args = ap.parse_args()
    if args.lfb:
        os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={args.lfb}"
    import jax

    print("load", os.getloadavg(), file=sys.stderr)
    variants = ["old", "lines"] + (["floor"] if args.floor else [])
    progs = {v: build(v, args) for v in variants}
    res: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            chunk, carry, xs = progs[v]
            c0, t0 = cpu(), time.perf_counter()
            carry, _ = chunk(carry, xs)
            jax.block_until_ready(carry)
            progs[v][1] = carry
            res[v].append(((time.perf_counter() - t0) * 1e3, (cpu() - c0) * 1e3))
    old = np.array(res["old"]) / args.steps
    for v in variants:
        a = np.array(res[v]) / args.steps
        q = np.median(a / old, axis=0)
        print(f"{v:6s} wall {np.median(a[:, 0]):7.1f} ms/step  CPU {np.median(a[:, 1]):7.1f}"
              f"  ratio to old: wall {q[0]:.3f} CPU {q[1]:.3f}")  # fmt: skip
    print("load", os.getloadavg(), file=sys.stderr)


if __name__ == "__main__":
    main()
