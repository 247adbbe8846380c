"""A plan's exposure figures, as those who approve a plan read them: the mechanical index, the
spatial-peak intensities, the acoustic power of the drive, the largest side lobe in the brain,
and how precisely the grid places the focus.

The simulation is linear and continuous-wave and in situ (through the modelled skull and
tissue): the focal pressure amplitude is both the peak compressional and the peak rarefactional
pressure, and no derating is applied (a derating stands in for tissue the simulation already
holds). Each formula is written once, here; :func:`exposure_summary` gathers them for
``plan.json`` (``summary["exposure"]``) and the report.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import ndimage

from sonotile.planning.aberration import water_medium
from sonotile.planning.acoustics import Focus, focal_region, side_lobe
from sonotile.planning.geometry import SimulationGrid
from sonotile.planning.tissue import BRAIN, TissueMaps
from sonotile.planning.transducers import Transducer

#: the focus's "ridge": the points at or above this fraction of the peak, connected to it
#: (:func:`focus_uncertainty`)
RIDGE_LEVEL = 0.95


def mechanical_index(p_neg_pa: float, frequency_hz: float) -> float:
    """The mechanical index ``MI = p_neg [MPa] / sqrt(f [MHz])`` (dimensionless) of the peak
    rarefactional pressure ``p_neg_pa`` [Pa] at ``frequency_hz`` [Hz]. For a plan's linear CW
    field ``p_neg`` is the focal pressure amplitude in situ, not derated."""
    return float(p_neg_pa / 1e6 / np.sqrt(frequency_hz / 1e6))


def pulse_average_intensity(p_pa: float, density: float, sound_speed: float) -> float:
    """The plane-wave intensity ``I = p^2 / (2 rho c)`` [W/cm^2] of a CW pressure amplitude
    ``p_pa`` [Pa] in a medium of ``density`` [kg/m^3] and ``sound_speed`` [m/s]: at the focal
    peak, the spatial-peak pulse-average intensity I_sppa."""
    return float(p_pa**2 / (2.0 * density * sound_speed) / 1e4)  # W/m^2 -> W/cm^2


def temporal_average_intensity(i_sppa: float, duty: float) -> float:
    """The spatial-peak temporal-average intensity ``I_spta = I_sppa x duty`` [W/cm^2] of the
    pulse-average ``i_sppa`` [W/cm^2] at the fraction ``duty`` of the time on."""
    return float(i_sppa * duty)


def element_areas_mm2(transducer: Transducer) -> np.ndarray:
    """Each element's radiating area [mm^2] ``(n_elements,)``: an array's flat discs
    ``pi d^2 / 4``, a bowl's spherical cap (:attr:`Transducer.cap_area_mm2`)."""
    if transducer.kind == "bowl":
        return np.array([transducer.cap_area_mm2])
    return np.full(transducer.n_elements, np.pi * transducer.element_mm**2 / 4)


def power_weights(areas_mm2: np.ndarray) -> np.ndarray:
    """Each element's acoustic power per squared drive amplitude [W/Pa^2]: ``S_e / (2 rho_w
    c_w)`` with ``S_e`` its area [mm^2] and the coupling water's density and sound speed
    (:func:`~sonotile.planning.aberration.water_medium`) -- the plane-wave power through the
    element's face."""
    water = water_medium()
    rho, c = float(np.asarray(water.density)), float(np.asarray(water.sound_speed))
    return np.asarray(areas_mm2, dtype=np.float64) * 1e-6 / (2.0 * rho * c)


def acoustic_power(amplitude_pa: np.ndarray, areas_mm2: np.ndarray) -> float:
    """The total acoustic power [W] of a drive: ``sum_e a_e^2 S_e / (2 rho_w c_w)`` with
    ``a_e`` each element's pressure amplitude as driven [Pa] (:func:`power_weights`)."""
    a = np.asarray(amplitude_pa, dtype=np.float64)
    return float(np.sum(a**2 * power_weights(areas_mm2)))


def focus_uncertainty(p_amp: np.ndarray, grid: SimulationGrid, peak: tuple[int, ...]) -> list:
    """How precisely the grid places the focus [mm, per world axis x, y, z]: the half-extent
    of the ridge -- the points at or above :data:`RIDGE_LEVEL` of the peak at grid point
    ``peak``, connected to it -- and at least half a grid spacing."""
    ridge, _ = ndimage.label(p_amp >= RIDGE_LEVEL * float(p_amp[peak]))
    ijk = np.argwhere(ridge == ridge[peak])
    xyz = grid.world(ijk)
    half = (xyz.max(axis=0) - xyz.min(axis=0)) / 2
    return np.maximum(half, grid.spacing_mm / 2).tolist()


def peak_index(grid: SimulationGrid, focus: Focus) -> tuple[int, int, int]:
    """The grid point of ``focus``'s peak."""
    ijk = np.rint(grid.index(focus.peak_voxel_mm or focus.position_mm)).astype(int)
    return int(ijk[0]), int(ijk[1]), int(ijk[2])


def exposure_summary(p_amp: np.ndarray, focus: Focus, grid: SimulationGrid, maps: TissueMaps,
                     transducer: Transducer, amplitude_pa: np.ndarray, frequency: float,
                     duty: float) -> dict[str, Any]:  # fmt: skip
    """The exposure figures of a field ``p_amp`` [Pa] (``grid.shape``) with focus ``focus``,
    driven per element with ``amplitude_pa`` [Pa] at ``frequency`` [Hz] and ``duty``: the
    focal pressure [Pa] and the tissue's density [kg/m^3] and sound speed [m/s] at the peak
    grid point, MI, I_sppa and I_spta [W/cm^2], the acoustic power [W], the largest side lobe
    in the brain (outside :func:`~sonotile.planning.acoustics.focal_region`) over the focal
    peak and where it is [mm], and the focus's position uncertainty [mm]."""
    i = peak_index(grid, focus)
    p, rho, c = float(p_amp[i]), float(maps.density[i]), float(maps.sound_speed[i])
    i_sppa = pulse_average_intensity(p, rho, c)
    lobe, k = side_lobe(p_amp, maps.labels == BRAIN, focal_region(p_amp, grid, focus))
    at = None if k < 0 else grid.world(np.array(np.unravel_index(k, p_amp.shape))).tolist()
    return {
        "focal_pressure_pa": p, "density_kg_m3": rho, "sound_speed_m_s": c,
        "mechanical_index": mechanical_index(p, frequency),
        "i_sppa_w_cm2": i_sppa, "i_spta_w_cm2": temporal_average_intensity(i_sppa, duty),
        "acoustic_power_w": acoustic_power(amplitude_pa, element_areas_mm2(transducer)),
        "side_lobe_pa": lobe, "side_lobe_ratio": lobe / p if p > 0 else 0.0,
        "side_lobe_mm": at, "focus_uncertainty_mm": focus_uncertainty(p_amp, grid, i),
    }  # fmt: skip
