"""``sonotile bench --profile``: where a step's time goes at 1 and at N threads, pass by pass.

For each thread count a process of its own (the count is fixed before JAX starts, as in
``sonotile-kwave -t``) compiles one case's steps, runs them under ``jax.profiler`` and sums the
XLA:CPU executor's events per instruction of the compiled program: each FFTW custom call (the
transforms and the operators fused with them, their jobs on XLA's intra-op pool), each XLA
fusion (element-wise work, split in work groups on the same pool), each copy. The table gives
per pass the ms per step at each count and the speed-up over the first count, then the totals
per kind, so a run on a quiet machine shows which pass scales badly. The events are wall time
on the thread that ran the pass; with more than one thread XLA may run independent passes side
by side, so their sum can exceed the step (both are printed). Passes are matched across counts
by instruction name; one the other count's program does not have shows 0 there (the totals
per kind do not depend on names).

    sonotile bench --profile --threads 1,2 --size 128 --case point_additive_absorbing_nonlinear
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

from sonotile.base.cliargs import Parser
from sonotile.bench.report import json_file, write_json
from sonotile.bench.whole import KNOWN_CASES, thread_counts

#: executor events that hold other events, not passes of their own
_CONTAINERS = re.compile(r"^(while|call|conditional)(\.\d+)?$|::|^end: ")


def kinds(hlo: str) -> dict[str, str]:
    """Instruction name -> what it is (``fftw <target>``, ``custom call <target>``, ``fusion``,
    ``copy`` or its opcode) from an optimised HLO module's text."""
    out = {}
    for line in hlo.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([a-z][\w-]*)\(", line)
        if not m:
            continue
        name, op = m.groups()
        if op == "custom-call":
            target = re.search(r'custom_call_target="([^"]+)"', line)
            t = target.group(1) if target else "?"
            out[name] = f"fftw {t}" if "fftw" in t else f"custom call {t}"
        else:
            out[name] = op
    return out


def measure(case: str, n: int, steps: int, rounds: int) -> dict[str, Any]:
    """This process's ms per step and ms per step of each pass (events of ``rounds`` runs)."""
    import jax
    from jax.profiler import ProfileData

    from sonotile.bench.inprocess import SonotileCase, bench_problem

    c = SonotileCase("", steps, problem=bench_problem(case, n, steps))
    step_s = min(c.run() for _ in range(2)) / steps
    names = kinds(c.compiled.as_text())
    ns: collections.Counter = collections.Counter()
    with tempfile.TemporaryDirectory(prefix="sonotile_profile_") as d:
        jax.profiler.start_trace(d)
        for _ in range(rounds):
            c.run()
        jax.profiler.stop_trace()
        (pb,) = glob.glob(os.path.join(d, "**", "*.xplane.pb"), recursive=True)
        for plane in ProfileData.from_file(pb).planes:
            for line in plane.lines:
                if line.name.startswith("tf_XLA"):
                    for ev in line.events:
                        if not _CONTAINERS.search(ev.name):
                            ns[ev.name] += ev.duration_ns
    scale = 1e-6 / (rounds * steps)
    passes = {k: {"kind": names.get(k, "?"), "ms": v * scale} for k, v in ns.items()}
    return {"ms_per_step": 1e3 * step_s, "passes": passes}


def table(by_threads: dict[int, dict]) -> list[str]:
    """The printed report: per pass (largest first at the first count) and per kind, ms per
    step at each count and the speed-up of the last count over the first."""
    counts = sorted(by_threads)
    lo, hi = counts[0], counts[-1]
    head = "".join(f"{f'{t} thr ms':>11s}" for t in counts)
    lines = [f"{'pass':28s} {'kind':32s}{head}  speed-up {hi}/{lo}"]

    def row(label: str, kind: str, ms: list[float]) -> str:
        up = f"{ms[0] / ms[-1]:8.2f}" if ms[-1] > 0 else "       -"
        return f"{label[:28]:28s} {kind[:32]:32s}" + "".join(f"{m:11.3f}" for m in ms) + f"  {up}"

    names = sorted(by_threads[lo]["passes"], key=lambda k: -by_threads[lo]["passes"][k]["ms"])
    total: dict[str, list[float]] = collections.defaultdict(lambda: [0.0] * len(counts))
    for name in names:
        kind = by_threads[lo]["passes"][name]["kind"]
        ms = [by_threads[t]["passes"].get(name, {}).get("ms", 0.0) for t in counts]
        group = kind.split()[0] if kind.startswith(("fftw", "custom")) else kind
        total[group] = [a + b for a, b in zip(total[group], ms)]
        if ms[0] >= 0.01 * by_threads[lo]["ms_per_step"]:  # passes of >= 1 % of the step
            lines.append(row(name, kind, ms))
    lines.append("per kind:")
    for group, ms in sorted(total.items(), key=lambda kv: -kv[1][0]):
        lines.append(row(group, "", ms))
    lines.append(row("sum of passes", "", [sum(v[i] for v in total.values())
                                           for i in range(len(counts))]))  # fmt: skip
    lines.append(row("step, without the profiler", "",
                     [by_threads[t]["ms_per_step"] for t in counts]))  # fmt: skip
    return lines


def main(argv: list[str]) -> int:
    p = Parser(prog="sonotile bench --profile", description=__doc__.split("\n")[0])
    p.add_argument("--case", default="point_additive_absorbing_nonlinear",
                   help=f"one of {', '.join(KNOWN_CASES)} (default "
                   "point_additive_absorbing_nonlinear)")  # fmt: skip
    p.add_argument("--size", type=int, default=128, help="grid points per axis (default 128)")
    p.add_argument("--steps", type=int, default=10, help="steps per run (default 10)")
    p.add_argument("--rounds", type=int, default=2, help="profiled runs (default 2)")
    p.add_argument(
        "--threads", type=thread_counts, default=[1, 2],
        help="comma-separated thread counts, one process each (default 1,2)",
    )  # fmt: skip
    p.add_argument("--json", type=json_file, default="bench_profile.json", help="output JSON file")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    least = (("size", a.size, 8), ("steps", a.steps, 1), ("rounds", a.rounds, 1))
    bad = [f"--{k} {v}: expected >= {lo}" for k, v, lo in least if v < lo]
    if a.case not in KNOWN_CASES:
        bad.append(f"--case {a.case!r}: expected one of {', '.join(KNOWN_CASES)}")
    if bad:
        print(f"sonotile bench --profile: {'; '.join(bad)}", file=sys.stderr)
        return 2
    if a.worker is not None:
        from sonotile.base.runtime import configure_threads

        configure_threads(a.worker)
        print("PROFILE " + json.dumps(measure(a.case, a.size, a.steps, a.rounds)))
        return 0
    by_threads = {}
    for t in a.threads:
        cmd = [sys.executable, "-m", "sonotile.commands.cli", "bench", "--profile", *argv,
               "--worker", str(t)]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        found = [ln for ln in r.stdout.splitlines() if ln.startswith("PROFILE ")]
        if r.returncode != 0 or not found:
            print(f"sonotile bench --profile: the run at {t} threads failed:\n"
                  f"{(r.stdout + r.stderr)[-2000:]}", file=sys.stderr)  # fmt: skip
            return 1
        by_threads[t] = json.loads(found[-1][len("PROFILE ") :])
    print(f"{a.case} {a.size}^3, {a.steps} steps x {a.rounds} profiled runs, ms per step:")
    print("\n".join(table(by_threads)))
    report = {"argv": argv, "case": a.case, "size": a.size, "steps": a.steps,
              "threads": {str(t): v for t, v in by_threads.items()}}  # fmt: skip
    write_json(a.json, report)
    print(f"wrote {a.json}")
    return 0
