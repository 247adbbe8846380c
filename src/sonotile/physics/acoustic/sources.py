"""k-Wave's scaling of source terms (``scaleSourceTerms``), written once for numpy and
jax.numpy values alike: the API scales user signals with it, differentiable runs scale traced
signals with a traced sound speed."""

from __future__ import annotations

from typing import Any


def pressure_source_scale(c: Any, ndim: int, dt: float, dx: float, mode: str) -> Any:
    """Factor from a pressure signal [Pa] to the value injected into each split density
    component [kg/m^3]: ``1 / (N c^2)`` for a Dirichlet source, ``2 dt / (N c dx)`` otherwise
    (``c`` [m/s] at the source points, ``dt`` [s], ``dx`` [m] the spacing along x)."""
    if mode == "dirichlet":
        return 1 / (ndim * c * c)
    return 2 * dt / (ndim * c * dx)


def velocity_source_scale(c: Any, dt: float, dx: float) -> Any:
    """Factor ``2 c dt / dx`` of an additive velocity source (and of k-Wave's transducer) along an
    axis of spacing ``dx`` [m] (``c`` [m/s], ``dt`` [s])."""
    return 2 * c * dt / dx
