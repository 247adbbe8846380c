"""The source of a time reversal (k-Wave's ``sensor.time_reversal_boundary_data``): the
recorded pressure, reversed in time, as a Dirichlet pressure source on the sensor's grid points
in the source mask's (column-major) order, and a sensor of the final pressure
(:func:`sonotile.api.reconstruction.time_reversal`; the elastic form:
:mod:`sonotile.api.elastic.reversal`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sonotile.api import inputs as user_input
from sonotile.api.problem import cart2grid, mask_points
from sonotile.api.types import KSensor, KSource, KWaveGrid
from sonotile.model.problem import ProblemError


def reversed_source(kgrid: KWaveGrid, sensor: KSensor, sensor_data: Any) -> tuple[KSource, KSensor]:
    """The Dirichlet source of the reversed data on the sensor's grid points (k-Wave order), and
    a sensor recording only the final pressure."""
    if kgrid.dt is None or kgrid.nt is None:
        raise ValueError(
            "kgrid.dt and kgrid.nt must be set for time reversal (the forward run's time "
            "axis: KWaveGrid.make_time, or the grid a forward simulate filled in)"
        )
    shape = tuple(kgrid.shape)
    idx = sensor_grid_points(sensor, kgrid)
    data = recorded(sensor_data, idx.shape[0], int(kgrid.nt))
    lin = np.ravel_multi_index(tuple(idx.T), shape, order="F")
    rows = np.argsort(lin, kind="stable")  # k-Wave's column-major mask order
    same = np.flatnonzero(np.diff(lin[rows]) == 0)
    if same.size:
        i, j = sorted(rows[same[0] : same[0] + 2].tolist())
        raise ValueError(
            f"sensor: points {i} and {j} (0-based) fall on the same grid point "
            f"{tuple(idx[i].tolist())}; time reversal enforces one signal per grid point (as "
            "k-Wave's does): use fewer points or a binary mask"
        )
    mask = np.zeros(shape, bool)
    mask[tuple(idx.T)] = True
    source = KSource(p=np.ascontiguousarray(data[rows, ::-1]), p_mask=mask, p_mode="dirichlet")
    return source, KSensor(mask=mask, record=("p_final",))


def sensor_grid_points(sensor: KSensor, kgrid: KWaveGrid) -> np.ndarray:
    """The sensor's points ``(N, ndim)`` as grid indices, in the order of its data."""
    shape = tuple(kgrid.shape)
    if sensor.corners is not None:
        raise ProblemError(
            "sensor.corners: time reversal takes a sensor mask, Cartesian points or "
            "sensor.points, not cuboid corners"
        )
    if sensor.points is not None:
        return user_input.grid_points(sensor.points, shape)
    if sensor.mask is None:
        raise ProblemError("sensor.mask: time reversal needs the sensor's points")
    if user_input.is_cartesian(sensor.mask, shape):
        return cart2grid(np.asarray(sensor.mask, np.float64), kgrid, "sensor.mask")
    return mask_points(np.asarray(sensor.mask, bool), shape, "sensor.mask")


def recorded(sensor_data: Any, n_points: int, nt: int) -> np.ndarray:
    """The recorded pressure ``(n_points, nt)`` from an array or a result with ``"p"``."""
    if isinstance(sensor_data, Mapping) or hasattr(sensor_data, "keys"):
        if "p" not in sensor_data:
            raise ValueError("sensor_data: the forward run's result holds no 'p' (record 'p')")
        sensor_data = sensor_data["p"]
    data = np.asarray(sensor_data, dtype=np.float64)
    if data.shape != (n_points, nt):
        hint = ""
        if data.ndim == 2 and data.shape[0] == n_points and data.shape[1] < nt:
            hint = "; record from the first step (sensor.record_start_index = 1)"
        elif data.shape == (nt, n_points):
            hint = "; its transpose matches: pass sensor_data.T (one row per sensor point)"
        raise ValueError(
            f"sensor_data: shape {data.shape}, expected (n_sensors, Nt) = ({n_points}, {nt}) "
            f"for the sensor's points and kgrid.nt{hint}"
        )
    if not np.all(np.isfinite(data)):
        raise ValueError("sensor_data: contains NaN or Inf")
    return data
