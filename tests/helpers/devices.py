"""Run a test script in a fresh Python on several virtual CPU devices (XLA reads the device
count once, before JAX starts, so the script cannot run in the test process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run_on_cpu_devices(script: str, devices: int, *args: str, timeout: float = 600) -> dict:
    """``python -c script *args`` on ``devices`` CPU devices (the helper modules importable);
    the JSON it prints after ``RESULT``."""
    helpers = os.path.dirname(os.path.abspath(__file__))  # importable from the script too
    path = os.pathsep.join(p for p in (helpers, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               JAX_PLATFORMS="cpu", PYTHONPATH=path)  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    return json.loads(line[len("RESULT") :])
