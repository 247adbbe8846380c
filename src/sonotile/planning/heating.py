"""A plan's heating: the heat source of a CW pressure field in the mapped tissue, and the
sonication's temperature and thermal dose on the plan's grid (or a box of it)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from sonotile.api.heating.bioheat import bioheat
from sonotile.api.heating.checkpoint import Checkpoint
from sonotile.api.heating.sonication import HeatRun, Tissue, sonicate, thermal_medium
from sonotile.physics.heat import acoustic_heat_source
from sonotile.physics.heat.sources import sonication
from sonotile.planning.geometry import SimulationGrid, kwave_medium
from sonotile.planning.thermal import ThermalMaps
from sonotile.planning.tissue import BRAIN, TRABECULAR, TissueMaps

Box = tuple[slice, slice, slice]


@dataclass(frozen=True)
class Sonication:
    """When the source is on and how the heat run steps.

    Attributes:
        duration: time on [s]; cooling: time after it [s]. duty: fraction of the time on;
        period: the pulse period [s] (None: the heat source is time-averaged by ``duty``).
        heat_dt: thermal step [s]; T0: body and arterial blood temperature [degC].
    """

    duration: float
    cooling: float
    duty: float
    period: float | None
    heat_dt: float
    T0: float  # noqa: N815

    @property
    def power_factor(self) -> float:
        """The factor on the CW heat source: ``duty`` when the pulses are averaged, else 1
        (the schedule switches the source)."""
        return 1.0 if self.period is not None else self.duty


def heat_coefficient(maps: TissueMaps, frequency: float, son: Sonication) -> np.ndarray:
    """The heat source per squared pressure amplitude [W/(m^3 Pa^2)] on the grid, averaged
    over the pulses where they are not simulated: ``Q = heat_coefficient * |p|^2``."""
    medium = kwave_medium(maps)
    q = acoustic_heat_source(1.0, np.asarray(medium.alpha_coeff), float(medium.alpha_power),
                             frequency, maps.density, maps.sound_speed)  # fmt: skip
    return np.asarray(q, dtype=np.float64) * son.power_factor


def _cut(v: np.ndarray | float, box: Box | None) -> np.ndarray | float:
    return v if box is None or np.ndim(v) == 0 else np.asarray(v)[box]


def _tissue(thermal: ThermalMaps, son: Sonication, box: Box | None) -> Tissue:
    """The heat model's tissue of ``thermal`` (or of its ``box``)."""
    return Tissue(_cut(thermal.specific_heat, box), _cut(thermal.conductivity, box),
                  perfusion_rate=_cut(thermal.perfusion_rate, box),
                  blood_density=thermal.blood_density,
                  blood_specific_heat=thermal.blood_specific_heat,
                  blood_temperature=son.T0)  # fmt: skip


def sonication_heat(
    q: np.ndarray,
    thermal: ThermalMaps,
    spacing_mm: float,
    son: Sonication,
    *,
    decomposition: str = "single",
    mesh: tuple[int, ...] | None = None,
    checkpoint: Checkpoint | None = None,
    box: Box | None = None,
    points: tuple[tuple[int, ...], ...] = (),
) -> HeatRun:
    """The sonication's temperature and dose from the heat source ``q`` [W/m^3] (the
    grid's shape, or ``box``'s when given: then only that box of the thermal maps is
    heated), ``spacing_mm`` the grid spacing; on the devices of ``decomposition`` (a pencil
    mesh unless single), saving to and resuming from ``checkpoint``; the temperature
    histories at the grid indices ``points`` kept (``T_points``)."""
    pulsed = son.period is not None
    tissue = _tissue(thermal, son, box)
    return sonicate(np.asarray(q, dtype=np.float64), (spacing_mm * 1e-3,) * 3,
                    _cut(thermal.density, box), son.duration + son.cooling, son.duration,
                    son.heat_dt, tissue=tissue, T0=son.T0, period=son.period,
                    duty=son.duty if pulsed else 1.0,
                    decomposition="single" if decomposition == "single" else "pencil",
                    mesh=mesh, checkpoint=checkpoint, points=points)  # fmt: skip


#: the temperature [degC] above which the heat model's tissue no longer exists as modelled
#: (water boils; coagulated, vaporised tissue has other properties)
BOILING = 100.0


def boiling(heat: HeatRun, what: str) -> str | None:
    """A sentence when the heating of ``what`` (``"the plan"``) passes :data:`BOILING`."""
    t = float(np.max(heat.data["T_max"]))
    if t <= BOILING:
        return None
    return (
        f"{what} heats tissue to {t:.0f} degC, above {BOILING:.0f} degC: tissue boils "
        "there and the bioheat model (constant properties, no phase change) does not hold; "
        "lower the focal pressure, the dose or the sonication time"
    )


def heat_summary(
    heat: HeatRun,
    labels: np.ndarray,
    grid: SimulationGrid,
    T0: float,  # noqa: N803
) -> dict[str, Any]:
    """The numbers of a plan's heating: the highest temperatures (everywhere, in the brain,
    in the skull) [degC], the skull's highest rise and where it is, the rises at the target
    and where most heat is deposited [K], the highest dose and the dose at the target [min]
    and the lesion [mm^3]."""
    data = heat.data
    fi = tuple(int(v) for v in data["focus"])
    in_skull = labels >= TRABECULAR  # trabecular and cortical bone
    brain = labels == BRAIN
    t_max = data["T_max"]
    skull_at = (np.unravel_index(int(np.argmax(np.where(in_skull, t_max, -np.inf))),
                                 t_max.shape) if in_skull.any() else None)  # fmt: skip
    return {
        "T_max_degC": float(t_max.max()),
        "T_max_brain_degC": float(t_max[brain].max()) if brain.any() else None,
        "T_max_skull_degC": float(t_max[in_skull].max()) if in_skull.any() else None,
        "skull_rise_K": float(t_max[in_skull].max() - T0) if in_skull.any() else None,
        "skull_peak_mm": None if skull_at is None else grid.world(np.array(skull_at)).tolist(),
        "rise_at_target_K": float(data["T_heated"][grid.target_index] - T0),
        "rise_at_heat_peak_K": float(data["T_heated"][fi] - T0),
        "heat_peak_mm": grid.world(fi).tolist(),
        "cem43_max_min": float(data["cem43"].max()),
        "cem43_at_target_min": float(data["cem43"][grid.target_index]),
        "lesion_volume_mm3": float(np.count_nonzero(data["lesion_map"])) * grid.spacing_mm**3,
    }


def green_functions(points: list[tuple[int, int, int]], thermal: ThermalMaps,
                    spacing_mm: float, son: Sonication, box: Box) -> np.ndarray:  # fmt: skip
    """The temperature rise [K] at the end of the time on at each of ``points`` (indices
    in ``box``) per unit heat source [W/m^3] at every point of ``box``: ``(len(points),
    *box shape)``, each the row of the heat model (Pennes, on the box, pulsed as ``son``)
    that maps a source to that rise: the model's exact adjoint, one backward pass each."""
    import jax
    import jax.numpy as jnp

    shape = tuple(s.stop - s.start for s in box)
    nt = max(1, round(son.duration / son.heat_dt))
    on = sonication(nt, son.heat_dt, None, son.period, son.duty)
    medium = thermal_medium(_tissue(thermal, son, box), _cut(thermal.density, box))
    grid = SimpleNamespace(shape=shape, spacing=spacing_mm * 1e-3)

    def final(q: jax.Array) -> jax.Array:
        return bioheat(grid, medium, {"T0": son.T0, "Q": q}, nt, son.heat_dt, on=on,
                       dtype="float32").T  # fmt: skip

    _, back = jax.vjp(final, jnp.zeros(shape, jnp.float32))
    hot = np.zeros((len(points), *shape), np.float32)
    for k, ijk in enumerate(points):
        hot[(k, *ijk)] = 1.0
    rows = jax.vmap(lambda e: back(e)[0])(jnp.asarray(hot))
    return np.asarray(rows, dtype=np.float64)
