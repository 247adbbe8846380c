"""Command-line parsing shared by the ``sonotile`` commands: one spelling of flags (k-Wave's
underscores, ``--cpu_devices``; the hyphenated form is accepted too) and, for an unknown flag,
one line naming the closest known flag."""

from __future__ import annotations

import argparse
import difflib
import sys


def closest(word: str, choices: list[str]) -> str:
    """`` (did you mean --x?)`` for the closest of ``choices``, or ``""``."""
    match = difflib.get_close_matches(word.split("=")[0], choices, n=1, cutoff=0.7)
    return f" (did you mean {match[0]}?)" if match else ""


class Parser(argparse.ArgumentParser):
    """``argparse`` with underscore flags (hyphen aliases) and one-line errors."""

    def add_argument(self, *names, **kwargs):
        names = list(names)
        for n in list(names):
            if n.startswith("--") and ("-" in n[2:] or "_" in n[2:]):
                under, hyphen = "--" + n[2:].replace("-", "_"), "--" + n[2:].replace("_", "-")
                names[names.index(n)] = under
                if hyphen not in names:
                    names.append(hyphen)
        return super().add_argument(*names, **kwargs)

    def flags(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings if "_" in s or "-" not in s[2:]]

    def error(self, message: str) -> None:
        unknown = message.split("unrecognized arguments: ")
        if len(unknown) == 2:
            word = unknown[1].split()[0]
            message = f"unknown option {word}{closest(word, self.flags())}"
        print(f"{self.prog}: error: {message} ('{self.prog} -h' lists the options)",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
