"""``sonotile bench``: throughput, compile time and memory of the single-device solver.

For each case a k-Wave input file is written (docs/kwave-format.md, a single-point pressure source
and a few index sensors), read back with sonotile's reader and run in-process:

* ``Mcells/s`` = grid points x steps / wall time of the steps (after compilation),
* ``ms/step``, ``compile_s`` (lower + XLA compile of the scan chunk) and ``first_step_s``
  (plan + compile + one chunk: what a user waits before the solver is at full speed),
* memory: peak process RSS and the compiled program's ``memory_analysis()`` (arguments, outputs,
  aliased = donated bytes, temporaries) as bytes per grid point,
* a breakdown of one step: the step's FFTs alone (same count and sizes, nothing else) versus the
  rest (element-wise work, copies).

``--kwave_binary PATH`` runs k-Wave's ``kspaceFirstOrder-OMP`` on the same input file,
alternating sonotile and k-Wave runs (``--repeats``), and reports the ratios of their step times
(k-Wave's own ``simulation_phase_execution_time``, ours measured around the steps) with their
spread, plus k-Wave's peak RSS per grid point.

``sonotile bench --whole_run --kwave_binary PATH ...`` compares complete ``sonotile-kwave`` and
k-Wave processes instead (runs of N and 3N steps, differenced; :mod:`sonotile.bench.whole`);
``sonotile bench --decompositions ...`` measures the decompositions (:mod:`sonotile.bench.scaling`).

Thread count (``--threads``) is applied before JAX is imported, as in ``sonotile-kwave -t``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from sonotile.base import runtime
from sonotile.base.cliargs import Parser, integer, positive_int, writable_dir
from sonotile.bench.cases import MEDIA, bench_case_problem
from sonotile.bench.report import json_file, write_json
from sonotile.model.problem import Problem

if TYPE_CHECKING:  # JAX is imported after the thread count is set
    import jax


#: the in-process bench's cases: the media, driven by one pressure point (``--source_mode``)
CASES = MEDIA


# --------------------------------------------------------------------------- input files


#: k-Wave's pressure source modes a benchmark input can have (``--source_mode``)
SOURCE_MODES = ("additive_no_correction", "additive")


def bench_problem(
    case: str, n: int, steps: int, source_mode: str = "additive_no_correction"
) -> Problem:
    """The benchmark problem on an ``n^3`` grid: a :data:`sonotile.bench.cases.WHOLE_RUN_CASES`
    name, or ``lossless`` / ``absorbing_nonlinear`` (:data:`CASES`): one pressure source point
    (a 1 kPa, 1 MHz burst, scaled as k-Wave scales it) added without k-space correction, or
    ``source_mode="additive"``: k-space filtered, k-Wave's default; 8 sensor points along x
    (:func:`sonotile.bench.cases.bench_case_problem`)."""
    if case not in CASES:
        return bench_case_problem(case, n, steps)
    if source_mode not in SOURCE_MODES:
        raise ValueError(f"source_mode = {source_mode!r}: expected one of {SOURCE_MODES}")
    return bench_case_problem(f"point_{source_mode}_{case}", n, steps)


def write_input(
    path: str, case: str, n: int, steps: int, source_mode: str = "additive_no_correction"
) -> None:
    """A k-Wave 1.2 input file of :func:`bench_problem` (through the k-Wave writer)."""
    from sonotile.kwave.writer import write_input as write

    problem = bench_problem(case, n, steps, source_mode)
    what = f"{case}, {source_mode} source" if case in CASES else case
    write(path, problem, description=f"sonotile bench {what} {n}^3")


# --------------------------------------------------------------------------- measurement


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a running process (all threads), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def _rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss_now_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _memory(compiled: jax.stages.Compiled) -> dict[str, int]:
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend implements it
        return {}
    if ma is None:
        return {}
    keys = (
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "alias_size_in_bytes",
        "temp_size_in_bytes",
        "generated_code_size_in_bytes",
    )
    out = {k: int(getattr(ma, k, 0) or 0) for k in keys}
    out["peak_bytes"] = (
        out["argument_size_in_bytes"]
        + out["output_size_in_bytes"]
        - out["alias_size_in_bytes"]
        + out["temp_size_in_bytes"]
    )
    return out


class SonotileCase:
    """A case compiled once; :meth:`run` times one scan over all steps from a fresh state."""

    def __init__(self, path: str, steps: int, problem: Problem | None = None) -> None:
        """``path``: a k-Wave input file, read with only ``p`` recorded; or ``problem`` (then
        ``path`` is not read)."""
        import jax

        from sonotile.kwave.reader import read_input
        from sonotile.physics.acoustic import release_host_medium
        from sonotile.solver import runner as rn
        from sonotile.solver import sensors as sens

        self._jax, self._rn, self._sens = jax, rn, sens
        t0 = time.perf_counter()
        if problem is None:
            problem, _ = read_input(path, record=("p",))
        self.problem = problem
        self.cp = cp = rn.compile_problem(problem)
        jax.block_until_ready((cp.consts, cp.ops))
        self.xs = rn.step_inputs(problem, 0, steps)
        release_host_medium(problem)  # as sonotile-kwave does
        t1 = time.perf_counter()
        g, dt = problem.grid, jax.numpy.dtype(problem.dtype)
        carry = jax.eval_shape(  # shapes only: no second state alive during the first run
            lambda: (cp.phys.zero_state(g.shape, dt), sens.init_aggregates(cp.layout, g.shape, dt))
        )
        self.carry_shape = carry
        lowered = rn.run_chunk.lower(
            carry, self.xs, cp.consts, cp.ops, cp.index, phys=cp.phys, layout=cp.layout
        )
        self.compiled = lowered.compile()
        t2 = time.perf_counter()
        self.plan_s, self.compile_s = t1 - t0, t2 - t1
        self.memory = _memory(self.compiled)
        self.steps = steps
        self.first_run_s = self.run()
        self.first_step_s = self.plan_s + self.compile_s + self.first_run_s / steps

    def _carry(self) -> tuple[Any, dict[str, jax.Array]]:
        g, dtype = self.problem.grid, self._jax.numpy.dtype(self.problem.dtype)
        carry = (
            self.cp.phys.zero_state(g.shape, dtype),
            self._sens.init_aggregates(self.cp.layout, g.shape, dtype),
        )
        return self._jax.block_until_ready(carry)

    def run(self) -> float:
        """Seconds for all steps (fresh zero state, samples copied to the host); the CPU
        seconds of the process over the same interval go to ``self.last_cpu_s``."""
        carry = self._carry()
        cp = self.cp
        c0, t0 = _cpu_s(), time.perf_counter()
        carry, raw = self.compiled(carry, self.xs, cp.consts, cp.ops, cp.index)
        self._jax.block_until_ready(carry)
        {k: np.asarray(v) for k, v in raw.items()}
        t1, c1 = time.perf_counter(), _cpu_s()
        self.last_cpu_s = c1 - c0
        return t1 - t0


def fft_breakdown(
    shape: tuple[int, ...], absorbing: bool, steps: int, dtype: str = "float32"
) -> Callable[[], float]:
    """A callable timing the step's FFTs alone (seconds per step): the same R2C/C2R transforms
    (4 + 6, or 6 + 8 with power-law absorption) on the solver's FFT backend (FFTW custom calls
    when ``FourierOps`` would use them, else XLA's FFT) with only a scalar scaling between them
    (distinct per transform, so that XLA cannot merge identical ones)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from sonotile.fft import backend as fft_backend
    from sonotile.fft import fftw

    nd = len(shape)
    if fft_backend.chooses("fftw", dtype, "auto"):

        def fwd(x: jax.Array) -> jax.Array:
            return fftw.r2c(x)

        # the scaling applied in the handler's copy, as the solver's operators
        def inv(X: jax.Array, c: float) -> jax.Array:
            v = jnp.full((shape[0],), c, jnp.complex64)
            return fftw.c2r(X, shape, vec=v)
    else:

        def fwd(x: jax.Array) -> jax.Array:
            return jnp.fft.rfftn(x)

        def inv(X: jax.Array, c: float) -> jax.Array:
            return jnp.fft.irfftn(X * c, s=shape)

    Carry = tuple[jax.Array, tuple[jax.Array, ...]]  # (p, u)

    def body(carry: Carry, _: None) -> tuple[Carry, None]:
        p, u = carry
        P = fwd(p)
        g = tuple(inv(P, 1.0 + i) for i in range(nd))
        d = tuple(inv(fwd(ua), 0.5) for ua in u)
        q = sum(d[1:], d[0])
        if absorbing:
            q = inv(fwd(q), 0.3) + inv(fwd(p), 0.2)
        return (q, g), None

    f = jax.jit(lambda c: lax.scan(body, c, None, length=steps)[0])
    carry = (jnp.ones(shape, dtype), tuple(jnp.ones(shape, dtype) for _ in range(nd)))
    jax.block_until_ready(f(carry))

    def timed() -> float:
        t0 = time.perf_counter()
        jax.block_until_ready(f(carry))
        return (time.perf_counter() - t0) / steps

    return timed


def run_kwave(binary: str, path: str, threads: int | None, workdir: str) -> dict:
    """Run the k-Wave binary on ``path``; its own timings and peak RSS (from wait4)."""
    import h5py

    out = os.path.join(workdir, "kwave_out.h5")
    cmd = [binary, "-i", path, "-o", out, "-p"]
    env = dict(os.environ)
    if threads:
        cmd += ["-t", str(threads)]
        env["OMP_NUM_THREADS"] = str(threads)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    # k-Wave flushes its log: CPU time of the time loop = between the progress table header
    # and the next "Elapsed time" line (robust to time slicing, unlike wall time)
    lines, cpu0, cpu1, hwm = [], None, None, 0
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        lines.append(line)
        # the new image's VmHWM: the child's ru_maxrss also counts the forked parent's pages
        hwm = max(hwm, runtime.peak_rss_bytes(proc.pid) or 0)
        if cpu0 is None and "Progress" in line:
            cpu0 = _proc_cpu_s(proc.pid)
        elif cpu0 is not None and cpu1 is None and "Elapsed time" in line:
            cpu1 = _proc_cpu_s(proc.pid)
    stdout = "".join(lines).encode()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} failed ({proc.returncode}):\n{stdout.decode()[-2000:]}")
    with h5py.File(out, "r") as f:

        def attr(k: str) -> float:
            v = f.attrs[k]
            return float(v.decode().strip().rstrip("s"))

        sim = attr("simulation_phase_execution_time")
        pre = attr("pre-processing_phase_execution_time")
        mem_mb = float(f.attrs["total_memory_in_use"].decode().split()[0])
    os.remove(out)
    return {
        "simulation_s": sim,
        "preprocessing_s": pre,
        "wall_s": wall,
        "peak_rss_bytes": hwm,
        "total_memory_in_use_MB": mem_mb,  # its getrusage: includes the forked parent's pages
        "simulation_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
        "process_cpu_s": usage.ru_utime + usage.ru_stime,
    }


def spread(xs: list[float]) -> dict:
    return {
        "median": statistics.median(xs),
        "min": min(xs),
        "max": max(xs),
        "values": xs,
    }


# --------------------------------------------------------------------------- command line


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="sonotile bench",
        description=__doc__.split("\n")[0],
        epilog="sonotile bench --whole_run -h: complete processes vs k-Wave; "
        "sonotile bench --profile -h: each pass at 1 and N threads; "
        "sonotile bench --decompositions -h: the decompositions",
    )
    p.add_argument(
        "--size", type=integer(8), default=128, help="grid points per axis (default 128)"
    )
    p.add_argument("--steps", type=positive_int, default=50, help="time steps per run (default 50)")
    p.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"comma-separated cases from {', '.join(CASES)} (default all)",
    )
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads (default all)")
    p.add_argument(
        "--repeats", type=positive_int, default=3, help="timed runs per case (default 3)"
    )
    p.add_argument("--json", type=json_file, default="bench.json",
                   help="output JSON file (default bench.json)")  # fmt: skip
    p.add_argument("--kwave_binary", default=None, help="k-Wave binary to compare against")
    p.add_argument("--no_breakdown", action="store_true", help="skip the FFT-only timing")
    p.add_argument("--workdir", type=writable_dir, default=None,
                   help="an existing folder for the input files (default a temp dir)")  # fmt: skip
    return p


def machine() -> dict:
    model = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count()
    return {"cpu": model, "cpus_usable": cpus, "cpu_count": os.cpu_count()}


def bench_case(case: str, args: argparse.Namespace, workdir: str) -> dict:
    import jax

    n, steps = args.size, args.steps
    path = os.path.join(workdir, f"bench_{case}_{n}.h5")
    write_input(path, case, n, steps)
    cells = n**3
    sc = SonotileCase(path, steps)
    res: dict = {
        "case": case,
        "description": CASES[case],
        "grid": [n, n, n],
        "steps": steps,
        "plan_s": sc.plan_s,
        "compile_s": sc.compile_s,
        "first_step_s": sc.first_step_s,
        "memory_analysis": sc.memory,
    }
    mem = sc.memory
    if mem:
        res["bytes_per_point_compiled"] = mem["peak_bytes"] / cells
    fft = None
    if not args.no_breakdown:
        fft = fft_breakdown(sc.problem.grid.shape, case != "lossless", steps)
    # round-robin: sonotile, FFTs alone, k-Wave; load from other processes hits all alike
    ours, cpus, ffts, kw = [], [], [], []
    for _ in range(args.repeats):
        ours.append(sc.run())
        cpus.append(sc.last_cpu_s)
        if fft is not None:
            ffts.append(fft())
        if args.kwave_binary:
            kw.append(run_kwave(args.kwave_binary, path, args.threads, workdir))
    per_step = [t / steps for t in ours]
    res["ms_per_step"] = spread([1e3 * t for t in per_step])
    res["mcells_per_s"] = spread([cells / t / 1e6 for t in per_step])
    res["cpu_ms_per_step"] = spread([1e3 * c / steps for c in cpus])
    if ffts:
        frac = [f / o for f, o in zip(ffts, per_step)]
        res["breakdown_ms_per_step"] = {
            "ffts": spread([1e3 * f for f in ffts]),
            "rest": spread([1e3 * (o - f) for f, o in zip(ffts, per_step)]),
            "fft_fraction": spread(frac),
        }
    res["peak_rss_bytes"] = _rss_peak_bytes()
    res["rss_now_bytes"] = _rss_now_bytes()
    res["bytes_per_point_rss"] = res["peak_rss_bytes"] / cells
    base = getattr(args, "rss_baseline", 0)
    res["bytes_per_point_rss_above_runtime"] = (res["peak_rss_bytes"] - base) / cells
    if kw:
        res.update(_kwave_figures(kw, per_step, cpus, steps, cells))
    del sc
    jax.clear_caches()
    return res


def _kwave_figures(kw: list, per_step: list, cpus: list, steps: int, cells: int) -> dict:
    """k-Wave's figures beside ours: its step time, memory and the per-pair speed ratios."""
    # k-Wave prints 2 decimals: a 0.00 s run is below its resolution
    sim = [(k["simulation_s"] or float("nan")) / steps for k in kw]
    ratios = [k / o for k, o in zip(sim, per_step)]  # > 1: sonotile faster
    out: dict = {
        "kwave": {
            "ms_per_step": spread([1e3 * t for t in sim]),
            "mcells_per_s": spread([cells / t / 1e6 for t in sim]),
            "preprocessing_s": spread([k["preprocessing_s"] for k in kw]),
            "peak_rss_bytes": max(k["peak_rss_bytes"] for k in kw),
            "bytes_per_point_rss": max(k["peak_rss_bytes"] for k in kw) / cells,
            "runs": kw,
        },
        "speed_ratio_sonotile_over_kwave": spread(ratios),
        "speed_ratio_of_best": min(sim) / min(per_step),
    }
    kcpu = [k["simulation_cpu_s"] for k in kw]
    # a run too short for k-Wave to print its progress table gives no CPU interval (0)
    if all(c is not None and c > 0 for c in kcpu):
        out["kwave"]["cpu_ms_per_step"] = spread([1e3 * c / steps for c in kcpu])
        # CPU seconds per step, k-Wave over sonotile (> 1: sonotile does less work)
        out["cpu_ratio_kwave_over_sonotile"] = spread([k / c for k, c in zip(kcpu, cpus) if c > 0])
    return out


def _print(res: dict) -> None:
    ms, mc = res["ms_per_step"], res["mcells_per_s"]
    print(
        f"{res['case']:20s} {res['grid'][0]}^3 x {res['steps']}: {mc['median']:7.1f} Mcells/s "
        f"({ms['median']:.1f} ms/step, range {ms['min']:.1f}-{ms['max']:.1f}), compile "
        f"{res['compile_s']:.1f} s, first step after {res['first_step_s']:.1f} s"
    )
    if "bytes_per_point_compiled" in res:
        m = res["memory_analysis"]
        print(
            f"{'':20s} memory: {res['bytes_per_point_compiled']:.0f} B/point compiled "
            f"(args {m['argument_size_in_bytes'] / 2**20:.0f} MiB, out "
            f"{m['output_size_in_bytes'] / 2**20:.0f} MiB, aliased "
            f"{m['alias_size_in_bytes'] / 2**20:.0f} MiB, temp "
            f"{m['temp_size_in_bytes'] / 2**20:.0f} MiB), process peak RSS "
            f"{res['peak_rss_bytes'] / 2**20:.0f} MiB "
            f"({res['bytes_per_point_rss_above_runtime']:.0f} B/point above the JAX runtime)"
        )
    if "breakdown_ms_per_step" in res:
        b = res["breakdown_ms_per_step"]
        print(
            f"{'':20s} per step: FFTs alone {b['ffts']['median']:.1f} ms, "
            f"{100 * b['fft_fraction']['median']:.0f}% of the step (range "
            f"{100 * b['fft_fraction']['min']:.0f}-{100 * b['fft_fraction']['max']:.0f}%), "
            f"rest {b['rest']['median']:.1f} ms"
        )
    if "kwave" in res:
        k, r = res["kwave"], res["speed_ratio_sonotile_over_kwave"]
        print(
            f"{'':20s} k-Wave: {k['mcells_per_s']['median']:7.1f} Mcells/s "
            f"({k['ms_per_step']['median']:.1f} ms/step), peak RSS "
            f"{k['bytes_per_point_rss']:.0f} B/point; speed sonotile/k-Wave "
            f"{r['median']:.2f} (range {r['min']:.2f}-{r['max']:.2f}, {len(r['values'])} pairs; "
            f"best/best {res['speed_ratio_of_best']:.2f})"
        )
        if "cpu_ratio_kwave_over_sonotile" in res:
            c = res["cpu_ratio_kwave_over_sonotile"]
            print(
                f"{'':20s} CPU per step: sonotile {res['cpu_ms_per_step']['median']:.1f} ms, "
                f"k-Wave {k['cpu_ms_per_step']['median']:.1f} ms; k-Wave/sonotile "
                f"{c['median']:.2f} (range {c['min']:.2f}-{c['max']:.2f})"
            )


def main(argv: list[str] | None = None) -> int:
    """The in-process bench of the cases (``sonotile bench`` without a mode flag)."""
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad:
        print(f"sonotile bench: unknown case(s) {bad}; known: {list(CASES)}", file=sys.stderr)
        return 2
    if args.size < 8 or args.steps < 1 or args.repeats < 1:
        print("sonotile bench: need --size >= 8, --steps >= 1, --repeats >= 1", file=sys.stderr)
        return 2
    from sonotile.base.runtime import configure_threads

    configure_threads(args.threads)
    import jax

    jax.numpy.zeros(1).block_until_ready()
    args.rss_baseline = _rss_now_bytes()  # the JAX runtime alone, subtracted per point
    report = {
        "rss_runtime_baseline_bytes": args.rss_baseline,
        "machine": machine(),
        "jax": jax.__version__,
        "device": str(jax.devices()[0]),
        "threads": args.threads,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "argv": list(sys.argv[1:] if argv is None else argv),
        "cases": [],
    }
    return run_cases(report, cases, lambda c, wd: bench_case(c, args, wd), _print, args)


def run_cases(
    report: dict[str, Any],
    cases: list[str],
    run_one: Callable[[str, str], dict],
    show: Callable[[dict], None],
    args: argparse.Namespace,
    finish: Callable[[dict[str, Any]], None] | None = None,
) -> int:
    """``run_one(case, workdir)`` for each case (input files in a temporary folder under
    ``args.workdir``), each result printed by ``show`` and appended to ``report["cases"]``;
    ``finish(report)`` last (a summary), then the report is written to ``args.json``."""
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        for case in cases:
            res = run_one(case, workdir)
            show(res)
            report["cases"].append(res)
    if finish is not None:
        finish(report)
    write_json(args.json, report)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
