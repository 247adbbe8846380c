"""Every GPU figure of sonotile in one call, written to one results file.

    python benchmarks/gpu_check.py RESULTS.json [--kwave-binary PATH] [--budget-s 480]
    python benchmarks/gpu_check.py RESULTS.json --dry-run      # every part, tiny sizes, on CPU

``benchmarks/gpu_check.sh`` is the one command for the GPU machine (docs/gpu.md). Each part runs
in a process of its own under a time cap (a part that overruns is killed and recorded as
``"timeout"``; a crash is recorded with its error), so one part cannot take the others down, the
device memory of each measurement is its own, and RESULTS.json is rewritten after every part
(and every measurement inside the longer ones): a killed run still leaves what it had.

Parts, in the order they run:

* ``env``: device, driver, CUDA/JAX/plugin versions, command, date; a device-to-device copy's
  bandwidth (bytes read + written per second).
* ``reference``: every k-Wave reference case of ``tests/data/kwave-reference`` through
  ``sonotile-kwave`` on the default device, compared with kspaceFirstOrder-OMP's output by the
  rule of that folder's README (:mod:`sonotile.kwave.compare`), plus a control: our output with
  one sample moved by 1e-3 of its peak must fail the same comparison.
* ``throughput``: ``sonotile bench``'s lossless and heterogeneous absorbing nonlinear inputs at
  each size: Mcells/s, ms/step, plan/compile/first-step times, peak device memory per grid point
  and the compiled program's memory; k-Wave's CUDA solver on the same input file right after.
* ``kwave_reference``: k-Wave's CUDA solver on the reference cases against the OMP outputs
  (how far k-Wave's own GPU float32 lands from its CPU float32).
* ``profile``: one absorbing step: XLA's optimised HLO (size, fusions, FFTs, copies, HLO dump
  size), XLA's bytes-accessed count per grid point per step against the measured copy bandwidth
  and the card's nominal one, and the kernels' times from ``jax.profiler``.
* ``step_compare``: the unstacked step (XLA's FFT) and the stacked step on cuFFT through XLA's
  FFI (:mod:`sonotile.bench.step_compare`; the library built alongside by ``gpu_check.sh``) on
  the same input at 256^3 and 512^3: ms/step, bytes per point, drift between them, k-Wave CUDA.
* ``whole_step``: ``sonotile-kwave`` as whole processes on the throughput part's lossless and
  absorbing inputs at 256^3 with ``SONOTILE_STEP=plain`` and ``stacked``, each on XLA's FFT and
  (where the library is built) ``SONOTILE_FFT=cufft`` (:mod:`sonotile.bench.step_runs`): wall
  and loop time, cold and warm compilation cache, what ran, drift from the plain step's output.
* ``largest``: the largest cubic grid that runs, per case, for sonotile (in-memory problems) and
  k-Wave CUDA: a prediction from the measured peak memory per point, then 10 % steps up to the
  first size that fails and bisection between, until the part's time cap.
* ``gradients``: ``make_simulator`` forward and ``jax.value_and_grad`` at 128^3: compile time,
  run time, peak device memory.
* ``parallel``: the pencil and lfb code paths on a mesh of one device against the single-device
  run of the same problem.
* ``models``: the elastic step (Kelvin-Voigt, lossless, slip interface) and the heat step
  (homogeneous, one conductivity, heterogeneous, insulating and conducting faces) against the
  acoustic absorbing step on the same grid (``benchmarks/elastic/elastic_step.py``,
  ``benchmarks/heat/heat_step.py``): ms/step and the ratio.
* ``cpu_scaling``: the host's CPU cores: sonotile-kwave and k-Wave's OMP solver (built from
  ``.gpu-carry/`` by ``kwave_omp_build.sh``) at 1-16 threads on the same inputs, alternating:
  loop time per step, whole run, peak RSS, parallel efficiency (:mod:`sonotile.bench.threads`);
  after both k-Wave builds have ended.
* ``mpi_one_gpu``: two MPI ranks sharing the one GPU through the MPI transport (its messages
  staged through host memory), LFB and pencil: ``sonotile-kwave`` against one process on the
  same input, then ms per step and the bytes each rank sends per step
  (``benchmarks/parallel/rank_step.py``). ``mpirun`` and mpi4py from the carried wheels where
  the host has none.

The order is by importance: correctness, speed against k-Wave CUDA, where the time goes, size,
then gradients and the decompositions; a run cut short loses the last.

Tolerance on the GPU: the reference folder's own rule, unchanged (1e-4 of the peak, 5e-4 for
absorbing or nonlinear cases, 1e-3 for ``*_final``, never below ten times k-Wave's run-to-run
spread). A float32 FFT on the GPU sums in another order than FFTW, which is a change of the
same kind and size as the FFTW plan changes behind k-Wave's own run-to-run spread; on the CPU
sonotile lands far inside the rule, so the rule leaves room for cuFFT's round-off and still
catches a missing term (``feature_sensitivity_rel`` of each case). ``kwave_reference`` measures
the same distance for k-Wave's own CUDA build beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "kwave-reference"
CASES = ("lossless", "absorbing_nonlinear")
#: nominal memory bandwidth [B/s] by device name (datasheets); the copy measured in ``env`` is
#: the ceiling actually reached
NOMINAL_BW = {"H100 80GB HBM3": 3.35e12, "H100 PCIe": 2.0e12, "H100 NVL": 3.9e12,
              "H200": 4.8e12, "A100-SXM4-80GB": 2.04e12, "A100-SXM4-40GB": 1.56e12}  # fmt: skip
PERTURB_REL = 1e-3

FULL: dict[str, Any] = {
    "sizes": [128, 256, 512], "steps": {"128": 200, "256": 100, "512": 40},
    "ref_cases": None, "copy_mib": 1024, "profile_n": 256, "profile_steps": 10,
    "parallel_n": 64, "parallel_nt": 100, "grad_n": 128, "grad_nt": 100,
    "largest_start": 512, "largest_step": 32, "largest_steps": 4, "largest_max": 2048,
    "caps": {"env": 40, "reference": 120, "throughput": 75, "kwave": 60, "kwave_reference": 60,
             "profile": 60, "parallel": 60, "gradients": 90, "largest": 120},
}  # fmt: skip
DRY: dict[str, Any] = {
    "sizes": [12, 16], "steps": {"12": 8, "16": 8},
    "ref_cases": ["2d_homog_lossless_p0_index"], "copy_mib": 4, "profile_n": 16,
    "profile_steps": 4, "parallel_n": 20, "parallel_nt": 8, "grad_n": 24, "grad_nt": 6,
    "largest_start": 16, "largest_step": 8, "largest_steps": 2, "largest_max": 24,
    "caps": {"env": 60, "reference": 120, "throughput": 90, "kwave": 30, "kwave_reference": 30,
             "profile": 90, "parallel": 90, "gradients": 90, "largest": 60},
}  # fmt: skip


# --------------------------------------------------------------------------- results file


class Results:
    """The results JSON, rewritten atomically after every change."""

    def __init__(self, path: Path, meta: dict) -> None:
        self.path = path
        self.data: dict[str, Any] = {"meta": meta, "parts": {}}
        self.write()

    def put(self, part: str, value: Any) -> None:
        self.data["parts"][part] = value
        self.write()

    def write(self) -> None:
        self.data["meta"]["written"] = _now()
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=_jsonable))
        os.replace(tmp, self.path)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _jsonable(x: Any) -> Any:
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


# --------------------------------------------------------------------------- orchestration


#: run workers in this process (``--inline``: the dry run's quick form; no time caps)
INLINE: list[bool] = [False]


def run_worker(name: str, spec: dict, cap_s: float, env: dict | None = None) -> dict:
    """Run ``--worker name`` in its own process group; its result, or why there is none."""
    if INLINE[0]:
        return run_inline(name, spec)
    cmd = [sys.executable, __file__, "--worker", name, "--spec", json.dumps(spec)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **(env or {})}, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=max(cap_s, 1))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return {"status": "timeout", "cap_s": cap_s, "seconds": time.perf_counter() - t0,
                "partial": _last(out, "GPU_CHECK_PARTIAL "), "log_tail": out[-1500:]}  # fmt: skip
    res = _last(out, "GPU_CHECK_RESULT ")
    if res is None:
        return {"status": "failed", "returncode": proc.returncode,
                "seconds": time.perf_counter() - t0, "partial": _last(out, "GPU_CHECK_PARTIAL "),
                "log_tail": out[-3000:]}  # fmt: skip
    res.setdefault("status", "ok")
    res["seconds"] = time.perf_counter() - t0
    return res


def run_inline(name: str, spec: dict) -> dict:
    t0 = time.perf_counter()
    try:
        res = json.loads(json.dumps(WORKERS[name](spec), default=_jsonable))
    except Exception:
        return {"status": "failed", "error": traceback.format_exc()[-3000:],
                "seconds": time.perf_counter() - t0}  # fmt: skip
    res.setdefault("status", "ok")
    res["seconds"] = time.perf_counter() - t0
    return res


def _last(out: str, tag: str) -> dict | None:
    """The last JSON line a worker printed after ``tag``."""
    found = None
    for line in out.splitlines():
        if line.startswith(tag):
            found = json.loads(line[len(tag) :])
    return found


def partial(res: dict) -> None:
    """What a worker has so far, for the results file should it be killed."""
    if not INLINE[0]:
        print("GPU_CHECK_PARTIAL " + json.dumps(res, default=_jsonable), flush=True)


class Clock:
    """The whole run's time budget: a part starts only if its cap fits what is left."""

    def __init__(self, budget_s: float) -> None:
        self.t0, self.budget = time.perf_counter(), budget_s

    def left(self) -> float:
        return self.budget - (time.perf_counter() - self.t0)

    def cap(self, want: float) -> float | None:
        left = self.left()
        return min(want, left) if left >= min(want, 15.0) else None


def worker_env(dry: bool) -> dict:
    """Environment of every worker: JAX allocates as it goes (peak memory per measurement)
    and may use 95 % of the card (the largest-grid probes)."""
    env = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95",
           "PYTHONUNBUFFERED": "1"}  # fmt: skip
    src = str(ROOT / "src")
    env["PYTHONPATH"] = src + (os.pathsep + os.environ["PYTHONPATH"] if "PYTHONPATH" in
                               os.environ else "")  # fmt: skip
    if dry:
        env["JAX_PLATFORMS"] = "cpu"
    return env


def meta_of(argv: list[str], a: argparse.Namespace) -> dict:
    return {
        "command": " ".join([os.path.relpath(sys.argv[0], ROOT) if sys.argv else ""] + argv),
        "started": _now(), "dry_run": a.dry_run, "budget_s": a.budget_s,
        "host": os.uname().nodename, "python": sys.version.split()[0],
        "tree": _git_head(), "tolerance": (
            "reference folder README rule: max|ours-ref|/max|ref| <= 1e-4 (5e-4 absorbing or "
            "nonlinear, 1e-3 *_final, >= 10x k-Wave's run-to-run spread), unchanged on the GPU"),
    }  # fmt: skip


def _git_head() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)  # fmt: skip
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, nargs="?", help="the results JSON to write")
    ap.add_argument("--dry-run", action="store_true", help="tiny sizes on the CPU")
    ap.add_argument("--kwave-binary", help="kspaceFirstOrder-CUDA (else k-Wave parts skipped)")
    ap.add_argument(
        "--kwave-wait-s",
        type=float,
        default=0.0,
        help="wait this long for --kwave-binary to appear (built alongside)",
    )
    ap.add_argument("--kwave-build-log", type=Path, help="its build log, kept in the results")
    ap.add_argument(
        "--kwave-omp-binary", help="kspaceFirstOrder-OMP (cpu_scaling; else sonotile alone)"
    )
    ap.add_argument(
        "--kwave-omp-wait-s",
        type=float,
        default=0.0,
        help="wait this long for --kwave-omp-binary to appear (built alongside)",
    )
    ap.add_argument("--kwave-omp-build-log", type=Path, help="its build log, kept in the results")
    ap.add_argument("--budget-s", type=float, default=480.0, help="the whole run's time")
    ap.add_argument("--parts", default="", help="comma-separated subset of the parts")
    ap.add_argument(
        "--inline",
        action="store_true",
        help="workers in this process, no time caps (quick dry runs)",
    )
    ap.add_argument(
        "--largest-start",
        type=int,
        help="first size the largest-grid search tries "
        "when the run has no memory figures to predict it from (default 512)",
    )
    ap.add_argument(
        "--prior",
        type=Path,
        help="an earlier results file on the same card: its env and throughput parts predict "
        "the largest-grid search when this run does not measure them",
    )
    ap.add_argument(
        "--cap",
        action="append",
        default=[],
        metavar="PART=SECONDS",
        help="a part's time cap (repeatable), e.g. largest=330",
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker_main(a.worker, json.loads(a.spec))
    if a.results is None:
        ap.error("the results file is required")
    a.results.parent.mkdir(parents=True, exist_ok=True)
    if a.inline:
        INLINE[0] = True
        os.environ.update(worker_env(a.dry_run))
        import sonotile  # noqa: F401  (its XLA flags before JAX starts)
    res = Results(a.results, meta_of(argv, a))
    cfg = dict(DRY if a.dry_run else FULL)
    if a.largest_start:
        cfg["largest_start"] = a.largest_start
    cfg["caps"] = dict(cfg["caps"])
    for item in a.cap:
        name, _, secs = item.partition("=")
        if name not in cfg["caps"]:
            ap.error(f"--cap {item}: no part {name!r} ({', '.join(cfg['caps'])})")
        cfg["caps"][name] = float(secs)
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as work:
        orchestrate(res, cfg, a, Path(work))
    res.data["meta"]["finished"] = _now()
    res.write()
    print_summary(res.data)
    return 0


def orchestrate(res: Results, cfg: dict, a: argparse.Namespace, work: Path) -> None:
    clock, env = Clock(a.budget_s), worker_env(a.dry_run)
    wanted = set(filter(None, a.parts.split(","))) or None
    ctx = {"res": res, "cfg": cfg, "clock": clock, "env": env, "work": work, "a": a}
    if a.prior:
        ctx["prior"] = json.loads(a.prior.read_text()).get("parts", {})
        res.data["meta"]["prior"] = a.prior.name
    for name, fn in PARTS:
        if wanted is not None and name not in wanted:
            continue
        try:
            fn(ctx)
        except Exception:  # a bug in one part must not lose the others
            res.put(name, {"status": "failed", "error": traceback.format_exc()[-3000:]})


def part_simple(name: str, spec_of: Any) -> Any:
    def run(ctx: dict) -> None:
        cap = ctx["clock"].cap(ctx["cfg"]["caps"][name])
        if cap is None:
            ctx["res"].put(name, {"status": "skipped", "why": "time budget spent"})
            return
        ctx["res"].put(name, {"status": "running"})
        ctx["res"].put(name, run_worker(name, spec_of(ctx), cap, ctx["env"]))

    return run


def part_throughput(ctx: dict) -> None:
    cfg, res, t0 = ctx["cfg"], ctx["res"], time.perf_counter()
    rows: list[dict] = []
    res.put("throughput", {"status": "running", "rows": rows})
    kw = kwave_binary(ctx)
    for n in cfg["sizes"]:  # both cases at a size before the next size: a cut run is balanced
        for case in CASES:
            path = ctx["work"] / f"{case}_{n}.h5"
            spec = {"case": case, "n": n, "steps": cfg["steps"][str(n)], "path": str(path)}
            cap = ctx["clock"].cap(cfg["caps"]["throughput"])
            row: dict[str, Any] = {"case": case, "n": n}
            row["sonotile"] = (run_worker("throughput", spec, cap, ctx["env"]) if cap else
                               {"status": "skipped", "why": "time budget spent"})  # fmt: skip
            kcap = ctx["clock"].cap(cfg["caps"]["kwave"])
            if kw and path.exists() and kcap:
                row["kwave_cuda"] = run_kwave_cuda(kw, path, ctx["work"], kcap, spec["steps"])
                row["speedup_vs_kwave"] = _ratio(row)
            at_copy_bw(row, res.data["parts"].get("env", {}).get("copy_bandwidth_Bps"))
            rows.append(row)
            path.unlink(missing_ok=True)
            res.put("throughput", {"status": "running", "rows": rows})
    res.put("throughput", {"status": "ok", "rows": rows, "seconds": time.perf_counter() - t0})


def at_copy_bw(row: dict, bw: float | None) -> None:
    """Each solver's step time as bytes per grid point the card's measured copy could have
    moved in it (comparable with a count of the step's bytes, e.g. k-Wave's 340-560 B)."""
    for who in ("sonotile", "kwave_cuda"):
        ms = row.get(who, {}).get("ms_per_step")
        if bw and ms:
            row[who]["bytes_per_point_step_at_copy_bw"] = ms * 1e-3 * bw / row["n"] ** 3


def _ratio(row: dict) -> float | None:
    s, k = row["sonotile"].get("ms_per_step"), row["kwave_cuda"].get("ms_per_step")
    return k / s if s and k else None


def kwave_binary(ctx: dict) -> str | None:
    """The k-Wave CUDA binary, waiting up to ``--kwave-wait-s`` for a build alongside."""
    a, res = ctx["a"], ctx["res"]
    if not a.kwave_binary:
        res.data["meta"]["kwave_cuda"] = "not given"
        return None
    t_end = time.perf_counter() + a.kwave_wait_s
    failed = Path(a.kwave_binary + ".failed")  # the build's marker of failure (gpu_check.sh)
    while not os.access(a.kwave_binary, os.X_OK) and time.perf_counter() < t_end:
        if failed.exists():
            break
        time.sleep(2)
    ok = os.access(a.kwave_binary, os.X_OK)
    res.data["meta"]["kwave_cuda"] = a.kwave_binary if ok else f"missing: {a.kwave_binary}"
    if a.kwave_build_log and a.kwave_build_log.exists():
        res.data["meta"]["kwave_cuda_build_log_tail"] = a.kwave_build_log.read_text()[-3000:]
    return a.kwave_binary if ok else None


def part_kwave_reference(ctx: dict) -> None:
    kw, cfg = kwave_binary(ctx), ctx["cfg"]
    if kw is None:
        ctx["res"].put("kwave_reference", {"status": "skipped", "why": "no k-Wave CUDA binary"})
        return
    from sonotile.kwave.compare import compare

    rows = []
    t_end = time.perf_counter() + (ctx["clock"].cap(cfg["caps"]["kwave_reference"]) or 0)
    for folder in reference_cases(cfg):
        if time.perf_counter() > t_end:
            rows.append({"case": folder.name, "status": "skipped", "why": "time cap"})
            continue
        meta = json.loads((folder / "case.json").read_text())
        nt, axisymmetric = _steps_and_symmetry(folder / "input.h5")
        if axisymmetric:  # k-Wave's CUDA solver 1.3 has no axisymmetric model
            rows.append({"case": folder.name, "status": "skipped", "why": "axisymmetric"})
            continue
        out = ctx["work"] / "kwave_ref_out.h5"
        out.unlink(missing_ok=True)
        run = run_kwave_cuda(kw, folder / "input.h5", ctx["work"], 60, nt,
                             flags=meta["flags"], out=out)  # fmt: skip
        row = {"case": folder.name, **{k: run.get(k) for k in ("status", "error", "wall_s")}}
        if run.get("status") == "ok":
            cmp = compare(folder / "output.h5", out, meta)
            row["datasets"] = {r.name: {"error": r.error, "tol": r.tol} for r in cmp}
            row["within_sonotile_rule"] = all(r.ok for r in cmp)
        rows.append(row)
        ctx["res"].put("kwave_reference", {"status": "running", "cases": rows})
    ctx["res"].put("kwave_reference", {"status": "ok", "cases": rows})


def _steps_and_symmetry(path: Path) -> tuple[int, bool]:
    """An input file's Nt, and whether it asks for k-Wave's axisymmetric model."""
    import h5py

    with h5py.File(path, "r") as f:
        axi = "axisymmetric_flag" in f and int(f["axisymmetric_flag"][()].ravel()[0]) != 0
        return int(f["Nt"][()].ravel()[0]), axi


def reference_cases(cfg: dict) -> list[Path]:
    names = cfg["ref_cases"] or sorted(p.name for p in REFERENCE.glob("*/"))
    return [REFERENCE / n for n in names]


def part_largest(ctx: dict) -> None:
    """Bisection per case and solver, sharing the part's time cap."""
    cfg, res = ctx["cfg"], ctx["res"]
    cap = ctx["clock"].cap(cfg["caps"]["largest"])
    out: dict[str, Any] = {"status": "running"}
    if cap is None:
        res.put("largest", {"status": "skipped", "why": "time budget spent"})
        return
    t_end = time.perf_counter() + cap
    kw = kwave_binary(ctx)
    solvers = ["sonotile"] + (["kwave_cuda"] if kw else [])
    jobs = [(s, c) for c in CASES for s in solvers]  # the cheap lossless probes first
    for i, (solver, case) in enumerate(jobs):
        share = (t_end - time.perf_counter()) / (len(jobs) - i)
        out[f"{solver}/{case}"] = bisect(ctx, solver, case, kw, share)
        res.put("largest", out)
    out["status"], out["seconds"] = "ok", cap - (t_end - time.perf_counter())
    res.put("largest", out)


def bisect(ctx: dict, solver: str, case: str, kw: str | None, cap_s: float) -> dict:
    """Largest n (a multiple of the step) for which a short run succeeds, within ``cap_s``."""
    cfg = ctx["cfg"]
    step, lo, hi = cfg["largest_step"], None, None
    predicted = predict_largest(ctx, solver, case)
    guess = predicted or cfg["largest_start"]
    probes: list[dict] = []
    t_end = time.perf_counter() + cap_s
    n = max(step, min(cfg["largest_max"], guess // step * step))
    while n is not None and time.perf_counter() < t_end - 5:
        probe = probe_once(ctx, solver, case, n, kw, t_end - time.perf_counter())
        probes.append(probe)
        if probe["status"] == "ok":
            lo = n
        elif probe["status"] == "timeout":
            break  # cannot tell a slow fit from a miss: stop with what is known
        else:
            hi = n
        n = _next_n(lo, hi, step, cfg["largest_max"])
    return {"largest_n_ran": lo, "smallest_n_failed": hi, "predicted_n": predicted,
            "probes": probes}  # fmt: skip


def _next_n(lo: int | None, hi: int | None, step: int, top: int) -> int | None:
    """Below the first miss; 10 % up from the last fit until a miss; then halves between."""
    if lo is None:
        n = ((hi or step) * 4 // 5) // step * step
        return n if n >= step else None
    if hi is None:
        n = -(-(lo * 11 // 10) // step) * step
        n = min(top, max(n, lo + step))
        return n if n > lo else None
    mid = (lo + hi) // 2 // step * step
    return mid if hi - lo > step and mid > lo else None


def predict_largest(ctx: dict, solver: str, case: str) -> int | None:
    """The n whose cube fills the card, from the throughput part's peak bytes per point."""
    parts = ctx["res"].data["parts"]
    if not parts.get("throughput", {}).get("rows"):  # a rerun of this part alone: --prior
        parts = ctx.get("prior") or parts
    rows = parts.get("throughput", {}).get("rows", [])
    total = parts.get("env", {}).get("device_memory_bytes")
    pts = [(r["n"] ** 3, r[solver].get("peak_device_bytes")) for r in rows
           if r["case"] == case and isinstance(r.get(solver), dict)]  # fmt: skip
    pts = [(n, b) for n, b in pts if b]
    if not total or not pts:
        return None
    if len(pts) >= 2:  # memory = fixed + per point x points, from the two largest sizes
        (n1, b1), (n2, b2) = sorted(pts)[-2:]
        per = (b2 - b1) / (n2 - n1) if n2 > n1 else b2 / n2
        fixed = max(0.0, b2 - per * n2)
    else:
        per, fixed = pts[0][1] / pts[0][0], 0.0
    return int(((0.95 * total - fixed) / per) ** (1 / 3)) if per > 0 else None


def probe_once(ctx: dict, solver: str, case: str, n: int, kw: str | None, cap: float) -> dict:
    steps = ctx["cfg"]["largest_steps"]
    if solver == "sonotile":
        r = run_worker("probe", {"case": case, "n": n, "steps": steps}, cap, ctx["env"])
        return {"n": n, **{k: r.get(k) for k in ("status", "seconds", "peak_device_bytes")},
                **_why(r)}  # fmt: skip
    path = ctx["work"] / f"probe_{case}_{n}.h5"
    r = run_worker("write_input", {"case": case, "n": n, "steps": steps, "path": str(path)},
                   cap, ctx["env"])  # fmt: skip
    if r.get("status") == "ok" and kw:
        left = max(5.0, cap - r["seconds"])
        r = run_kwave_cuda(kw, path, ctx["work"], left, steps)
    path.unlink(missing_ok=True)
    return {"n": n, **{k: r.get(k) for k in ("status", "wall_s", "peak_device_bytes")}, **_why(r)}


def _why(r: dict) -> dict:
    """The end of a failed probe's error or log (an out-of-memory error, usually)."""
    if r.get("status") == "ok":
        return {}
    text = r.get("error") or r.get("log_tail") or r.get("stderr_tail") or ""
    return {"why": text[-400:]} if text else {}


# --------------------------------------------------------------------------- k-Wave CUDA


class GpuMemoryPoll:
    """Peak of the card's used memory (nvidia-smi) above its level at the start [bytes]."""

    def __init__(self) -> None:
        self.base, self.peak, self._stop = self._used(), 0, threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _used() -> int | None:
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=5,
            )  # fmt: skip
            return int(out.stdout.split()[0]) * 2**20
        except (OSError, ValueError, IndexError, subprocess.SubprocessError):
            return None

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            u = self._used()
            if u is not None:
                self.peak = max(self.peak, u)

    def __enter__(self) -> GpuMemoryPoll:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()

    def bytes(self) -> int | None:
        return None if self.base is None or not self.peak else self.peak - self.base


def run_kwave_cuda(
    binary: str, path: Path, work: Path, cap_s: float, steps: int,
    flags: list[str] | None = None, out: Path | None = None,
) -> dict:  # fmt: skip
    """k-Wave CUDA on ``path``: its own phase times (output file attributes), wall time, peak
    device memory (polled) and what it prints about memory."""
    out = out or work / "kwave_cuda_out.h5"
    cmd = [binary, "-i", str(path), "-o", str(out), *(flags or ["--p_raw"])]
    t0 = time.perf_counter()
    try:
        with GpuMemoryPoll() as mem:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=cap_s)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "cap_s": cap_s, "wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        return {"status": "failed", "returncode": p.returncode, "wall_s": wall,
                "error": (p.stdout + p.stderr)[-1500:]}  # fmt: skip
    r: dict[str, Any] = {"status": "ok", "wall_s": wall, "polled_device_bytes": mem.bytes()}
    r.update(_kwave_attrs(out))
    r["memory_lines"] = [ln.strip() for ln in p.stdout.splitlines() if "memory" in ln.lower()]
    said = re.search(r"Peak device memory in use:\s*(\d+)\s*MB", p.stdout)
    r["reported_device_bytes"] = int(said.group(1)) * 2**20 if said else None
    r["peak_device_bytes"] = r["polled_device_bytes"] or r["reported_device_bytes"]
    if r.get("simulation_s"):
        r["ms_per_step"] = 1e3 * r["simulation_s"] / steps
    if flags is None:
        out.unlink(missing_ok=True)
    return r


def _kwave_attrs(out: Path) -> dict:
    import h5py

    keys = {"simulation_s": "simulation_phase_execution_time",
            "preprocessing_s": "pre-processing_phase_execution_time",
            "data_loading_s": "data_loading_phase_execution_time",
            "total_s": "total_execution_time"}  # fmt: skip
    r: dict[str, Any] = {}
    with h5py.File(out, "r") as f:
        for k, name in keys.items():
            if name in f.attrs:
                v = f.attrs[name]
                r[k] = float((v.decode() if isinstance(v, bytes) else str(v)).strip().rstrip("s"))
        for name in ("total_memory_in_use", "peak_core_memory_in_use"):
            if name in f.attrs:
                v = f.attrs[name]
                r[name] = v.decode().strip() if isinstance(v, bytes) else str(v)
    return r


# --------------------------------------------------------------------------- workers


def worker_main(name: str, spec: dict) -> int:
    import sonotile  # noqa: F401  (sonotile's XLA flags before JAX starts)

    out = WORKERS[name](spec)
    print("GPU_CHECK_RESULT " + json.dumps(out, default=_jsonable), flush=True)
    return 0


def _device() -> Any:
    import jax

    return jax.devices()[0]


def peak_device_bytes() -> int | None:
    """Peak bytes the allocator handed out on the default device (None on a CPU)."""
    stats = _device().memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def w_env(spec: dict) -> dict:
    import importlib.metadata as md

    import jax

    dev = _device()
    r: dict[str, Any] = {"jax": jax.__version__, "backend": jax.default_backend(),
                         "device_kind": dev.device_kind, "platform": dev.platform,
                         "n_devices": len(jax.devices()), "date": _now()}  # fmt: skip
    r["packages"] = {}
    for pkg in ("jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "jax-cuda12-plugin",
                "jax-cuda12-pjrt", "numpy", "h5py", "nvidia-cufft"):  # fmt: skip
        try:
            r["packages"][pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    stats = dev.memory_stats() or {}
    r["device_memory_bytes"] = stats.get("bytes_limit")
    r["platform_version"] = getattr(dev.client, "platform_version", None)
    query = "name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,compute_cap"
    r["nvidia_smi"] = _cmd(["nvidia-smi", f"--query-gpu={query}", "--format=csv"])
    r["nvcc"] = _cmd(["nvcc", "--version"]) or _cmd(["/usr/local/cuda/bin/nvcc", "--version"])
    r["copy_bandwidth_Bps"] = copy_bandwidth(spec["copy_mib"])
    r["nominal_bandwidth_Bps"] = next((v for k, v in NOMINAL_BW.items() if k in dev.device_kind),
                                      None)  # fmt: skip
    return r


def _cmd(cmd: list[str]) -> str | None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        return (p.stdout + p.stderr).strip()[-2000:]
    except (OSError, subprocess.SubprocessError):
        return None


def copy_bandwidth(mib: int, repeat: int = 20) -> float:
    """Bytes read + written per second by a jitted scale of a ``mib`` MiB float32 array
    (median of ``repeat`` calls after a warm-up; random data, not zeros)."""
    import statistics

    import jax
    import jax.numpy as jnp

    x = jax.random.uniform(jax.random.key(0), (mib * 2**18,), jnp.float32)
    f = jax.jit(lambda a: a * 1.0001)
    jax.block_until_ready(f(x))
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(f(x))
        ts.append(time.perf_counter() - t0)
    return 2 * x.nbytes / statistics.median(ts)


def w_reference(spec: dict) -> dict:
    from sonotile.kwave.cli import main as kwave_main

    rows = []
    work = Path(tempfile.mkdtemp(prefix="gpu_check_ref_"))
    for folder in [Path(p) for p in spec["cases"]]:
        meta = json.loads((folder / "case.json").read_text())
        out = work / f"{folder.name}.h5"
        t0 = time.perf_counter()
        status = kwave_main(["-i", str(folder / "input.h5"), "-o", str(out), *meta["flags"]])
        row = {"case": folder.name, "exit": status, "wall_s": time.perf_counter() - t0}
        row.update(compare_case(folder, out, meta) if status == 0 else {"ok": False})
        rows.append(row)
        partial({"cases": rows})
    control = control_check(Path(spec["cases"][0]), work / f"{Path(spec['cases'][0]).name}.h5")
    shutil.rmtree(work, ignore_errors=True)
    return {"device": str(_device()), "cases": rows, "all_ok": all(r["ok"] for r in rows),
            "n_ok": sum(r["ok"] for r in rows), "control": control}  # fmt: skip


def compare_case(folder: Path, ours: Path, meta: dict) -> dict:
    """The reference rule applied to one output: per dataset error and tolerance."""
    from sonotile.kwave.compare import compare

    rows = compare(folder / "output.h5", ours, meta)
    return {"ok": bool(rows) and all(r.ok for r in rows),
            "datasets": {r.name: {"error": r.error, "tol": r.tol, "ok": r.ok,
                                  "problem": r.problem} for r in rows}}  # fmt: skip


def perturb(path: Path, out: Path, rel: float = PERTURB_REL) -> str:
    """A copy of ``path`` with one sample of its largest dataset moved by ``rel`` of the
    dataset's peak; returns the dataset's name."""
    import h5py
    import numpy as np

    shutil.copyfile(path, out)
    with h5py.File(out, "r+") as f:
        names: list[str] = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        name = max(names, key=lambda n: f[n].size)
        d = f[name][()]
        i = np.unravel_index(np.argmax(np.abs(d)), d.shape)
        d[i] = d[i] + rel * np.abs(d).max()
        f[name][...] = d
    return name


def control_check(folder: Path, ours: Path) -> dict:
    """Our output with one sample moved by 1e-3 of its peak must fail the comparison."""
    meta = json.loads((folder / "case.json").read_text())
    if not ours.exists():
        return {"ok": False, "why": f"no output {ours.name}"}
    with tempfile.TemporaryDirectory(prefix="gpu_check_control_") as d:
        bad = Path(d) / "perturbed.h5"
        name = perturb(ours, bad)
        res = compare_case(folder, bad, meta)
    return {"case": folder.name, "dataset": name, "perturbation_rel": PERTURB_REL,
            "detected": not res["ok"], "ok": not res["ok"]}  # fmt: skip


def w_throughput(spec: dict) -> dict:
    from sonotile.bench.inprocess import SonotileCase, write_input

    n, steps = spec["n"], spec["steps"]
    t0 = time.perf_counter()
    write_input(spec["path"], spec["case"], n, steps)
    write_s = time.perf_counter() - t0
    c = SonotileCase(spec["path"], steps)
    runs = [c.run() for _ in range(2)]
    best = min(runs)
    return {
        "device": str(_device()), "steps": steps, "write_input_s": write_s,
        "plan_s": c.plan_s, "compile_s": c.compile_s, "first_run_s": c.first_run_s,
        "first_step_s": c.first_step_s, "run_s": runs, "ms_per_step": 1e3 * best / steps,
        "mcells_per_s": n**3 * steps / best / 1e6, "peak_device_bytes": peak_device_bytes(),
        "peak_device_bytes_per_point": (peak_device_bytes() or 0) / n**3 or None,
        "compiled_memory": c.memory,
    }  # fmt: skip


def w_write_input(spec: dict) -> dict:
    from sonotile.bench.inprocess import write_input

    write_input(spec["path"], spec["case"], spec["n"], spec["steps"])
    return {"bytes": os.path.getsize(spec["path"])}


def w_probe(spec: dict) -> dict:
    """One short run of an in-memory bench problem at ``n``^3 (the largest-grid probe)."""
    from sonotile.bench.inprocess import SonotileCase, bench_problem

    problem = bench_problem(spec["case"], spec["n"], spec["steps"])
    c = SonotileCase("", spec["steps"], problem=problem)
    return {"first_run_s": c.first_run_s, "peak_device_bytes": peak_device_bytes()}


def w_parallel(spec: dict) -> dict:
    """pencil and lfb on a mesh of one device against the single-device run."""
    import jax
    import numpy as np

    from sonotile.bench.cases import heterogeneous_absorbing
    from sonotile.parallel.engine import engine_for
    from sonotile.solver import runner

    problem = heterogeneous_absorbing(n=spec["n"], nt=spec["nt"])
    t0 = time.perf_counter()
    ref, ref_final = runner.run_engine(runner.single_engine(problem))
    r: dict[str, Any] = {"n": spec["n"], "nt": spec["nt"], "single_s": time.perf_counter() - t0}
    for dec, tol in (("pencil", 1e-5), ("lfb", 1e-3)):
        t0 = time.perf_counter()
        eng, why = engine_for(problem, dec, (1,), 16, devices=[jax.devices()[0]])
        raw, final = runner.run_engine(eng)
        errs = {}
        for k, v in {**ref, **{f"final/{k}": x for k, x in ref_final.items()}}.items():
            mine = raw.get(k) if not k.startswith("final/") else final.get(k[6:])
            a, b = np.asarray(mine, np.float64), np.asarray(v, np.float64)
            errs[k] = float(np.abs(a - b).max() / (np.abs(b).max() or 1.0))
        r[dec] = {"engine": eng.describe, "reason": why, "seconds": time.perf_counter() - t0,
                  "max_rel_error": errs, "tol": tol,
                  "agree": all(e <= tol for e in errs.values())}  # fmt: skip
    return r


def w_gradients(spec: dict) -> dict:
    import jax
    import jax.numpy as jnp

    import sonotile as st

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gradient_cost import make_case

    from sonotile.base import config
    from sonotile.fft import backend as fft_backend

    n, nt = spec["n"], spec["nt"]
    sim = st.make_simulator(*make_case(n, nt))
    params = {k: sim.params[k] for k in ("sound_speed", "density")}
    # the FFT the operators resolve to and the step setting (auto: the stacked step on one
    # GPU on sonotile's cuFFT calls)
    fft = fft_backend.resolve(None, "float32")

    def loss(p: dict) -> jax.Array:
        return jnp.sum(sim(p)["p"] ** 2)

    r: dict[str, Any] = {"n": n, "nt": nt, "chunk": sim.static.chunk, "fft": fft,
                         "step_setting": config.current().step}  # fmt: skip
    for name, f in (("forward", jax.jit(loss)), ("gradient", jax.jit(jax.value_and_grad(loss)))):
        t0 = time.perf_counter()
        comp = f.lower(params).compile()
        r[f"{name}_compile_s"] = time.perf_counter() - t0
        m = comp.memory_analysis()
        r[f"{name}_compiled_bytes"] = (m.argument_size_in_bytes + m.output_size_in_bytes +
                                       m.temp_size_in_bytes - m.alias_size_in_bytes)  # fmt: skip
        jax.block_until_ready(comp(params))
        t0 = time.perf_counter()
        out = jax.block_until_ready(comp(params))
        r[f"{name}_s"] = time.perf_counter() - t0
        r[f"{name}_peak_device_bytes"] = peak_device_bytes()
        partial(r)
    g = out[1]
    r["gradient_finite"] = bool(all(bool(jnp.isfinite(v).all()) for v in g.values()))
    r["gradient_over_forward"] = r["gradient_s"] / r["forward_s"]
    return r


def w_profile(spec: dict) -> dict:
    """One absorbing step's optimised HLO, XLA's byte count and the kernels' times."""
    from sonotile.bench.inprocess import SonotileCase, bench_problem
    from sonotile.solver import runner as rn

    n, steps = spec["n"], spec["steps"]
    c = SonotileCase("", steps, problem=bench_problem("absorbing_nonlinear", n, steps))
    one = rn.step_inputs(c.problem, 0, 1)
    cp = c.cp
    comp1 = rn.run_chunk.lower(c.carry_shape, one, cp.consts, cp.ops, cp.index, phys=cp.phys,
                               layout=cp.layout).compile()  # fmt: skip
    r: dict[str, Any] = {"n": n, "steps": steps, "hlo": hlo_summary(comp1.as_text())}
    partial(r)
    cost = comp1.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    step_s = min(c.run() for _ in range(2)) / steps
    r["ms_per_step"] = 1e3 * step_s
    if cost and cost.get("bytes accessed"):
        b = float(cost["bytes accessed"])
        r["xla_bytes_accessed_per_point_step"] = b / n**3
        r["achieved_Bps"] = b / step_s
        r["flops_per_point_step"] = float(cost.get("flops", 0.0)) / n**3
    r["hlo_dump_bytes"] = sum(p.stat().st_size for p in Path(spec["dump"]).rglob("*") if
                              p.is_file()) if spec.get("dump") else None  # fmt: skip
    r["kernels"] = kernel_times(lambda: c.run(), steps)
    return r


def hlo_summary(text: str) -> dict:
    """Counts in an optimised HLO module: fusions (kernels XLA made), FFTs, copies, custom
    calls, all instructions; and its size."""
    ops = re.findall(r"=\s*\S+\s+(\w[\w-]*)\(", text)
    count = {k: ops.count(k) for k in ("fusion", "fft", "copy", "custom-call", "while",
                                         "dynamic-update-slice", "transpose")}  # fmt: skip
    kinds = re.findall(r"kind=(k\w+)", text)
    return {"bytes": len(text), "instructions": len(ops), "ops": count,
            "fusion_kinds": {k: kinds.count(k) for k in sorted(set(kinds))}}  # fmt: skip


def kernel_times(run: Any, steps: int, rounds: int = 2) -> dict:
    """ms per step per kernel (device events of ``jax.profiler``; host XLA events on a CPU),
    the 25 largest, and their sum."""
    import collections
    import glob

    import jax
    from jax.profiler import ProfileData

    d = tempfile.mkdtemp(prefix="gpu_check_trace_")
    try:
        jax.profiler.start_trace(d)
        for _ in range(rounds):
            run()
        jax.profiler.stop_trace()
        (pb,) = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)
        data = ProfileData.from_file(pb)
        ops: collections.Counter = collections.Counter()  # per HLO op
        kernels: collections.Counter = collections.Counter()  # per kernel launched
        gpu = [p for p in data.planes if p.name.startswith("/device:GPU")]
        for plane in gpu or data.planes:
            for line in plane.lines:
                if line.name == "XLA Ops" or (not gpu and line.name.startswith("tf_XLA")):
                    for ev in line.events:
                        ops[ev.name] += ev.duration_ns
                elif gpu and line.name.startswith("Stream"):
                    for ev in line.events:
                        kernels[ev.name[:120]] += ev.duration_ns
    finally:
        shutil.rmtree(d, ignore_errors=True)
    scale = 1e-6 / (rounds * steps)
    return {"source": "device" if gpu else "host",
            "ops_ms_per_step": {k: v * scale for k, v in ops.most_common(25)},
            "kernels_ms_per_step": {k: v * scale for k, v in kernels.most_common(25)},
            "kernels_ms_per_step_sum": sum(kernels.values()) * scale}  # fmt: skip


WORKERS = {
    "env": w_env, "reference": w_reference, "throughput": w_throughput, "probe": w_probe,
    "write_input": w_write_input, "parallel": w_parallel, "gradients": w_gradients,
    "profile": w_profile,
}  # fmt: skip


# --------------------------------------------------------------------------- stacked step

#: the unstacked step (XLA's FFT) against the stacked one on cuFFT (sonotile.bench.step_compare)
FULL["step_compare"] = {"rows": [["lossless", 256, 40], ["absorbing_nonlinear", 256, 40],
                                 ["lossless", 512, 12], ["absorbing_nonlinear", 512, 12]],
                        "profile": ["absorbing_nonlinear", 256], "lib_wait_s": 60}  # fmt: skip
DRY["step_compare"] = {"rows": [["lossless", 12, 4], ["absorbing_nonlinear", 16, 4]],
                       "profile": ["absorbing_nonlinear", 16], "lib_wait_s": 0}  # fmt: skip
FULL["caps"]["step_compare"], DRY["caps"]["step_compare"] = 90, 90


def w_step_compare(spec: dict) -> dict:
    """Both steps on each row ``(case, n, steps)``; the stacked one on cuFFT where it loads
    (a GPU and ``SONOTILE_CUFFT_LIB``), else on the CPU stand-in (``jnp.fft``)."""
    from sonotile.bench import step_compare as sc
    from sonotile.fft import cufft

    why = cufft.unavailable()
    r: dict[str, Any] = {"fft": "xla" if why else "cufft", "cufft_unavailable": why,
                         "cufft_lib": cufft.library_path(), "rows": [],
                         "counted_bytes": {"absorbing": sc.counted_bytes(True),
                                           "lossless": sc.counted_bytes(False)}}  # fmt: skip
    try:
        r["transform_check"] = sc.transform_check(r["fft"])
    except Exception as e:  # noqa: BLE001 - recorded; the rows say whether the steps run
        r["transform_check"] = {"error": f"{type(e).__name__}: {e}"[:600]}
    partial(r)
    for case, n, steps in spec["rows"]:
        try:
            prof = _kernel_times_of(steps) if [case, n] == spec.get("profile") else None
            r["rows"].append(sc.compare(case, n, steps, r["fft"], prof))
        except Exception as e:  # noqa: BLE001 - out of memory at one size keeps the others
            r["rows"].append({"case": case, "n": n, "error": f"{type(e).__name__}: {e}"[:600]})
        partial(r)
    r["cufft_plans"] = cufft.plans()
    return r


def _kernel_times_of(steps: int) -> Any:
    """:func:`kernel_times` of a loop of ``steps`` steps (a function of the loop)."""
    return lambda run: kernel_times(run, steps)


def cufft_lib() -> str | None:
    """The cuFFT library gpu_check.sh builds alongside (``GPU_CHECK_CUFFT_LIB``), else the
    caller's ``SONOTILE_CUFFT_LIB``."""
    return os.environ.get("GPU_CHECK_CUFFT_LIB") or os.environ.get("SONOTILE_CUFFT_LIB")


def _lib_env(ctx: dict, wait_s: float) -> dict:
    """The workers' environment with ``SONOTILE_CUFFT_LIB`` (only the parts of the stacked step
    get it), after up to ``wait_s`` for the library to be built."""
    path = cufft_lib()
    t_end = time.perf_counter() + wait_s
    while path and not os.path.exists(path) and time.perf_counter() < t_end:
        if os.path.exists(path + ".failed"):
            break
        time.sleep(1)
    return {**ctx["env"], "SONOTILE_CUFFT_LIB": path} if path else ctx["env"]


def part_step_compare(ctx: dict) -> None:
    """The worker's rows, each with k-Wave CUDA's loop time at that case and size (from this
    run's ``throughput`` part, else ``--prior``'s) and each step's fraction of the measured
    copy bandwidth."""
    cfg, parts = ctx["cfg"]["step_compare"], ctx["res"].data["parts"]
    cap = ctx["clock"].cap(ctx["cfg"]["caps"]["step_compare"])
    if cap is None:
        ctx["res"].put("step_compare", {"status": "skipped", "why": "time budget spent"})
        return
    ctx["res"].put("step_compare", {"status": "running"})
    env = _lib_env(ctx, cfg["lib_wait_s"])
    cap = ctx["clock"].cap(ctx["cfg"]["caps"]["step_compare"]) or cap
    spec = {"rows": cfg["rows"], "profile": cfg["profile"]}
    r = run_worker("step_compare", spec, cap, env)
    if "rows" not in r and isinstance(r.get("partial"), dict):  # cut off: the rows it had
        r["rows"] = r["partial"].get("rows", [])
    prior = ctx.get("prior", {})
    rows = parts.get("throughput", {}).get("rows") or prior.get("throughput", {}).get("rows", [])
    bw = (parts.get("env") or prior.get("env") or {}).get("copy_bandwidth_Bps")
    for row in r.get("rows", []):
        kw = [t.get("kwave_cuda", {}).get("ms_per_step") for t in rows
              if t.get("case") == row.get("case") and t.get("n") == row.get("n")]  # fmt: skip
        if kw and kw[0]:
            row["kwave_cuda_ms_per_step"] = kw[0]
            for who in ("xla", "stacked"):
                if row.get(f"{who}_ms_per_step"):
                    row[f"kwave_over_{who}"] = kw[0] / row[f"{who}_ms_per_step"]
        for who, key in (
            ("xla", "xla_bytes_per_point"),
            ("stacked", "stacked_counted_bytes_per_point"),
        ):
            ms, b = row.get(f"{who}_ms_per_step"), row.get(key)
            if bw and ms and b:
                row[f"{who}_fraction_of_copy_bandwidth"] = b * row["n"] ** 3 / (ms * 1e-3) / bw
    ctx["res"].put("step_compare", r)


def summary_step_compare(part: dict) -> None:
    """ms/step of both steps, their ratio, k-Wave's, and the drift between them."""
    if part.get("transform_check"):
        print(f"step_compare fft {part.get('fft')}: transforms vs jnp.fft {part['transform_check']}"
              f"  {part.get('cufft_unavailable') or ''}")  # fmt: skip
    for row in part.get("rows", []):
        if "error" in row:
            print(f"step {row['case'][:20]:20s} {row['n']:4d}^3 {row['error'][:80]}")
            continue
        print(f"step {row['case'][:20]:20s} {row['n']:4d}^3 xla {row['xla_ms_per_step']:7.2f} "
              f"stacked/{row['fft']} {row['stacked_ms_per_step']:7.2f} ms/step "
              f"({row['speedup']:.2f}x)  vs k-Wave CUDA {row.get('kwave_over_xla') or 0:.2f}x / "
              f"{row.get('kwave_over_stacked') or 0:.2f}x  drift p "
              f"{row['max_rel_diff']['p']:.1e}")  # fmt: skip


def _profile_spec(ctx: dict) -> dict:
    dump = ctx["work"] / "hlo_dump"  # XLA_FLAGS act in a new process only: none inline
    dump.mkdir(exist_ok=True)
    return {"n": ctx["cfg"]["profile_n"], "steps": ctx["cfg"]["profile_steps"],
            "dump": None if INLINE[0] else str(dump)}  # fmt: skip


def part_profile(ctx: dict) -> None:
    spec = _profile_spec(ctx)
    env = {**ctx["env"], "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") +
                                       f" --xla_dump_to={spec['dump']}").strip()}  # fmt: skip
    cap = ctx["clock"].cap(ctx["cfg"]["caps"]["profile"])
    if cap is None:
        ctx["res"].put("profile", {"status": "skipped", "why": "time budget spent"})
        return
    r = run_worker("profile", spec, cap, env)
    bw = ctx["res"].data["parts"].get("env", {})
    if r.get("achieved_Bps"):
        for k in ("copy_bandwidth_Bps", "nominal_bandwidth_Bps"):
            if bw.get(k):
                r[f"fraction_of_{k[:-4]}"] = r["achieved_Bps"] / bw[k]
    ctx["res"].put("profile", r)


# --------------------------------------------------------------------------- CPU threads

#: the host's 16 cores: sonotile-kwave and k-Wave's OMP solver (built from .gpu-carry/ by
#: kwave_omp_build.sh) at each thread count on the same input files (sonotile.bench.threads)
FULL["cpu_scaling"] = {"n": 256, "steps": 8, "threads": [1, 2, 4, 8, 16],
                       "cases": ["ivp_lossless", "point_additive_absorbing_nonlinear"]}  # fmt: skip
DRY["cpu_scaling"] = {"n": 16, "steps": 4, "threads": [1, 2],
                      "cases": ["ivp_lossless", "point_additive_absorbing_nonlinear"]}  # fmt: skip
FULL["caps"]["cpu_scaling"], DRY["caps"]["cpu_scaling"] = 120, 240
#: FFTW's shared libraries carried for sonotile's extension, used where the host has none
FFTW_CARRIED = ROOT / ".gpu-carry" / "fftw" / "lib"


def w_cpu_scaling(spec: dict) -> dict:
    """Both programs at each thread count (sonotile alone without a k-Wave OMP binary)."""
    from sonotile.bench import threads
    from sonotile.bench.inprocess import machine
    from sonotile.fft import fftw

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}  # the host's CPU, not the GPU
    fftw_lib = "host"
    if fftw.find_library() is None and (FFTW_CARRIED / "libfftw3f.so.3").exists():
        env["LD_LIBRARY_PATH"] = f"{FFTW_CARRIED}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
        fftw_lib = str(FFTW_CARRIED)
    deadline = time.perf_counter() + spec["cap_s"] - 10  # the rows so far come back whole
    with tempfile.TemporaryDirectory(prefix="cpu_scaling_") as work:
        res = threads.sweep(spec["kwave"], spec["cases"], spec["n"], spec["steps"],
                            spec["threads"], work, env, deadline, on_row=partial)  # fmt: skip
    res.update({"machine": machine(), "fftw_for_sonotile": fftw_lib, "kwave_omp": spec["kwave"]})
    if spec["kwave"]:  # its banner: version, compiler, instruction set
        banner = _cmd([spec["kwave"], "--version"]) or ""
        res["kwave_omp_version"] = [ln.strip("│ ") for ln in banner.splitlines() if ":" in ln]
    if not res["complete"]:
        res["status"] = "partial"
        res["efficiency"] = threads.efficiency(res["rows"])
    return res


def kwave_omp_binary(ctx: dict) -> str | None:
    """k-Wave's OMP binary, waiting up to ``--kwave-omp-wait-s`` for a build alongside."""
    a, meta = ctx["a"], ctx["res"].data["meta"]
    path = a.kwave_omp_binary
    if not path:
        meta["kwave_omp"] = "not given"
        return None
    t_end = time.perf_counter() + a.kwave_omp_wait_s
    while not os.access(path, os.X_OK) and time.perf_counter() < t_end:
        if Path(path + ".failed").exists():  # the build's marker of failure (gpu_check.sh)
            break
        time.sleep(2)
    ok = os.access(path, os.X_OK)
    meta["kwave_omp"] = path if ok else f"missing: {path}"
    log = a.kwave_omp_build_log
    if log and log.exists():
        meta["kwave_omp_build_log_tail"] = log.read_text()[-2000:]
    return path if ok else None


def part_cpu_scaling(ctx: dict) -> None:
    """Starts once both k-Wave builds have ended (neither compiles on the cores it times)."""
    kwave_binary(ctx)
    spec = {**ctx["cfg"]["cpu_scaling"], "kwave": kwave_omp_binary(ctx)}
    cap = ctx["clock"].cap(ctx["cfg"]["caps"]["cpu_scaling"])
    if cap is None:
        ctx["res"].put("cpu_scaling", {"status": "skipped", "why": "time budget spent"})
        return
    spec["cap_s"] = cap
    ctx["res"].put("cpu_scaling", {"status": "running"})
    ctx["res"].put("cpu_scaling", run_worker("cpu_scaling", spec, cap, ctx["env"]))


def summary_cpu_scaling(part: dict) -> None:
    """Loop time per step and parallel efficiency per case, program and thread count."""
    for case, per in part.get("efficiency", {}).items():
        for tool in ("sonotile", "kwave"):
            cells = per.get(tool, {})
            text = "  ".join(f"{t}:{c['loop_ms_per_step']:.0f}ms/" + (
                f"{c['loop_efficiency']:.2f}" if "loop_efficiency" in c else "-")
                for t, c in cells.items())  # fmt: skip
            if text:
                print(f"cpu {case[:28]:28s} {tool:8s} threads:ms/step/efficiency {text}")


WORKERS["cpu_scaling"] = w_cpu_scaling


PARTS = (
    ("env", part_simple("env", lambda ctx: {"copy_mib": ctx["cfg"]["copy_mib"]})),
    ("reference", part_simple("reference", lambda ctx: {
        "cases": [str(p) for p in reference_cases(ctx["cfg"])]})),
    ("throughput", part_throughput),
    ("kwave_reference", part_kwave_reference),
    ("profile", part_profile),
    ("largest", part_largest),
    ("gradients", part_simple("gradients", lambda ctx: {
        "n": ctx["cfg"]["grad_n"], "nt": ctx["cfg"]["grad_nt"]})),
    ("parallel", part_simple("parallel", lambda ctx: {
        "n": ctx["cfg"]["parallel_n"], "nt": ctx["cfg"]["parallel_nt"]})),
)  # fmt: skip
PARTS += (("cpu_scaling", part_cpu_scaling),)


# --------------------------------------------------------------------------- summary


def print_summary(data: dict) -> None:
    """A short table last (the device tool returns the end of the output)."""
    parts = data["parts"]
    print("\n== gpu_check summary ==")
    env = parts.get("env", {})
    print(f"device {env.get('device_kind')}  jax {env.get('jax')}  "
          f"copy {(env.get('copy_bandwidth_Bps') or 0) / 1e9:.0f} GB/s")  # fmt: skip
    ref = parts.get("reference", {})
    print(f"reference: {ref.get('n_ok')}/{len(ref.get('cases', []))} within tolerance, "
          f"control detected: {ref.get('control', {}).get('detected')}")  # fmt: skip
    for row in parts.get("throughput", {}).get("rows", []):
        s, k = row.get("sonotile", {}), row.get("kwave_cuda", {})
        print(
            f"{row['case']:20s} {row['n']:4d}^3  sonotile {s.get('ms_per_step') or 0:8.2f} "
            f"ms/step {s.get('mcells_per_s') or 0:8.0f} Mcells/s  "
            f"{(s.get('peak_device_bytes_per_point') or 0):6.1f} B/pt  "
            f"k-Wave CUDA {k.get('ms_per_step') or 0:8.2f} ms/step  {s.get('status')}"
        )
    summary_step_compare(parts.get("step_compare", {}))
    summary_whole_step(parts.get("whole_step", {}))
    kref = parts.get("kwave_reference", {}).get("cases", [])
    n_in = sum(bool(c.get("within_sonotile_rule")) for c in kref)
    print(f"k-Wave CUDA vs OMP: {n_in}/{len(kref)} within the same rule")
    for k, v in parts.get("largest", {}).items():
        if isinstance(v, dict):
            print(
                f"largest {k:30s} ran {v.get('largest_n_ran')}  failed "
                f"{v.get('smallest_n_failed')}  predicted {v.get('predicted_n')}"
            )
    summary_cpu_scaling(parts.get("cpu_scaling", {}))
    summary_plan(parts.get("plan", {}))
    summary_models(parts.get("models", {}))
    summary_mpi_one_gpu(parts.get("mpi_one_gpu", {}))
    for name in ("gradients", "gradients_cufft"):
        g = parts.get(name, {})
        if "gradient_s" in g:
            print(f"{name:16s} fft {g.get('fft')}  value_and_grad {g['gradient_s']:.2f} s = "
                  f"{g.get('gradient_over_forward') or 0:.2f}x forward")  # fmt: skip
    for name, p in parts.items():
        print(f"part {name:16s} {p.get('status', 'ok'):8s} {p.get('seconds') or 0:7.1f} s")


# the stacked step's part (its functions: the section "stacked step" above)
WORKERS["step_compare"] = w_step_compare
PARTS += (("step_compare", part_step_compare),)


# --------------------------------------------------------------------------- whole program

#: sonotile-kwave as whole processes with SONOTILE_STEP / SONOTILE_FFT variants
#: (sonotile.bench.step_runs) on the bench inputs the throughput part writes
FULL["whole_step"] = {"rows": [["lossless", 256, 300], ["absorbing_nonlinear", 256, 300]],
                      "lib_wait_s": 60}  # fmt: skip
DRY["whole_step"] = {"rows": [["lossless", 12, 8], ["absorbing_nonlinear", 16, 8]],
                     "lib_wait_s": 0}  # fmt: skip
FULL["caps"]["whole_step"], DRY["caps"]["whole_step"] = 240, 240


def w_whole_step(spec: dict) -> dict:
    """Each row's input written, then every variant on it, cold and warm."""
    from sonotile.bench import step_runs
    from sonotile.bench.inprocess import write_input

    lib = os.environ.get("SONOTILE_CUFFT_LIB")
    names = step_runs.variants(lib)
    r: dict[str, Any] = {"cufft_lib": lib, "variants": names, "rows": []}
    for case, n, steps in spec["rows"]:
        row: dict[str, Any] = {"case": case, "n": n, "steps": steps}
        r["rows"].append(row)
        with tempfile.TemporaryDirectory(prefix="gpu_check_whole_") as work:
            path = os.path.join(work, "input.h5")
            write_input(path, case, n, steps)
            row.update(step_runs.sweep(path, steps, names, work, dict(os.environ),
                                       on_row=lambda _: partial(r)))  # fmt: skip
        partial(r)
    return r


def run_on_cufft(ctx: dict, part: str, worker: str, spec: dict) -> dict | None:
    """``worker`` for ``part`` with the cuFFT library in its environment (:func:`_lib_env`,
    waiting as ``whole_step`` does), within the part's cap; None, recorded as skipped, where
    the budget is spent."""
    cap = ctx["clock"].cap(ctx["cfg"]["caps"][part])
    if cap is None:
        ctx["res"].put(part, {"status": "skipped", "why": "time budget spent"})
        return None
    ctx["res"].put(part, {"status": "running"})
    env = _lib_env(ctx, ctx["cfg"]["whole_step"]["lib_wait_s"])
    cap = ctx["clock"].cap(ctx["cfg"]["caps"][part]) or cap
    return run_worker(worker, spec, cap, env)


def part_whole_step(ctx: dict) -> None:
    """The worker's rows, each with k-Wave CUDA's loop time at that case and size (this run's
    ``throughput`` part, else ``--prior``'s) over each variant's warm loop time."""
    r = run_on_cufft(ctx, "whole_step", "whole_step", {"rows": ctx["cfg"]["whole_step"]["rows"]})
    if r is None:
        return
    if "rows" not in r and isinstance(r.get("partial"), dict):  # cut off: the rows it had
        r["rows"] = r["partial"].get("rows", [])
    parts, prior = ctx["res"].data["parts"], ctx.get("prior", {})
    kw_rows = parts.get("throughput", {}).get("rows") or prior.get("throughput", {}).get("rows", [])
    for row in r.get("rows", []):
        kw = [t.get("kwave_cuda", {}).get("ms_per_step") for t in kw_rows
              if t.get("case") == row.get("case") and t.get("n") == row.get("n")]  # fmt: skip
        for v, runs in row.get("runs", {}).items():
            ms = runs.get("warm", {}).get("loop_ms_per_step")
            if kw and kw[0] and ms:
                row.setdefault("kwave_over", {})[v] = kw[0] / ms
    ctx["res"].put("whole_step", r)


def summary_whole_step(part: dict) -> None:
    """Per row and variant: the warm loop's ms/step, k-Wave's over it, the drift of p."""
    for row in part.get("rows", []):
        for v, runs in row.get("runs", {}).items():
            warm, cold = runs.get("warm", {}), runs.get("cold", {})
            drift = row.get("max_rel_diff_vs_plain", {}).get(v, {}).get("p")
            print(f"whole {row['case'][:20]:20s} {row['n']:4d}^3 {v:14s} "
                  f"{warm.get('loop_ms_per_step') or 0:8.2f} ms/step warm, wall "
                  f"{cold.get('wall_s') or 0:6.1f} s cold {warm.get('wall_s') or 0:6.1f} s warm, "
                  f"k-Wave/this {row.get('kwave_over', {}).get(v) or 0:.2f}x, "
                  f"drift p {drift if drift is not None else float('nan'):.1e}, "
                  f"{warm.get('decomposition') or warm.get('error', '')[:60]}")  # fmt: skip


WORKERS["whole_step"] = w_whole_step
PARTS += (("whole_step", part_whole_step),)


def part_gradients_cufft(ctx: dict) -> None:
    """The ``gradients`` worker with sonotile's cuFFT calls (``SONOTILE_CUFFT_LIB``): on one
    GPU ``make_simulator`` takes the stacked step, its primal on the calls and its derivatives
    on XLA's FFT; ``gradient_over_forward`` beside the ``gradients`` part's (XLA's FFT, plain
    step)."""
    spec = {"n": ctx["cfg"]["grad_n"], "nt": ctx["cfg"]["grad_nt"]}
    r = run_on_cufft(ctx, "gradients_cufft", "gradients", spec)
    if r is not None:
        ctx["res"].put("gradients_cufft", r)


FULL["caps"]["gradients_cufft"], DRY["caps"]["gradients_cufft"] = 90, 90
PARTS += (("gradients_cufft", part_gradients_cufft),)


# --------------------------------------------------------------------------- the plan


def w_plan(spec: dict) -> dict:
    """``sonotile plan`` end to end on the synthetic head, one row per resolution: the CT
    written as NIfTI, then the command in this process (``--optimize`` where the row asks),
    its wall time and ``plan.json``'s ``timings_s`` (per stage) and figures."""
    import tempfile

    import numpy as np

    from sonotile.commands.cli import main as cli
    from sonotile.planning.images import write_nifti
    from sonotile.planning.phantom import head_phantom

    target, direction = np.array([0.0, 10.0, 30.0]), np.array([0.2, 0.1, 1.0])
    entry = target + 70 * direction / np.linalg.norm(direction)
    r: dict[str, Any] = {"rows": []}
    for row in spec["rows"]:
        folder = tempfile.mkdtemp(prefix="gpu-check-plan-")
        mm, f0, ppw = row["ct_mm"], row["f0"], row["ppw"]
        t0 = time.perf_counter()
        n = [int(np.ceil(2 * s / mm)) for s in (80.0, 96.0, 84.0)]
        ct = head_phantom(tuple(n), mm, seed=0)
        path = os.path.join(folder, "head.nii.gz")
        write_nifti(path, ct.hu, ct)
        out: dict[str, Any] = {**row, "ct_shape": n, "phantom_s": time.perf_counter() - t0}
        argv = ["plan", path, "--target", *map(str, target), "--entry", *map(str, entry),
                "--transducer", spec["transducer"], "--frequency", str(f0), "--ppw", str(ppw),
                "--focal_pressure", "1e6", "--duration", "10", "-o",
                os.path.join(folder, "plan")]  # fmt: skip
        if row.get("optimize"):
            argv += ["--optimize", "--groups", str(row["groups"])]
        t0 = time.perf_counter()
        out["status"] = cli(argv)
        out["plan_s"] = time.perf_counter() - t0
        plan_json = os.path.join(folder, "plan", "plan.json")
        if os.path.exists(plan_json):
            with open(plan_json) as f:
                done = json.load(f)
            out["timings_s"] = done.get("timings_s")
            out["grid"] = done.get("grid")
            out["optimized_timings_s"] = (done.get("optimized") or {}).get("timings_s")
        out["peak_device_bytes"] = peak_device_bytes()
        r["rows"].append(out)
        partial(r)
    return r


def part_plan(ctx: dict) -> None:
    """``sonotile plan`` on the GPU (see :func:`w_plan`)."""
    cap = ctx["clock"].cap(ctx["cfg"]["caps"]["plan"])
    if cap is None:
        ctx["res"].put("plan", {"status": "skipped", "why": "time budget spent"})
        return
    ctx["res"].put("plan", {"status": "running"})
    r = run_worker("plan", ctx["cfg"]["plan"], cap, ctx["env"])
    if "rows" not in r and isinstance(r.get("partial"), dict):  # cut off: the rows it had
        r["rows"] = r["partial"].get("rows", [])
    ctx["res"].put("plan", r)


def summary_plan(part: dict) -> None:
    for row in part.get("rows", []):
        print(f"plan {row['ct_mm']} mm{' --optimize' if row.get('optimize') else '':11s} "
              f"status {row.get('status')}  {row.get('plan_s') or 0:7.1f} s  stages "
              f"{row.get('timings_s')}")  # fmt: skip


#: the 0.5 mm plan (6 points per wavelength at 500 kHz) and the optimised 1 mm plan
FULL["plan"] = {"transducer": "array:128:64:64:4", "rows": [
    {"ct_mm": 0.5, "f0": 500e3, "ppw": 6},
    {"ct_mm": 1.0, "f0": 500e3, "ppw": 3, "optimize": True, "groups": 16},
]}  # fmt: skip
DRY["plan"] = {"transducer": "array:32:64:64:8", "rows": [
    {"ct_mm": 4.0, "f0": 150e3, "ppw": 2.5},
    {"ct_mm": 4.0, "f0": 150e3, "ppw": 2.5, "optimize": True, "groups": 4},
]}  # fmt: skip
FULL["caps"]["plan"], DRY["caps"]["plan"] = 300, 300
WORKERS["plan"] = w_plan
PARTS += (("plan", part_plan),)


# --------------------------------------------------------------------------- other models

#: ``benchmarks/elastic/elastic_step.py``'s line per variant
ELASTIC_ROW = re.compile(r"^\s+(\S+)\s+([\d.]+) ms/step \(min\s+([\d.]+)\)\s+x([\d.]+)\s+"
                         r"memory\s+([\d.]+) B/pt.*XLA\s+([\d.]+|nan) B/pt/step")  # fmt: skip
#: ``benchmarks/heat/heat_step.py``'s line per variant
HEAT_ROW = re.compile(r"^\s+(\S+)\s+wall\s+([\d.]+) ms/step \(min\s+([\d.]+)\)\s+([\d.]+) x")


def _step_script(script: str, args: list[str], pattern: re.Pattern, keys: tuple[str, ...],
                 timeout: float) -> dict:  # fmt: skip
    """Run a step benchmark of ``benchmarks/`` on the default device: its rows by variant
    (the numbers its ``pattern`` takes, named ``keys``) and the end of its output."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    try:
        out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                             cwd=ROOT, env=env, capture_output=True, text=True,
                             timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
        return {"status": "timeout", "output_tail": text[-3000:]}
    rows = {}
    for line in out.stdout.splitlines():
        m = pattern.match(line)
        if m:
            rows[m.group(1)] = dict(zip(keys, map(float, m.groups()[1:])))
    return {"status": "ok" if out.returncode == 0 else "failed", "returncode": out.returncode,
            "rows": rows, "output_tail": (out.stdout + out.stderr)[-3000:]}  # fmt: skip


def w_models(spec: dict) -> dict:
    """The elastic and heat steps against the acoustic absorbing step on the same grid, on the
    default device (the issue's bounds: elastic <= 2.0x, heat <= 0.3x the acoustic step):
    ``elastic_step.py`` (Kelvin-Voigt, lossless, slip) and ``heat_step.py`` (homogeneous, one
    conductivity, heterogeneous, insulating and conducting faces)."""
    e, h = spec["elastic"], spec["heat"]
    r: dict[str, Any] = {}
    r["elastic"] = _step_script(
        "elastic/elastic_step.py",
        ["--size", str(e["n"]), "--steps", str(e["steps"]), "--rounds", str(e["rounds"]),
         "--variants", e["variants"]],
        ELASTIC_ROW, ("ms_per_step", "min_ms_per_step", "over_acoustic", "bytes_per_point",
                      "xla_bytes_per_point_step"),
        spec["timeout_s"],
    )  # fmt: skip
    partial(r)
    r["heat"] = _step_script(
        "heat/heat_step.py",
        ["--size", str(h["n"]), "--steps", str(h["steps"]), "--rounds", str(h["rounds"])],
        HEAT_ROW, ("ms_per_step", "min_ms_per_step", "over_acoustic"), spec["timeout_s"],
    )  # fmt: skip
    return r


#: the elastic and heat steps on the GPU (see :func:`w_models`); each script within half the cap
part_models = part_simple("models", lambda ctx: {
    **ctx["cfg"]["models"], "timeout_s": ctx["cfg"]["caps"]["models"] / 2})  # fmt: skip


def summary_models(part: dict) -> None:
    for model in ("elastic", "heat"):
        for name, row in part.get(model, {}).get("rows", {}).items():
            print(f"{model:8s} {name:18s} {row['ms_per_step']:8.2f} ms/step "
                  f"{row['over_acoustic']:5.2f}x the acoustic step")  # fmt: skip


_ELASTIC_VARIANTS = "acoustic,acoustic-xla,elastic,elastic-lossless,elastic-slip"
FULL["models"] = {"elastic": {"n": 256, "steps": 10, "rounds": 2, "variants": _ELASTIC_VARIANTS},
                  "heat": {"n": 256, "steps": 20, "rounds": 2}}  # fmt: skip
DRY["models"] = {"elastic": {"n": 24, "steps": 2, "rounds": 1, "variants": _ELASTIC_VARIANTS},
                 "heat": {"n": 24, "steps": 2, "rounds": 1}}  # fmt: skip
FULL["caps"]["models"], DRY["caps"]["models"] = 180, 180
WORKERS["models"] = w_models
PARTS += (("models", part_models),)


# --------------------------------------------------------------------------- two ranks, one GPU

#: Open MPI's and mpi4py's wheels (for the image's Python), carried where the host has no MPI
#: (benchmarks/gpu_carry.sh)
MPI_WHEELS = ROOT / ".gpu-carry" / "mpi-wheels"
MPI_PREFIX = Path("/tmp/sonotile-mpi")


def mpi_environment() -> dict:
    """``mpirun`` and mpi4py for the two-rank runs: the Python environment's own, else the
    carried wheels installed under :data:`MPI_PREFIX`. The environment to run them in (and
    what was found), or ``{"error": ...}``."""
    here = Path(sys.executable).parent / "mpirun"
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "PYTHONPATH": str(ROOT / "src")}  # fmt: skip
    if here.exists() or shutil.which("mpirun"):
        mpirun = str(here) if here.exists() else shutil.which("mpirun")
        return {"env": env, "mpirun": mpirun, "from": "host"}
    wheels = sorted(str(w) for w in MPI_WHEELS.glob("*.whl"))
    if not wheels:
        return {"error": f"no mpirun on this host and no wheels in {MPI_WHEELS}"}
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                        "--no-compile", "--ignore-installed", "--prefix", str(MPI_PREFIX), *wheels],
                       capture_output=True, text=True)  # fmt: skip
    site = next(iter(MPI_PREFIX.glob("lib/python3*/site-packages")), None)
    if r.returncode != 0 or site is None:
        return {"error": f"installing {wheels}: {(r.stdout + r.stderr)[-1500:]}"}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{env['PYTHONPATH']}"
    env["PATH"] = f"{MPI_PREFIX / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {"env": env, "mpirun": str(MPI_PREFIX / "bin" / "mpirun"), "from": wheels}


def _ranks(mpi: dict, cmd: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``cmd`` on 2 MPI ranks sharing the device, each allowed under half of its memory."""
    env = {**mpi["env"], "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
           "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.45"}  # fmt: skip
    passed = (
        "PATH",
        "PYTHONPATH",
        "XLA_PYTHON_CLIENT_PREALLOCATE",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
    )  # each rank's environment, said outright
    full = [mpi["mpirun"], "-n", "2", "--oversubscribe", "--bind-to", "none",
            *[a for name in passed for a in ("-x", name)], *cmd]  # fmt: skip
    return subprocess.run(full, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def _relative_errors(ours: Path, ref: Path) -> dict:
    import h5py
    import numpy as np

    errs = {}
    with h5py.File(ref, "r") as f, h5py.File(ours, "r") as g:
        for k in ("p", "p_final"):
            if k in f and k in g:
                a, b = np.asarray(g[k], np.float64), np.asarray(f[k], np.float64)
                errs[k] = float(np.abs(a - b).max() / (np.abs(b).max() or 1.0))
    return errs


def w_mpi_one_gpu(spec: dict) -> dict:
    """Two MPI ranks sharing the one device (the MPI transport, staged through host memory on
    a GPU), LFB and pencil: ``sonotile-kwave`` against one process on the same input (pencil
    within 1e-5 of the largest value, LFB within 1e-3), then ms per step and bytes each rank
    sends per step (``rank_step.py``, 2n x n x n over the ranks against n^3 alone)."""
    from sonotile.bench.inprocess import write_input

    mpi = mpi_environment()
    if "error" in mpi:
        return {"status": "failed", "error": mpi["error"]}
    r: dict[str, Any] = {"mpi_from": mpi["from"], "agree": {}, "steps": {}}
    kwave = [sys.executable, "-m", "sonotile.kwave.cli"]
    with tempfile.TemporaryDirectory(prefix="mpi_one_gpu_") as work:
        inp, single = Path(work) / "in.h5", Path(work) / "single.h5"
        write_input(str(inp), "ivp_absorbing_nonlinear", spec["n_compare"], spec["steps"])
        one = subprocess.run([*kwave, "-i", inp, "-o", single, "-p", "--p_final"], cwd=ROOT,
                             env=mpi["env"], capture_output=True, text=True)  # fmt: skip
        r["single_returncode"] = one.returncode
        for dec, tol in (("pencil", 1e-5), ("lfb", 1e-3)):
            out, t0 = Path(work) / f"{dec}.h5", time.perf_counter()
            two = _ranks(mpi, [*kwave, "-i", str(inp), "-o", str(out), "-p", "--p_final",
                               "--decomposition", dec, "--transport", "mpi", "--verbose", "2"],
                         spec["timeout_s"])  # fmt: skip
            row: dict[str, Any] = {"returncode": two.returncode,
                                   "seconds": time.perf_counter() - t0, "tol": tol}  # fmt: skip
            row["engine"] = next((ln for ln in two.stderr.splitlines() if " on " in ln
                                  and "mesh" in ln), "")[-300:]  # fmt: skip
            if two.returncode == 0 and one.returncode == 0:
                row["max_rel_error"] = _relative_errors(out, single)
                row["agree"] = all(e <= tol for e in row["max_rel_error"].values())
            else:
                row["log_tail"] = (two.stdout + two.stderr)[-2000:]
            r["agree"][dec] = row
            partial(r)
    step = [
        sys.executable,
        str(ROOT / "benchmarks" / "parallel" / "rank_step.py"),
        "--json",
        "--threads",
        "0",
        "--n",
        str(spec["n_step"]),
        "--steps",
        str(spec["step_steps"]),
    ]
    for kind in ("single", "lfb", "pencil"):
        cmd = [step[0], step[1], kind, *step[2:]]
        run = (subprocess.run(cmd, cwd=ROOT, env=mpi["env"], capture_output=True, text=True,
                              timeout=spec["timeout_s"]) if kind == "single"
               else _ranks(mpi, cmd, spec["timeout_s"]))  # fmt: skip
        r["steps"][kind] = _last(run.stdout, "RANK_STEP ") or {
            "returncode": run.returncode,
            "log_tail": (run.stdout + run.stderr)[-2000:],
        }
        partial(r)
    return r


def summary_mpi_one_gpu(part: dict) -> None:
    for dec, row in part.get("agree", {}).items():
        err = max(row.get("max_rel_error", {}).values(), default=float("nan"))
        print(f"2 ranks {dec:7s} agree={row.get('agree')} max rel error {err:.2e} "
              f"({row.get('seconds', 0):.0f} s)")  # fmt: skip
    for kind, row in part.get("steps", {}).items():
        sent = sum(row.get("sent_bytes_per_rank", {}).values()) / 2**20
        print(f"2 ranks step {kind:7s} {row.get('ms_per_step', float('nan')):8.2f} ms/step "
              f"{sent:8.1f} MiB sent per rank")  # fmt: skip


part_mpi_one_gpu = part_simple("mpi_one_gpu", lambda ctx: {
    **ctx["cfg"]["mpi_one_gpu"], "timeout_s": ctx["cfg"]["caps"]["mpi_one_gpu"] / 4})  # fmt: skip
FULL["mpi_one_gpu"] = {"n_compare": 128, "steps": 100, "n_step": 128, "step_steps": 10}
DRY["mpi_one_gpu"] = {"n_compare": 24, "steps": 8, "n_step": 32, "step_steps": 2}
FULL["caps"]["mpi_one_gpu"], DRY["caps"]["mpi_one_gpu"] = 200, 400
WORKERS["mpi_one_gpu"] = w_mpi_one_gpu
PARTS += (("mpi_one_gpu", part_mpi_one_gpu),)

if __name__ == "__main__":
    sys.exit(main())
