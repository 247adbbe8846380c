"""Where a small ``sonotile-kwave`` run's time goes (docs/performance.md, Small runs).

    PYTHONPATH=src .venv/bin/python benchmarks/performance/small_run.py write in.h5
    PYTHONPATH=src .venv/bin/python benchmarks/performance/small_run.py parts in.h5 \
        [sonotile-kwave flags]
    PYTHONPATH=src .venv/bin/python benchmarks/performance/small_run.py alternate in.h5 \
        KWAVE_BINARY [RUNS]

``write``: the 2-D initial value problem of 128^2 points and 600 steps (k-wave-python's
homogeneous-medium example: two discs of p0, power-law absorption, 50 sensor points on a
circle, PML 20 inside) as a k-Wave input file. ``parts``: runs ``sonotile-kwave -i IN -o
IN.out.h5`` in this process with timers around its imports and the functions that do each part
(reading, operators and FFTW, loading or compiling the programs, the steps, the output) and
prints them [ms]; run it several times (the first fills the caches) and compare the whole
process's wall time (``time``) with ``python -m sonotile.kwave.cli`` alternately.
``alternate``: whole processes, RUNS rounds (default 5) of k-Wave's binary on one thread
(``-t 1``), ``sonotile-kwave`` with its defaults and warm caches, and ``sonotile-kwave`` with
cold ones (a fresh cache folder holding only the built FFTW extension: no compiled programs,
no FFTW wisdom), in turn; prints each one's median and smallest wall time and CPU time (user +
system) [s], and the load average (the CPU time of a one-thread process is its wall time on an
idle core).
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

PARTS: dict[str, float] = {}


def timed(owner: Any, name: str, label: str) -> None:
    """Replace ``owner.name`` by a wrapper that adds its time to ``PARTS[label]``."""
    fn: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            PARTS[label] = PARTS.get(label, 0.0) + time.perf_counter() - t

    setattr(owner, name, wrapper)


def write(path: str) -> None:
    import numpy as np

    from sonotile.api import KSensor, KSource, KWaveGrid, KWaveMedium, Options, build_problem
    from sonotile.kwave.writer import write_input

    n = 128
    x, y = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    p0 = 5.0 * ((x - 64) ** 2 + (y - 64) ** 2 <= 25) + 3.0 * ((x - 84) ** 2 + (y - 54) ** 2 <= 9)
    theta = np.linspace(0, 2 * np.pi, 50, endpoint=False)
    mask = np.zeros((n, n), bool)
    mask[np.round(64 + 40 * np.cos(theta)).astype(int),
         np.round(64 + 40 * np.sin(theta)).astype(int)] = True  # fmt: skip
    grid = KWaveGrid((n, n), 1e-4, dt=2e-8, nt=600)
    medium = KWaveMedium(1500.0, 1000.0, alpha_coeff=0.75, alpha_power=1.5)
    problem, _ = build_problem(grid, medium, KSource(p0=p0), KSensor(mask=mask), Options())
    write_input(path, problem)


def parts(path: str, flags: list[str]) -> int:
    t = time.perf_counter()
    from sonotile.base import runtime
    from sonotile.kwave import cli

    args = cli.parse(["-i", path, "-o", path + ".out.h5", *flags])
    small = args.threads is None and cli.one_thread(args)  # the threads sonotile-kwave takes
    runtime.configure_threads(1 if small else args.threads, pin=not small)
    import h5py  # noqa: F401
    import numpy  # noqa: F401

    PARTS["import numpy, h5py, sonotile.base"] = time.perf_counter() - t
    t = time.perf_counter()
    import jax

    PARTS["import jax"] = time.perf_counter() - t
    t = time.perf_counter()
    import sonotile.kwave.run as run
    from sonotile.fft import fftw
    from sonotile.kwave import output
    from sonotile.solver import programs, runner

    PARTS["the rest of sonotile-kwave's imports"] = time.perf_counter() - t
    t = time.perf_counter()
    jax.devices()
    PARTS["JAX's CPU backend"] = time.perf_counter() - t
    timed(run, "read_input", "reading the input")
    timed(fftw, "load", "FFTW extension loaded")
    timed(fftw, "prepare", "FFTW plans")
    timed(run, "make_engine", "constants and operators (FFTW included)")
    timed(programs, "load", "compiled programs loaded from the cache")
    timed(runner, "advance", "the steps (programs loaded or compiled included)")
    for name in ("__init__", "write_fields", "finish_leg"):
        timed(output.OutputFile, name, "the output file")
    t = time.perf_counter()
    status = cli.main(["-i", path, "-o", path + ".out.h5", *flags])
    PARTS["sonotile-kwave's main"] = time.perf_counter() - t
    PARTS["in process"] = time.perf_counter() - T0
    for label, seconds in PARTS.items():
        print(f"{label:50s} {seconds * 1e3:8.1f} ms")
    return status


def alternate(path: str, kwave: str, runs: int) -> None:
    import glob
    import shutil
    import statistics
    import subprocess
    import tempfile

    from sonotile.base import config

    cache = config.current().cache_dir
    sonotile = [sys.executable, "-m", "sonotile.kwave.cli", "-i", path]
    cmds = {
        "k-Wave -t 1": [kwave, "-i", path, "-o", path + ".kwave.h5", "-t", "1"],
        "sonotile warm": [*sonotile, "-o", path + ".warm.h5"],
        "sonotile cold": [*sonotile, "-o", path + ".cold.h5"],
    }
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    subprocess.run(cmds["sonotile warm"], capture_output=True, check=True)  # fills the caches
    for _ in range(runs):
        for name, cmd in cmds.items():
            with tempfile.TemporaryDirectory() as tmp:
                env = dict(os.environ)
                if name.endswith("cold"):
                    os.makedirs(os.path.join(tmp, "sonotile"))
                    for f in glob.glob(os.path.join(cache, "fftw_ffi_*.so*")):
                        shutil.copy(f, os.path.join(tmp, "sonotile"))
                    env["XDG_CACHE_HOME"] = tmp
                t = time.perf_counter()
                proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env)
                _, status, use = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - t
            if status:
                raise RuntimeError(f"{name}: exit status {status}")
            times[name].append((wall, use.ru_utime + use.ru_stime))
    print(f"load average {os.getloadavg()[0]:.1f}; {runs} rounds")
    for name, v in times.items():
        w, c = [x[0] for x in v], [x[1] for x in v]
        print(f"{name:14s} wall median {statistics.median(w):.3f} min {min(w):.3f}   "
              f"CPU median {statistics.median(c):.3f} min {min(c):.3f} s")  # fmt: skip


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "write":
        write(argv[1])
        return 0
    if len(argv) >= 3 and argv[0] == "alternate":
        alternate(argv[1], argv[2], int(argv[3]) if len(argv) > 3 else 5)
        return 0
    if len(argv) >= 2 and argv[0] == "parts":
        status = parts(argv[1], argv[2:])
        sys.stdout.flush()
        os._exit(status)  # as sonotile-kwave ends (no interpreter teardown)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
