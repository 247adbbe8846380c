"""``sonotile bench``: the in-process bench of the cases (:mod:`.inprocess`), or with its first
flag one of the other modes: ``--scaling`` (1 -> 2 processes: weak, strong, time by part,
:mod:`.processes`), ``--decompositions`` (communication and time per decomposition,
:mod:`.scaling`), ``--whole-run`` (complete sonotile-kwave and k-Wave processes, differenced,
:mod:`.whole`), ``--profile`` (each pass of a step at 1 and N threads, :mod:`.profile`)."""

from __future__ import annotations

import importlib
import sys

from sonotile.base.cliargs import normalize

MODES = {
    "--scaling": "sonotile.bench.processes",
    "--decompositions": "sonotile.bench.scaling",
    "--whole_run": "sonotile.bench.whole",
    "--profile": "sonotile.bench.profile",
}


def main(argv: list[str] | None = None) -> int:
    argv = normalize(sys.argv[1:] if argv is None else argv, ["--whole_run"])
    module = MODES.get(argv[0]) if argv else None
    if module is None:
        return int(importlib.import_module("sonotile.bench.inprocess").main(argv) or 0)
    return int(importlib.import_module(module).main(argv[1:]) or 0)
