"""Command-line parsing shared by the ``sonotile`` commands: one spelling of flags (k-Wave's
underscores, ``--cpu_devices``), the only one the help shows; a hyphenated spelling of a known
flag is read as that flag; an unknown flag gives one line naming the closest known flag.

The types of numeric options (:func:`integer`, :func:`number` and the names built from them)
refuse what is not a finite number in the option's range with one line that argparse prefixes
with the option, e.g. ``argument --size: 'nan': expected an integer >= 32``."""

from __future__ import annotations

import argparse
import difflib
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

#: The largest integer a count option takes by default (a larger count is a typing mistake).
INT_MAX = 2**31 - 1


def _num(v: float) -> str:
    return str(v) if isinstance(v, int) else f"{v:g}"


def _span(lo: float | None, hi: float | None, above: float | None = None) -> str:
    """``>= lo``, ``> above``, ``in lo..hi`` ... (for messages)."""
    if above is not None:
        low = f"> {_num(above)}"
    else:
        low = f">= {_num(lo)}" if lo is not None else ""
    if hi is None:
        return low
    if lo is not None and above is None:
        return f"in {_num(lo)}..{_num(hi)}"
    return f"{low} and <= {_num(hi)}" if low else f"<= {_num(hi)}"


def integer(lo: int | None = None, hi: int | None = INT_MAX) -> Callable[[str], int]:
    """An argparse type: an integer in ``lo..hi`` (None: unbounded on that side)."""
    what = f"an integer {_span(lo, hi)}".strip()

    def conv(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}': expected {what}") from None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise argparse.ArgumentTypeError(f"'{text}': expected {what}")
        return value

    conv.lo, conv.hi = lo, hi  # type: ignore[attr-defined]  # for the options' walk test
    return conv


def number(
    lo: float | None = None, hi: float | None = None, above: float | None = None
) -> Callable[[str], float]:
    """An argparse type: a finite number ``>= lo`` (or ``> above``) and ``<= hi``."""
    what = f"a finite number {_span(lo, hi, above)}".strip()

    def conv(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}': expected {what}") from None
        bad = not math.isfinite(value) or (lo is not None and value < lo)
        bad = bad or (above is not None and value <= above) or (hi is not None and value > hi)
        if bad:
            raise argparse.ArgumentTypeError(f"'{text}': expected {what}")
        return value

    conv.lo, conv.hi = lo if above is None else above, hi  # type: ignore[attr-defined]
    return conv


#: An integer >= 1 (a count).
positive_int = integer(1)
#: An integer >= 0 (an index).
index = integer(0)
#: A finite number > 0 (a time, a size).
positive = number(above=0)
#: A finite number >= 0.
nonnegative = number(0)
#: A finite number in 0..1.
fraction = number(0, 1)
#: Any finite number.
finite = number()


def utf8_path(text: str) -> str:
    """An argparse type: a file path HDF5 can open, that is, one that is valid UTF-8 (a name
    holding other bytes, such as Latin-1 ones, is refused with its bytes shown)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raw = os.fsencode(text)
        raise argparse.ArgumentTypeError(
            f"{raw!r}: the path is not valid UTF-8, which HDF5 needs: rename the file or folder"
        ) from None
    return text


def writable_dir(text: str) -> str:
    """An argparse type: an existing folder this process may write into (files are made in
    it), refused with what is wrong before any work starts."""
    if not os.path.isdir(text):
        what = "is not a folder" if os.path.exists(text) else "does not exist"
        raise argparse.ArgumentTypeError(f"{text!r} {what}")
    if not os.access(text, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: no permission to write in it")
    return text


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
