"""Where a small ``sonotile-kwave`` run's time goes (docs/performance.md, Small runs).

    PYTHONPATH=src .venv/bin/python benchmarks/small_run.py write in.h5
    PYTHONPATH=src .venv/bin/python benchmarks/small_run.py parts in.h5 [sonotile-kwave flags]

``write``: the 2-D initial value problem of 128^2 points and 600 steps (k-wave-python's
homogeneous-medium example: two discs of p0, power-law absorption, 50 sensor points on a
circle, PML 20 inside) as a k-Wave input file. ``parts``: runs ``sonotile-kwave -i IN -o
IN.out.h5`` in this process with timers around its imports and the functions that do each part
(reading, operators and FFTW, loading or compiling the programs, the steps, the output) and
prints them [ms]; run it several times (the first fills the caches) and compare the whole
process's wall time (``time``) with ``python -m sonotile.kwave.cli`` alternately.
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

    runtime.enable_env()
    import h5py  # noqa: F401
    import numpy  # noqa: F401

    PARTS["import numpy, h5py, sonotile.base"] = time.perf_counter() - t
    t = time.perf_counter()
    import jax

    PARTS["import jax"] = time.perf_counter() - t
    t = time.perf_counter()
    import sonotile.kwave.cli as cli
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


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "write":
        write(argv[1])
        return 0
    if len(argv) >= 2 and argv[0] == "parts":
        status = parts(argv[1], argv[2:])
        sys.stdout.flush()
        os._exit(status)  # as sonotile-kwave ends (no interpreter teardown)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
