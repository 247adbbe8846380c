"""The isotropic elastic medium, validated in the user's names (numpy, no JAX).

Each property is a number (homogeneous) or an array of the grid's shape. Shear speed 0 marks a
fluid (a skull in water is one heterogeneous grid). Absorption follows k-Wave's Kelvin-Voigt
model: ``alpha_coeff_compression`` / ``alpha_coeff_shear`` [dB/(MHz^2 cm)], both or neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.problem import ProblemError, check_real

#: A property: a float, or a float64 array of the grid's shape.
Value = float | np.ndarray


def _value(name: str, v: ArrayLike | None, shape: tuple[int, ...], positive: bool) -> Value:
    """``v`` as a float or a grid-shaped float64 array; finite, > 0 (``positive``) or >= 0."""
    if v is None:
        raise ProblemError(f"medium.{name}: missing")
    check_real(f"medium.{name}", v)
    arr = np.asarray(v, dtype=np.float64)
    if arr.size == 1:
        arr = arr.reshape(())
    elif arr.shape != shape:
        raise ProblemError(f"medium.{name}: shape {arr.shape} is not the grid shape {shape}")
    if not np.all(np.isfinite(arr)):
        raise ProblemError(f"medium.{name}: must be finite")
    low = float(arr.min())
    if (positive and low <= 0) or low < 0:
        raise ProblemError(f"medium.{name}: found {low:g}, must be {'> 0' if positive else '>= 0'}")
    return float(arr) if arr.ndim == 0 else arr


@dataclass(frozen=True)
class ElasticMedium:
    """Validated isotropic elastic medium (k-Wave's ``pstdElastic2D/3D`` medium fields).

    Attributes:
        sound_speed_compression: c_p [m/s], > 0.
        sound_speed_shear: c_s [m/s], >= 0 and below c_p (0: fluid).
        density: rho [kg/m^3], > 0.
        alpha_coeff_compression, alpha_coeff_shear: Kelvin-Voigt absorption
            [dB/(MHz^2 cm)], >= 0; both or neither (None: lossless).
        shape: the grid shape the fields are checked against.
    """

    sound_speed_compression: Value
    sound_speed_shear: Value
    density: Value
    shape: tuple[int, ...]
    alpha_coeff_compression: Value | None = None
    alpha_coeff_shear: Value | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        shape = tuple(int(n) for n in self.shape)
        set_(self, "shape", shape)
        if len(shape) < 2:
            raise ProblemError(
                f"medium.sound_speed_shear: the elastic model needs a 2-D or 3-D grid, "
                f"the grid {shape} is {len(shape)}-D"
            )
        cp = _value("sound_speed_compression [m/s]", self.sound_speed_compression, shape, True)
        cs = _value("sound_speed_shear [m/s]", self.sound_speed_shear, shape, False)
        rho = _value("density [kg/m^3]", self.density, shape, True)
        above = np.asarray(cs) >= np.asarray(cp)
        if np.any(above):
            where = tuple(int(i) for i in np.argwhere(np.broadcast_to(above, shape))[0])
            raise ProblemError(
                "medium.sound_speed_shear: must be below sound_speed_compression "
                f"(found {np.broadcast_to(cs, shape)[tuple(where)]:g} >= "
                f"{np.broadcast_to(cp, shape)[tuple(where)]:g} m/s at grid index {tuple(where)})"
            )
        set_(self, "sound_speed_compression", cp)
        set_(self, "sound_speed_shear", cs)
        set_(self, "density", rho)
        given = [self.alpha_coeff_compression is not None, self.alpha_coeff_shear is not None]
        if any(given) and not all(given):
            missing = "alpha_coeff_shear" if given[0] else "alpha_coeff_compression"
            raise ProblemError(
                f"medium.{missing}: missing (Kelvin-Voigt absorption needs both "
                "alpha_coeff_compression and alpha_coeff_shear, as in k-Wave)"
            )
        if all(given):
            unit = " [dB/(MHz^2 cm)]"
            for name in ("alpha_coeff_compression", "alpha_coeff_shear"):
                set_(self, name, _value(name + unit, getattr(self, name), shape, False))

    @property
    def kelvin_voigt(self) -> bool:
        """True when the medium absorbs (both coefficients given)."""
        return self.alpha_coeff_compression is not None

    @property
    def c_max(self) -> float:
        """Largest compressional speed [m/s] (k-Wave's reference speed of the PML)."""
        return float(np.max(self.sound_speed_compression))

    @property
    def c_min(self) -> float:
        """Smallest non-zero wave speed [m/s] (shear where present) for resolution checks."""
        cs = np.asarray(self.sound_speed_shear)
        cp = float(np.min(self.sound_speed_compression))
        return float(min(cp, np.min(cs[cs > 0]))) if np.any(cs > 0) else cp
