"""Oblique incidence on a water-solid interface (solid c_p 3000, c_s 1800 m/s, rho 1900:
critical angles 30 and 56 deg) against the analytic fluid-solid reflection coefficient, with
``benchmarks/elastic_oblique.py``'s single-mode CW method (each case 20-70 s: slow)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "elastic_oblique.py"


def _oblique():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("elastic_oblique", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.parametrize(
    ("deg", "m", "periods", "tol"),
    # before the compressional critical angle; beyond both (total reflection: the run must
    # outlast the slow build-up near the leaky Rayleigh angle, about 64 deg); between them,
    # where the model is 2.8 % high at this resolution and the <= 2 % target is not met (the
    # tangential velocity's slip across the interface, see docs/elastic.md)
    [(20.0, 1, 40.0, 0.01), (60.0, 3, 120.0, 0.01), (45.0, 3, 40.0, 0.04)],
)
def test_reflection_from_a_solid_at_oblique_incidence(
    deg: float, m: int, periods: float, tol: float
) -> None:
    ob = _oblique()
    theta = np.radians(deg)
    _, r = ob.simulated(theta, m, 1800.0, 1, (ob.C1, 0.0, ob.R1), periods)
    assert abs(abs(r) / abs(ob.analytic(theta, 1800.0)) - 1) < tol
