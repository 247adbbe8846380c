"""Where an elastic sensor records (``pstd_elastic_2d/3d``, ``st.simulate`` with an elastic
medium): a binary mask of the grid's shape (points in k-Wave's column-major order), integer
``sensor.points``, or Cartesian points as k-Wave's ``pstdElastic2D/3D`` take them: ``sensor.mask``
of shape ``(ndim, N)`` [m], origin at the grid centre (k-Wave's ``kgrid.x``), recorded in the
given order.

Cartesian points are read by ``sensor.cart_interp``: ``"linear"`` (multilinear, k-Wave's
``'CartInterp'`` default; objects without ``cart_interp`` get it) or ``"bli"`` (band-limited,
``bli_tolerance``), each field on its own staggered grid
(:func:`sonotile.solver.sensors.field_offset`), so every record is the field at the point; or
``"nearest"``: each point moved to its nearest grid point (k-Wave's ``cart2grid``, halves away
from the centre) and recorded there as a binary mask records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sonotile.api import inputs as user_input
from sonotile.api.problem import cart2grid, cartesian_coords, mask_points
from sonotile.api.types import KWaveGrid
from sonotile.model.bli import INTERPOLATIONS
from sonotile.model.problem import ProblemError
from sonotile.physics.elastic.problem import OffGrid


@dataclass(frozen=True)
class SensorPoints:
    """A validated elastic sensor: ``index`` ``(N, ndim)`` grid indices or ``off_grid``
    (Cartesian points read by interpolation) or neither (whole-grid records only); ``record``;
    ``start``: k-Wave's 1-based ``record_start_index``."""

    index: np.ndarray | None
    off_grid: OffGrid | None
    record: tuple[str, ...]
    start: int


def _extent(kgrid: KWaveGrid) -> str:
    """The grid's extent per axis [m] in k-Wave's coordinates, for messages."""
    spacing = np.broadcast_to(kgrid.spacing, (len(kgrid.shape),))
    return ", ".join(f"{'xyz'[a]} in [{-(n // 2) * d:.4g}, {(n - 1 - n // 2) * d:.4g}]"
                     for a, (n, d) in enumerate(zip(kgrid.shape, spacing)))  # fmt: skip


def cartesian_points(sensor: Any, kgrid: KWaveGrid) -> tuple[np.ndarray | None, OffGrid | None]:
    """Checked Cartesian ``sensor.mask`` ``(ndim, N)`` [m]: grid indices (``"nearest"``) or the
    off-grid points (``"linear"``, ``"bli"``)."""
    method = getattr(sensor, "cart_interp", "linear")
    if method not in INTERPOLATIONS:
        raise ProblemError(f"sensor.cart_interp = {method!r}: expected one of {INTERPOLATIONS} "
                           "(how Cartesian sensor points are read)")  # fmt: skip
    tol = float(getattr(sensor, "bli_tolerance", 0.05))
    if method == "bli" and not 0 < tol < 1:
        raise ProblemError(f"sensor.bli_tolerance = {tol}: must be in (0, 1)")
    pts = np.asarray(sensor.mask, np.float64)
    if pts.shape[1] == 0 or not np.all(np.isfinite(pts)):
        raise ProblemError(f"sensor.mask: Cartesian points {pts.shape} must be finite, N >= 1")
    coords = cartesian_coords(pts, kgrid)
    outside = np.flatnonzero(np.any((coords < 0) | (coords > np.array(kgrid.shape) - 1), 1))
    if outside.size:
        i = int(outside[0])
        raise ProblemError(
            f"sensor.mask: Cartesian point {i} (0-based) at {tuple(pts[:, i].tolist())} m lies "
            f"outside the grid ({_extent(kgrid)} m; origin at the grid centre)"
        )
    if method == "nearest":
        return cart2grid(pts, kgrid, "sensor.mask"), None
    return None, OffGrid(coords, method, tol)


def _grid_indices(points: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``sensor.points`` as ``(N, ndim)`` indices inside the grid."""
    p = np.asarray(points, dtype=int)
    if p.ndim != 2 or p.shape[1] != len(shape) or np.any(p < 0) or np.any(p >= np.array(shape)):
        raise ProblemError(f"sensor.points: expected (N, {len(shape)}) indices in the grid")
    return p


def sensor_points(sensor: Any, kgrid: KWaveGrid) -> SensorPoints:
    """Where ``sensor`` records and what (``None``: ``p`` nowhere, as k-Wave without a sensor),
    checked in the user's names."""
    if sensor is None:
        return SensorPoints(None, None, ("p",), 1)
    if getattr(sensor, "corners", None) is not None:
        raise ProblemError("sensor.corners: cuboid sensors are not supported by the elastic "
                           "model yet; give sensor.mask or sensor.points")  # fmt: skip
    shape = tuple(kgrid.shape)
    mask, points, off = getattr(sensor, "mask", None), getattr(sensor, "points", None), None
    if mask is not None and user_input.is_cartesian(mask, shape):
        points, off = cartesian_points(sensor, kgrid)
    elif mask is not None and np.shape(mask) != shape:
        raise ProblemError(
            f"sensor.mask: shape {np.shape(mask)}; the elastic model takes a binary mask of the "
            f"grid shape {shape}, Cartesian points ({len(shape)}, N) [m] (floats) or "
            "sensor.points"
        )
    elif mask is not None:
        points = mask_points(mask, shape, "sensor.mask")
    index = None if points is None else _grid_indices(points, shape)
    record = tuple(getattr(sensor, "record", ("p",)))
    return SensorPoints(index, off, record, int(getattr(sensor, "record_start_index", 1)))
