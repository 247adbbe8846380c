"""CPU time of an LFB shard step's local work: both shards of a 2-way x split in one process on
one core (2 virtual devices, FFTW on 1 thread), or the single-device control.

    PYTHONPATH=src .venv/bin/python benchmarks/lfb_local_step.py lfb
    PYTHONPATH=src .venv/bin/python benchmarks/lfb_local_step.py single --no-unstagger

``heterogeneous_absorbing(n, 12)`` on ``2n x n x n`` (lfb, overlap 16, bell width 0.5) or ``n^3``
(single); one chunk of 10 steps compiles and warms, then ``--rounds`` chunks are timed. Prints
CPU time (``getrusage``, all threads) and wall time per step, best and median; single's are
doubled (two independent blocks: the local-work bound on weak efficiency is single / lfb).
``--no-unstagger`` drops ``u_non_staggered`` from the recorded fields. Compare variants only in
alternating runs within the hour (the machine's speed drifts between hours).
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ["XLA_FLAGS"] = (
    "--xla_force_host_platform_device_count=2 --xla_cpu_multi_thread_eigen=false"
)
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})

import dataclasses  # noqa: E402

import jax  # noqa: E402

from sonotile import parallel  # noqa: E402
from sonotile.bench.cases import heterogeneous_absorbing  # noqa: E402
from sonotile.fft import fftw  # noqa: E402
from sonotile.model.problem import Problem  # noqa: E402
from sonotile.solver import runner  # noqa: E402


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def problem_for(kind: str, n: int, unstagger: bool) -> Problem:
    shape = (2 * n, n, n) if kind == "lfb" else (n, n, n)
    problem = heterogeneous_absorbing(n, 12, shape=shape)
    if not unstagger:
        sen = problem.sensor
        kept = tuple(r for r in sen.record if r != "u_non_staggered")
        problem = dataclasses.replace(problem, sensor=dataclasses.replace(sen, record=kept))
    return problem


def time_steps(kind: str, n: int, rounds: int, unstagger: bool) -> tuple[list, list]:
    """CPU and wall ms per step of each timed chunk (single: times two)."""
    problem = problem_for(kind, n, unstagger)
    if kind == "lfb":
        eng = parallel.decomposed_engine(problem, "lfb", (2,), 16, 0.5)
    else:
        eng = runner.single_engine(problem)
    rs, _ = eng.start()
    xs = runner.step_inputs(problem, 0, 10)
    carry, _ = eng.chunk(rs.carry, xs)
    jax.block_until_ready(carry)
    scale = 1e3 / 10 * (2 if kind == "single" else 1)
    cpu, wall = [], []
    for _ in range(rounds):
        c0, t0 = cpu_seconds(), time.perf_counter()
        carry, _ = eng.chunk(carry, xs)
        jax.block_until_ready(carry)
        cpu.append((cpu_seconds() - c0) * scale)
        wall.append((time.perf_counter() - t0) * scale)
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=("lfb", "single"))
    ap.add_argument("--n", type=int, default=128, help="block edge [points]")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-unstagger", action="store_true")
    args = ap.parse_args()
    assert fftw.available() and fftw.threads() == 1, "FFTW on one thread expected"
    cpu, wall = time_steps(args.kind, args.n, args.rounds, not args.no_unstagger)

    def med(v: list) -> float:
        return sorted(v)[len(v) // 2]

    what = "both shards" if args.kind == "lfb" else "two single blocks"
    print(f"{args.kind} ms per step ({what}): cpu best {min(cpu):.1f} median {med(cpu):.1f}"
          f" | wall best {min(wall):.1f} median {med(wall):.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
