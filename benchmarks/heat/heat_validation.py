"""The heat model's validation numbers (docs/heat.md), float64 on the CPU (~30 s):

    PYTHONPATH=src .venv/bin/python benchmarks/heat/heat_validation.py

* homogeneous perfused media with a heat source in 1-D, 2-D, 3-D against ``bioheat_exact``
  (Green's function): max error / max rise;
* the dose at 50 degC held for 500 s against ``t/60 2^7`` min (k-Wave's check).

The other figures of docs/heat.md are asserted by tests/physics/test_heat*.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from sonotile.api.heating.bioheat import KWaveDiffusion  # noqa: E402
from sonotile.physics.heat import bioheat_exact  # noqa: E402

RHO, C, K = 1079.0, 3540.0, 0.52
BLOOD = {"blood_density": 1060.0, "blood_specific_heat": 3617.0, "blood_ambient_temperature": 37.0}


def gaussian(shape: tuple[int, ...], centre: float, width: float) -> np.ndarray:
    axes = [(np.arange(n) - n // 2) * 1e-3 for n in shape]
    r2 = sum((x - centre) ** 2 for x in np.meshgrid(*axes, indexing="ij"))
    return np.exp(-r2 / width**2)


def homogeneous(shape: tuple[int, ...], perf: float, dt: float, steps: int) -> float:
    T0 = 37.0 + 2.0 * gaussian(shape, 2e-3, 2.5e-3)
    Q = 2e5 * gaussian(shape, 0.0, 3e-3)
    med = {"density": RHO, "specific_heat": C, "thermal_conductivity": K, **BLOOD,
           "blood_perfusion_rate": perf}  # fmt: skip
    kd = KWaveDiffusion(SimpleNamespace(shape=shape, spacing=1e-3), med, {"T0": T0, "Q": Q})
    kd.take_time_step(3 * steps, dt)
    D, P = K / (RHO * C), 1060.0 * 3617.0 * perf / (RHO * C)
    exact = bioheat_exact(T0, Q / (RHO * C), (D, P, 37.0), 1e-3, 3 * steps * dt)
    return float(np.max(np.abs(kd.T - exact)) / np.max(np.abs(exact - 37.0)))


def main() -> int:
    print("homogeneous, perfused, vs bioheat_exact (max error / max rise):")
    for shape, perf, dt, steps in (((128,), 0.01, 0.5, 40), ((48, 40), 0.02, 1.0, 15),
                                   ((24, 20, 16), 0.005, 0.25, 12)):  # fmt: skip
        print(f"  {str(shape):14s} P-rate {perf:5.3f}/s dt {dt:4.2f} s: "
              f"{homogeneous(shape, perf, dt, steps):.2e}")  # fmt: skip
    kd = KWaveDiffusion(SimpleNamespace(shape=(64,), spacing=1e-3),
                        {"density": RHO, "specific_heat": C, "thermal_conductivity": K},
                        {"T0": 50.0})  # fmt: skip
    kd.take_time_step(1000, 0.5)
    want = 1000 * 0.5 / 60 * 2.0**7
    print(f"dose at 50 degC for 500 s: {kd.cem43[0]:.12g} min (t/60 2^7 = {want:.12g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
