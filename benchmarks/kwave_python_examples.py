"""k-wave-python's example scripts through k-Wave's C++ solver and through sonotile-kwave.

For every example of k-wave-python (0.6.2: ``examples/*.py`` with ``run(backend="cpp")`` and the
``examples/legacy/*/*.py`` scripts, which call ``kspaceFirstOrder2D/3D/AS`` with the C++ or CUDA
binary), k-wave-python builds its HDF5 input file and calls its binary. The binary here is a
capture script (``$SONOTILE_KWAVE``, honoured by the wrapper of ``scripts/kwave_python_env.sh``)
that keeps the first input file and command line and stops the example. That input is then run
by k-Wave's ``kspaceFirstOrder-OMP`` (``-t 1``) and by ``sonotile-kwave`` with the same flags,
and every dataset of k-Wave's output is compared (:func:`sonotile.kwave.compare.compare`: the
tolerance of ``tests/kwave/test_reference.py``, max error relative to k-Wave's peak; the
relative L2 error is reported beside it).

Run (the examples of the installed k-wave-python version)::

    mkdir -p /tmp/kwp && git --git-dir=MIRROR archive v0.6.2 examples | tar x -C /tmp/kwp
    PYTHONPATH=src .venv/bin/python benchmarks/kwave_python_examples.py \
        --examples /tmp/kwp/examples --kwave-binary PATH/kspaceFirstOrder-OMP --json out.json

Inputs whose k-Wave run is estimated above ``--max-cost`` (grid points x time steps) are
listed as skipped, not run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import h5py
import numpy as np

from sonotile.kwave.compare import compare

REPO = Path(__file__).resolve().parents[1]
KWAVE_OMP = "/work/kwave-omp/kspaceFirstOrder-OMP"
CAPTURE = """#!/bin/sh
# k-wave-python's binary call: keep the input file and the command line, run nothing
prev=""
for a in "$@"; do
  if [ "$prev" = "-i" ]; then cp "$a" "$KWP_CAPTURE_DIR/input.h5"; fi
  prev="$a"
done
printf '%s\\n' "$@" > "$KWP_CAPTURE_DIR/args.txt"
echo "input captured by kwave_python_examples.py" >&2
exit 3
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


def capture(py: Path, script: Path, mode: str, work: Path, timeout: float, root: Path) -> str:
    """Run the example with the capture script as its binary; '' or why nothing was captured."""
    work.mkdir(parents=True, exist_ok=True)
    wrapper = work / "capture.sh"
    wrapper.write_text(CAPTURE)
    wrapper.chmod(0o755)
    env = {
        **os.environ,
        "SONOTILE_KWAVE": str(wrapper),
        "KWP_CAPTURE_DIR": str(work),
        "MPLBACKEND": "Agg",
    }
    env.pop("PYTHONPATH", None)
    try:
        r = subprocess.run(
            [str(py), "-c", DRIVER, str(script), mode, str(root)],
            env=env,
            timeout=timeout,
            capture_output=True,
            text=True,
        )
    except subprocess.TimeoutExpired:
        return f"no binary call within {timeout:.0f} s of Python set-up"
    if (work / "input.h5").exists():
        return ""
    tail = (r.stderr or r.stdout).strip().splitlines()
    return "no binary call: " + (tail[-1] if tail else f"exit {r.returncode}")


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
    res.note = "; ".join(f"{r.name}: {r.problem or f'{r.error:.1e}'}" for r in rows if not r.ok)


def one(name: str, script: Path, mode: str, a: argparse.Namespace) -> Result:
    """Capture, size, run both solvers and compare one example."""
    res = Result(name)
    work = a.work / name.replace("/", "_")
    why = (
        ""
        if (work / "input.h5").exists() and a.reuse
        else capture(
            a.kwave_python, script, mode, work, a.setup_timeout, a.examples.resolve().parent
        )
    )
    if why:
        res.note = why
        return res
    grid, nt, medium = size_of(work / "input.h5")
    res.flags, res.steps = flags_of(work), nt
    res.grid = "x".join(str(n) for n in grid if n > 1) + (
        " AS" if medium.get("axisymmetric_flag") else ""
    )
    cost = float(np.prod(grid)) * nt
    if cost > a.max_cost:
        res.status, res.note = "skipped", f"{cost:.1e} point-steps > --max-cost {a.max_cost:.0e}"
        return res
    solvers = {
        "kwave": [str(a.kwave_binary)],
        "sonotile": [sys.executable, "-m", "sonotile.kwave.cli"],
    }
    try:
        for name, cmd in solvers.items():
            t = run_solver(cmd, work, name, res.flags, a.run_timeout)
            res.t_kwave_s, res.t_sonotile_s = (
                (t, res.t_sonotile_s) if name == "kwave" else (res.t_kwave_s, t)
            )
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        res.note = str(e).splitlines()[-1][:200]
        return res
    judge(res, work, medium)
    return res


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
        verdict = r.status + (f" ({r.note})" if r.note and r.status != "pass" else "")
        lines.append(
            f"| {r.example} | {r.grid} | {r.steps or ''} | {r.outputs or ''} | "
            f"{r.worst} | {err} | {l2} | {tol} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=Path, required=True, help="k-wave-python's examples/")
    ap.add_argument("--kwave-binary", type=Path, default=Path(KWAVE_OMP))
    ap.add_argument("--kwave-python", type=Path, default=REPO / ".venv-kwave-python/bin/python")
    ap.add_argument("--work", type=Path, default=Path("/tmp/kwp_examples"))
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--only", nargs="*", help="example names (as printed) to run")
    ap.add_argument("--max-cost", type=float, default=3e9, help="grid points x steps")
    ap.add_argument("--setup-timeout", type=float, default=300.0)
    ap.add_argument("--run-timeout", type=float, default=600.0)
    ap.add_argument("--reuse", action="store_true", help="reuse captured inputs in --work")
    a = ap.parse_args(argv)
    results = []
    for name, script, mode in examples(a.examples):
        if a.only and name not in a.only:
            continue
        results.append(one(name, script, mode, a))
        r = results[-1]
        print(
            f"{name:45s} {r.status:8s} {r.grid:14s} {r.steps:6d} {r.max_rel:.1e} "
            f"kwave {r.t_kwave_s:.1f}s sonotile {r.t_sonotile_s:.1f}s {r.note}",
            flush=True,
        )
        if a.json:
            a.json.write_text(json.dumps([asdict(x) for x in results], indent=1))
    print(table(results))
    return 0 if all(r.status in ("pass", "skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
