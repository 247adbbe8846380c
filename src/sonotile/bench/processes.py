"""``sonotile bench --scaling``: weak and strong scaling from 1 to 2 processes, with where the
time of a step goes.

Every process runs with 1 thread and 1 CPU device. Runs, alternating in each round:

* ``single``: one process on ``N^3`` (weak) or ``M^3`` (strong);
* ``control``: two independent single-process runs of ``N^3`` at the same time (what this
  machine gives two processes that never talk: shared memory bandwidth, the ceiling);
* ``lfb`` and ``pencil`` on 2 processes (``sonotile launch -n 2``, mesh ``2``): ``2N x N x N``
  (weak) and ``M^3`` (strong).

Per step each run reports (:func:`sonotile.bench.breakdown.measure`): the whole step and its
parts ``FFTs`` (the step's transforms alone), ``element-wise`` (the step with its collectives
replaced by local copies, minus the FFTs), ``exchange`` (the step's own collectives run back to
back, the processes in step) and ``waiting`` (the rest), which add up to the step.
Weak-scaling efficiency against the ceiling is ``t(control) / t(coupled)``; against one process
alone ``t(single) / t(coupled)``. The figures go to a JSON file and a PNG of time per step by
part.

    sonotile bench --scaling --size 128 --strong 192 --steps 5 --repeats 2 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from sonotile.base import config
from sonotile.base.cliargs import Parser, index, integer, positive_int
from sonotile.bench.breakdown import PARTS
from sonotile.bench.report import json_file, png_file, write_json


def _worker(spec: dict) -> dict:
    """One measurement in this process (one of a launched pair, or alone), on one CPU: a
    launched process pins itself to the CPU of its rank, a lone one was pinned by its parent."""
    from sonotile.base import runtime

    if config.current().process_id is not None or "OMPI_COMM_WORLD_RANK" in os.environ:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[runtime.local_rank() % len(cpus)]})
    config.configure(threads=1)
    dec = spec["decomposition"]
    from sonotile.parallel import distributed

    distributed.initialize()
    import jax

    from sonotile.bench.breakdown import measure

    r = measure(dec, spec["shape"], spec["steps"], spec["repeats"],
                spec["overlap"])  # fmt: skip
    return {"process": jax.process_index(), **r}


def _command(spec: dict) -> list[str]:
    return [sys.executable, "-m", "sonotile.bench.processes", "--worker", json.dumps(spec)]


def _env() -> dict:
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false", JAX_PLATFORMS="cpu")
    env.pop(config.ENV_NUM_PROCESSES, None)
    return env


def _results(out: str) -> list[dict]:
    """Every ``RESULT{json}`` in the output: mpirun may forward two ranks' lines as one."""
    decoder = json.JSONDecoder()
    return [decoder.raw_decode(piece)[0] for piece in out.split("RESULT")[1:]]


#: what each run reports, per step: the step, the bytes sent, the exchange replayed alone
#: (uncapped) and the step's parts (:mod:`sonotile.bench.breakdown`)
FIGURES = ("ms_per_step", "mb_sent_per_step", "exchange_replay_ms", *PARTS)


def _run(kind: str, spec: dict) -> dict:
    """One run of a kind: single, control (two at once) or coupled (2 processes)."""
    env = _env()
    if kind == "control":
        procs = [subprocess.Popen(["taskset", "-c", str(i)] + _command(spec), env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(2)]  # fmt: skip
        outs = [p.communicate(timeout=3600) for p in procs]
        if any(p.returncode for p in procs):
            raise RuntimeError(f"control run failed: {outs[0][1][-1500:]}{outs[1][1][-1500:]}")
        rows = [r for o, _ in outs for r in _results(o)]
    elif kind == "single":
        r = subprocess.run(["taskset", "-c", "0"] + _command(spec), env=env, capture_output=True,
                           text=True, timeout=3600)  # fmt: skip
        if r.returncode:
            raise RuntimeError(f"single run failed: {r.stderr[-2000:]}")
        rows = _results(r.stdout)
    else:
        cmd = _coupled(spec, env)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
        if r.returncode:
            raise RuntimeError(f"{kind} run failed: {r.stdout[-1500:]}{r.stderr[-1500:]}")
        rows = _results(r.stdout)
    worst = max(rows, key=lambda x: x["ms_per_step"])  # the slower process sets the pace
    return {"kind": kind, **{k: worst[k] for k in FIGURES}}


def _coupled(spec: dict, env: dict) -> list[str]:
    """The command of a coupled 2-process run: ``mpirun`` when its collectives go through MPI
    (each process an MPI rank), else ``sonotile launch``; ``env`` gets the transport."""
    env[config.ENV_TRANSPORT] = spec["transport"]
    if spec["transport"] != "mpi":
        return [sys.executable, "-m", "sonotile.parallel.launch", "-n", "2", "--"] + _command(spec)
    if os.geteuid() == 0:  # Open MPI refuses root unless told
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return ["mpirun", "-n", "2", "--bind-to", "core", "-x", "XLA_FLAGS", "-x", "JAX_PLATFORMS",
            "-x", config.ENV_TRANSPORT] + _command(spec)  # fmt: skip


def default_transports() -> str:
    """``mpi,xla`` where ``mpirun`` and mpi4jax are installed, else ``xla``."""
    import importlib.util
    import shutil

    have = shutil.which("mpirun") and importlib.util.find_spec("mpi4jax") is not None
    return "mpi,xla" if have else "xla"


def _plan(a: argparse.Namespace) -> list[tuple[str, str, dict]]:
    n, m = a.size, a.strong
    base = {"steps": a.steps, "repeats": a.repeats, "overlap": a.overlap}
    plan = [("weak", "single", {**base, "shape": [n, n, n], "decomposition": "single", "mesh": []}),
            ("weak", "control", {**base, "shape": [n, n, n], "decomposition": "single",
                                 "mesh": []})]  # fmt: skip
    coupled = [(f"{dec}/{tr}", {"decomposition": dec, "transport": tr, "mesh": [2]})
               for dec in a.decompositions.split(",")
               for tr in a.transports.split(",")]  # fmt: skip
    for kind, c in coupled:
        plan.append(("weak", kind, {**base, "shape": [2 * n, n, n], **c}))
    if m:
        plan.append(("strong", "single", {**base, "shape": [m, m, m], "decomposition": "single",
                                          "mesh": []}))  # fmt: skip
        for kind, c in coupled:
            plan.append(("strong", kind, {**base, "shape": [m, m, m], **c}))
    return plan


def _summary(rows: list[dict]) -> dict:
    """The median round per (study, kind) (by its step; the lower middle of an even count), all
    its figures, so that its parts add up to its step as in each round; and the efficiencies /
    speed-ups of these steps."""
    out: dict = {}
    for study, kind in {(r["study"], r["kind"]) for r in rows}:
        sel = sorted((r for r in rows if r["study"] == study and r["kind"] == kind),
                     key=lambda r: r["ms_per_step"])  # fmt: skip
        middle = sel[(len(sel) - 1) // 2]
        out[f"{study}/{kind}"] = {k: middle[k] for k in FIGURES}
    for key, v in list(out.items()):
        study, kind = key.split("/", 1)
        if study == "weak" and kind not in ("single", "control"):
            v["efficiency_vs_ceiling"] = out["weak/control"]["ms_per_step"] / v["ms_per_step"]
            v["efficiency_vs_one_process"] = out["weak/single"]["ms_per_step"] / v["ms_per_step"]
        if study == "strong" and kind != "single":
            v["speedup"] = out["strong/single"]["ms_per_step"] / v["ms_per_step"]
    return out


def per_round(rows: list[dict]) -> dict[str, list[float]]:
    """Each coupled run's figure in every round against that round's reference run: weak
    efficiency vs the control, strong speed-up vs the single process (the spread a median
    hides; the machine's drift moves both runs of a round alike)."""
    ref = {"weak": "control", "strong": "single"}
    by = {(r["study"], r["kind"], r["round"]): r["ms_per_step"] for r in rows}
    out: dict[str, list[float]] = {}
    for (study, kind, rnd), ms in sorted(by.items(), key=lambda kv: kv[0][2]):
        base = by.get((study, ref[study], rnd))
        if kind not in ("single", "control") and base is not None:
            out.setdefault(f"{study}/{kind}", []).append(base / ms)
    return out


def _plot(summary: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(summary)
    fig, ax = plt.subplots(figsize=(1.6 * len(keys) + 2, 4.5))
    bottom = [0.0] * len(keys)
    for part, color in zip(PARTS, ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        vals = [summary[k][part] for k in keys]
        ax.bar(keys, vals, bottom=bottom, color=color, label=part.removesuffix("_ms"))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set(ylabel="ms per step (slowest process)", title="time per step by part, 1 thread each")
    ax.tick_params(axis="x", rotation=30)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _report(summary: dict) -> None:
    head = f"{'run':16s} {'ms/step':>8s} {'fft':>7s} {'elem':>7s} {'exch':>7s} {'wait':>7s}"
    print(f"\n{head} {'MB sent':>8s}  efficiency / speed-up")
    for k in sorted(summary):
        v = summary[k]
        extra = "  ".join(f"{n} {v[n]:.2f}" for n in ("efficiency_vs_ceiling",
                          "efficiency_vs_one_process", "speedup") if n in v)  # fmt: skip
        print(f"{k:16s} {v['ms_per_step']:8.1f} {v['fft_ms']:7.1f} {v['elementwise_ms']:7.1f} "
              f"{v['exchange_ms']:7.1f} {v['waiting_ms']:7.1f} {v['mb_sent_per_step']:8.2f}  "
              f"{extra}")  # fmt: skip


def parser() -> Parser:
    ap = Parser(prog="sonotile bench --scaling", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument("--size", type=integer(8), default=128, help="weak scaling: N^3 per process")
    ap.add_argument("--strong", type=index, default=192, help="strong scaling: M^3 (0: skip)")
    ap.add_argument("--steps", type=positive_int, default=10)
    ap.add_argument("--repeats", type=positive_int, default=2, help="timed chunks per run")
    ap.add_argument("--rounds", type=positive_int, default=2, help="alternating rounds of all runs")
    ap.add_argument("--overlap", type=integer(2, 32), default=16)
    ap.add_argument(
        "--decompositions",
        default="lfb,pencil",
        help="of lfb and pencil",
    )
    ap.add_argument(
        "--transports", default=None,
        help="coupled runs' transports: mpi (mpirun), xla (gloo through sonotile launch); "
        "default mpi,xla where mpirun and mpi4jax are installed",
    )  # fmt: skip
    ap.add_argument("--json", type=json_file, default="bench-scaling.json")
    ap.add_argument("--png", type=png_file, default="bench-scaling.png")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        print("RESULT" + json.dumps(_worker(json.loads(argv[1]))), flush=True)
        return 0
    a = parser().parse_args(argv)
    a.transports = a.transports or default_transports()
    rows = []
    plan = _plan(a)
    for rnd in range(a.rounds):
        order = plan if rnd % 2 == 0 else plan[::-1]  # alternate: drift hits all runs alike
        for study, kind, spec in order:
            t0 = time.perf_counter()
            r = {"study": study, "round": rnd, **_run(kind, spec)}
            rows.append(r)
            print(f"round {rnd + 1} {study:6s} {kind:8s} {r['ms_per_step']:8.1f} ms/step "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    summary, rounds = _summary(rows), per_round(rows)
    _report(summary)
    for k, v in sorted(rounds.items()):
        what = "efficiency vs control" if k.startswith("weak") else "speed-up"
        print(f"{k:16s} {what} per round: " + " ".join(f"{x:.2f}" for x in v))
    report = {"command": "sonotile bench --scaling " + " ".join(argv), "rows": rows,
              "summary": summary, "per_round": rounds, "load": os.getloadavg()}  # fmt: skip
    write_json(a.json, report)
    _plot(summary, a.png)
    print(f"written {a.json}, {a.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
