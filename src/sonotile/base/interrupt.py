"""Ctrl-C (SIGINT) and SIGTERM in the programs: one line on stderr and exit status 128 + the
signal's number (130 for Ctrl-C, 143 for SIGTERM), at any moment of a command.

The ``sonotile`` and ``sonotile-kwave`` programs install :func:`install` as their first act (when
``import sonotile`` sees that it runs one of them, and again at the top of each entry point):
from then on either signal raises :class:`Interrupted` where the program stands (importing,
parsing, reading, compiling, running, writing); every file a command writes goes under a
temporary name that the unwinding removes, so nothing incomplete is left at an output path.
:func:`deferred` holds a signal back over a step that must not be cut in two (the rename of a
finished output into place). The entry points turn :class:`Interrupted` (and a plain
``KeyboardInterrupt``) into :func:`report`'s line and status. Standard library only: this runs
before anything else is imported.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType

#: The programs whose processes install the handlers as soon as ``sonotile`` is imported.
PROGRAMS = ("sonotile", "sonotile-kwave")
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A command stopped by ``signum`` (SIGINT or SIGTERM)."""

    def __init__(self, signum: int = signal.SIGINT, where: str = "") -> None:
        super().__init__(f"signal {int(signum)}")
        self.signum = int(signum)
        self.where = where

    @property
    def status(self) -> int:
        """The exit status: 128 + the signal's number (the shells' convention)."""
        return 128 + self.signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def install() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` (in the main thread; elsewhere no-op)."""
    for sig in SIGNALS:
        with contextlib.suppress(ValueError, OSError):  # not the main thread
            signal.signal(sig, _raise)


def is_program(argv0: str) -> bool:
    """Whether ``argv0`` (``sys.argv[0]``) is one of :data:`PROGRAMS`."""
    return os.path.basename(argv0).removesuffix(".exe") in PROGRAMS


def install_for_programs() -> None:
    """:func:`install` when this process runs one of :data:`PROGRAMS` (a library import leaves
    the signals alone)."""
    if sys.argv and is_program(sys.argv[0]):
        install()


@contextlib.contextmanager
def deferred(where: str) -> Iterator[None]:
    """Hold SIGINT/SIGTERM back over the block (in the main thread): one that arrived raises
    :class:`Interrupted` (``where`` says what had been done) once the block has ended."""
    got: list[int] = []
    previous = {}
    for sig in SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, lambda s, f: got.append(s))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if got:
        raise Interrupted(got[0], where)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def report(prog: str, e: KeyboardInterrupt, outcome: str = "") -> int:
    """Print the one line for an interrupted command and return its exit status. ``outcome``:
    what it leaves (e.g. ``no output written``), unless the signal was held back over a step
    that then completed (:func:`deferred`'s ``where`` says what was done)."""
    signum = e.signum if isinstance(e, Interrupted) else int(signal.SIGINT)
    tail = (e.where if isinstance(e, Interrupted) else "") or outcome
    line = f"{prog}: error: stopped by signal {signum} ({signal_name(signum)})"
    print(f"{line}: {tail}" if tail else line, file=sys.stderr, flush=True)
    return 128 + signum
