"""Milliseconds per step of the scaling benchmark's case, one configuration per process or job:
for A/B comparisons of two source trees in alternating jobs (``PYTHONPATH`` picks the tree).

    PYTHONPATH=src taskset -c 1 .venv/bin/python benchmarks/parallel/rank_step.py single
    PYTHONPATH=src mpirun -n 2 --bind-to core .venv/bin/python benchmarks/parallel/rank_step.py lfb
    PYTHONPATH=src mpirun -n 2 --bind-to core \
        .venv/bin/python benchmarks/parallel/rank_step.py pencil

``heterogeneous_absorbing`` (``sonotile.bench.cases``) at ``n^3`` (single) or ``2n x n x n`` over
the ranks of the job (lfb: overlap 16, bell width 0.5; pencil: slabs), the step's collectives
through MPI, 1 thread per process (``--threads``). One chunk of ``--steps`` steps compiles and
warms, then the best of ``--rounds`` chunks is printed by rank 0 (with ``--tag``). Run two
single processes side by side (``taskset -c 0`` and ``-c 1``) for the control of
docs/scaling.md.
"""

from __future__ import annotations

import argparse
import json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=("single", "lfb", "pencil"))
    ap.add_argument("--n", type=int, default=128, help="block edge [points]")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed chunk")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tag", default="", help="printed first (which tree)")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="CPU threads per process (0: as they are, e.g. beside a GPU)",
    )
    ap.add_argument("--json", action="store_true", help="print the result as one JSON line")
    a = ap.parse_args(argv)
    from sonotile.base import runtime

    if a.threads:
        runtime.configure_threads(a.threads)
    from sonotile.parallel import distributed

    if a.kind != "single":
        distributed.initialize()
    import jax

    from sonotile import parallel
    from sonotile.bench.cases import heterogeneous_absorbing
    from sonotile.bench.scaling import time_chunks
    from sonotile.solver import runner

    n = a.n
    shape = (n, n, n) if a.kind == "single" else (2 * n, n, n)
    problem = heterogeneous_absorbing(n, (a.rounds + 1) * a.steps + 2, shape=shape)
    if a.kind == "single":
        eng = runner.single_engine(problem)
    else:
        eng = parallel.decomposed_engine(problem, a.kind, (2,), 16, 0.5, transport="mpi")
    best = time_chunks(eng, problem, a.steps, a.rounds)
    if jax.process_index() != 0:
        return 0
    if not a.json:
        print(f"{a.tag} {a.kind} {shape}: best {1e3 * best:.1f} ms/step", flush=True)
        return 0
    row = {
        "kind": a.kind,
        "shape": shape,
        "ms_per_step": 1e3 * best,
        "engine": eng.describe,
        "device": str(jax.devices()[0].device_kind),
        "processes": jax.process_count(),
    }
    if eng.transport is not None and eng.lower is not None:  # one step's sends, by kind
        rs, _ = eng.start()
        eng.lower(rs.carry, runner.step_inputs(problem, rs.next_step, rs.next_step + 1))
        sent: dict[str, int] = {}
        for kind, size in eng.transport.traced:
            sent[kind] = sent.get(kind, 0) + size
        row["sent_bytes_per_rank"] = sent  # the one-step chunk's, with those before its loop
        from sonotile.bench.scaling import exchanged_fields, predicted_bytes, transforms_per_step

        row["predicted_sent_bytes_per_rank"] = predicted_bytes(
            shape, (2,), a.kind, transforms_per_step(problem), exchanged_fields(problem)
        )
    print("RANK_STEP " + json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
