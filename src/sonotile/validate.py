"""``sonotile validate``: run k-Wave reference cases through ``sonotile-kwave`` and compare.

Each case folder holds ``input.h5``, k-Wave's ``output.h5`` and ``case.json`` (flags, jitter);
the comparison is ``shared/tools/kwave_compare.py`` (max|ours - ref| / max|ref| per dataset).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from sonotile.cliargs import Parser

DEFAULT = Path(__file__).resolve().parents[3] / "shared" / "reference"


def main(argv: list[str] | None = None) -> int:
    ap = Parser(prog="sonotile validate", description=__doc__)
    ap.add_argument(
        "folder",
        nargs="?",
        default=str(DEFAULT.resolve()),
        help="folder of reference cases (default: ../shared/reference)",
    )
    ap.add_argument("--compare", help="path of kwave_compare.py (default: beside the folder)")
    a = ap.parse_args(argv)
    root = Path(a.folder)
    cases = sorted(p for p in root.glob("*/") if (p / "case.json").is_file())
    if not cases:
        print(f"sonotile validate: no cases (folders with case.json) in {root}", file=sys.stderr)
        return 1
    compare = Path(a.compare) if a.compare else root.parent / "tools" / "kwave_compare.py"
    if not compare.is_file():
        print(f"sonotile validate: comparison tool not found: {compare}", file=sys.stderr)
        return 1
    from sonotile.kwave.cli import main as kwave

    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            flags = json.loads((case / "case.json").read_text())["flags"]
            out = Path(tmp) / f"{case.name}.h5"
            status = kwave(["-i", str(case / "input.h5"), "-o", str(out), "-r", "100", *flags])
            if status != 0:
                print(f"FAIL {case.name}: sonotile-kwave exited {status}")
                failed += 1
                continue
            r = subprocess.run(
                [
                    sys.executable,
                    str(compare),
                    str(case / "output.h5"),
                    str(out),
                    "--case",
                    str(case / "case.json"),
                ],
                capture_output=True,
                text=True,
            )
            worst = max(
                (line for line in r.stdout.splitlines() if line[:4] in ("ok  ", "FAIL")),
                key=lambda s: float(s.split()[2]) if s.split()[2][0].isdigit() else 1e9,
                default="",
            )
            print(
                f"{'ok  ' if r.returncode == 0 else 'FAIL'} {case.name:52s} worst: "
                f"{' '.join(worst.split()[1:3])}"
            )
            failed += r.returncode != 0
    print(f"{len(cases) - failed}/{len(cases)} cases within tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
