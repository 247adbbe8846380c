"""A whole sonication through the heat model's engine (``KWaveDiffusion.take_time_step``), timed.

    /usr/bin/time -v env PYTHONPATH=src .venv/bin/python benchmarks/heat/heat_sonication.py \\
        --size 256 --dt 0.01 --duration 10 --medium density [--threads 2]

A cube of ``--size`` points (0.25 mm), a Gaussian heat source (2 mm wide, 1e7 W/m^3 at the
focus) on for ``--duration`` seconds in steps of ``--dt``, float32 (FFTW on the CPU). Media:

* ``homogeneous``  one perfused tissue (the exact propagator: one transform pair per step);
* ``density``      rho C and perfusion differ in two halves, one conductivity (Laplacian and
  smoothing from one forward transform);
* ``tissues``      conductivity too (gradient, smoothing and divergence).

Prints the set-up time, the run's time (compilation included), the time per step, the peak
temperature and the load average before and after; ``/usr/bin/time -v`` adds the process's
wall time and peak memory.
"""

from __future__ import annotations

import argparse
import resource
import time


def medium_of(kind: str, n: int) -> dict:
    """The thermal medium ``kind`` on an ``n``-cube (numbers or ``(n, n, n)`` arrays)."""
    import numpy as np

    base = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5,
            "blood_density": 1060.0, "blood_specific_heat": 3617.0,
            "blood_perfusion_rate": 0.01, "blood_ambient_temperature": 37.0}  # fmt: skip
    if kind == "homogeneous":
        return base
    right = (np.arange(n) >= n // 2)[:, None, None] * np.ones((n, n, n), bool)
    out = {**base, "density": 1050.0 + 50.0 * right, "blood_perfusion_rate": 0.01 + 0.01 * right}
    if kind == "tissues":
        out["thermal_conductivity"] = 0.5 + 0.2 * right
    return out


def load() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--dt", type=float, default=0.01)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--medium", choices=("homogeneous", "density", "tissues"), default="density")
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
    import numpy as np

    import sonotile as st

    t0, load0 = time.perf_counter(), load()
    n, dx = a.size, 0.25e-3
    r2 = sum(((np.arange(n) - n // 2) * dx).reshape([-1 if i == j else 1 for j in range(3)]) ** 2
             for i in range(3))  # fmt: skip
    Q = 1e7 * np.exp(-r2 / 2e-3**2)
    kdiff = st.KWaveDiffusion(st.KWaveGrid((n,) * 3, dx), medium_of(a.medium, n),
                              {"T0": 37.0, "Q": Q}, dtype="float32")  # fmt: skip
    nt = round(a.duration / a.dt)
    t1 = time.perf_counter()
    kdiff.take_time_step(nt, a.dt)
    t2 = time.perf_counter()
    print(f"{n}^3 float32, {a.medium}, {nt} steps of {a.dt * 1e3:g} ms, threads "
          f"{a.threads or 'all'}: set-up {t1 - t0:.1f} s, run {t2 - t1:.1f} s "
          f"({(t2 - t1) / nt * 1e3:.0f} ms/step, compilation included), peak "
          f"{float(np.max(kdiff.T_max)):.2f} degC, process peak memory "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB; load {load0} -> "
          f"{load()}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
