"""Variants of the spectral operators: compiled memory and step time, round-robin.

    .venv/bin/python benchmarks/ops_variants.py --size 128 --steps 20 --rounds 5 \
        --case absorbing_nonlinear [--variants base,realmul] [--no-time]

``base`` is :class:`sonotile.spectral.operators.FourierOps` as it is. ``realmul`` multiplies spectra
by the real operators (kappa, |k|^(y-2), |k|^(y-1), source kappa) component-wise
(``lax.complex(re*k, im*k)``) instead of ``complex * real``, which XLA otherwise lowers by
converting the real operator to a complex array hoisted out of the time loop (a second, complex
copy of each operator and twice the bytes read per multiply).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--case", default="absorbing_nonlinear")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--variants", default="base,realmul")
    ap.add_argument("--no-time", action="store_true")
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
    import jax
    from jax import lax

    from sonotile.bench.inprocess import SonotileCase, write_input
    from sonotile.solver import runner as rn
    from sonotile.spectral.operators import FourierOps

    def rmul(F, k):
        return lax.complex(F.real * k, F.imag * k)

    @jax.tree_util.register_pytree_node_class
    class RealMulOps(FourierOps):
        def grad(self, p):
            P = rmul(self._spec(p), self.kappa)
            return tuple(self._back(P * s, p) for s in self.shift_pos)

        def div(self, u):
            return tuple(
                self._back(rmul(self._spec(ua), self.kappa) * s, ua)
                for ua, s in zip(u, self.shift_neg)
            )

        def fractional(self, f, which):
            nabla = self.nabla1 if which == 1 else self.nabla2
            return self._back(rmul(self._spec(f), nabla), f)

        def filter_source(self, s):
            return self._back(rmul(self._spec(s), self.source_kappa), s)

    variants = {"base": FourierOps, "realmul": RealMulOps}
    names = [v for v in a.variants.split(",") if v]
    orig = rn.compile_problem
    cases = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.h5")
        write_input(path, a.case, a.size, a.steps)
        for name in names:
            cls = variants[name]

            def patched(problem, ops=None, consts=None, cls=cls):
                cp = orig(problem)
                o = cp.ops
                return orig(problem, ops=cls(*o.tree_flatten()[0]), consts=cp.consts)

            rn.compile_problem = patched
            cases[name] = SonotileCase(path, a.steps)
            rn.compile_problem = orig
    n = a.size**3
    times = {k: [] for k in names}
    if not a.no_time:
        for _ in range(a.rounds):
            for name in names:
                times[name].append(cases[name].run() / a.steps * 1e3)
    print(
        f"{a.case} {a.size}^3, {a.steps} steps x {a.rounds} rounds, load {os.getloadavg()[0]:.1f}"
    )
    for name in names:
        m = cases[name].memory
        line = (
            f"  {name:8s} compiled {m['peak_bytes'] / n:6.1f} B/pt (args "
            f"{m['argument_size_in_bytes'] / n:5.1f}, temp {m['temp_size_in_bytes'] / n:5.1f})"
        )
        if times[name]:
            t = times[name]
            line += f"  {statistics.median(t):7.1f} ms/step (min {min(t):.1f}, max {max(t):.1f})"
        print(line)
    if len(names) == 2 and times[names[0]]:
        r = [x / y for x, y in zip(times[names[0]], times[names[1]])]
        print(
            f"  time {names[0]}/{names[1]} per round: median {statistics.median(r):.3f} "
            f"(min {min(r):.3f}, max {max(r):.3f})"
        )
    time.sleep(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
