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
from types import ModuleType
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
    ``start``: k-Wave's 1-based ``record_start_index``; ``cuboids``: the shape of each cuboid
    whose points ``index`` lists one cuboid after another (``sensor.corners``), else ``()``."""

    index: np.ndarray | None
    off_grid: OffGrid | None
    record: tuple[str, ...]
    start: int
    cuboids: tuple[tuple[int, ...], ...] = ()


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


def cuboid_points(corners: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple]:
    """``sensor.corners`` (``(lo, hi)`` inclusive 0-based corner pairs, checked) as the points
    ``(N, ndim)`` of one cuboid after another, each in C order (the last axis fastest), and
    the cuboids' shapes."""
    user_input.check_corners(corners, shape)
    blocks, shapes = [], []
    for lo, hi in corners:
        axes = [np.arange(int(a), int(b) + 1) for a, b in zip(lo, hi)]
        blocks.append(np.stack([g.ravel() for g in np.meshgrid(*axes, indexing="ij")], 1))
        shapes.append(tuple(len(a) for a in axes))
    return np.concatenate(blocks).astype(np.int64), tuple(shapes)


def by_cuboid(out: dict[str, Any], cuboids: tuple[tuple[int, ...], ...],
              xp: ModuleType = np) -> dict[str, Any]:  # fmt: skip
    """The records at the points of a cuboid sensor per cuboid, as the acoustic model gives
    them: series ``(N, T)`` as lists of ``(Cx, Cy[, Cz], T)``, statistics ``(N,)`` as lists of
    ``(Cx, Cy[, Cz])``; whole-grid records (``*_all``, ``*_final``) as they are. ``xp``: numpy or
    jax.numpy."""
    if not cuboids:
        return out
    ends = np.cumsum([int(np.prod(c)) for c in cuboids])
    starts = np.concatenate([[0], ends[:-1]])
    res: dict[str, Any] = {}
    for name, v in out.items():
        if name.endswith(("_all", "_final")):
            res[name] = v
            continue
        res[name] = [xp.reshape(v[a:b], c + tuple(v.shape[1:]))
                     for a, b, c in zip(starts, ends, cuboids)]  # fmt: skip
    return res


def sensor_points(sensor: Any, kgrid: KWaveGrid) -> SensorPoints:
    """Where ``sensor`` records and what (``None``: ``p`` nowhere, as k-Wave without a sensor),
    checked in the user's names."""
    if sensor is None:
        return SensorPoints(None, None, ("p",), 1)
    shape = tuple(kgrid.shape)
    record = tuple(getattr(sensor, "record", ("p",)))
    start = int(getattr(sensor, "record_start_index", 1))
    if getattr(sensor, "corners", None) is not None:
        points, cuboids = cuboid_points(sensor.corners, shape)
        return SensorPoints(points, None, record, start, cuboids)
    mask, points, off = getattr(sensor, "mask", None), getattr(sensor, "points", None), None
    if mask is not None and user_input.is_cartesian(mask, shape):
        points, off = cartesian_points(sensor, kgrid)
    elif mask is not None and np.shape(mask) != shape:
        raise ProblemError(
            f"sensor.mask: shape {np.shape(mask)}; the elastic model takes a binary mask of the "
            f"grid shape {shape}, Cartesian points ({len(shape)}, N) [m] (floats), "
            "sensor.points or sensor.corners (cuboids: (lo, hi) pairs of 0-based indices, in "
            "place of k-Wave's 1-based corner list)"
        )
    elif mask is not None:
        points = mask_points(mask, shape, "sensor.mask")
    index = None if points is None else _grid_indices(points, shape)
    return SensorPoints(index, off, record, start)
