"""Where does a k-space step's time go on CPU? Round-robin timing of the pieces of one step.

    .venv/bin/python benchmarks/performance/step_profile.py --size 128 --steps 20 --rounds 5 \
        [--case lossless|absorbing_nonlinear] [--threads N] [--trace]

Variants, each a jitted ``lax.scan`` over ``--steps`` steps on the bench case's constants:

* ``step``     the real step (``sonotile.physics.acoustic.step.step``), no sensors;
* ``spectral`` only the spectral operators in the same sequence (grad, div, fractional): FFTs plus
  the k-space multiplications, no PML/medium updates;
* ``ffts``     the same FFTs with nothing but a scalar scaling between them;
* ``pointwise`` the step with every spectral operator replaced by a scalar multiple of its
  input (element-wise work, source injection and the equation of state only);
* ``separate`` the real step with the velocity (and lossless density) updates done by XLA after
  the FFTW calls instead of inside them (``SONOTILE_FFTW_UPDATES=0``).

For each the wall time per step and the CPU time / wall time (threads actually busy) are printed,
medians over ``--rounds`` round-robin rounds, and the compiled temp bytes.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import replace


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class ScalarOps:
    """Spectral operators replaced by cheap element-wise stand-ins (same shapes, no FFT)."""

    def grad(self, p):
        return tuple(p * (0.5 + 0.1 * i) for i in range(p.ndim))

    def div(self, u):
        return tuple(ua * (0.3 + 0.1 * i) for i, ua in enumerate(u))

    def fractional(self, f, which):
        return f * (0.7 if which == 1 else 0.9)

    def filter_source(self, s):
        return s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--case", default="lossless")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--variants", default="step,spectral,ffts,pointwise")
    ap.add_argument(
        "--trace",
        action="store_true",
        help="also trace each variant with jax.profiler and print ms/step per XLA thunk "
        "(FFT custom calls, loop fusions, copies)",
    )
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
    import jax
    import jax.numpy as jnp
    from jax import lax

    from sonotile.bench.inprocess import write_input
    from sonotile.kwave.reader import read_input
    from sonotile.physics.acoustic.step import step, zero_state
    from sonotile.solver import runner as rn

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.h5")
        write_input(path, a.case, a.size, a.steps)
        problem, _ = read_input(path)
    cp = rn.compile_problem(problem)
    c, ops, phys = cp.consts, cp.ops, cp.phys
    xs = rn.step_inputs(problem, 0, a.steps)
    shape = problem.grid.shape
    absorbing = phys.absorption == "power_law"

    def scan_of(body):
        @jax.jit
        def f(state, xs, c, ops):
            return lax.scan(lambda s, x: (body(s, x, c, ops), None), state, xs)[0]

        return f

    def step_body(s, x, c, ops):
        return step(s, x, c, ops, phys)

    def pointwise_body(s, x, c, ops):
        return step(s, x, c, ScalarOps(), phys)

    # the step with the velocity / density updates done by XLA after the FFTW calls
    separate_ops = replace(ops, fft=f"{ops.fft}-separate-updates")

    def separate_body(s, x, c, ops):
        return step(s, x, c, separate_ops, phys)

    def spectral_body(s, x, c, ops):
        g = ops.grad(s.p)
        d = ops.div(g)
        q = sum(d[1:], d[0])
        if absorbing:
            q = q + ops.fractional(q, 1) + ops.fractional(s.p, 2)
        return s._replace(p=q, u=g)

    def ffts_body(s, x, c, ops):
        P = jnp.fft.rfftn(s.p)
        g = tuple(jnp.fft.irfftn(P * (1.0 + i), s=shape) for i in range(len(shape)))
        d = tuple(jnp.fft.irfftn(jnp.fft.rfftn(ua) * 0.5, s=shape) for ua in g)
        q = sum(d[1:], d[0])
        if absorbing:
            q = jnp.fft.irfftn(jnp.fft.rfftn(q) * 0.3, s=shape) + jnp.fft.irfftn(
                jnp.fft.rfftn(s.p) * 0.2, s=shape
            )
        return s._replace(p=q, u=g)

    bodies = {
        "step": step_body,
        "spectral": spectral_body,
        "ffts": ffts_body,
        "pointwise": pointwise_body,
        "separate": separate_body,
    }
    names = [v for v in a.variants.split(",") if v]
    dtype = jnp.dtype(problem.dtype)
    compiled = {}
    for name in names:
        st = zero_state(shape, dtype)
        st = st._replace(p=st.p + 1.0)
        lowered = scan_of(bodies[name]).lower(st, xs, c, ops)
        comp = lowered.compile()
        ma = comp.memory_analysis()
        compiled[name] = (comp, st, ma.temp_size_in_bytes if ma else 0)
        jax.block_until_ready(comp(st, xs, c, ops))
    wall = {k: [] for k in names}
    util = {k: [] for k in names}
    for _ in range(a.rounds):
        for name in names:
            comp, st, _ = compiled[name]
            c0, t0 = cpu_s(), time.perf_counter()
            jax.block_until_ready(comp(st, xs, c, ops))
            t1, c1 = time.perf_counter(), cpu_s()
            wall[name].append((t1 - t0) / a.steps * 1e3)
            util[name].append((c1 - c0) / (t1 - t0))
    n = a.size**3
    print(
        f"{a.case} {a.size}^3, {a.steps} steps x {a.rounds} rounds, threads={a.threads or 'all'}"
        f", XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}, load {os.getloadavg()[0]:.1f}"
    )
    for name in names:
        w = wall[name]
        print(
            f"  {name:10s} {statistics.median(w):7.1f} ms/step (min {min(w):6.1f}, max "
            f"{max(w):6.1f})  cpu/wall {statistics.median(util[name]):4.2f}  "
            f"{n / min(w) / 1e3:6.1f} Mcells/s best  temp {compiled[name][2] / n:5.1f} B/pt"
        )
    for name in names if a.trace else ():
        comp, st, _ = compiled[name]
        print(f"  {name}:")
        trace_thunks(lambda comp=comp, st=st: jax.block_until_ready(comp(st, xs, c, ops)), a.steps)
    return 0


def trace_thunks(run, steps: int, rounds: int = 3) -> None:
    """Run ``run`` ``rounds`` times under jax.profiler; print ms per step per thunk class."""
    import collections
    import glob

    import jax
    from jax.profiler import ProfileData

    with tempfile.TemporaryDirectory() as d:
        jax.profiler.start_trace(d)
        for _ in range(rounds):
            run()
        jax.profiler.stop_trace()
        (pb,) = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)
        data = ProfileData.from_file(pb)
        per = collections.Counter()
        for plane in data.planes:
            for line in plane.lines:
                if not line.name.startswith("tf_XLA"):
                    continue
                for ev in line.events:
                    per[ev.name] += ev.duration_ns
    scale = 1e-6 / (rounds * steps)
    groups = collections.Counter()
    for name, ns in per.items():
        if name.startswith("ffi_call"):
            groups["custom calls (FFTW, keep)"] += ns
        elif "fusion" in name:
            groups["loop fusions"] += ns
        elif name.startswith("copy"):
            groups["copies"] += ns
    print(f"  trace ({rounds} x {steps} steps), ms per step:")
    for g, ns in groups.items():
        print(f"    {g:28s} {ns * scale:8.2f}")
    for name, ns in per.most_common(40):
        if name.startswith(("ffi_call", "copy")) or "fusion" in name:
            print(f"      {name:40s} {ns * scale:8.2f}")


if __name__ == "__main__":
    sys.exit(main())
