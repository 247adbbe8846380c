"""Ctrl-C (SIGINT) and SIGTERM in the programs: one line on stderr and exit status 128 + the
signal's number (130 for Ctrl-C, 143 for SIGTERM), at any moment of a command.

The ``sonotile`` and ``sonotile-kwave`` programs install :func:`install` as their first act (when
``import sonotile`` sees that it runs one of them, and again at the top of each entry point):
until the entry point is ready (:func:`guard`) either signal ends the process at once with one
line (while it imports itself and parses its command line, nothing is written); from then on
it raises :class:`Interrupted` where the program stands, and every file a command writes goes
under a temporary name that the unwinding removes, so nothing incomplete is left at an output
path. A Python exception raised by a signal inside C++ code (JAX, HDF5) can abort the process
or be swallowed (a garbage-collector callback), so a command that writes while JAX runs sets a
flag instead (:func:`sonotile.base.runtime.install_stop_handlers`) and stops at its next safe
point (``sonotile-kwave`` during its run), and only the commands that clean up after
themselves guard (:data:`sonotile.commands.cli.UNWINDING`). The entry points turn
:class:`Interrupted` (and a plain ``KeyboardInterrupt``) into :func:`report`'s line and status.
Standard library only: this runs before anything else is imported.
"""

from __future__ import annotations

import os
import sys
from types import FrameType  # (``typing`` would take 30-60 ms)

try:  # the C module: ``signal`` itself imports enum, 30-60 ms before any handler is in place
    import _signal as _sig
except ImportError:  # another Python implementation
    import signal as _sig

#: The programs whose processes install the handlers as soon as ``sonotile`` is imported.
PROGRAMS = ("sonotile", "sonotile-kwave")
SIGINT, SIGTERM = int(_sig.SIGINT), int(_sig.SIGTERM)
SIGNALS = (SIGINT, SIGTERM)
NAMES = {SIGINT: "SIGINT", SIGTERM: "SIGTERM"}


class Interrupted(KeyboardInterrupt):
    """A command stopped by ``signum`` (SIGINT or SIGTERM)."""

    def __init__(self, signum: int = SIGINT, where: str = "") -> None:
        super().__init__(f"signal {int(signum)}")
        self.signum = int(signum)
        self.where = where

    @property
    def status(self) -> int:
        """The exit status: 128 + the signal's number (the shells' convention)."""
        return 128 + self.signum


#: Whether an entry point is ready to catch :class:`Interrupted` (else the handler ends the
#: process itself: nothing has been written yet, and an import would print a traceback).
_guarded = [False]


#: The temporary files this process has created and not yet renamed into place or removed
#: (:func:`sonotile.base.files.create_exclusive`, ``commit``, ``remove_own``): a signal that
#: ends the process at once removes them first, so no half-written file is left.
OWN_TEMPORARY: set[str] = set()


def remove_own_temporary() -> None:
    """Remove every file of :data:`OWN_TEMPORARY` (one already gone is no error)."""
    for path in list(OWN_TEMPORARY):
        try:
            os.remove(path)
        except OSError:
            pass
        OWN_TEMPORARY.discard(path)


def _raise(signum: int, frame: FrameType | None) -> None:
    if not _guarded[0]:
        prog = os.path.basename(sys.argv[0]) if sys.argv else "sonotile"
        remove_own_temporary()
        os._exit(report(prog, Interrupted(signum)))
    raise Interrupted(signum)


def guard(on: bool = True) -> None:
    """From now on (``on``) a signal raises :class:`Interrupted` for the caller to catch; off:
    the handler prints its line and ends the process at once (before an entry point's ``try``,
    after its last act)."""
    _guarded[0] = on


def install() -> None:
    """SIGINT and SIGTERM raise :class:`Interrupted` once :func:`guard` is on, and end the
    process with :func:`report`'s line before (in the main thread; elsewhere no-op). A signal
    the process was started ignoring stays ignored."""
    for sig in SIGNALS:
        try:
            if _sig.getsignal(sig) is not _sig.SIG_IGN:  # (nohup, a shell's background job)
                _sig.signal(sig, _raise)
        except (ValueError, OSError):  # not the main thread
            pass


def is_program(argv0: str) -> bool:
    """Whether ``argv0`` (``sys.argv[0]``) is one of :data:`PROGRAMS`."""
    return os.path.basename(argv0).removesuffix(".exe") in PROGRAMS


def install_for_programs() -> None:
    """:func:`install` when this process runs one of :data:`PROGRAMS` (a library import leaves
    the signals alone)."""
    if sys.argv and is_program(sys.argv[0]):
        install()


def signal_name(signum: int) -> str:
    return NAMES.get(signum, f"signal {signum}")


def report(prog: str, e: KeyboardInterrupt, outcome: str = "") -> int:
    """Print the one line for an interrupted command and return its exit status. ``outcome``:
    what it leaves (e.g. ``no output written``), unless the signal was held back over a step
    that then completed (:func:`deferred`'s ``where`` says what was done)."""
    signum = e.signum if isinstance(e, Interrupted) else SIGINT
    tail = (e.where if isinstance(e, Interrupted) else "") or outcome
    line = f"{prog}: error: stopped by signal {signum} ({signal_name(signum)})"
    print(f"{line}: {tail}" if tail else line, file=sys.stderr, flush=True)
    return 128 + signum
