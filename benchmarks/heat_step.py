"""Cost of a 3-D heat step against an acoustic absorbing step on the same grid (float32).

    PYTHONPATH=src .venv/bin/python benchmarks/heat_step.py --size 128 --steps 10 --rounds 5

Variants, each a jitted ``lax.scan`` over ``--steps`` steps (round-robin, medians):

* ``acoustic``     the acoustic step of ``sonotile bench``'s ``absorbing_nonlinear`` case
  (heterogeneous, power-law absorption with dispersion, B/A, PML), no sensors;
* ``heat-homog``   the heat step in a homogeneous perfused medium with a heat source (the exact
  propagator: one transform pair) and the dose update;
* ``heat-hetero``  the same with heterogeneous conductivity, rho C and perfusion (gradient,
  divergence and the perfusion term: 2 + 2 ndim transforms' work).
"""

from __future__ import annotations

import argparse
import statistics
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    import jax
    import numpy as np
    from jax import lax

    from sonotile.bench.inprocess import bench_problem
    from sonotile.physics.heat import ThermalMedium
    from sonotile.physics.heat.medium import coefficients
    from sonotile.physics.heat.step import build_ops, constants, initial_state, statics_of
    from sonotile.physics.heat.step import step as heat_step
    from sonotile.solver import runner as rn

    n, shape = a.size, (a.size,) * 3
    problem = bench_problem("absorbing_nonlinear", n, a.steps)
    cp = rn.compile_problem(problem)
    model = cp.phys
    xs = model.inputs(problem, 0, a.steps)

    @jax.jit
    def acoustic(s, xs, c, ops):  # type: ignore[no-untyped-def]
        return lax.scan(lambda s, x: (model.step(s, x, c, ops), None), s, xs)[0]

    st = model.zero_state(shape, np.float32)
    runs = {"acoustic": (acoustic, (st._replace(p=st.p + 1.0), xs, cp.consts, cp.ops))}
    x = np.linspace(-1, 1, n)[:, None, None] * np.ones(shape)
    base = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5,
            "blood_density": 1060.0, "blood_specific_heat": 3617.0,
            "blood_perfusion_rate": 0.01, "blood_ambient_temperature": 37.0}  # fmt: skip
    right = x > 0
    hetero = {**base, "thermal_conductivity": 0.5 + 0.2 * right, "density": 1050.0 + 50 * right,
              "blood_perfusion_rate": 0.01 + 0.01 * right}  # fmt: skip
    Q = 1e6 * np.exp(-(x**2) / 0.1)
    for name, med in (("heat-homog", base), ("heat-hetero", hetero)):
        co = coefficients(ThermalMedium(**med), shape)
        stat = statics_of(co, True)
        ops = build_ops(co, shape, (2e-4,) * 3, 0.05, "float32", stat)
        c = constants(co, Q, shape, 0.05, "float32", ops, stat)

        @jax.jit
        def heat(s, on, c, ops, stat=stat):  # type: ignore[no-untyped-def]
            return lax.scan(lambda s, o: (heat_step(s, {"on": o}, c, ops, stat), None), s, on)[0]

        runs[name] = (heat, (initial_state(37.0, shape, "float32"), np.ones(a.steps), c, ops))
    for f, args in runs.values():
        jax.block_until_ready(f(*args))
    wall: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(a.rounds):
        for name, (f, args) in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(*args))
            wall[name].append((time.perf_counter() - t0) / a.steps * 1e3)
    ref = statistics.median(wall["acoustic"])
    print(f"{n}^3 float32, {a.steps} steps x {a.rounds} rounds, {jax.devices()[0].device_kind}, "
          f"fft {cp.ops.fft}")  # fmt: skip
    for name, w in wall.items():
        med = statistics.median(w)
        print(f"  {name:12s} {med:8.2f} ms/step (min {min(w):7.2f})  {med / ref:5.2f} x acoustic")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
