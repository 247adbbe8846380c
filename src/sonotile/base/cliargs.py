"""Command-line parsing shared by the ``sonotile`` commands: one spelling of flags (k-Wave's
underscores, ``--cpu_devices``), the only one the help shows; a hyphenated spelling of a known
flag is read as that flag; an unknown flag gives one line naming the closest known flag."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn


def closest(word: str, choices: list[str]) -> str:
    """`` (did you mean --x?)`` for the closest of ``choices``, or ``""``."""
    match = difflib.get_close_matches(word.split("=")[0], choices, n=1, cutoff=0.7)
    return f" (did you mean {match[0]}?)" if match else ""


def normalize(argv: list[str], flags: list[str]) -> list[str]:
    """``argv`` with ``--a-b`` spelt ``--a_b`` where that is a known flag (up to a ``--``)."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name.startswith("--") and name not in flags:
            under = "--" + name[2:].replace("-", "_")
            if under in flags:
                out[i] = under + eq + value
    return out


class Parser(argparse.ArgumentParser):
    """``argparse`` with k-Wave-style underscore flags and one-line errors (exit 2)."""

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action:
        names = tuple("--" + n[2:].replace("-", "_") if n.startswith("--") else n for n in names)
        return super().add_argument(*names, **kwargs)

    def flags(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings]

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(normalize(args, self.flags()), namespace)

    def error(self, message: str) -> NoReturn:
        unknown = message.split("unrecognized arguments: ")
        if len(unknown) == 2:
            word = unknown[1].split()[0]
            message = f"unknown option {word}{closest(word, self.flags())}"
        print(f"{self.prog}: error: {message} ('{self.prog} -h' lists the options)",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
