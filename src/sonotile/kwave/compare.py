"""Compare a k-Wave output file with a reference output, dataset by dataset.

The rule (``tests/data/kwave-reference/README.md``): for every dataset of the reference (groups
included), the other file has the same shape and dtype, finite values, and
``max|ours - ref| / max|ref|`` within the tolerance. The base tolerance is 1e-4, 5e-4 for an
absorbing or nonlinear case; per dataset it is raised to ten times k-Wave's own run-to-run
spread given in ``case.json`` (``jitter_rel_over_5_runs``, else ``jitter_rel``), and to 1e-3 for
the ``*_final`` fields. Run as ``python -m sonotile.kwave.compare REF.h5 OURS.h5 [--case F]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

BASE_TOL = 1e-4
BASE_TOL_LOSSY = 5e-4
FINAL_TOL = 1e-3


@dataclass(frozen=True)
class Row:
    """One dataset's verdict: relative error (None when not comparable) against its tolerance."""

    name: str
    tol: float
    error: float | None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.error is not None and self.error <= self.tol

    def line(self) -> str:
        what = self.problem or f"{self.error:.2e}" + ("" if self.ok else f"  > {self.tol:.1e}")
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name:32s} {what}"


def _read_all(path: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}

    def visit(name: str, obj: object) -> None:
        if isinstance(obj, h5py.Dataset):
            out[name] = obj[()]

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return out


def tolerances(case: dict[str, Any] | None) -> tuple[float, dict[str, float]]:
    """Base tolerance and k-Wave's run-to-run spread per dataset family from a ``case.json``."""
    if not case:
        return BASE_TOL, {}
    medium = case.get("medium", {})
    lossy = bool(medium.get("absorbing_flag") or medium.get("nonlinear_flag"))
    spread = {**case.get("jitter_rel", {}), **case.get("jitter_rel_over_5_runs", {})}
    return (BASE_TOL_LOSSY if lossy else BASE_TOL), spread


def _verdict(name: str, ref: np.ndarray, ours: np.ndarray | None, tol: float) -> Row:
    if ours is None:
        return Row(name, tol, None, "missing")
    if ours.shape != ref.shape or ours.dtype != ref.dtype:
        return Row(
            name, tol, None, f"shape/dtype {ours.shape} {ours.dtype} != {ref.shape} {ref.dtype}"
        )
    o, r = np.asarray(ours, np.float64), np.asarray(ref, np.float64)
    if not np.isfinite(o).all():
        return Row(name, tol, None, "non-finite values")
    scale = float(np.max(np.abs(r))) if r.size else 0.0
    err = float(np.max(np.abs(o - r))) / (scale or 1.0) if r.size else 0.0
    return Row(name, tol, err)


def compare(
    reference: Path, ours: Path, case: dict[str, Any] | None = None, tol: float | None = None
) -> list[Row]:
    """One :class:`Row` per dataset of ``reference``; ``tol`` overrides the base tolerance."""
    base, spread = tolerances(case)
    base = base if tol is None else tol
    ref, mine = _read_all(Path(reference)), _read_all(Path(ours))
    rows = []
    for name in sorted(ref):
        t = max(base, 10 * spread.get(name.split("/")[0], 0.0))
        t = max(t, FINAL_TOL) if name.endswith("_final") else t
        rows.append(_verdict(name, ref[name], mine.get(name), t))
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print a line per dataset; exit status 0 when every dataset is within tolerance."""
    ap = argparse.ArgumentParser(prog="python -m sonotile.kwave.compare", description=__doc__)
    ap.add_argument("reference", type=Path)
    ap.add_argument("ours", type=Path)
    ap.add_argument("--case", type=Path, help="case.json with the case's run-to-run spread")
    ap.add_argument("--tol", type=float, help="base tolerance (default from the case)")
    a = ap.parse_args(argv)
    case = json.loads(a.case.read_text()) if a.case else None
    rows = compare(a.reference, a.ours, case, a.tol)
    for row in rows:
        print(row.line())
    bad = sum(not r.ok for r in rows)
    print(f"{len(rows) - bad}/{len(rows)} datasets within tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
