"""A batch worker: one long-lived process that runs k-Wave runs one after another.

Started by :mod:`sonotile.batch.pool` as ``python -m sonotile.batch.worker --fd N [--threads T]
[--cpus 0,1]``. It reads one JSON job per line on standard input (``{"name", "argv", "log"}``),
runs it exactly as ``sonotile-kwave <argv>`` would (:func:`sonotile.kwave.cli.main`), with the
run's standard output and error in the file ``log``, and answers one JSON line per job on file
descriptor ``N``: ``{"name", "status", "error", "wall_s", "peak_rss_bytes"}``.

Compiled programs stay in the process between runs, so runs of the same grid shape after the
first skip the compilation and the start-up of Python, JAX and the FFTW plans — most of a short
run's time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from sonotile.base import config

#: Environment of a multi-process launcher: a worker is a single process of its own.
LAUNCHER_ENV = (
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_orte_hnp_uri", "PMI_RANK", "PMI_SIZE",
    "SLURM_STEP_NUM_TASKS", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    config.ENV_COORDINATOR, config.ENV_NUM_PROCESSES, config.ENV_PROCESS_ID,
)  # fmt: skip


def peak_rss_bytes() -> int:
    """Peak resident memory of this process since the last :func:`reset_peak` [bytes]."""
    from sonotile.base.runtime import peak_rss_bytes as vm_hwm

    hwm = vm_hwm()
    if hwm is not None:
        return hwm
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def reset_peak() -> None:
    """Start a new peak-RSS measurement (Linux: ``clear_refs`` 5); no-op elsewhere."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def last_error(log: str) -> str:
    """The last ``sonotile-kwave: error:`` line of a run's log (its one-line failure)."""
    try:
        with open(log, errors="replace") as f:
            lines = [ln.strip() for ln in f if "error:" in ln]
    except OSError:
        return "no log"
    if not lines:
        return "failed without an error message (see its log)"
    return lines[-1].split("error:", 1)[1].strip()


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job with its output redirected to ``job['log']``; the result record."""
    from sonotile.kwave.cli import main

    os.makedirs(os.path.dirname(os.path.abspath(job["log"])) or ".", exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    reset_peak()
    t0 = time.perf_counter()
    with open(job["log"], "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            status = main(list(job["argv"]))
        except BaseException as e:  # noqa: BLE001 - a run never takes the worker down
            print(f"sonotile-kwave: error: {type(e).__name__}: {e}", file=sys.stderr)
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    wall = time.perf_counter() - t0
    return {
        "name": job["name"],
        "status": "ok" if status == 0 else "failed",
        "error": "" if status == 0 else last_error(job["log"]),
        "wall_s": wall,
        "peak_rss_bytes": peak_rss_bytes(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sonotile.batch.worker")
    p.add_argument("--fd", type=int, required=True, help="file descriptor for results")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--cpus", default=None, help="comma-separated CPU ids to run on")
    a = p.parse_args(argv)
    for k in LAUNCHER_ENV:
        os.environ.pop(k, None)
    if a.cpus:
        try:
            os.sched_setaffinity(0, {int(c) for c in a.cpus.split(",")})
        except (AttributeError, OSError):
            pass
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)  # before JAX starts: XLA's and FFTW's threads
    out = os.fdopen(a.fd, "w", buffering=1)
    for line in sys.stdin:
        if not line.strip():
            continue
        result = run_job(json.loads(line))
        out.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
