"""Thermal dose: Sapareto and Dewey's cumulative equivalent minutes at 43 degC (CEM43).

``CEM43 = sum_n dt/60 R^(43 - T_n)`` [min] with ``R = 0.5`` for ``T >= 43`` degC and ``0.25`` for
``37 <= T < 43`` degC, and no dose below 37 degC (k-Wave's ``kWaveDiffusion``: ``R = 0`` there;
the standard ``R = 0.25`` would add at most ``0.25^6 = 2.4e-4`` min per minute spent below
37 degC). Written once for numpy and jax.numpy (``xp``).
"""

from __future__ import annotations

from typing import Any

#: The dose of an ablative lesion [min] (k-Wave's ``lesion_map``: ``cem43 >= 240``).
LESION_CEM43 = 240.0


def cem43_rate(T: Any, xp: Any) -> Any:
    """``R^(43 - T)`` [equivalent minutes per minute] of a temperature ``T`` [degC]."""
    # 0.5^(43 - T) = 2^(T - 43) and 0.25^(43 - T) = 2^(2 (T - 43)): one exp2 per point
    slope = xp.where(T >= 43.0, 1.0, 2.0)
    return xp.where(T >= 37.0, xp.exp2(slope * (T - 43.0)), 0.0)


def cem43_increment(T: Any, dt: float, xp: Any) -> Any:
    """Dose [min] of holding ``T`` [degC] for ``dt`` [s]."""
    return (dt / 60.0) * cem43_rate(T, xp)


def cem43_of_history(T: Any, dt: float, xp: Any, axis: int = 0) -> Any:
    """Dose [min] of a recorded history ``T`` [degC] (samples along ``axis``, ``dt`` [s] apart),
    each sample held for one step (k-Wave's sum over steps)."""
    return xp.sum(cem43_increment(T, dt, xp), axis=axis)


def lesion(cem43: Any, threshold: float = LESION_CEM43) -> Any:
    """The lesion map: where the dose reaches ``threshold`` [min] (k-Wave: 240)."""
    return cem43 >= threshold
