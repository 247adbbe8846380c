"""The analytic solution of Pennes' bioheat equation in a homogeneous, periodic medium
(k-Wave's ``bioheatExact``): the Green's function in Fourier space."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike


def bioheat_exact(T0: ArrayLike, S: ArrayLike, material: Sequence[float],
                  dx: float | Sequence[float], t: float) -> np.ndarray:  # fmt: skip
    """Temperature [degC] at time ``t`` [s] of ``dT/dt = D lap T - P (T - Ta) + S``.

    Args:
        T0: initial temperature [degC], an array (1-D, 2-D or 3-D; periodic).
        S: source term [K/s] (``Q / (rho C)``), an array of ``T0``'s shape or 0.
        material: ``(D [m^2/s], P [1/s], Ta [degC])``: diffusivity, perfusion coefficient
            ``rho_b w_b C_b / (rho C)`` and arterial temperature (each a single value).
        dx: grid spacing [m] (one for all axes, or one per axis).
        t: time [s].

    ``T = Ta + F^-1(exp(-a t) F(T0 - Ta) + (1 - exp(-a t)) / a F S)``, ``a = D |k|^2 + P``
    (``t`` where ``a = 0``).
    """
    T0 = np.asarray(T0, dtype=np.float64)
    if T0.ndim == 0:
        raise ValueError("T0 must be an array (the grid's initial temperature)")
    S = np.asarray(S, dtype=np.float64)
    if S.size != 1 and S.shape != T0.shape:
        raise ValueError(f"S: shape {S.shape} is neither 0 nor T0's shape {T0.shape}")
    D, P, Ta = (float(np.asarray(v)) for v in material)
    spacing = [float(dx)] * T0.ndim if np.isscalar(dx) else [float(d) for d in dx]  # type: ignore[arg-type, union-attr]
    k2 = np.zeros((1,) * T0.ndim)
    for ax, (n, d) in enumerate(zip(T0.shape, spacing)):
        k = 2 * np.pi * np.fft.fftfreq(n, d)
        shape = [1] * T0.ndim
        shape[ax] = n
        k2 = k2 + (k**2).reshape(shape)
    a = D * k2 + P
    decay = np.exp(-a * t)
    with np.errstate(divide="ignore", invalid="ignore"):
        growth = np.where(a > 0, -np.expm1(-a * t) / np.where(a > 0, a, 1.0), t)
    spec = decay * np.fft.fftn(T0 - Ta)
    if S.size != 1 or float(S) != 0:
        spec = spec + growth * np.fft.fftn(np.broadcast_to(S, T0.shape))
    return np.real(np.fft.ifftn(spec)) + Ta
