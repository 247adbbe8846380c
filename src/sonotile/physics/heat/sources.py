"""Heat sources: absorbed ultrasound, ``Q = alpha p^2 / (rho c)``, and sonication schedules.

Written for numpy and jax.numpy alike (the pressure amplitude may be a traced value: gradients
of temperature and dose through the chain).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.units import db2neper


def alpha_np_per_m(alpha_coeff: Any, alpha_power: float, frequency: float) -> Any:
    """Absorption [Np/m] at ``frequency`` [Hz] of ``alpha_coeff`` [dB/(MHz^y cm)] with exponent
    ``alpha_power`` y (k-Wave's ``db2neper(alpha_coeff, y) (2 pi f)^y``)."""
    return db2neper(alpha_coeff, alpha_power) * (2 * math.pi * frequency) ** alpha_power


def acoustic_heat_source(p_amp: Any, alpha_coeff: Any, alpha_power: float, frequency: float,
                         density: Any, sound_speed: Any) -> Any:  # fmt: skip
    """Volume rate of heat deposition [W/m^3] of a CW field: ``Q = alpha p^2 / (rho c)``
    (k-Wave's focused-ultrasound heating example), ``p_amp`` the pressure amplitude [Pa],
    ``density`` [kg/m^3], ``sound_speed`` [m/s], absorption as :func:`alpha_np_per_m`."""
    alpha = alpha_np_per_m(alpha_coeff, alpha_power, frequency)
    return alpha * p_amp * p_amp / (density * sound_speed)


def sonication(nt: int, dt: float, on: float | None = None, period: float | None = None,
               duty: float = 1.0) -> np.ndarray:  # fmt: skip
    """Power factor per step ``(nt,)`` (1 on, 0 off) of a sonication of ``nt`` steps of ``dt``
    [s]: on for the first ``on`` seconds (None: the whole run), pulsed within that time with
    ``period`` [s] at ``duty`` (fraction of each period on). A step counts as on when it
    starts inside an on interval."""
    t = np.arange(nt) * dt
    eps = 1e-9 * dt
    out = np.ones(nt)
    if on is not None:
        out[t >= on - eps] = 0.0
    if period is not None:
        if not (period > 0 and 0 <= duty <= 1):
            raise ValueError(f"period = {period} s, duty = {duty}: need period > 0, 0 <= duty <= 1")
        phase = np.mod(t + eps, period)
        out[phase >= duty * period] = 0.0
    return out


def block_mean(field: ArrayLike, factor: tuple[int, ...]) -> np.ndarray:
    """``field`` averaged over blocks of ``factor`` points per axis (a coarser grid with
    spacing ``factor * d``): the deposited power per volume averaged, so the total power is
    kept. Each axis length must be a multiple of its factor."""
    a = np.asarray(field, dtype=np.float64)
    if len(factor) != a.ndim or any(f < 1 or n % f for n, f in zip(a.shape, factor)):
        raise ValueError(f"grid {a.shape} cannot be coarsened by {factor} (whole blocks needed)")
    shape: list[int] = []
    for n, f in zip(a.shape, factor):
        shape += [n // f, f]
    return a.reshape(shape).mean(axis=tuple(range(1, 2 * a.ndim, 2)))
