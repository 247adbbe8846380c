"""Intensity records of the elastic model (``I``, ``I_avg``), as k-Wave's pstdElastic2D/3D
make them (``kspaceFirstOrder_saveIntensity``): from the recorded series of the pressure
``p = -(sxx + syy [+ szz]) / ndim`` and the velocity moved to the grid points
(``u_non_staggered``), the velocity shifted by half a time step onto the pressure's time grid
(a Fourier shift of the whole series), ``Ix = p ux`` [W/m^2] per step and ``Ix_avg`` its mean
over the recorded steps. This is the acoustic intensity of the pressure; in a solid it is not
the elastic energy flux ``-sigma . u``. The series recorded only for it are dropped, as k-Wave
drops them.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

from sonotile.api.problem import fourier_shift
from sonotile.model.grid import AXES


def with_intensity(out: dict[str, Any], record: Sequence[str], ndim: int,
                   xp: ModuleType) -> dict[str, Any]:  # fmt: skip
    """``out`` (series ``(N, recorded steps)``) with ``I`` / ``I_avg`` where recorded, and
    without the series only they needed."""
    rec = set(record)
    if not {"I", "I_avg"} & rec:
        return out
    res = dict(out)
    for a in range(ndim):
        name = f"u{AXES[a]}_non_staggered"
        inten = out["p"] * fourier_shift(out[name], 0.5, xp).astype(out[name].dtype)
        if "I" in rec:
            res[f"I{AXES[a]}"] = inten
        if "I_avg" in rec:
            res[f"I{AXES[a]}_avg"] = xp.mean(inten, axis=-1)
        if "u_non_staggered" not in rec:
            del res[name]
    if "p" not in rec:
        del res["p"]
    return res
