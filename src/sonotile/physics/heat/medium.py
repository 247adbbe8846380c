"""The thermal medium and source in k-Wave's names, validated (numpy, no JAX).

k-Wave's ``kWaveDiffusion`` writes Pennes' bioheat equation as

    dT/dt = p1 div(p2 grad T) - P (T - Ta) + q Q

with ``p1 = 1 / (rho C)``, ``p2 = k`` (thermal conductivity) or, given a diffusion
coefficient ``D``, ``p1 = 1``, ``p2 = D``; the perfusion coefficient
``P = rho_b w_b C_b / (rho C)`` [1/s] and ``q = 1 / (rho C)`` [K m^3/J]. Each property is a
number or a field of the grid's shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.problem import ProblemError, check_real

#: A coefficient: a Python float (homogeneous) or a float64 array of the grid's shape.
Coef = float | np.ndarray

#: The reference-value rules of k-Wave (``diffusion_coeff_ref``, ``perfusion_coeff_ref``).
REFERENCES = ("max", "min", "mean")

#: k-Wave's ``medium.boundary_condition`` values: periodic (FFT), insulating (zero normal
#: derivative at the edge points, DCT-I), conducting (zero one point outside the grid, DST-I).
BOUNDARY_CONDITIONS = ("periodic", "insulating", "conducting")


@dataclass
class ThermalMedium:
    """Thermal properties in k-Wave's names; each a number or a grid-shaped array.

    Attributes:
        density: tissue density rho [kg/m^3].
        specific_heat: tissue specific heat C [J/(kg K)].
        thermal_conductivity: k [W/(m K)].
        diffusion_coeff: thermal diffusivity D [m^2/s], instead of ``thermal_conductivity``
            (then ``density`` and ``specific_heat`` are only needed for a heat source).
        blood_density: rho_b [kg/m^3].
        blood_specific_heat: C_b [J/(kg K)].
        blood_perfusion_rate: w_b [1/s] (volume of blood per volume of tissue per second).
        perfusion_coeff: P = rho_b w_b C_b / (rho C) [1/s], instead of the three blood values.
        blood_ambient_temperature: arterial temperature Ta [degC].
        diffusion_coeff_ref: reference D of the k-space correction [m^2/s], or "max" (default),
            "min", "mean" of the medium's D.
        perfusion_coeff_ref: reference P [1/s], or "max" (default), "min", "mean".
        boundary_condition: "periodic" (default), "insulating" (no heat flows through the
            grid's faces) or "conducting" (the temperature is 0 one point outside the grid);
            the last two for homogeneous media only (k-Wave's rule).
    """

    density: ArrayLike | None = None
    specific_heat: ArrayLike | None = None
    thermal_conductivity: ArrayLike | None = None
    diffusion_coeff: ArrayLike | None = None
    blood_density: ArrayLike | None = None
    blood_specific_heat: ArrayLike | None = None
    blood_perfusion_rate: ArrayLike | None = None
    perfusion_coeff: ArrayLike | None = None
    blood_ambient_temperature: ArrayLike | None = None
    diffusion_coeff_ref: float | str = "max"
    perfusion_coeff_ref: float | str = "max"
    boundary_condition: str = "periodic"

    @classmethod
    def of(cls, medium: Any) -> ThermalMedium:
        """A ``ThermalMedium`` from itself, a dict or any object with k-Wave's field names."""
        if isinstance(medium, cls):
            return medium
        names = [f.name for f in fields(cls)]
        if isinstance(medium, dict):
            unknown = sorted(set(medium) - set(names))
            if unknown:
                raise ProblemError(f"medium: unknown thermal properties {unknown}")
            return cls(**medium)
        return cls(**{n: getattr(medium, n) for n in names if getattr(medium, n, None) is not None})


@dataclass(frozen=True)
class Coefficients:
    """The medium as the scheme uses it (see the module docstring); fields are float64.

    Attributes:
        p1, p2: ``dT/dt = p1 div(p2 grad T) + ...``: [m^3 K/J] and [W/(m K)], or 1 and [m^2/s].
        perfusion: P [1/s] (0.0 without perfusion).
        ambient: Ta [degC] (0.0 without perfusion).
        q_scale: 1 / (rho C) [m^3 K/J], or None when rho and C are not given.
        d_ref, p_ref: reference D [m^2/s] and P [1/s] of the k-space correction.
        boundary: one of :data:`BOUNDARY_CONDITIONS`.
    """

    p1: Coef
    p2: Coef
    perfusion: Coef
    ambient: Coef
    q_scale: Coef | None
    d_ref: float
    p_ref: float
    boundary: str = "periodic"

    @property
    def diffusivity(self) -> Coef:
        """D = p1 p2 [m^2/s]."""
        return _mul(self.p1, self.p2)

    @property
    def homogeneous(self) -> bool:
        """All of p1, p2, P and Ta are single values (the exact propagator applies)."""
        return not any(isinstance(v, np.ndarray) for v in (self.p1, self.p2, self.perfusion,
                                                            self.ambient))  # fmt: skip

    @property
    def has_perfusion(self) -> bool:
        return bool(np.any(np.asarray(self.perfusion) != 0))


def _mul(a: Coef, b: Coef) -> Coef:
    out = np.multiply(a, b)
    return float(out) if np.ndim(out) == 0 else out


def _div(a: Coef, b: Coef) -> Coef:
    out = np.divide(a, b)
    return float(out) if np.ndim(out) == 0 else out


def field(name: str, value: ArrayLike, shape: tuple[int, ...], minimum: float | None = None,
          strict: bool = False) -> Coef:  # fmt: skip
    """``value`` checked: a number or an array of ``shape``, finite, and ``>= minimum`` (``>``
    with ``strict``); a float or a float64 array. ``name``: the user's name in messages."""
    check_real(name, value)
    a = np.asarray(value, dtype=np.float64)
    if a.size == 1:
        a = a.reshape(())
    elif a.shape != tuple(shape):
        raise ProblemError(f"{name}: shape {a.shape} is neither a number nor the grid {shape}")
    if not np.all(np.isfinite(a)):
        raise ProblemError(f"{name}: contains NaN or Inf")
    if minimum is not None:
        low = a < minimum if not strict else a <= minimum
        if np.any(low):
            rel = ">" if strict else ">="
            raise ProblemError(f"{name}: must be {rel} {minimum:g} everywhere (min {a.min():g})")
    return float(a) if a.ndim == 0 else a


def _reference(name: str, rule: float | str, values: Coef) -> float:
    """k-Wave's reference value: a number, or the max / min / mean of ``values``."""
    if isinstance(rule, str):
        if rule not in REFERENCES:
            raise ProblemError(f"medium.{name}: {rule!r} is none of {REFERENCES} or a number")
        return float(getattr(np, rule)(values))
    check_real(f"medium.{name}", rule)
    ref = float(rule)
    if not (math.isfinite(ref) and ref >= 0):
        raise ProblemError(f"medium.{name}: must be a number >= 0, got {rule!r}")
    return ref


def _diffusion(m: ThermalMedium, shape: tuple[int, ...]) -> tuple[Coef, Coef]:
    """``(p1, p2)`` from ``diffusion_coeff`` or from conductivity, density and specific heat."""
    if m.diffusion_coeff is not None:
        if m.thermal_conductivity is not None:
            raise ProblemError(
                "medium: give either diffusion_coeff or thermal_conductivity (with density and "
                "specific_heat), not both"
            )
        return 1.0, field("medium.diffusion_coeff", m.diffusion_coeff, shape, 0.0)
    missing = [n for n in ("density", "thermal_conductivity", "specific_heat")
               if getattr(m, n) is None]  # fmt: skip
    if missing:
        raise ProblemError(
            f"medium: {', '.join('medium.' + n for n in missing)} missing (give density, "
            "thermal_conductivity and specific_heat, or diffusion_coeff)"
        )
    rho_c = _rho_c(m, shape)
    assert rho_c is not None  # density and specific heat given
    k = field("medium.thermal_conductivity", m.thermal_conductivity, shape, 0.0)  # type: ignore[arg-type]
    return _div(1.0, rho_c), k


def _rho_c(m: ThermalMedium, shape: tuple[int, ...]) -> Coef | None:
    """``rho C`` [J/(m^3 K)], None when density or specific heat is not given."""
    if m.density is None or m.specific_heat is None:
        return None
    rho = field("medium.density", m.density, shape, 0.0, strict=True)
    c = field("medium.specific_heat", m.specific_heat, shape, 0.0, strict=True)
    return _mul(rho, c)


BLOOD = ("blood_density", "blood_specific_heat", "blood_perfusion_rate")


def _perfusion(m: ThermalMedium, shape: tuple[int, ...]) -> tuple[Coef, Coef]:
    """``(P, Ta)``: from the blood properties, from ``perfusion_coeff``, or none (0, 0)."""
    blood = [n for n in BLOOD if getattr(m, n) is not None]
    if blood:
        need = [*BLOOD, "blood_ambient_temperature", "density", "specific_heat"]
        missing = [n for n in need if getattr(m, n) is None]
        if missing:
            raise ProblemError(
                f"medium.{blood[0]} given without {', '.join('medium.' + n for n in missing)} "
                "(perfusion needs blood_density, blood_specific_heat, blood_perfusion_rate, "
                "blood_ambient_temperature, density and specific_heat)"
            )
        if m.perfusion_coeff is not None:
            raise ProblemError("medium: give either perfusion_coeff or the blood properties")
        rb, cb, wb = (field(f"medium.{n}", getattr(m, n), shape, 0.0, strict=n != BLOOD[2])
                      for n in BLOOD)  # fmt: skip
        rho_c = _rho_c(m, shape)
        assert rho_c is not None
        perf = _div(_mul(_mul(rb, wb), cb), rho_c)
    elif m.perfusion_coeff is not None:
        if m.blood_ambient_temperature is None:
            raise ProblemError("medium.perfusion_coeff given without "
                               "medium.blood_ambient_temperature")  # fmt: skip
        perf = field("medium.perfusion_coeff", m.perfusion_coeff, shape, 0.0)
    elif m.blood_ambient_temperature is not None:
        raise ProblemError(
            "medium.blood_ambient_temperature given without perfusion (blood_density, "
            "blood_specific_heat and blood_perfusion_rate, or perfusion_coeff)"
        )
    else:
        return 0.0, 0.0
    ta = field("medium.blood_ambient_temperature", m.blood_ambient_temperature, shape)  # type: ignore[arg-type]
    return perf, ta


def coefficients(medium: ThermalMedium, shape: tuple[int, ...]) -> Coefficients:
    """Validate ``medium`` for a grid of ``shape`` and return the scheme's coefficients.

    Raises :class:`~sonotile.model.problem.ProblemError` naming the property (a negative
    conductivity, perfusion without the blood properties, a field of the wrong shape...).
    """
    p1, p2 = _diffusion(medium, shape)
    perf, ta = _perfusion(medium, shape)
    rho_c = _rho_c(medium, shape)
    d = _mul(p1, p2)
    d_ref = _reference("diffusion_coeff_ref", medium.diffusion_coeff_ref, d)
    p_ref = 0.0
    if np.any(np.asarray(perf) != 0):
        p_ref = _reference("perfusion_coeff_ref", medium.perfusion_coeff_ref, perf)
    q = None if rho_c is None else _div(1.0, rho_c)
    co = Coefficients(p1, p2, perf, ta, q, d_ref, p_ref, medium.boundary_condition)
    check_boundary(medium, co, shape)
    return co


def check_boundary(medium: ThermalMedium, co: Coefficients, shape: tuple[int, ...]) -> None:
    """Raise :class:`ProblemError` for an unknown ``medium.boundary_condition``, or an
    insulating / conducting one with a heterogeneous medium (k-Wave's rule) or, insulating,
    an axis of one point (a DCT-I needs two)."""
    bc = medium.boundary_condition
    if not isinstance(bc, str) or bc not in BOUNDARY_CONDITIONS:
        raise ProblemError(f"medium.boundary_condition: {bc!r} is none of {BOUNDARY_CONDITIONS}")
    if bc == "periodic":
        return
    if not co.homogeneous:
        varying = ", ".join(f"medium.{f.name}" for f in fields(medium)
                            if np.size(getattr(medium, f.name)) > 1)  # fmt: skip
        raise ProblemError(
            f"medium.boundary_condition = {bc!r} needs a homogeneous medium ({varying} vary): "
            "as in k-Wave, insulating and conducting boundaries are supported for homogeneous "
            "media only; use 'periodic'"
        )
    if bc == "insulating" and min(shape) < 2:
        raise ProblemError(
            f"medium.boundary_condition = 'insulating': the grid {shape} needs at least 2 "
            "points along every axis"
        )


def stability_limit(co: Coefficients, kmax: float, kmin: float = 0.0) -> float:
    """The largest stable time step [s] (``inf``: any), k-Wave's ``dt_limit``.

    A Fourier mode of rate ``a = D k^2 + P`` is stepped by ``1 - a dt kappa`` with
    ``dt kappa = (1 - exp(-a_ref dt)) / a_ref`` made from the reference values: exact where
    ``a = a_ref``, stable for every ``dt`` while ``a <= 2 a_ref``, else only for
    ``dt <= -log(1 - 2 a_ref / a) / a_ref``; checked at the smallest and largest wavenumbers
    ``kmin``, ``kmax`` [rad/m] (``kmin > 0``: a conducting boundary's DST-I) with the largest
    local ``a``.
    """
    limit = math.inf
    d = np.asarray(co.diffusivity)
    perf = np.asarray(co.perfusion)
    for k in (kmin, kmax):
        a_ref = co.d_ref * k * k + co.p_ref
        a = float(np.max(d * k * k + perf))
        if a <= 2 * a_ref or a == 0:
            continue
        if a_ref == 0:  # kappa = 1 for this mode: forward Euler
            limit = min(limit, 2 / a)
            continue
        limit = min(limit, -math.log1p(-2 * a_ref / a) / a_ref)
    return limit


@dataclass
class ThermalSource:
    """Initial temperature and volume heat source (k-Wave's ``source.T0`` and ``source.Q``).

    Attributes:
        T0: initial temperature [degC], a number or a grid-shaped array.
        Q: volume rate of heat deposition [W/m^3], a number or a grid-shaped array (``None``:
            none); switched in time by the run's source switch (duty cycles).
    """

    T0: ArrayLike = 37.0
    Q: Any = None

    @classmethod
    def of(cls, source: Any) -> ThermalSource:
        """A ``ThermalSource`` from itself, a dict or an object with ``T0`` (and ``Q``)."""
        if isinstance(source, cls):
            return source
        if isinstance(source, dict):
            return cls(**source)
        if getattr(source, "T0", None) is None:
            raise ProblemError("source.T0: missing (the initial temperature [degC])")
        return cls(source.T0, getattr(source, "Q", None))


def check_source(source: ThermalSource, co: Coefficients, shape: tuple[int, ...]) -> None:
    """Raise :class:`ProblemError` for a bad ``T0`` or ``Q`` (a traced ``Q``: shape only)."""
    field("source.T0", source.T0, shape)
    if source.Q is None:
        return
    if co.q_scale is None:
        raise ProblemError(
            "source.Q given without medium.density and medium.specific_heat (needed to turn "
            "W/m^3 into K/s)"
        )
    if isinstance(source.Q, np.ndarray | float | int | list | tuple):
        field("source.Q", source.Q, shape)
    elif np.size(source.Q) != 1 and tuple(np.shape(source.Q)) != tuple(shape):
        raise ProblemError(f"source.Q: shape {np.shape(source.Q)} is neither a number nor "
                           f"the grid {shape}")  # fmt: skip
