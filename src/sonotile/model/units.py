"""Unit conversions of k-Wave's inputs, written once for numpy and jax.numpy values alike
(plain arithmetic: a number, a numpy array or a traced JAX array in, the same kind out)."""

from __future__ import annotations

import math
from typing import Any

#: Decibels per neper: 1 Np = 20 log10(e) dB.
DB_PER_NEPER = 20 * math.log10(math.e)


def db2neper(alpha_coeff: Any, y: float) -> Any:
    """k-Wave's ``db2neper``: ``alpha_coeff`` [dB/(MHz^y cm)] as [Np/((rad/s)^y m)].

    With ``y = 0`` it is the plain conversion of dB/cm to Np/m.
    """
    return 100.0 * alpha_coeff * (1e-6 / (2 * math.pi)) ** y / DB_PER_NEPER
