"""k-wave-python's example scripts through k-Wave's C++ solver and through sonotile-kwave.

Every example of k-wave-python (0.6.2: ``examples/*.py``, run as ``run(backend="cpp")``, and
the ``examples/legacy/*/*.py`` scripts, which call ``kspaceFirstOrder2D/3D/AS`` with the OMP or
CUDA binary) builds its HDF5 input file and calls its binary. The binary here is a capture
script (``$SONOTILE_KWAVE``, honoured by the wrapper of ``scripts/kwave_python_env.sh``): it
keeps each call's input file and command line (up to ``--max-calls``) and lets k-Wave answer it
so that the example goes on to its next call. Each distinct input is then run by k-Wave's
``kspaceFirstOrder-OMP`` (``-t 1``) and by ``sonotile-kwave`` with the same flags (a run that
stops at a checkpoint is run again to resume, as the example does), and every dataset of
k-Wave's output is compared by :func:`sonotile.kwave.compare.compare`, the rule of
``tests/kwave/test_reference.py``: max error relative to k-Wave's peak within 1e-4 (5e-4
absorbing or nonlinear, 1e-3 for ``*_final``); the relative L2 error is reported beside it.
A failing dataset is also computed by sonotile in double precision: when sonotile's distance
from k-Wave is within twice k-Wave's own distance from that answer, the row says ``float32``
(single-precision round-off of both solvers, not a disagreement).

An input above ``--max-cost`` grid points x time steps is run for its first steps only (both
solvers' ``--benchmark N``), or skipped when that leaves fewer than ``--min-steps``.
Statuses: pass, FAIL, float32, refused (k-Wave refuses the input and sonotile does too, with a
message), skipped, no call (the example stops before calling its binary), error.

Run (the examples of the installed k-wave-python version; MIRROR a clone of k-wave-python)::

    mkdir -p /tmp/kwp && git --git-dir=MIRROR archive v0.6.2 examples \
        tests/EXAMPLE_source_one.png tests/EXAMPLE_source_two.bmp | tar x -C /tmp/kwp
    PYTHONPATH=src .venv/bin/python benchmarks/accuracy/kwave_python_examples.py \
        --examples /tmp/kwp/examples --kwave-binary PATH/kspaceFirstOrder-OMP --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import h5py
import numpy as np

from sonotile.kwave.compare import compare

REPO = Path(__file__).resolve().parents[2]
CAPTURE = """#!/bin/sh
# k-wave-python's binary: keep each call's input file and command line (up to $KWP_MAX_CALLS),
# then let k-Wave answer it (-t 1) so that the example goes on to its next call
n=0
while [ -d "$KWP_CAPTURE_DIR/call$n" ]; do n=$((n+1)); done
if [ "$n" -ge "$KWP_MAX_CALLS" ]; then exit 3; fi
d="$KWP_CAPTURE_DIR/call$n"
mkdir -p "$d"
prev=""
for a in "$@"; do
  if [ "$prev" = "-i" ]; then cp "$a" "$d/input.h5"; fi
  prev="$a"
done
printf '%s\\n' "$@" > "$d/args.txt"
if [ "$n" -ge $((KWP_MAX_CALLS - 1)) ]; then exit 3; fi
"$KWP_PYTHON" -c "$KWP_SMALL" "$d/input.h5" || exit 3
skip=0
for a in "$@"; do
  shift
  if [ $skip = 1 ]; then skip=0; continue; fi
  if [ "$a" = "-t" ]; then skip=1; continue; fi
  set -- "$@" "$a"
done
exec "$KWP_KWAVE" "$@" -t 1
"""
SMALL = """
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], "r")
cost = np.prod([float(f[k][()].ravel()[0]) for k in ("Nx", "Ny", "Nz", "Nt")])
sys.exit(0 if cost <= {max_cost} else 1)
"""
DRIVER = """
import os, runpy, sys, importlib.util
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.show = lambda *a, **k: None
path = sys.argv[1]
os.chdir(sys.argv[3])
sys.path[:0] = [os.path.dirname(path), sys.argv[3]]
if sys.argv[2] == "run":
    spec = importlib.util.spec_from_file_location("example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.run(backend="cpp", device="cpu", quiet=True)
else:
    runpy.run_path(path, run_name="__main__")
"""
DROP = {"-i": 1, "-o": 1, "-t": 1, "-g": 1, "--verbose": 1}


@dataclass
class Result:
    """One example's verdict; ``status`` is pass, FAIL, skipped or error."""

    example: str
    status: str = "error"
    grid: str = ""
    steps: int = 0
    flags: list[str] = field(default_factory=list)
    fields: list[str] = field(default_factory=list)
    outputs: int = 0
    worst: str = ""
    max_rel: float = float("nan")
    l2_rel: float = float("nan")
    tol: float = float("nan")
    t_kwave_s: float = float("nan")
    t_sonotile_s: float = float("nan")
    note: str = ""


def examples(root: Path) -> list[tuple[str, Path, str]]:
    """(name, script, mode): ``run`` for the examples with ``run(backend=...)``, else ``script``."""
    out = []
    for p in sorted(root.glob("*.py")):
        mode = "run" if "def run(" in p.read_text() else "script"
        out.append((p.stem, p, mode))
    for p in sorted(root.glob("legacy/*/*.py")):
        if p.stem != "example_utils":
            out.append((f"legacy/{p.stem}", p, "script"))
    return out


def capture(script: Path, mode: str, work: Path, a: argparse.Namespace) -> str:
    """Run the example with the capture script as its binary; '' or why nothing was captured."""
    work.mkdir(parents=True, exist_ok=True)
    wrapper = work / "capture.sh"
    wrapper.write_text(CAPTURE)
    wrapper.chmod(0o755)
    env = {**os.environ, "SONOTILE_KWAVE": str(wrapper), "KWP_CAPTURE_DIR": str(work),
           "KWP_MAX_CALLS": str(a.max_calls), "KWP_KWAVE": str(a.kwave_binary),
           "KWP_PYTHON": sys.executable, "KWP_SMALL": SMALL.format(max_cost=a.max_cost),
           "MPLBACKEND": "Agg"}  # fmt: skip
    env.pop("PYTHONPATH", None)
    root = str(a.examples.resolve().parent)
    proc = subprocess.Popen([str(a.kwave_python), "-c", DRIVER, str(script), mode, root],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        said = proc.communicate(timeout=a.setup_timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        said = proc.communicate()[0] + f"\nstopped after {a.setup_timeout:.0f} s"
    if (work / "call0" / "input.h5").exists():
        return ""
    tail = said.strip().splitlines()
    return "no binary call: " + (tail[-1] if tail else f"exit {proc.returncode}")


def flags_of(work: Path) -> list[str]:
    """The captured command line less input, output, threads, device and verbosity."""
    args = (work / "args.txt").read_text().split("\n")
    out, i = [], 0
    while i < len(args):
        if args[i] in DROP:
            i += 1 + DROP[args[i]]
            continue
        if args[i]:
            out.append(args[i])
        i += 1
    return out


def size_of(path: Path) -> tuple[list[int], int, dict[str, bool]]:
    """Grid (k-Wave's Nx, Ny, Nz), time steps and the medium's flags of an input file."""
    with h5py.File(path, "r") as f:
        grid = [int(np.asarray(f[k][()]).ravel()[0]) for k in ("Nx", "Ny", "Nz")]
        nt = int(np.asarray(f["Nt"][()]).ravel()[0])
        med = {
            k: bool(np.asarray(f[k][()]).ravel()[0])
            for k in ("absorbing_flag", "nonlinear_flag", "axisymmetric_flag")
            if k in f
        }
    return grid, nt, med


def run_binary(cmd: list[str], inp: Path, out: Path, flags: list[str], timeout: float) -> float:
    """Run one solver on ``inp``; wall time in s (RuntimeError with its last words on failure)."""
    t0 = time.perf_counter()
    r = subprocess.run(
        [*cmd, "-i", str(inp), "-o", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if r.returncode != 0 or not out.exists():
        words = [
            ln.strip(" \u2502\u2500\u250c\u2510\u2514\u2518\u251c\u2524")
            for ln in (r.stderr + r.stdout).splitlines()
        ]
        words = [w for w in words if any(c.isalpha() for c in w)]
        said = next((w for w in words if w.startswith("Error")), words[-1] if words else "")
        raise RuntimeError(f"{Path(cmd[-1]).name} exit {r.returncode}: {said}")
    return time.perf_counter() - t0


def run_solver(cmd: list[str], work: Path, name: str, flags: list[str], timeout: float) -> float:
    """One solver on ``work/input.h5`` into ``work/NAME.h5`` (k-Wave with ``-t 1``); a run that
    stops at a checkpoint is run again to resume from it, as the example does. Wall time in s."""
    flags = [*flags, "-t", "1"] if name == "kwave" else list(flags)
    ckpt = work / f"{name}_checkpoint.h5"
    if "--checkpoint_file" in flags:
        flags[flags.index("--checkpoint_file") + 1] = str(ckpt)
    for f in (work / f"{name}.h5", ckpt):
        f.unlink(missing_ok=True)
    t = run_binary(cmd, work / "input.h5", work / f"{name}.h5", flags, timeout)
    if ckpt.exists():
        t += run_binary(cmd, work / "input.h5", work / f"{name}.h5", flags, timeout)
    return t


def l2_errors(ref: Path, ours: Path) -> dict[str, float]:
    """Relative L2 error of every dataset of ``ref`` present in ``ours`` with the same shape."""
    out: dict[str, float] = {}
    with h5py.File(ref, "r") as a, h5py.File(ours, "r") as b:

        def visit(name: str, obj: object) -> None:
            if isinstance(obj, h5py.Dataset) and name in b and b[name].shape == obj.shape:
                r, o = np.asarray(obj[()], float), np.asarray(b[name][()], float)
                out[name] = float(np.linalg.norm(o - r) / (np.linalg.norm(r) or 1.0))

        a.visititems(visit)
    return out


def judge(res: Result, work: Path, medium: dict[str, bool]) -> None:
    """Fill the comparison fields of ``res`` from ``work``'s two output files."""
    ref, ours = work / "kwave.h5", work / "sonotile.h5"
    rows = compare(ref, ours, {"medium": medium})
    l2 = l2_errors(ref, ours)
    worst = max(rows, key=lambda r: float("inf") if r.error is None else r.error / r.tol)
    with h5py.File(ref, "r") as f:
        res.fields = [r.name for r in rows if np.prod(f[r.name].shape) > 1]
    res.outputs = len(res.fields)
    res.worst, res.tol = worst.name, worst.tol
    res.max_rel = float("nan") if worst.error is None else worst.error
    res.l2_rel = max(l2.values(), default=float("nan"))
    res.status = "pass" if all(r.ok for r in rows) else "FAIL"
    bad = "; ".join(f"{r.name}: {r.problem or f'{r.error:.1e}'}" for r in rows if not r.ok)
    res.note = "; ".join(x for x in (res.note, bad) if x)


def fingerprint(work: Path) -> str:
    """The command line and every dataset of a captured input (a resumed call repeats both)."""
    h = hashlib.sha256("\n".join(flags_of(work)).encode())
    with h5py.File(work / "input.h5", "r") as f:
        for name in sorted(f):
            h.update(name.encode() + np.ascontiguousarray(f[name][()]).tobytes())
    return h.hexdigest()


def float32_floor(res: Result, work: Path) -> None:
    """For a failing comparison: how far each single-precision solver is from sonotile's
    double-precision answer on the worst dataset. When sonotile's distance from k-Wave is
    within twice k-Wave's own distance from the double-precision answer, the difference is
    float32 round-off (status ``float32``), not a disagreement of the methods."""
    with (
        h5py.File(work / "kwave.h5") as k,
        h5py.File(work / "sonotile.h5") as s32,
        h5py.File(work / "sonotile64.h5") as s64,
    ):
        ref = np.asarray(s64[res.worst][()], np.float64)
        scale = float(np.abs(ref).max()) or 1.0
        e_k = float(np.abs(np.asarray(k[res.worst][()], np.float64) - ref).max()) / scale
        e_s = float(np.abs(np.asarray(s32[res.worst][()], np.float64) - ref).max()) / scale
    res.note += f"; vs float64: k-Wave {e_k:.1e}, sonotile {e_s:.1e}"
    if res.max_rel <= 2 * e_k:
        res.status = "float32"


def both_refuse(
    res: Result, work: Path, sonotile: list[str], kwave_said: str, a: argparse.Namespace
) -> Result:
    """k-Wave refused the input: sonotile must refuse it too (status ``refused``), with a
    clear message, rather than give an answer k-Wave has no counterpart for."""
    try:
        res.t_sonotile_s = run_solver(sonotile, work, "sonotile", res.flags, a.run_timeout)
        res.status, res.note = "error", f"{kwave_said}; sonotile ran it"
    except RuntimeError as e:
        res.status, res.note = "refused", f"{kwave_said}; {e}"
    return res


def one_call(res: Result, work: Path, a: argparse.Namespace) -> Result:
    """Size one captured call, run both solvers on it and compare."""
    grid, nt, medium = size_of(work / "input.h5")
    res.flags, res.steps = flags_of(work), nt
    axisym = " AS" if medium.get("axisymmetric_flag") else ""
    res.grid = "x".join(str(n) for n in grid if n > 1) + axisym
    cost = float(np.prod(grid)) * nt
    if cost > a.max_cost:  # both run the first steps only (--benchmark, a flag of both)
        n = int(a.max_cost / np.prod(grid))
        if n < a.min_steps:
            res.status = "skipped"
            res.note = f"{cost:.1e} point-steps > --max-cost {a.max_cost:.0e}"
            return res
        res.flags += ["--benchmark", str(n)]
        res.note = f"first {n} of {nt} steps (--benchmark {n}): {cost:.1e} point-steps in all"
    sonotile = [sys.executable, "-m", "sonotile.kwave.cli"]
    try:
        res.t_kwave_s = run_solver([str(a.kwave_binary)], work, "kwave", res.flags, a.run_timeout)
    except RuntimeError as e:
        return both_refuse(res, work, sonotile, str(e), a)
    try:
        res.t_sonotile_s = run_solver(sonotile, work, "sonotile", res.flags, a.run_timeout)
        judge(res, work, medium)
        if res.status == "FAIL":
            run_solver([*sonotile, "--float64"], work, "sonotile64", res.flags, a.run_timeout)
            float32_floor(res, work)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        res.status, res.note = "error", str(e).splitlines()[-1][:200]
    return res


def one(name: str, script: Path, mode: str, a: argparse.Namespace) -> list[Result]:
    """Capture an example's binary calls; one :class:`Result` per distinct call."""
    work = a.work / name.replace("/", "_")
    fresh = not (a.reuse and (work / "call0" / "input.h5").exists())
    why = capture(script, mode, work, a) if fresh else ""
    if why:
        return [Result(name, status="no call", note=why)]
    out, seen = [], set()
    calls = sorted(work.glob("call*/input.h5"), key=lambda p: int(p.parent.name[4:]))
    for k, inp in enumerate(calls):
        key = fingerprint(inp.parent)
        if key not in seen:
            seen.add(key)
            label = name if k == 0 else f"{name} (call {k + 1})"
            out.append(one_call(Result(label), inp.parent, a))
    return out


def table(results: list[Result]) -> str:
    """The Markdown table of the docs."""
    lines = [
        "| example | grid | steps | outputs | worst dataset | max rel. err | L2 rel. err "
        "| tolerance | result |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        err = "" if np.isnan(r.max_rel) else f"{r.max_rel:.1e}"
        l2 = "" if np.isnan(r.l2_rel) else f"{r.l2_rel:.1e}"
        tol = "" if np.isnan(r.tol) else f"{r.tol:.0e}"
        verdict = r.status + (f" ({r.note})" if r.note else "")
        lines.append(
            f"| {r.example} | {r.grid} | {r.steps or ''} | {r.outputs or ''} | "
            f"{r.worst} | {err} | {l2} | {tol} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=Path, required=True, help="k-wave-python's examples/")
    ap.add_argument("--kwave-binary", type=Path, required="KWAVE_OMP" not in os.environ,
                    default=os.environ.get("KWAVE_OMP"),
                    help="k-Wave's kspaceFirstOrder-OMP (default $KWAVE_OMP)")  # fmt: skip
    ap.add_argument("--kwave-python", type=Path, default=REPO / ".venv-kwave-python/bin/python")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kwp_examples"))
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--only", nargs="*", help="example names (as printed) to run")
    ap.add_argument("--max-cost", type=float, default=3e9, help="grid points x steps")
    ap.add_argument("--setup-timeout", type=float, default=300.0)
    ap.add_argument("--run-timeout", type=float, default=600.0)
    ap.add_argument("--min-steps", type=int, default=100, help="fewest steps of a partial run")
    ap.add_argument("--max-calls", type=int, default=3, help="binary calls kept per example")
    ap.add_argument("--reuse", action="store_true", help="reuse captured inputs in --work")
    a = ap.parse_args(argv)
    for what, path in (("--kwave-binary", a.kwave_binary), ("--kwave-python", a.kwave_python),
                       ("--examples", a.examples)):  # fmt: skip
        if not path.exists():
            ap.error(f"{what} {path}: not found (k-wave-python's environment: "
                     "bash scripts/kwave_python_env.sh)")  # fmt: skip
    results: list[Result] = []
    for name, script, mode in examples(a.examples):
        if a.only and name not in a.only:
            continue
        for r in one(name, script, mode, a):
            results.append(r)
            print(f"{r.example:45s} {r.status:8s} {r.grid:14s} {r.steps:6d} {r.max_rel:.1e} "
                  f"k-Wave {r.t_kwave_s:.1f} s sonotile {r.t_sonotile_s:.1f} s {r.note}",
                  flush=True)  # fmt: skip
        if a.json:
            a.json.write_text(json.dumps([asdict(x) for x in results], indent=1))
    print(table(results))
    ok = ("pass", "float32", "skipped", "refused", "no call")
    return 0 if all(r.status in ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
