"""Checks of the Python API's input in the user's own terms (``medium.sound_speed``, masks,
grid indices), and warnings about input that runs but is probably not what was meant.

The solver-ready layer (:mod:`sonotile.model.problem`) names things as the solver sees them
(``medium.c0``); :func:`user_error` translates its messages for API users.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.problem import ProblemError

if TYPE_CHECKING:
    from sonotile.api.types import KSensor, KSource, KWaveMedium

#: Solver-layer names -> the API's names.
USER_NAMES = {
    "medium.c0": "medium.sound_speed",
    "medium.rho0": "medium.density",
    "medium.bona": "medium.BonA",
    "medium.c_ref": "medium.sound_speed_ref",
    "sensor.index": "sensor.points",
    "sensor.cuboids": "sensor.corners",
    "sensor.start": "sensor.record_start_index - 1",
    "source.p.index": "source.p_mask",
    "source.p.signal": "source.p",
    **{f"source.u{a}.index": "source.u_mask" for a in "xyz"},
    **{f"source.u{a}.signal": f"source.u{a}" for a in "xyz"},
    "transducer.index": "source.transducer_mask",
    "transducer.delay": "source.transducer_delays",
    "transducer.signal": "source.transducer_signal",
}


def user_error(e: ProblemError) -> ProblemError:
    """The same error with the API's names for what the user passed."""
    msg = str(e)
    for solver, user in USER_NAMES.items():
        msg = msg.replace(solver, user)
    return ProblemError(msg)


def check_shape(
    name: str, value: ArrayLike | None, shape: tuple[int, ...], scalar_ok: bool = True
) -> None:
    """A scalar (when allowed) or an array of the grid ``shape``; suggests the transpose when
    that is what matches (arrays are indexed ``(x, y, z)``)."""
    if value is None or (scalar_ok and np.ndim(value) == 0):
        return
    got = tuple(np.shape(value))
    if got == tuple(shape):
        return
    hint = ""
    if got == tuple(shape)[::-1]:
        hint = (
            f"; its transpose has the grid shape: sonotile indexes arrays (x, y, z) like "
            f"k-Wave, pass {name}.T"
        )
    what = "a scalar or " if scalar_ok else ""
    raise ProblemError(f"{name}: shape {got}, expected {what}the grid shape {tuple(shape)}{hint}")


def check_medium(medium: KWaveMedium, shape: tuple[int, ...]) -> None:
    """Shapes and values of the medium, named as the user named them."""
    for attr in ("sound_speed", "density", "alpha_coeff", "BonA"):
        v = getattr(medium, attr)
        check_shape(f"medium.{attr}", v, shape)
        if v is None:
            continue
        a = np.asarray(v, dtype=np.float64)
        if not np.all(np.isfinite(a)):
            raise ProblemError(f"medium.{attr}: contains NaN or Inf")
        if attr in ("sound_speed", "density") and np.any(a <= 0):
            raise ProblemError(f"medium.{attr}: must be > 0 everywhere (min {a.min():g})")


def check_sources(source: KSource, shape: tuple[int, ...]) -> None:
    for attr in ("p0", "p_mask", "u_mask", "transducer_mask"):
        check_shape(f"source.{attr}", getattr(source, attr), shape, scalar_ok=False)


def check_sensor(sensor: KSensor, shape: tuple[int, ...]) -> None:
    """Masks of the grid shape or Cartesian points ``(D, N)`` [m] (checked where they are
    converted, :func:`sonotile.api.problem.cartesian_coords`); points are 0-based grid indices."""
    if sensor.mask is not None:
        m = np.asarray(sensor.mask)
        cartesian = m.ndim == 2 and m.shape[0] == len(shape) and m.shape != tuple(shape)
        if not (cartesian and m.dtype.kind == "f"):
            check_shape("sensor.mask", m, shape, scalar_ok=False)
    if sensor.points is not None:
        p = np.asarray(sensor.points)
        if p.dtype.kind == "f" and np.any(p != np.round(p)):
            raise ProblemError(
                "sensor.points: non-integer values; points are 0-based grid indices "
                f"(N, {len(shape)}), not positions in metres"
            )


def grid_points(points: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """``sensor.points`` as ``(N, ndim)`` 0-based grid indices, with the transpose hinted and
    metres recognised."""
    p, nd = np.asarray(points), len(shape)
    if p.ndim != 2 or p.shape[1] != nd:
        hint = ""
        if p.ndim == 2 and p.shape[0] == nd:
            hint = "; its transpose matches: pass sensor.points.T (one row per point)"
        raise ProblemError(
            f"sensor.points: shape {p.shape}, expected (N, {nd}) 0-based grid indices{hint}"
        )
    bad = np.any((p < 0) | (p >= np.asarray(shape)), axis=1)
    if np.any(bad):
        raise ProblemError(
            f"sensor.points: point {tuple(p[np.argmax(bad)].tolist())} is outside the grid "
            f"{shape}; points are 0-based grid indices (0..N-1 per axis), not metres"
        )
    return p.astype(np.int64)


def absorption_warnings(medium: KWaveMedium, axisymmetric: bool) -> list[str]:
    """An ``alpha_power`` other than 2 that the run replaces with 2 (Stokes absorption: an
    axisymmetric run or ``alpha_mode="stokes"``), as k-Wave warns and does."""
    absorbing = medium.alpha_coeff is not None and np.any(np.asarray(medium.alpha_coeff) != 0)
    stokes = axisymmetric or medium.alpha_mode == "stokes"
    if not (absorbing and stokes) or float(np.asarray(medium.alpha_power)) == 2.0:
        return []
    why = "axisymmetric=True" if axisymmetric else "medium.alpha_mode = 'stokes'"
    return [
        f"{why}: absorption is Stokes' (alpha_power = 2, medium.alpha_coeff in dB/(MHz^2 cm)); "
        f"medium.alpha_power = {medium.alpha_power} is ignored, as in k-Wave (set it to 2 to "
        "silence this warning)"
    ]


def record_warnings(record: tuple[str, ...]) -> list[str]:
    """A sensor asked to record nothing (the problem-level warnings are
    :func:`sonotile.physics.acoustic.checks.input_warnings`)."""
    return [] if record else ["sensor.record is empty: nothing will be recorded"]


def with_defaults(defaults: Mapping[str, Any], params: Mapping[str, Any] | None) -> dict:
    """A simulator's ``defaults`` updated by the ``params`` of one call; a name that is not a
    parameter of the simulation is refused."""
    params = {} if params is None else dict(params)
    unknown = set(params) - set(defaults)
    if unknown:
        raise ProblemError(
            f"params: {sorted(unknown)} not parameters of this simulation "
            f"(it takes {sorted(defaults)}; absent effects and sources cannot be added)"
        )
    return {**defaults, **params}
