"""Thermal properties of each tissue class, as fields on the plan's grid.

The heating of a plan (:func:`sonotile.planning.chain.plan`) takes, per tissue class of
:func:`sonotile.planning.tissue.classify`, the specific heat, thermal conductivity and blood
perfusion of the IT'IS Foundation's tissue properties database (v4.1, Hasgall et al., 2022;
the values BabelBrain and PRESTUS use for water, skin, brain, trabecular and cortical bone):

- water: C 4178 J/(kg K), k 0.60 W/(m K), no perfusion;
- soft tissue (skin): 3391, 0.37, 106 mL/(min kg);
- brain: 3630, 0.51, 559 mL/(min kg);
- trabecular (cancellous) bone: 2274, 0.31, 30 mL/(min kg);
- cortical bone: 1313, 0.32, 10 mL/(min kg).

Blood: 1050 kg/m^3, 3617 J/(kg K) (IT'IS). The density is the acoustic mapping's (from the
Hounsfield units, :func:`~sonotile.planning.tissue.tissue_properties`), so that the absorbed
power and the heat capacity use one density. A perfusion of ``F`` mL/(min kg) is the volume rate
``w = F rho 1e-6 / 60`` [1/s] of Pennes' equation. Any property may be set to one value for all
voxels instead (the caller's override).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sonotile.planning.tissue import (
    BRAIN,
    CLASS_NAMES,
    CORTICAL,
    SOFT_TISSUE,
    TRABECULAR,
    WATER,
    TissueMaps,
)

#: Specific heat [J/(kg K)], thermal conductivity [W/(m K)] and perfusion [mL/(min kg)] per
#: tissue class (IT'IS database v4.1).
THERMAL_PROPERTIES: dict[int, tuple[float, float, float]] = {
    WATER: (4178.0, 0.60, 0.0),
    SOFT_TISSUE: (3391.0, 0.37, 106.0),
    BRAIN: (3630.0, 0.51, 559.0),
    TRABECULAR: (2274.0, 0.31, 30.0),
    CORTICAL: (1313.0, 0.32, 10.0),
}
#: Blood density [kg/m^3] and specific heat [J/(kg K)] (IT'IS database v4.1).
BLOOD_DENSITY, BLOOD_SPECIFIC_HEAT = 1050.0, 3617.0
THERMAL_REFERENCE = (
    "IT'IS Foundation tissue properties database v4.1 (Hasgall et al., 2022), as BabelBrain "
    "and PRESTUS use it: water, skin (soft tissue), brain, cancellous (trabecular) and "
    "cortical bone; density from the acoustic mapping"
)


@dataclass
class ThermalMaps:
    """Per-voxel thermal properties (arrays of the grid's shape) and their provenance.

    Attributes:
        density: [kg/m^3]. specific_heat: [J/(kg K)]. conductivity: [W/(m K)].
        perfusion_rate: blood volume per tissue volume per second [1/s].
        blood_density: [kg/m^3]. blood_specific_heat: [J/(kg K)].
        provenance: the table used (per class and units), overrides, reference.
    """

    density: np.ndarray
    specific_heat: np.ndarray
    conductivity: np.ndarray
    perfusion_rate: np.ndarray
    blood_density: float = BLOOD_DENSITY
    blood_specific_heat: float = BLOOD_SPECIFIC_HEAT
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def heat_capacity(self) -> np.ndarray:
        """``rho C`` [J/(m^3 K)]: the heat that warms one cubic metre by one kelvin."""
        return self.density * self.specific_heat


def thermal_properties(
    maps: TissueMaps,
    *,
    specific_heat: float | None = None,
    conductivity: float | None = None,
    perfusion: float | None = None,
) -> ThermalMaps:
    """The thermal fields of ``maps`` (its classes and density) from
    :data:`THERMAL_PROPERTIES`; ``specific_heat`` [J/(kg K)], ``conductivity`` [W/(m K)] or
    ``perfusion`` [1/s], when given, replace the table's values in every voxel."""
    labels = maps.labels
    table = np.zeros((max(THERMAL_PROPERTIES) + 1, 3))
    for cls, values in THERMAL_PROPERTIES.items():
        table[cls] = values
    per = table[labels]
    rho = np.asarray(maps.density, dtype=np.float64)
    c, k = per[..., 0], per[..., 1]
    w = per[..., 2] * rho * 1e-6 / 60.0
    if specific_heat is not None:
        c = np.full(labels.shape, float(specific_heat))
    if conductivity is not None:
        k = np.full(labels.shape, float(conductivity))
    if perfusion is not None:
        w = np.full(labels.shape, float(perfusion))
    overrides = {"specific_heat": specific_heat, "conductivity": conductivity,
                 "perfusion_rate": perfusion}  # fmt: skip
    provenance = {
        "reference": THERMAL_REFERENCE,
        "classes": {CLASS_NAMES[cls]: {"specific_heat": v[0], "conductivity": v[1],
                                       "perfusion_ml_per_min_kg": v[2]}
                    for cls, v in THERMAL_PROPERTIES.items()},
        "blood": {"density": BLOOD_DENSITY, "specific_heat": BLOOD_SPECIFIC_HEAT},
        "overrides": {n: v for n, v in overrides.items() if v is not None},
        "units": {"specific_heat": "J/(kg K)", "conductivity": "W/(m K)",
                  "perfusion_rate": "1/s", "density": "kg/m^3"},
    }  # fmt: skip
    return ThermalMaps(rho, c, k, w, provenance=provenance)
