"""``sonotile bench --whole_run``: sonotile-kwave vs the k-Wave binary as complete processes.

For each case two k-Wave input files are written that differ only in their number of steps
(``N`` and ``3 N``). Each round runs k-Wave and ``sonotile-kwave`` on both, alternating
(k-Wave N, sonotile N, k-Wave 3N, sonotile 3N; the next round sonotile first, see
:func:`run_order`), and takes the per-step cost of each tool as
``(t(3N) - t(N)) / 2N``: everything a step costs in a real run (time loop, sensor output,
chunk boundaries) and nothing of the fixed start-up (imports, reading, planning, compiling,
writing; a first, unrecorded round fills sonotile's compilation cache and FFTW wisdom for
both files). Three measures are differenced: each tool's own time-loop timer
(``simulation_phase_execution_time`` in its output file), wall time and CPU time (user +
system of the child, from ``wait4``). k-Wave plans its FFTs with FFTW_MEASURE on every run,
which varies by seconds at 256^3, so its wall and CPU differences are noisy there. The report
gives the ratio k-Wave / sonotile per round (> 1: sonotile faster) with its spread, and each
tool's peak RSS.

The headline is the whole run as a user waits for it: the ratio of the two processes' wall
times on the ``3 N`` file (start-up, planning and compilation included) and of their own
time-loop timers (sonotile's includes compiling the step, k-Wave's has nothing to compile),
per round. Each tool's fixed cost (``(3 t(N) - t(3N)) / 2``: imports, reading, planning,
compiling, writing) is its own column. ``--first-step`` also times ``sonotile-kwave
--benchmark 1`` on the ``N`` file with a fresh (cold) and a filled (warm) compilation cache:
the whole process up to and including one step, an upper bound of the time to first step.
The load average is recorded before every round. ``--threads 1,2`` runs every case at each
thread count in turn (one report line per case and count).

The cases (``--case``, :data:`sonotile.bench.cases.WHOLE_RUN_CASES`) are the inputs users run:
the initial value problem, one point in either additive mode, a linear array with a signal per
element, each lossless and heterogeneous absorbing nonlinear. The report ends with the
headline: the lowest cell (case and thread count) by the median whole-run ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

from sonotile.base import runtime
from sonotile.base.cliargs import INT_MAX, Parser, integer, positive_int, writable_dir
from sonotile.bench.cases import WHOLE_RUN_CASES
from sonotile.bench.inprocess import CASES, SOURCE_MODES, run_cases, spread, write_input
from sonotile.bench.report import json_file

#: every case name ``--cases`` takes: the named cases, and the two media driven by one point in
#: the mode ``--source_mode`` gives
KNOWN_CASES = {**WHOLE_RUN_CASES, **CASES}
#: Where the report goes without ``--out``: a folder of its own under the current folder.
DEFAULT_OUT = ("sonotile-bench", "bench_whole.json")

# Each run is started by a small launcher process that times it and waits for it: Linux counts
# in a process's peak RSS the memory of the process it was forked from, so a tool started by
# the bench itself (which holds the inputs it wrote: 172 B/point after the 128^3 absorbing
# case's) reported at least the bench's peak RSS.
_LAUNCHER = """import os, subprocess, sys, time
t = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(p.pid, 0)
wall = time.perf_counter() - t
code = os.waitstatus_to_exitcode(status)
print(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, code)
"""


def run_process(cmd: list[str], env: dict) -> dict:
    """Run ``cmd`` to completion: wall seconds, CPU seconds and peak RSS of the child (through
    a launcher process of a few MB, see ``_LAUNCHER``)."""
    launcher = [sys.executable, "-S", "-c", _LAUNCHER, *cmd]
    proc = subprocess.run(launcher, capture_output=True, env=env, check=False)
    err = proc.stderr.decode(errors="replace")
    fields = proc.stdout.decode().split()
    if proc.returncode != 0 or len(fields) != 4 or fields[3] != "0":
        code = fields[3] if len(fields) == 4 else proc.returncode
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{err[-2000:]}")
    wall, cpu, rss_kb = float(fields[0]), float(fields[1]), int(fields[2])
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": rss_kb * 1024}


def simulation_phase_s(path: str) -> float:
    """The output file's ``simulation_phase_execution_time`` [s]: the time loop as each tool
    measures it (k-Wave's excludes its FFTW planning, whose FFTW_MEASURE time varies by seconds
    between runs and so does not cancel in the wall-time difference)."""
    import h5py

    with h5py.File(path, "r") as f:
        return float(f.attrs["simulation_phase_execution_time"].decode().strip().rstrip("s"))


def commands(kwave: str, path: str, out: str, threads: int | None) -> dict:
    """The two command lines for one input file (same flags: pressure at the sensors)."""
    flags = ["-i", path, "-o", out, "-p"] + (["-t", str(threads)] if threads else [])
    sonotile = [sys.executable, "-m", "sonotile.kwave.cli"]
    return {"kwave": [kwave, *flags], "sonotile": [*sonotile, *flags]}


def run_order(round_index: int) -> tuple[str, str]:
    """The tools of round ``round_index`` in the order they run: k-Wave first in even rounds,
    sonotile first in odd ones. On the 2-core machines measured, the first of two back-to-back
    processes ran up to ~7 % faster than the second (the same program both times), so a
    fixed order would favour one tool."""
    return ("kwave", "sonotile") if round_index % 2 == 0 else ("sonotile", "kwave")


def compare_case(
    case: str, args: argparse.Namespace, workdir: str, threads: int | None = None
) -> dict:
    """Rounds of both tools on one case at ``threads`` (-t for both; None: their defaults)."""
    n, steps = args.size, args.steps
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    paths = {}
    for k in (1, 3):
        paths[k] = os.path.join(workdir, f"{case}_{n}_{k * steps}.h5")
        write_input(paths[k], case, n, k * steps, args.source_mode)
    out = os.path.join(workdir, "out.h5")
    runs: dict = {"kwave": {1: [], 3: []}, "sonotile": {1: [], 3: []}}
    loads = []
    for r in range(-1, args.repeats):  # round -1 warms caches (compiled programs, wisdom)
        loads.append(os.getloadavg()[0])
        for k in (1, 3):
            cmds = commands(args.kwave_binary, paths[k], out, threads)
            for tool in run_order(r):
                run = run_process(cmds[tool], env)
                run["loop_s"] = simulation_phase_s(out)
                os.remove(out)
                if r >= 0:
                    runs[tool][k].append(run)
    res: dict = {"case": case, "grid": [n, n, n], "steps": [steps, 3 * steps], "runs": runs}
    res["description"] = KNOWN_CASES[case]
    res["source_mode"] = args.source_mode if case in CASES else None
    res["threads"] = threads
    res["load_average_1min"] = spread(loads)
    res.update(differenced(runs, steps, n))
    res.update(whole_ratios(runs, steps))
    if args.first_step:
        res["first_step_s"] = first_step(paths[1], out, threads, env)
    return res


def differenced(runs: dict, steps: int, n: int) -> dict:
    """Per-step costs ``(t(3N) - t(N)) / 2N`` and fixed costs ``(3 t(N) - t(3N)) / 2`` of each
    tool and measure, the per-round ratios of the per-step costs, and peak RSS per point."""
    res: dict = {}
    for tool in ("kwave", "sonotile"):
        for key in ("wall_s", "cpu_s", "loop_s"):
            pairs = list(zip(runs[tool][1], runs[tool][3]))
            per = [(b[key] - a[key]) / (2 * steps) for a, b in pairs]
            res[f"{tool}_{key[:-2]}_ms_per_step"] = spread([1e3 * x for x in per])
            fixed = [(3 * a[key] - b[key]) / 2 for a, b in pairs]
            res[f"{tool}_{key[:-2]}_fixed_s"] = spread(fixed)
        res[f"{tool}_peak_rss_bytes_per_point"] = (
            max(r["peak_rss_bytes"] for r in runs[tool][3]) / n**3
        )
    for key in ("wall", "cpu", "loop"):
        kw = res[f"kwave_{key}_ms_per_step"]["values"]
        st = res[f"sonotile_{key}_ms_per_step"]["values"]
        # a round whose differences are not positive (steps too short against the start-up's
        # spread, or below k-Wave's 10 ms timer resolution) gives no ratio
        ratios = [k / s for k, s in zip(kw, st) if k > 0 and s > 0]
        res[f"{key}_ratio_kwave_over_sonotile"] = spread(ratios) if ratios else None
    return res


def whole_ratios(runs: dict, steps: int) -> dict:
    """k-Wave / sonotile of whole runs of ``N`` and ``3 N`` steps, per round: wall and CPU time
    of the processes and each tool's time-loop timer (sonotile's includes compiling the step).
    CPU time does not grow with the machine's load when one thread is used."""
    res: dict = {}
    for k in (1, 3):
        for key in ("wall_s", "cpu_s", "loop_s"):
            pairs = zip(runs["kwave"][k], runs["sonotile"][k])
            ratios = [a[key] / b[key] for a, b in pairs if b[key] > 0]
            res[f"whole_{k * steps}_{key[:-2]}_ratio_kwave_over_sonotile"] = spread(ratios)
            for tool in ("kwave", "sonotile"):
                res[f"{tool}_whole_{k * steps}_{key}"] = spread([r[key] for r in runs[tool][k]])
    return res


def first_step(path: str, out: str, threads: int | None, env: dict) -> dict:
    """Wall seconds of ``sonotile-kwave --benchmark 1`` (imports, reading, planning, compiling
    or loading the compiled step, one step, writing): with an empty compilation cache (cold),
    then twice with the cache that run filled (warm). FFTW's wisdom is kept (warm) in both."""
    cmd = commands("", path, out, threads)["sonotile"] + ["--benchmark", "1"]
    with tempfile.TemporaryDirectory() as cache:
        env = {**env, "JAX_COMPILATION_CACHE_DIR": cache}
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = str(runtime.MIN_COMPILE_S)  # as ours
        walls = []
        for _ in range(3):
            walls.append(run_process(cmd, env)["wall_s"])
            os.remove(out)
    return {"cold": walls[0], "warm": spread(walls[1:])}


def _ratio_text(r: dict | None) -> str:
    if r is None:
        return "no round with positive differences: use more steps"
    return f"{r['median']:.2f} (range {r['min']:.2f}-{r['max']:.2f}, {len(r['values'])} rounds)"


def _print(res: dict) -> None:
    n, (s1, s3) = res["grid"][0], res["steps"]
    load = res["load_average_1min"]
    t = res.get("threads")
    t_text = "default threads" if t is None else f"-t {t}"
    mode = f", {res['source_mode']} source" if res.get("source_mode") else ""
    print(
        f"{res['case']:20s} {n}^3, {t_text}{mode}, load average {load['min']:.1f}-{load['max']:.1f}"
    )
    for k in (s1, s3):
        sw, kw = res[f"sonotile_whole_{k}_wall_s"], res[f"kwave_whole_{k}_wall_s"]
        print(
            f"{'':20s} whole run of {k} steps: wall sonotile {sw['median']:.2f} s, k-Wave "
            f"{kw['median']:.2f} s; k-Wave/sonotile:"
        )
        for m in ("wall", "cpu", "loop"):
            r = res[f"whole_{k}_{m}_ratio_kwave_over_sonotile"]
            print(f"{'':24s} {m:4s} {_ratio_text(r)}")
    print(f"{'':20s} differenced ({s1} and {s3} steps) per step, and fixed cost per run:")
    for key in ("loop", "wall", "cpu"):
        kw, st = res[f"kwave_{key}_ms_per_step"], res[f"sonotile_{key}_ms_per_step"]
        kf, sf = res[f"kwave_{key}_fixed_s"], res[f"sonotile_{key}_fixed_s"]
        print(
            f"{'':20s} {key:4s}: sonotile {st['median']:8.1f} ms + {sf['median']:5.2f} s, k-Wave "
            f"{kw['median']:8.1f} ms + {kf['median']:5.2f} s; k-Wave/sonotile per step "
            f"{_ratio_text(res[f'{key}_ratio_kwave_over_sonotile'])}"
        )
    print(
        f"{'':20s} peak RSS: sonotile {res['sonotile_peak_rss_bytes_per_point']:.0f}, k-Wave "
        f"{res['kwave_peak_rss_bytes_per_point']:.0f} B/point (whole processes)"
    )
    if "first_step_s" in res:
        fs = res["first_step_s"]
        print(
            f"{'':20s} sonotile-kwave --benchmark 1 (whole process): cold cache "
            f"{fs['cold']:.2f} s, warm {fs['warm']['median']:.2f} s"
        )


def parser() -> Parser:
    p = Parser(prog="sonotile bench --whole_run", description=__doc__.split("\n")[0])
    p.add_argument("--kwave_binary", required=True, help="k-Wave binary to compare against")
    p.add_argument(
        "--size", type=integer(8), default=128, help="grid points per axis (default 128)"
    )
    p.add_argument(
        "--steps", type=positive_int, default=100, help="N: runs of N and 3N steps (default 100)"
    )
    p.add_argument("--cases", "--case", default=",".join(WHOLE_RUN_CASES),
                   help=f"comma-separated cases from {', '.join(WHOLE_RUN_CASES)}, or "
                   f"{' / '.join(CASES)} (one point, --source_mode); default all named "
                   "ones")  # fmt: skip
    p.add_argument("--threads", type=thread_counts, default=None,
                   help="-t for both tools, or a comma-separated list run one after the other "
                   "(e.g. 1,2; default: each tool's own default, all CPUs)")  # fmt: skip
    p.add_argument("--repeats", type=positive_int, default=3, help="rounds (default 3)")
    p.add_argument("--source_mode", choices=SOURCE_MODES, default=SOURCE_MODES[0],
                   help="the k-Wave mode of the point of the cases lossless and "
                   "absorbing_nonlinear (default additive_no_correction; additive: filtered in "
                   "k-space, k-Wave's default)")  # fmt: skip
    p.add_argument(
        "--first-step", action="store_true", help="also time sonotile-kwave --benchmark 1"
    )
    p.add_argument("--out", "--json", dest="json", type=json_file,
                   default=os.path.join(*DEFAULT_OUT),
                   help="output JSON file, its folder made if need be (default "
                   f"{'/'.join(DEFAULT_OUT)} under the current folder)")  # fmt: skip
    p.add_argument("--workdir", type=writable_dir, default=None,
                   help="an existing folder for the input files (default a temp dir)")  # fmt: skip
    return p


def main(argv: list[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in KNOWN_CASES]
    if bad or args.size < 8 or args.steps < 1 or args.repeats < 1:
        print(
            f"sonotile bench --whole_run: need known --cases (got {bad or cases}; known: "
            f"{', '.join(KNOWN_CASES)}), --size >= 8, --steps >= 1, --repeats >= 1",
            file=sys.stderr,
        )
        return 2
    if not (os.path.isfile(args.kwave_binary) and os.access(args.kwave_binary, os.X_OK)):
        print(f"sonotile bench --whole_run: {args.kwave_binary} is not an executable file",
              file=sys.stderr)  # fmt: skip
        return 2
    report = {"argv": argv, "threads": args.threads, "cases": []}
    jobs = {f"{c} -t {t}": (c, t) for t in (args.threads or [None]) for c in cases}
    return run_cases(
        report, list(jobs), lambda j, wd: compare_case(jobs[j][0], args, wd, jobs[j][1]),
        _print, args, finish=_headline,
    )  # fmt: skip


def headline(cells: list[dict]) -> dict | None:
    """The lowest cell: the case and thread count whose whole run of ``3 N`` steps has the
    lowest median k-Wave / sonotile wall-time ratio (the figure a summary may quote)."""
    rows = []
    for c in cells:
        r = c.get(f"whole_{c['steps'][1]}_wall_ratio_kwave_over_sonotile")
        if r and r["values"]:
            rows.append((r["median"], c, r))
    if not rows:
        return None
    med, c, r = min(rows, key=lambda row: row[0])
    return {"case": c["case"], "threads": c["threads"], "grid": c["grid"], "steps": c["steps"][1],
            "whole_wall_ratio_kwave_over_sonotile": r}  # fmt: skip


def _headline(report: dict) -> None:
    """Adds the lowest cell to the report and prints it last."""
    h = report["headline"] = headline(report["cases"])
    if h is not None:
        t = "default threads" if h["threads"] is None else f"-t {h['threads']}"
        ratio = _ratio_text(h["whole_wall_ratio_kwave_over_sonotile"])
        print(
            f"headline (lowest cell): k-Wave/sonotile {ratio} for the whole run of "
            f"{h['steps']} steps, {h['case']} {h['grid'][0]}^3, {t}"
        )


def thread_counts(text: str) -> list[int]:
    """``--threads``: one positive count or a comma-separated list of them."""
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or max(counts) > INT_MAX:
        raise argparse.ArgumentTypeError(f"{text!r}: expected positive integers, e.g. 2 or 1,2")
    return counts
