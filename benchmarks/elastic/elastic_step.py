"""One 3-D elastic step against the acoustic absorbing step on the same grid: time and memory.

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_step.py --size 128 --steps 4 \
        --rounds 3

Variants, each a jitted ``lax.scan`` over ``--steps`` steps (no sensors), state donated:

* ``acoustic``      the acoustic step (:mod:`sonotile.physics.acoustic.step`) on the bench's
  heterogeneous absorbing nonlinear case (power-law absorption), with the operators
  ``sonotile`` picks (FFTW on a CPU);
* ``acoustic-xla``  the same with XLA's FFT;
* ``elastic``       the elastic step (:mod:`sonotile.physics.elastic`), heterogeneous c_p, c_s
  (a shear-free region and a solid ball), density and Kelvin-Voigt absorption;
* ``elastic-lossless`` the same without absorption;
* ``elastic-separate`` ``elastic`` with the updates outside FFTW's calls (``ops.diffs``, as a
  traced run takes them);
* ``elastic-slip``  ``elastic`` with the slip-aware fluid-solid interface (``interface="slip"``:
  the ``ops.diffs`` path, the continued fields).

Prints the median wall time per step over round-robin rounds, the compiled program's memory
(arguments + temporaries) per grid point, XLA's count of the bytes one step moves per grid point
(with the time, the bandwidth the step reaches) and the process's peak resident memory above
what it held once JAX and the FFT were loaded (run one variant per process to compare models by
it).
``--threads``: CPU threads of XLA and FFTW (as ``sonotile-kwave -t``; default all).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import time
from functools import partial
from typing import Any


def acoustic_body(s: Any, x: dict, c: dict, o: Any, phys: Any) -> Any:
    """The acoustic step (imported late: JAX starts after the arguments are read)."""
    from sonotile.physics.acoustic import step as ac

    return ac.step(s, x, c, o, phys)


def elastic_case(n: int, dtype: str, absorbing: bool, interface: str = "kwave") -> tuple:
    """Constants, operators and statics of a heterogeneous 3-D elastic case on ``n^3``."""
    import numpy as np

    from sonotile.physics.elastic import ElasticMedium, build
    from sonotile.physics.elastic.interface import ElasticModel

    x = np.arange(n) / n
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    smooth = np.sin(2 * np.pi * X) * np.cos(2 * np.pi * Y) * np.sin(4 * np.pi * Z + 0.3)
    ball = ((X - 0.6) ** 2 + (Y - 0.45) ** 2 + (Z - 0.5) ** 2) < 0.25**2
    cp = 1500 + 40 * smooth + 1300 * ball
    cs = np.where(ball, 1400.0, 0.0)
    rho = 1000 + 30 * smooth + 850 * ball
    kw = {}
    if absorbing:
        kw = {"alpha_coeff_compression": 0.5 + 2 * ball, "alpha_coeff_shear": 0.5 + 4 * ball}
    medium = ElasticMedium(cp, cs, rho, (n, n, n), **kw)
    dx = 1e-4
    dt = 0.3 * dx / cp.max()
    p0 = np.zeros((n, n, n))
    p0[n // 2 - 2 : n // 2 + 2, n // 2 - 2 : n // 2 + 2, n // 2 - 2 : n // 2 + 2] = 1e5
    run = build(medium, (dx,) * 3, dt, 8, p0=p0, dtype=dtype, interface=interface)
    c = ElasticModel.of(run).constants(run, (0, 1, 2))  # what a run's time loop takes
    return c, run.ops, run.statics, run.xs


def step_bytes(body: Any, state: Any, xs: dict, c: dict, ops: Any) -> float:
    """XLA's count of the bytes one step reads and writes (its cost analysis of the step
    compiled alone; nan where the backend gives none): with the time per step, the bandwidth
    the step reaches."""
    import jax

    one = jax.tree_util.tree_map(lambda v: v[0], xs)
    cost = jax.jit(body).lower(state, one, c, ops).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return float((cost or {}).get("bytes accessed", float("nan")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="acoustic,acoustic-xla,elastic,elastic-lossless")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
    import jax
    import jax.numpy as jnp
    from jax import lax

    from sonotile.bench.cases import heterogeneous_absorbing
    from sonotile.fft import fftw
    from sonotile.physics.acoustic import step as ac
    from sonotile.physics.elastic import model as em
    from sonotile.solver import runner as rn
    from sonotile.spectral.operators import FourierOps

    fftw.load()
    jax.block_until_ready(jnp.zeros(8) + 1)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    n, dtype = a.size, "float32"
    cases = {}
    for name in a.variants.split(","):
        if name.startswith("acoustic"):
            problem = heterogeneous_absorbing(n=n, nt=a.steps)
            ops = None
            if name == "acoustic-xla":
                g, m = problem.grid, problem.medium
                ops = FourierOps.build(g.shape, g.spacing, m.c_ref, g.dt, dtype,
                                       alpha_power=m.alpha_power, source_filter=True,
                                       fft="xla")  # fmt: skip
            cp = rn.compile_problem(problem, ops=ops)
            xs = rn.step_inputs(problem, 0, a.steps)
            state = ac.zero_state(problem.grid.shape, jnp.float32)
            body = partial(acoustic_body, phys=cp.phys)
            cases[name] = (body, state, xs, cp.consts, cp.ops)
        else:
            absorbing = name != "elastic-lossless"
            c, ops, st, xs = elastic_case(
                n, dtype, absorbing, "slip" if "slip" in name else "kwave"
            )
            if name == "elastic-separate":
                ops = dataclasses.replace(ops, fft="fftw-separate-updates")
            xs = jax.tree_util.tree_map(lambda v: v[: a.steps], xs)
            state = em.zero_state((n, n, n), jnp.float32)
            body = partial(em.step, st=st)
            cases[name] = (body, state, xs, c, ops)
    compiled = {}
    for name, (body, state, xs, c, ops) in cases.items():

        def scan(state, xs, c, ops, body=body):
            return lax.scan(lambda s, x: (body(s, x, c, ops), None), state, xs)[0]

        comp = jax.jit(scan, donate_argnums=0).lower(state, xs, c, ops).compile()
        ma = comp.memory_analysis()
        mem = (ma.argument_size_in_bytes / n**3, ma.temp_size_in_bytes / n**3,
               step_bytes(body, state, xs, c, ops) / n**3)  # fmt: skip
        state = jax.block_until_ready(comp(state, xs, c, ops))
        compiled[name] = [comp, state, mem]
    times: dict[str, list[float]] = {k: [] for k in compiled}
    for _ in range(a.rounds):
        for name, entry in compiled.items():
            comp, state, _ = entry
            _, xs, c, ops = cases[name][1:]
            t0 = time.perf_counter()
            entry[1] = jax.block_until_ready(comp(state, xs, c, ops))
            times[name].append((time.perf_counter() - t0) / a.steps * 1e3)
    threads = a.threads or len(os.sched_getaffinity(0))
    print(f"{n}^3 float32, {a.steps} steps x {a.rounds} rounds, {jax.devices()[0]}, "
          f"{threads} threads")  # fmt: skip
    base = statistics.median(times.get("acoustic", [float("nan")]))
    for name, ts in times.items():
        med = statistics.median(ts)
        args, temp, moved = compiled[name][2]
        print(f"  {name:17s} {med:8.1f} ms/step (min {min(ts):7.1f})  x{med / base:4.2f}  "
              f"memory {args + temp:6.1f} B/pt (arguments {args:5.1f}, temporaries "
              f"{temp:5.1f})  XLA {moved:6.0f} B/pt/step")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(f"  peak resident memory {peak / 1e9:.2f} GB, {(peak - base_rss) / n**3:.0f} B/pt above "
          f"the {base_rss / 1e9:.2f} GB held before the first case")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
