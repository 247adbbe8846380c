"""LFB (and pencil) error against the single-device run, for docs/decomposition.md.

Case: 3-D heterogeneous (c0, rho0, B/A, alpha_coeff fields), power-law absorbing, nonlinear,
PML 8, an additive pressure source (k-space filtered) and a Dirichlet ux source, sensors at
points spread over all subdomains recording p, ux, uy, uz, u_non_staggered, p_max, p_rms, and
whole-grid p_max_all and p_final. Error = for each recorded quantity
``max|x - single| / max|single|``, worst over them.

Run on CPU with virtual devices, e.g.::

    XLA_FLAGS=--xla_force_host_platform_device_count=8 \
        .venv/bin/python benchmarks/parallel/lfb_error.py \
        --shape 64 --nt 120 --mesh 2 2 2 --overlaps 2 4 8 16 32 --widths 1.0 0.5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from sonotile.bench.cases import heterogeneous_absorbing


def make_case(
    n: int = 48, nt: int = 80, dtype: str = "float32", seed: int = 0, pml: int = 8,
    shape: tuple[int, ...] | None = None, p_mode: str | None = None, u_mode: str | None = None,
    u_final: bool = False,
):  # fmt: skip
    """The shared test problem (:func:`sonotile.bench.cases.heterogeneous_absorbing`) on an
    ``n^3`` grid or ``shape``; ``p_mode`` / ``u_mode`` replace the modes of its pressure
    (additive) and ux (Dirichlet) sources; ``u_final``: record the final velocity too."""
    prob = heterogeneous_absorbing(n, nt, dtype, seed, pml, shape)
    if u_final:
        record = (*prob.sensor.record, "u_final")
        prob = dataclasses.replace(prob, sensor=dataclasses.replace(prob.sensor, record=record))
    s = prob.sources
    p = s.p if p_mode is None else dataclasses.replace(s.p, mode=p_mode)
    ux = s.u[0] if u_mode is None else dataclasses.replace(s.u[0], mode=u_mode)
    return dataclasses.replace(prob, sources=dataclasses.replace(s, p=p, u=(ux, *s.u[1:])))


def errors(test: tuple[dict, dict], ref: tuple[dict, dict]) -> dict:
    """``max|x - ref| / max|ref|`` per quantity (raw and final)."""
    out = {}
    for a, b in zip(test, ref):
        for k, v in b.items():
            v = np.asarray(v, np.float64)
            out[k] = float(np.max(np.abs(np.asarray(a[k], np.float64) - v)) / np.max(np.abs(v)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, nargs="+", default=[64], help="n, or nx ny nz")
    ap.add_argument("--p-mode", help="mode of the pressure source (default additive)")
    ap.add_argument("--u-mode", help="mode of the ux source (default dirichlet)")
    ap.add_argument("--u-final", action="store_true", help="also record ux/uy/uz_final")
    ap.add_argument("--nt", type=int, default=120)
    ap.add_argument("--mesh", type=int, nargs="+", default=[2, 2, 2])
    ap.add_argument("--overlaps", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    ap.add_argument("--widths", type=float, nargs="+", default=[1.0, 0.5])
    ap.add_argument("--pencil", action="store_true", help="also measure pencil on (P0, P1)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)

    from sonotile.parallel import run_decomposed
    from sonotile.solver.runner import run

    shape = tuple(args.shape) if len(args.shape) > 1 else None
    prob = make_case(
        args.shape[0],
        args.nt,
        shape=shape,
        p_mode=args.p_mode,
        u_mode=args.u_mode,
        u_final=args.u_final,
    )
    t0 = time.perf_counter()
    ref = run(prob)
    print(f"single: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    rows = []
    if args.pencil:
        t0 = time.perf_counter()
        e = errors(run_decomposed(prob, "pencil", tuple(args.mesh[:2])), ref)
        rows.append(
            {
                "method": "pencil",
                "overlap": 0,
                "width": 0,
                "error": max(e.values()),
                "worst": max(e, key=e.get),
            }
        )
        print(
            f"pencil {args.mesh[:2]}: {max(e.values()):.2e} ({time.perf_counter() - t0:.1f} s)",
            file=sys.stderr,
        )
    print("| overlap | bell width | error (worst) | worst quantity |")
    print("|---:|---:|---:|---|")
    for ov in args.overlaps:
        for w in args.widths:
            t0 = time.perf_counter()
            e = errors(run_decomposed(prob, "lfb", tuple(args.mesh), overlap=ov, bell_width=w), ref)
            worst = max(e, key=e.get)
            rows.append(
                {"method": "lfb", "overlap": ov, "width": w, "error": e[worst], "worst": worst}
            )
            print(f"| {ov} | {w:g} | {e[worst]:.2e} | {worst} |", flush=True)
            print(f"  ({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
