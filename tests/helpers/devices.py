"""Run a test script in a fresh Python on several virtual CPU devices (XLA reads the device
count once, before JAX starts, so the script cannot run in the test process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

#: XLA:CPU's in-process collectives (jaxlib 0.10.2) can abort when a collective inside a loop
#: is entered again before its previous rendezvous was torn down: a check in ``rendezvous.h``
#: counts one participant too many ("7 vs. 6"). It is a race in XLA's runtime, seen only with
#: many virtual devices sharing 2 cores under load (2 of ~20 full suites), never in a result.
XLA_RENDEZVOUS_RACE = "rendezvous.h"
#: runs of a script the race keeps aborting before its failure is reported (it struck the same
#: script twice in a row on a machine loaded by a second suite)
RUNS = 3


def run_on_cpu_devices(script: str, devices: int, *args: str, timeout: float = 600) -> dict:
    """``python -c script *args`` on ``devices`` CPU devices (the helper modules importable);
    the JSON it prints after ``RESULT``."""
    helpers = os.path.dirname(os.path.abspath(__file__))  # importable from the script too
    path = os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               JAX_PLATFORMS="cpu", PYTHONPATH=path)  # fmt: skip
    proc = run_python(["-c", script, *args], env, timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])


def run_python(args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``python *args`` with output captured; a run that XLA's rendezvous race aborted (see
    :data:`XLA_RENDEZVOUS_RACE`) is repeated, up to :data:`RUNS` runs, with a warning. Any
    other outcome, failures included, is returned as it is."""
    for attempt in range(RUNS):
        proc = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                              timeout=timeout)  # fmt: skip
        if (
            proc.returncode == 0
            or attempt == RUNS - 1
            or not _aborted_by_rendezvous_race(proc.stderr)
        ):
            return proc
        warnings.warn("XLA:CPU rendezvous race aborted the subprocess; running it again",
                      stacklevel=2)  # fmt: skip
    return proc


def _aborted_by_rendezvous_race(stderr: str) -> bool:
    """Whether ``stderr`` holds XLA's failed rendezvous check (a crash, not a wrong answer)."""
    return any(XLA_RENDEZVOUS_RACE in ln and "Check failed" in ln for ln in stderr.splitlines())
