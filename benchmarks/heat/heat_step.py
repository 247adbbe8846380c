"""Cost of a 3-D heat step against an acoustic absorbing step on the same grid (float32).

    PYTHONPATH=src .venv/bin/python benchmarks/heat/heat_step.py --size 128 --steps 5 --threads 1

Variants, each a jitted ``lax.scan`` over ``--steps`` steps (round-robin, medians of wall time
and of the process's CPU time, which a loaded machine disturbs less on one thread):

* ``acoustic``     the acoustic step of ``sonotile bench``'s ``absorbing_nonlinear`` case
  (heterogeneous, power-law absorption with dispersion, B/A, PML), no sensors;
* ``heat-homog``   the heat step in a homogeneous perfused medium with a heat source (the exact
  propagator: one transform pair) and the dose update;
* ``heat-density`` rho C and perfusion heterogeneous, one conductivity (the Laplacian and the
  perfusion term's smoothing from one forward transform: 3 transforms);
* ``heat-hetero``  the same with heterogeneous conductivity too (gradient and smoothing from one
  forward transform, divergence: 1 + ndim + 1 and ndim + 1 transforms);
* ``heat-insul``   ``heat-homog`` with insulating faces (DCT-I pair) on ``size + 1`` points per
  axis, and ``heat-cond`` with conducting faces (DST-I pair) on ``size - 1`` (the sizes whose
  implied periods 2N - 2 and 2N + 2 are ``2 size``).

The load average is printed for each round.
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
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default all)")
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
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
    density = {**base, "density": 1050.0 + 50 * right, "blood_perfusion_rate": 0.01 + 0.01 * right}
    hetero = {**density, "thermal_conductivity": 0.5 + 0.2 * right}
    Q = 1e6 * np.exp(-(x**2) / 0.1)
    insul, cond = ({**base, "boundary_condition": b} for b in ("insulating", "conducting"))
    variants = [("heat-homog", base, shape), ("heat-density", density, shape),
                ("heat-hetero", hetero, shape), ("heat-insul", insul, (n + 1,) * 3),
                ("heat-cond", cond, (n - 1,) * 3)]  # fmt: skip
    for name, med, shp in variants:
        co = coefficients(ThermalMedium(**med), shp)
        stat = statics_of(co, True)
        ops = build_ops(co, shp, (2e-4,) * 3, 0.05, "float32", stat)
        q = Q if shp == shape else 1e6 * np.ones(shp)
        c = constants(co, q, shp, 0.05, "float32", ops, stat, (2e-4,) * 3)

        @jax.jit
        def heat(s, on, c, ops, stat=stat):  # type: ignore[no-untyped-def]
            return lax.scan(lambda s, o: (heat_step(s, {"on": o}, c, ops, stat), None), s, on)[0]

        runs[name] = (heat, (initial_state(37.0, shp, "float32"), np.ones(a.steps), c, ops))
    for f, args in runs.values():
        jax.block_until_ready(f(*args))
    wall: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    loads = []
    for _ in range(a.rounds):
        with open("/proc/loadavg") as fh:
            loads.append(fh.read().split()[0])
        for name, (f, args) in runs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(f(*args))
            wall[name].append((time.perf_counter() - t0) / a.steps * 1e3)
            cpu[name].append((time.process_time() - c0) / a.steps * 1e3)
    ref, ref_cpu = statistics.median(wall["acoustic"]), statistics.median(cpu["acoustic"])
    print(f"{n}^3 float32, {a.steps} steps x {a.rounds} rounds, {jax.devices()[0].device_kind}, "
          f"fft {cp.ops.fft}, threads {a.threads or 'all'}, load {' '.join(loads)}")  # fmt: skip
    print("  (wall: median, min, median / acoustic's median; CPU: all threads' time per step)")
    for name, w in wall.items():
        med, mc = statistics.median(w), statistics.median(cpu[name])
        print(f"  {name:12s} wall {med:8.2f} ms/step (min {min(w):7.2f}) {med / ref:5.2f} x  "
              f"CPU {mc:8.2f} ms/step {mc / ref_cpu:5.2f} x acoustic")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
