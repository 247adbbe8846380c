"""Time reversal with the elastic model, as k-Wave's ``pstdElastic2D/3D`` make it from
``sensor.time_reversal_boundary_data``: the recorded pressure, reversed in time, is enforced on
the sensor's grid points as the normal stresses ``sxx = syy [= szz] = -p`` (Dirichlet, so the
pressure there, ``-(sxx + syy [+ szz]) / ndim``, is the recorded one) for ``kgrid.nt`` steps; the
final pressure field is the reconstruction of ``p0``.

Used by :func:`sonotile.api.reconstruction.time_reversal` (and ``TimeReversal``) with an elastic
medium, and by ``pstd_elastic_2d/3d`` given a sensor with ``time_reversal_boundary_data``. The
data's rows follow the sensor's order (a binary mask's column-major order, ``sensor.points`` or
Cartesian points as given; Cartesian points are moved to their nearest grid points, as k-Wave's
``cart2grid``), and are put in the order of the source mask here (k-Wave's elastic codes leave
Cartesian data in the given order on a mask of another order).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sonotile.api.reversal import reversed_source
from sonotile.api.types import ElasticSource, KSensor, KSource, KWaveGrid
from sonotile.model.problem import ProblemError

#: The source fields that time reversal replaces (k-Wave clears the source).
SOURCE_FIELDS = ("p0", "u_mask", "s_mask", "ux", "uy", "uz", "sxx", "syy", "szz", "sxy", "sxz",
                 "syz")  # fmt: skip


def stress_source(source: KSource, ndim: int) -> ElasticSource:
    """The elastic form of a Dirichlet pressure source (the reversed data on its mask): the
    normal stresses ``-p`` [Pa] on the same points, Dirichlet."""
    s = -np.asarray(source.p, dtype=np.float64)
    return ElasticSource(s_mask=source.p_mask, s_mode="dirichlet", sxx=s, syy=s,
                         szz=s if ndim == 3 else None)  # fmt: skip


def boundary_data_inputs(kgrid: KWaveGrid, source: Any, sensor: Any) -> tuple[ElasticSource,
                                                                            KSensor]:  # fmt: skip
    """k-Wave's elastic time reversal from ``sensor.time_reversal_boundary_data``
    ``(N, Nt)`` [Pa]: the source of the reversed data and a sensor of the final pressure, in
    place of the user's (whose source must be empty: k-Wave discards it)."""
    given = [f for f in SOURCE_FIELDS if getattr(source, f, None) is not None]
    if given:
        raise ProblemError(
            f"source.{given[0]}: with sensor.time_reversal_boundary_data the source is the "
            "reversed data (as in k-Wave's pstdElastic); pass an empty source or None"
        )
    if getattr(sensor, "record_start_index", 1) != 1:
        raise ProblemError("sensor.record_start_index: time reversal takes data recorded from "
                           "the first step (record_start_index = 1)")  # fmt: skip
    where = KSensor(mask=getattr(sensor, "mask", None), points=getattr(sensor, "points", None),
                    corners=getattr(sensor, "corners", None))  # fmt: skip
    src, tr_sensor = reversed_source(kgrid, where, sensor.time_reversal_boundary_data)
    return stress_source(src, len(kgrid.shape)), tr_sensor
