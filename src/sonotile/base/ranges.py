"""A number checked against its allowed range, in the user's own name for it, for the Python
API (``ValueError``); the command line's types are :mod:`sonotile.base.cliargs`'s."""

from __future__ import annotations

import math


def interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """``(0, 1]``-style text of a range (None: unbounded)."""
    lo = "(-inf" if low is None else ("(" if low_open else "[") + f"{low:g}"
    hi = "inf)" if high is None else f"{high:g}" + (")" if high_open else "]")
    return f"{lo}, {hi}"


def in_range(name: str, value: float | str, low: float | None = None, high: float | None = None, *,
             low_open: bool = False, high_open: bool = False, whole: bool = False,
             unit: str = "") -> float:  # fmt: skip
    """``value`` if it is a finite number (a whole one if ``whole``) between ``low`` and
    ``high`` (excluded where ``low_open``/``high_open``; None: unbounded), else a
    ``ValueError`` naming ``name``, the value found and the range expected."""
    span = interval(low, high, low_open, high_open) + (f" {unit}" if unit else "")
    kind = "a whole number" if whole else "a finite number"
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: got {value!r}, expected {kind} in {span}") from None
    ok = math.isfinite(v) and (not whole or v.is_integer())
    ok = ok and (low is None or (v > low if low_open else v >= low))
    ok = ok and (high is None or (v < high if high_open else v <= high))
    if not ok:
        raise ValueError(f"{name}: got {value!r}, expected {kind} in {span}")
    return v
