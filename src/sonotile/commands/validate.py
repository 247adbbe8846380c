"""``sonotile validate``: run k-Wave reference cases through ``sonotile-kwave`` and compare.

Each case folder holds ``input.h5``, k-Wave's ``output.h5`` and ``case.json`` (flags, k-Wave's
run-to-run spread); :mod:`sonotile.kwave.compare` applies the tolerance rule. The ten cases of
the repository (``tests/data/kwave-reference``) are the default; they ship with the source
checkout (an editable install finds them), not inside a wheel.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from sonotile.base.cliargs import Parser

#: the reference cases of the source checkout this module was installed from (editable install)
DEFAULT = Path(__file__).resolve().parents[3] / "tests" / "data" / "kwave-reference"


def find_cases(root: Path) -> list[Path]:
    """Case folders (those holding ``case.json``) directly under ``root``, sorted by name."""
    return sorted(p for p in root.glob("*/") if (p / "case.json").is_file())


def run_case(case: Path, out: Path) -> tuple[bool, str]:
    """Run one case through ``sonotile-kwave``; (within tolerance, one-line summary)."""
    from sonotile.kwave.cli import main as kwave
    from sonotile.kwave.compare import compare

    meta = json.loads((case / "case.json").read_text())
    status = kwave(["-i", str(case / "input.h5"), "-o", str(out), "-r", "100", *meta["flags"]])
    if status != 0:
        return False, f"sonotile-kwave exited {status}"
    rows = compare(case / "output.h5", out, meta)
    bad = [r for r in rows if not r.ok]
    if bad:
        return False, "; ".join(r.line()[5:].strip() for r in bad)
    worst = max(rows, key=lambda r: r.error / r.tol)
    return True, f"worst: {worst.name} {worst.error:.2e} (tolerance {worst.tol:.0e})"


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="sonotile validate", description=__doc__)
    ap.add_argument(
        "folder",
        nargs="?",
        type=Path,
        default=DEFAULT,
        help="folder of reference cases (default: tests/data/kwave-reference of the checkout)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    cases = find_cases(a.folder)
    if not cases:
        print(
            f"sonotile validate: no cases (folders with case.json) in {a.folder}; the reference "
            "cases ship with the source repository (tests/data/kwave-reference): give its path",
            file=sys.stderr,
        )
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            ok, summary = run_case(case, Path(tmp) / f"{case.name}.h5")
            print(f"{'ok  ' if ok else 'FAIL'} {case.name:52s} {summary}", flush=True)
            failed += not ok
    print(f"{len(cases) - failed}/{len(cases)} cases within tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
