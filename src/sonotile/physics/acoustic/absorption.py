"""k-Wave's power-law absorption factors, written once for numpy and jax.numpy values alike
(plain arithmetic: a number, a numpy array or a traced JAX array in, the same kind out)."""

from __future__ import annotations

import math
from typing import Any

from sonotile.model.units import db2neper


def tau_of(c0: Any, alpha_coeff: Any, y: float) -> Any:
    """The absorption factor ``tau = -2 a0 c0^(y-1)`` (``c0`` [m/s], ``alpha_coeff``
    [dB/(MHz^y cm)], ``a0`` its value in Np/((rad/s)^y m))."""
    return -2.0 * db2neper(alpha_coeff, y) * c0 ** (y - 1)


def eta_per_c0_tau(y: float) -> float:
    """``eta / (c0 tau) = -tan(pi y / 2)``: the dispersion factor ``eta = 2 a0 c0^y tan(pi y/2)``
    from ``tau`` and ``c0``."""
    return -math.tan(math.pi * y / 2)


def absorption_factors(c0: Any, alpha_coeff: Any, y: float) -> tuple[Any, Any]:
    """k-Wave's power-law factors ``tau = -2 a0 c0^(y-1)``, ``eta = 2 a0 c0^y tan(pi y/2)``."""
    tau = tau_of(c0, alpha_coeff, y)
    return tau, eta_per_c0_tau(y) * c0 * tau
