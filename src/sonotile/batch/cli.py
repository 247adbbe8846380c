"""``sonotile batch SPEC``: many k-Wave runs at once, each on a subset of the devices.

SPEC is a folder of k-Wave input files or a JSON / TOML list of runs
(:mod:`sonotile.batch.spec`). Outputs are exactly what ``sonotile-kwave`` writes. Runs whose
output already exists are skipped (``--rerun`` runs them again), so an interrupted batch is
resumed by starting it again; a failing run is reported and the others go on. Progress: a line
when a run starts and when it ends; at the end a summary table (time, peak memory, status,
error), also written to ``<out>/batch-summary.json``.

Under ``mpirun`` / ``srun`` / ``sonotile launch`` every process takes its share of the runs
(round robin) on its own devices; process 0 prints the summary of all of them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sonotile.base import config, files
from sonotile.base.cliargs import Parser, positive_int, utf8_path
from sonotile.base.runtime import host_memory_available
from sonotile.batch.pool import Pool, Slot, cpu_slots, gpu_slots
from sonotile.batch.spec import Run, SpecError, load

STATE = ".sonotile-batch"


def devices_per_run(text: str) -> str:
    """``--devices_per_run``: ``auto`` or a count of 1 or more (kept as text)."""
    if text == "auto":
        return text
    try:
        return str(positive_int(text))
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"'{text}': expected 'auto' or an integer >= 1") from None


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="sonotile batch",
        description="Run many k-Wave input files, each on a subset of the devices.",
        epilog="Flags after '--' go to every run's sonotile-kwave command line "
        "(e.g. -- --p_max -s 20).",
    )
    p.add_argument(
        "spec", type=utf8_path, help="folder of k-Wave input files, or a .json / .toml list of runs"
    )
    p.add_argument(
        "--out", type=utf8_path, help="output folder (default: <folder>/out or the spec's 'out')"
    )
    p.add_argument(
        "--devices_per_run", "--devices-per-run", default="auto", type=devices_per_run,
        help="devices per run: a number (CPU cores on a CPU, GPUs on GPUs) or 'auto' "
        "(from the runs' memory estimates and count)",
    )  # fmt: skip
    p.add_argument(
        "--max_parallel", type=positive_int, default=None, help="at most this many runs at once"
    )
    p.add_argument("--rerun", action="store_true", help="run again runs whose output exists")
    return p


# --------------------------------------------------------------------------- devices


def accelerators() -> tuple[str, int, int | None]:
    """``(platform, count, bytes per device)`` of the accelerators, or ``("cpu", 0, None)``.

    Probed in a child process (so that this one never holds a GPU) and only when a CUDA or ROCm
    plugin of JAX is installed."""
    if not any(
        importlib.util.find_spec(m)
        for m in ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin")
    ):
        return "cpu", 0, None
    code = (
        "import jax, json; d = jax.devices(); s = d[0].memory_stats() or {}; "
        "print(json.dumps([d[0].platform, len(d), s.get('bytes_limit')]))"
    )
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if r.returncode:
        return "cpu", 0, None
    platform, n, mem = json.loads(r.stdout.strip().splitlines()[-1])
    return ("cpu", 0, None) if platform == "cpu" else (platform, n, mem)


def local_cpus() -> list[int]:
    """The CPUs this process may use; under a launcher with several processes per node and no
    binding, this process's share of them."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        cpus = list(range(os.cpu_count() or 1))
    env = os.environ
    size = int(env.get("OMPI_COMM_WORLD_LOCAL_SIZE") or env.get("SLURM_NTASKS_PER_NODE") or 1)
    rank = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK") or env.get("SLURM_LOCALID") or 0)
    job = config.current()
    if job.num_processes is not None:  # sonotile launch: all processes on this machine
        size, rank = job.num_processes, job.process_id or 0
    if size > 1 and len(cpus) >= size and len(cpus) == (os.cpu_count() or len(cpus)):
        per = len(cpus) // size
        cpus = cpus[rank * per : (rank + 1) * per]
    return cpus


def estimate(run: Run) -> int:
    """Device memory of ``run`` [bytes] from its input file (0 when it cannot be read)."""
    from sonotile.kwave.reader import read_input
    from sonotile.physics import model_for

    try:
        problem, _ = read_input(run.input, lazy=True)
        return int(model_for(problem).memory_estimate(problem))
    except Exception:  # noqa: BLE001 - a broken input fails in its own run, with its message
        return 0


def plan_slots(
    per_run: str, runs: list[Run], sizes: dict[str, int]
) -> tuple[list[Slot], float | None]:
    """The device subsets (slots) and the host-memory budget for runs in progress."""
    platform, n_gpu, gpu_mem = accelerators()
    biggest = max(sizes.values(), default=0)
    if platform != "cpu":
        if per_run == "auto":
            k = 1
            while gpu_mem and biggest > 0.9 * gpu_mem * k and k < n_gpu:
                k *= 2
            per_run = str(min(k, n_gpu))
        return gpu_slots(n_gpu, int(per_run)), None
    cpus = local_cpus()
    budget: float | None = host_memory_available()
    budget = None if budget is None else 0.8 * budget
    if per_run == "auto":
        many = len(runs) >= len(cpus)
        fits = budget is None or len(cpus) * biggest <= budget
        per_run = "1" if many and fits else str(len(cpus))
    return cpu_slots(cpus, int(per_run)), budget


# --------------------------------------------------------------------------- the batch


def mine(runs: list[Run]) -> tuple[list[Run], int, int]:
    """This process's share of the runs under a launcher (round robin), rank and size."""
    from sonotile.parallel.distributed import detect

    info = detect()
    if info is None:
        return runs, 0, 1
    rank, size = int(info["process_id"]), int(info["num_processes"])
    return runs[rank::size], rank, size


def worker_argv(run: Run, slot: Slot) -> list[str]:
    argv = run.argv()
    if len(slot.gpus) > 1 and "--decomposition" not in run.flags:
        argv += ["--decomposition", "auto"]
    return argv


def state_path(out: Path, run: Run) -> Path:
    return out / STATE / f"{run.name}.json"


def record(out: Path, run: Run, result: dict[str, Any]) -> None:
    """Keep a run's result (for the summary and for resuming)."""
    p = state_path(out, run)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({**result, "input": run.input, "output": run.output})
    files.write_bytes(str(p), text.encode(), "batch state file")


def summary_rows(out: Path, runs: list[Run], skipped: set[str]) -> list[dict[str, Any]]:
    rows = []
    for r in runs:
        p = state_path(out, r)
        row = json.loads(p.read_text()) if p.exists() else {"name": r.name, "status": "missing"}
        if r.name in skipped:
            row = {**row, "status": "done earlier"}
        rows.append({**row, "name": r.name, "output": r.output})
    return rows


def print_summary(rows: list[dict[str, Any]], wall: float) -> None:
    w = max(4, *(len(r["name"]) for r in rows))
    print(f"\n{'run':{w}s}  {'status':12s}  {'time s':>8s}  {'peak MB':>8s}  error")
    for r in rows:
        t = f"{r['wall_s']:8.2f}" if "wall_s" in r else f"{'':8s}"
        m = f"{r['peak_rss_bytes'] / 2**20:8.0f}" if r.get("peak_rss_bytes") else f"{'':8s}"
        print(f"{r['name']:{w}s}  {r['status']:12s}  {t}  {m}  {r.get('error', '')}")
    n_ok = sum(r["status"] in ("ok", "done earlier") for r in rows)
    n = len(rows)
    per_h = 3600 * sum(r["status"] == "ok" for r in rows) / wall if wall > 0 else 0.0
    print(f"{n_ok}/{n} runs done, {n - n_ok} failed; {wall:.1f} s, {per_h:.0f} runs/hour")


def wait_for_ranks(out: Path, size: int, timeout: float = 7 * 24 * 3600) -> None:
    """Process 0 waits for every other process's done marker (shared file system)."""
    t0 = time.time()
    while time.time() - t0 < timeout:
        if all((out / STATE / f"rank-{r}.done").exists() for r in range(1, size)):
            return
        time.sleep(0.5)


def execute(runs: list[Run], out: Path, args: argparse.Namespace) -> int:
    """Run this process's share; returns the exit status of the whole batch."""
    t0 = time.perf_counter()
    share, rank, size = mine(runs)
    skipped = {r.name for r in share if not args.rerun and os.path.exists(r.output)}
    todo = [r for r in share if r.name not in skipped]
    sizes = {r.name: estimate(r) for r in todo}
    slots, budget = plan_slots(str(args.devices_per_run), todo, sizes)
    if args.max_parallel:
        slots = slots[: max(1, args.max_parallel)]
    # sonotile launch prefixes each line with the rank already
    tag = f"[{rank}] " if size > 1 and config.current().num_processes is None else ""
    print(
        f"{tag}sonotile batch: {len(share)} runs ({len(skipped)} done earlier), "
        f"{len(slots)} at once on {', '.join(s.describe() for s in slots)}",
        flush=True,
    )
    count = {"done": 0}

    def on_start(run: Run, slot: Slot) -> None:
        print(f"{tag}  start  {run.name}  ({slot.describe()})", flush=True)

    def on_done(run: Run, result: dict[str, Any]) -> None:
        count["done"] += 1
        record(out, run, result)
        mb = result["peak_rss_bytes"] / 2**20
        msg = f"  {result['error']}" if result["error"] else ""
        print(
            f"{tag}[{count['done']}/{len(todo)}] {result['status']:6s} {run.name}  "
            f"{result['wall_s']:.1f} s  {mb:.0f} MB{msg}",
            flush=True,
        )

    if todo:
        (out / "logs").mkdir(parents=True, exist_ok=True)
        pool = Pool(
            slots, worker_argv, lambda r: str(out / "logs" / f"{r.name}.log"),
            lambda r: sizes.get(r.name, 0), budget,
        )  # fmt: skip
        pool.run_all(todo, on_start, on_done)
    (out / STATE).mkdir(parents=True, exist_ok=True)
    files.write_bytes(str(out / STATE / f"rank-{rank}.done"), b"", "batch state file")
    if rank != 0:
        return 0
    wait_for_ranks(out, size)
    all_skipped = {r.name for r in runs if not args.rerun and r.name in skipped}
    rows = summary_rows(out, runs, all_skipped if size == 1 else skipped)
    wall = time.perf_counter() - t0
    text = json.dumps({"wall_s": wall, "runs": rows}, indent=1)
    files.write_bytes(str(out / "batch-summary.json"), text.encode(), "batch summary")
    print_summary(rows, wall)
    for r in range(1, size):
        (out / STATE / f"rank-{r}.done").unlink(missing_ok=True)
    return 0 if all(r["status"] in ("ok", "done earlier") for r in rows) else 1


def output_folder(spec: str, out: str | None, runs: list[Run]) -> Path:
    """Where the batch keeps its logs, state and summary."""
    if out:
        return Path(out)
    parents = {str(Path(r.output).parent) for r in runs}
    if len(parents) == 1:
        return Path(parents.pop())
    base = Path(spec) if Path(spec).is_dir() else Path(spec).parent
    return base / "out"


def check_paths(runs: list[Run], out: Path) -> None:
    """Before any run: the batch folder a folder (not a link); no output that is an input or
    another run's output; every output, log, state and summary path a regular file or new
    (:func:`sonotile.base.files.check_output_path`); an ``OSError`` or ``ValueError`` naming
    the run and the path otherwise."""
    files.check_output_folder(str(out), "batch folder")
    named: list[tuple[str, str | None]] = [(f"input of run '{r.name}'", r.input) for r in runs]
    for i, r in enumerate(runs):  # one input may serve several runs; an output only one
        others = [(f"output of run '{o.name}'", o.output) for o in runs[:i]]
        for name, p in [*named, *others]:
            if files.same_file(p, r.output):
                raise ValueError(f"output of run '{r.name}' '{r.output}' is the same file as "
                                 f"{name} '{p}': give another path")  # fmt: skip
        if os.path.isdir(os.path.dirname(os.path.abspath(r.output))):
            files.check_output_path(r.output, f"output of run '{r.name}'", named)
    own = [out / "logs" / f"{r.name}.log" for r in runs] + [out / "batch-summary.json"]
    own += [state_path(out, r) for r in runs]
    for own_path in own:
        if own_path.parent.is_dir():
            files.check_output_path(str(own_path), "batch file", named)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    args = parser().parse_args(argv)
    try:
        runs = load(args.spec, args.out, tuple(extra))
    except SpecError as e:
        print(f"sonotile batch: error: {e}", file=sys.stderr)
        return 1
    out = output_folder(args.spec, args.out, runs)
    try:
        check_paths(runs, out)
    except (OSError, ValueError) as e:
        print(f"sonotile batch: error: {e}", file=sys.stderr)
        return 2
    for r in runs:
        Path(r.output).parent.mkdir(parents=True, exist_ok=True)
    try:
        return execute(runs, out, args)
    except KeyboardInterrupt:
        print(
            "sonotile batch: interrupted; finished runs are kept, start the batch again to "
            "run the rest",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
