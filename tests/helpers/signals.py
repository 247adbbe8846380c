"""Waiting for a program's signal handlers (Linux ``/proc``)."""

from __future__ import annotations

import signal
import time


def handlers_installed(pid: int, timeout: float = 30.0) -> float:
    """Wait until process ``pid`` catches SIGTERM (the interpreter alone does not: sonotile's
    handlers are in place); the time then."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        try:
            with open(f"/proc/{pid}/status") as f:
                caught = next(int(ln.split()[1], 16) for ln in f if ln.startswith("SigCgt:"))
        except (OSError, StopIteration):
            caught = 0
        if caught >> (signal.SIGTERM - 1) & 1:
            return time.perf_counter()
        time.sleep(0.002)
    raise AssertionError(f"process {pid} installed no handler within {timeout} s")
