"""The ``sonotile`` command: ``demo``, ``kwave``, ``bench``, ``heat``, ``plan``, ``plot``,
``validate``, ``launch``.

Each subcommand lives in its own module and is imported only when used, so that options which
configure JAX (threads, virtual devices) can act before JAX is imported.
"""

from __future__ import annotations

import sys

from sonotile.base import config, interrupt

COMMANDS = {
    "demo": (
        "sonotile.commands.demo",
        "3-D focused ultrasound through a tissue layer (about a minute)",
    ),
    "kwave": (
        "sonotile.kwave.cli",
        "k-Wave compatible solver (same flags as kspaceFirstOrder-OMP)",
    ),
    "bench": ("sonotile.bench.cli", "throughput, compile time and memory benchmarks"),
    "batch": ("sonotile.batch.cli", "many k-Wave input files at once, on subsets of the devices"),
    "heat": ("sonotile.commands.heat", "temperature and thermal dose of a sonication (CW result)"),
    "plan": ("sonotile.commands.plan", "a sonication plan from a CT: beam, heating, dose, report"),
    "plot": ("sonotile.commands.plot", "figures of a result or k-Wave output file (PNG)"),
    "validate": ("sonotile.commands.validate", "run the k-Wave reference cases and compare"),
    "launch": ("sonotile.parallel.launch", "run N local processes of one job (-n N -- <command>)"),
}


#: The commands a signal unwinds (they stop their runs, clean up and report, themselves); in
#: the others a signal ends the process at once with one line (sonotile-kwave notes it during
#: its run and stops at the next safe point): a Python exception raised by a signal inside
#: JAX's C++ code can abort the process or be lost (:mod:`sonotile.base.interrupt`).
UNWINDING = ("batch", "launch", "heat", "plan")


def usage() -> str:
    lines = ["usage: sonotile <command> [options]", "", "commands:"]
    lines += [f"  {name:9s} {doc}" for name, (_, doc) in COMMANDS.items()]
    lines += ["", "'sonotile <command> -h' describes a command's options."]
    return "\n".join(lines)


def _kwave_wants_hugepages(argv: list[str]) -> bool:
    from sonotile.kwave.cli import wants_hugepages

    return wants_hugepages(argv)


def main(argv: list[str] | None = None) -> int:
    """The ``sonotile`` program (``argv`` None: this process's arguments; the program first
    starts itself again with huge pages for malloc when it can,
    :func:`sonotile.base.runtime.restart_with_hugepages`, for ``kwave`` when the run gains,
    :func:`sonotile.kwave.cli.wants_hugepages`). Ctrl-C or SIGTERM at any moment: one line,
    exit status 128 + the signal (130 for Ctrl-C)."""
    program = argv is None
    if program:
        interrupt.install()
    try:
        return _main(argv, program)
    except KeyboardInterrupt as e:
        return interrupt.report("sonotile", e, "files being written were not put in place")
    except config.SettingsError as e:
        print(f"sonotile: error: {e}", file=sys.stderr)
        return 2
    finally:
        if program:
            interrupt.guard(False)


def _main(argv: list[str] | None, program: bool = False) -> int:
    if argv is None:
        from sonotile.base import runtime

        argv = sys.argv[1:]
        if argv[:1] != ["kwave"] or _kwave_wants_hugepages(argv[1:]):
            runtime.restart_with_hugepages()
    if not argv:  # a usage error: say what there is, on stderr
        print(usage(), file=sys.stderr)
        return 2
    if argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] == "--version":
        from sonotile.base.version import __version__

        print(f"sonotile {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(usage(), file=sys.stderr)
        from sonotile.base.cliargs import closest

        print(f"sonotile: error: unknown command '{name}'{closest(name, list(COMMANDS))}",
              file=sys.stderr)  # fmt: skip
        return 2
    config.current()  # the SONOTILE_* variables, checked before any work (SettingsError)
    if program and name in UNWINDING:
        interrupt.guard()  # from here a signal unwinds (removing temporary files) to main
    import importlib

    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
