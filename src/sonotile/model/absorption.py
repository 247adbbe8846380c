"""k-Wave's power-law absorption factors (numpy; the plan turns them into device constants)."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike


def absorption_factors(
    c0: ArrayLike, alpha_coeff: ArrayLike, y: float
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """k-Wave's power-law factors ``tau = -2 a0 c0^(y-1)``, ``eta = 2 a0 c0^y tan(pi y/2)``.

    ``a0`` is ``alpha_coeff`` [dB/(MHz^y cm)] converted to Np/((rad/s)^y m). Arrays for array
    input, numpy floats for scalars.
    """
    a0 = 100.0 * np.asarray(alpha_coeff) * (1e-6 / (2 * math.pi)) ** y / (20 * math.log10(math.e))
    c0 = np.asarray(c0)
    tau = -2.0 * a0 * c0 ** (y - 1)
    eta = 2.0 * math.tan(math.pi * y / 2) * a0 * c0**y
    return tau, eta
