"""``sonotile launch -n N [--cpu_devices K] [--timeout S] -- <command ...>``: N local processes.

Starts ``N`` copies of ``command`` on this machine as one JAX job: each gets
``SONOTILE_COORDINATOR`` (a free port on 127.0.0.1), ``SONOTILE_NUM_PROCESSES``,
``SONOTILE_PROCESS_ID`` (also usable in the command, e.g. ``sh -c '... $SONOTILE_PROCESS_ID'``)
and ``SONOTILE_LOCAL_DEVICE_IDS`` (its GPU(s)), which
:func:`sonotile.parallel.distributed.initialize` reads. Output lines are prefixed with ``[rank]``.

When a process exits non-zero (or is killed), the others are terminated at once and the launcher
exits with that process's status; the same after ``--timeout`` seconds (status 124). SIGTERM /
SIGINT are forwarded (``sonotile-kwave`` then checkpoints if asked to); a second one kills.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import IO

from sonotile.base.cliargs import Parser, integer, positive
from sonotile.base.config import (
    ENV_COORDINATOR,
    ENV_LOCAL_DEVICES,
    ENV_NUM_PROCESSES,
    ENV_PROCESS_ID,
)

#: Seconds between SIGTERM and SIGKILL when the job is torn down (peers of a failed process sit
#: in collectives and do not react to SIGTERM).
GRACE = 3.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="sonotile launch",
        description="Run N local processes of one JAX job (sonotile-kwave, Python scripts ...).",
        usage="sonotile launch -n N [--cpu_devices K] [--timeout S] -- <command ...>",
    )
    p.add_argument(
        "-n", "--processes", type=integer(1, 4096), required=True, help="number of processes"
    )
    p.add_argument(
        "--cpu_devices",
        type=integer(1, 4096),
        help="virtual CPU devices per process (XLA --xla_force_host_platform_device_count)",
    )
    p.add_argument(
        "--gpus_per_process", type=integer(1, 4096), default=1, help="GPUs per process (default 1)"
    )
    p.add_argument("--timeout", type=positive, help="kill the job after this many seconds")
    p.add_argument("--port", type=integer(1, 65535), help="coordinator port (default: a free one)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


def child_env(rank: int, n: int, port: int, cpu_devices: int | None, gpus: int) -> dict[str, str]:
    env = dict(os.environ)
    for k in list(env):  # an enclosing mpirun/srun job must not confuse the children
        if k.startswith(("OMPI_COMM_WORLD", "PMI_", "PMIX_RANK")):
            del env[k]
    env[ENV_COORDINATOR] = f"127.0.0.1:{port}"
    env[ENV_NUM_PROCESSES] = str(n)
    env[ENV_PROCESS_ID] = str(rank)
    env[ENV_LOCAL_DEVICES] = ",".join(str(rank * gpus + i) for i in range(gpus))
    env["PYTHONUNBUFFERED"] = "1"
    if cpu_devices:
        flags = env.get("XLA_FLAGS", "")
        env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={cpu_devices}".strip()
    return env


def _pump(stream: IO[bytes], out: IO[bytes], prefix: bytes, lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        if not line.endswith(b"\n"):
            line += b"\n"
        with lock:
            out.write(prefix + line)
            out.flush()
    stream.close()


def _status(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def _kill(procs: Sequence[subprocess.Popen[bytes]], sig: int) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)  # the child's process group: it and what it started
            except (ProcessLookupError, PermissionError):
                pass


def terminate(procs: Sequence[subprocess.Popen[bytes]], grace: float = GRACE) -> None:
    """SIGTERM the running processes, SIGKILL what is left after ``grace`` seconds."""
    _kill(procs, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    _kill(procs, signal.SIGKILL)
    for p in procs:
        p.wait()


def launch(
    command: list[str],
    n: int,
    cpu_devices: int | None = None,
    timeout: float | None = None,
    port: int | None = None,
    gpus_per_process: int = 1,
) -> int:
    """Run the job; returns the exit status (0, a failed process's status, 124 on timeout)."""
    port = port or free_port()
    out, err = sys.stdout.buffer, sys.stderr.buffer
    lock = threading.Lock()
    procs: list[subprocess.Popen[bytes]] = []
    pumps: list[threading.Thread] = []
    stop = {"signals": 0}

    def say(msg: str) -> None:
        with lock:
            err.write(f"sonotile launch: {msg}\n".encode())
            err.flush()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop["signals"] += 1
        _kill(procs, signal.SIGTERM if stop["signals"] == 1 else signal.SIGKILL)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for rank in range(n):
            p = subprocess.Popen(
                command,
                env=child_env(rank, n, port, cpu_devices, gpus_per_process),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            procs.append(p)
            for stream, sink in ((p.stdout, out), (p.stderr, err)):
                t = threading.Thread(
                    target=_pump, args=(stream, sink, f"[{rank}] ".encode(), lock), daemon=True
                )
                t.start()
                pumps.append(t)
        status = _watch(procs, timeout, say)
        for t in pumps:
            t.join(timeout=2.0)
        return status
    finally:
        if any(p.poll() is None for p in procs):
            terminate(procs)
        for s, h in previous.items():
            signal.signal(s, h)


def _watch(
    procs: list[subprocess.Popen[bytes]], timeout: float | None, say: Callable[[str], None]
) -> int:
    """Wait for the processes: all succeed (0), one fails (its status; the others are stopped)
    or the time runs out (124)."""
    t0 = time.monotonic()
    while True:
        codes = [p.poll() for p in procs]
        bad = [(r, c) for r, c in enumerate(codes) if c not in (None, 0)]
        if bad:
            rank, code = bad[0]
            status = _status(code)
            if any(c is None for c in codes):
                say(f"process {rank} exited with status {status}; stopping the others")
            terminate(procs)
            return status
        if all(c == 0 for c in codes):
            return 0
        if timeout is not None and time.monotonic() - t0 > timeout:
            say(f"timeout after {timeout:g} s; stopping all processes")
            terminate(procs)
            return 124
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("sonotile launch: error: no command given after --", file=sys.stderr)
        return 2
    if args.processes < 1:
        print("sonotile launch: error: -n must be >= 1", file=sys.stderr)
        return 2
    try:
        return launch(
            cmd, args.processes, args.cpu_devices, args.timeout, args.port, args.gpus_per_process
        )
    except FileNotFoundError as e:
        print(f"sonotile launch: error: {e}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
