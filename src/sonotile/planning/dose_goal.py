"""A thermal-dose goal at the target: the drive's power scale that brings the dose there to a
prescription, from one heat run.

The heat model (Pennes' bioheat equation with constant tissue properties, blood at the body
temperature ``T0``) is linear in its heat source, and the heat source is ``Q ∝ |p|^2``: a
drive scaled by ``s`` raises the temperature history at every point by ``k = s^2`` times its
rise, ``T(t) = T0 + k dT(t)``. The dose at the target,

    CEM43(k) = sum_n dt/60 R^(43 - T0 - k dT_n)      (:mod:`sonotile.physics.heat.dose`),

grows monotonically with ``k`` where ``dT >= 0``, so the ``k`` that reaches a prescribed dose
``D`` is found by bisection on ``log k`` from the one recorded history ``dT_n``.
"""

from __future__ import annotations

import numpy as np

from sonotile.api.heating.sonication import HeatRun
from sonotile.model.problem import ProblemError
from sonotile.physics.heat.dose import cem43_of_history
from sonotile.planning.heating import BOILING

#: bisection steps on log k (to well below 1e-12 relative for any bracket found)
STEPS = 100


def target_rise(heat: HeatRun, T0: float, column: int = 0) -> np.ndarray:  # noqa: N803
    """The temperature rise history [K] at recorded point ``column`` of ``heat`` (a run with
    ``points``: :func:`sonotile.api.heating.sonicate`)."""
    if "T_points" not in heat.data:
        raise ValueError("the heat run kept no point histories (sonicate(..., points=...))")
    return np.asarray(heat.data["T_points"], dtype=np.float64)[:, column] - T0


def dose_of(rise: np.ndarray, T0: float, dt: float, k: float = 1.0) -> float:  # noqa: N803
    """CEM43 [min] of the history ``T0 + k rise`` [degC] sampled every ``dt`` [s]."""
    return float(cem43_of_history(T0 + k * np.asarray(rise, np.float64), dt, np))


def power_scale(rise: np.ndarray, T0: float, dt: float, dose: float) -> float:  # noqa: N803
    """The factor ``k`` on the heat source (``s^2`` on the drive) that brings the dose of the
    history ``T0 + k rise`` [degC, every ``dt`` s] to ``dose`` [CEM43 min]."""
    if not (np.isfinite(dose) and dose > 0):
        raise ProblemError(f"target dose must be a positive number of minutes, got {dose}")
    if not np.max(rise, initial=0.0) > 0:
        raise ProblemError("the target does not heat: no drive reaches a dose there")
    base = dose_of(rise, T0, dt, 0.0)  # body temperature alone (R = 0.25 from 37 degC)
    if dose <= base * (1 + 1e-9):
        raise ProblemError(f"a target dose of {dose:g} min is below that of {T0:g} degC "
                           f"alone over the run ({base:.3g} min)")  # fmt: skip
    top = (BOILING - T0) / float(np.max(rise))  # the largest k the model is asked for
    if dose_of(rise, T0, dt, top) < dose:
        raise ProblemError(f"a target dose of {dose:g} min is out of reach: it needs more than "
                           f"{BOILING:g} degC at the target")  # fmt: skip
    lo, hi = min(1.0, top), min(1.0, top)
    while dose_of(rise, T0, dt, lo) > dose:
        lo /= 2.0
    while dose_of(rise, T0, dt, hi) < dose:
        hi = min(2.0 * hi, top)
    for _ in range(STEPS):
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if dose_of(rise, T0, dt, mid) < dose else (lo, mid)
    return float(np.sqrt(lo * hi))
