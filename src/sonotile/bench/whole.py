"""``sonotile bench --whole_run``: sonotile-kwave vs the k-Wave binary as complete processes.

For each case two k-Wave input files are written that differ only in their number of steps
(``N`` and ``3 N``). Each round runs k-Wave and ``sonotile-kwave`` on both, alternating
(k-Wave N, sonotile N, k-Wave 3N, sonotile 3N), and takes the per-step cost of each tool as
``(t(3N) - t(N)) / 2N``: everything a step costs in a real run (time loop, sensor output,
chunk boundaries) and nothing of the fixed start-up (imports, reading, planning, compiling,
writing; a first, unrecorded round fills sonotile's compilation cache and FFTW wisdom for
both files). Three measures are differenced: each tool's own time-loop timer
(``simulation_phase_execution_time`` in its output file), wall time and CPU time (user +
system of the child, from ``wait4``). k-Wave plans its FFTs with FFTW_MEASURE on every run,
which varies by seconds at 256^3, so its wall and CPU differences are noisy there. The report
gives the ratio k-Wave / sonotile per round (> 1: sonotile faster) with its spread, and each
tool's peak RSS.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from sonotile.bench.inprocess import CASES, run_cases, spread, write_input
from sonotile.cliargs import Parser


def run_process(cmd: list[str], env: dict) -> dict:
    """Run ``cmd`` to completion: wall seconds, CPU seconds and peak RSS of the child."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({code}):\n{err[-2000:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_bytes": usage.ru_maxrss * 1024,
    }


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


def compare_case(case: str, args, workdir: str) -> dict:
    n, steps = args.size, args.steps
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    paths = {}
    for k in (1, 3):
        paths[k] = os.path.join(workdir, f"{case}_{n}_{k * steps}.h5")
        write_input(paths[k], case, n, k * steps)
    out = os.path.join(workdir, "out.h5")
    runs: dict = {"kwave": {1: [], 3: []}, "sonotile": {1: [], 3: []}}
    for r in range(-1, args.repeats):  # round -1 warms caches (compiled programs, wisdom)
        for k in (1, 3):
            for tool, cmd in commands(args.kwave_binary, paths[k], out, args.threads).items():
                run = run_process(cmd, env)
                run["loop_s"] = simulation_phase_s(out)
                os.remove(out)
                if r >= 0:
                    runs[tool][k].append(run)
    res: dict = {"case": case, "grid": [n, n, n], "steps": [steps, 3 * steps], "runs": runs}
    for tool in ("kwave", "sonotile"):
        for key in ("wall_s", "cpu_s", "loop_s"):
            per = [(b[key] - a[key]) / (2 * steps) for a, b in zip(runs[tool][1], runs[tool][3])]
            res[f"{tool}_{key[:-2]}_ms_per_step"] = spread([1e3 * x for x in per])
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


def _print(res: dict) -> None:
    n, (s1, s3) = res["grid"][0], res["steps"]
    print(f"{res['case']:20s} {n}^3, {s1} and {s3} steps, differenced per step:")
    for key in ("loop", "wall", "cpu"):
        kw, st = res[f"kwave_{key}_ms_per_step"], res[f"sonotile_{key}_ms_per_step"]
        r = res[f"{key}_ratio_kwave_over_sonotile"]
        ratio = (
            "no round with positive differences: use more steps"
            if r is None
            else f"k-Wave/sonotile {r['median']:.2f} (range {r['min']:.2f}-{r['max']:.2f}, "
            f"{len(r['values'])} rounds)"
        )
        print(
            f"{'':20s} {key:4s}: sonotile {st['median']:8.1f} ms, k-Wave {kw['median']:8.1f} ms;"
            f" {ratio}"
        )
    print(
        f"{'':20s} peak RSS: sonotile {res['sonotile_peak_rss_bytes_per_point']:.0f}, k-Wave "
        f"{res['kwave_peak_rss_bytes_per_point']:.0f} B/point (whole processes)"
    )


def main(argv: list[str]) -> int:
    p = Parser(prog="sonotile bench --whole_run", description=__doc__.split("\n")[0])
    p.add_argument("--kwave_binary", required=True, help="k-Wave binary to compare against")
    p.add_argument("--size", type=int, default=128, help="grid points per axis (default 128)")
    p.add_argument("--steps", type=int, default=20, help="N: runs of N and 3N steps (default 20)")
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated cases (default all)")
    p.add_argument("--threads", type=int, default=None, help="-t for both tools (default all)")
    p.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--json", default="bench_whole.json", help="output JSON file")
    p.add_argument("--workdir", default=None, help="where input files go (default a temp dir)")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad or args.size < 8 or args.steps < 1 or args.repeats < 1:
        print(
            f"sonotile bench --whole_run: need known cases ({list(CASES)}), --size >= 8, "
            "--steps >= 1, --repeats >= 1",
            file=sys.stderr,
        )
        return 2
    if not (os.path.isfile(args.kwave_binary) and os.access(args.kwave_binary, os.X_OK)):
        print(f"sonotile bench --whole_run: {args.kwave_binary} is not an executable file",
              file=sys.stderr)  # fmt: skip
        return 2
    report = {"argv": argv, "threads": args.threads, "cases": []}
    return run_cases(report, cases, lambda c, wd: compare_case(c, args, wd), _print, args)
