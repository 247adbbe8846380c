"""The plan's beam through an elastic skull: k-Wave's ``pstdElastic3D``
(:func:`sonotile.api.elastic.pstd_elastic_3d`) on the beam grid, with the mapped shear speed
and shear attenuation in bone (fluid elsewhere: shear speed 0).

The elastic model keeps its PML inside the grid, so the beam grid is padded by its PML with
the edge values of the medium; the transducer's elements drive the three normal stresses
with ``-p`` (an additive pressure source), and the field is the maximum pressure over the last
periods (``p_max_all``) of a run as long as the fluid runs'. Absorption is Kelvin-Voigt
(proportional to f^2), matched to the mapped attenuation at the drive frequency, as the fluid
medium's ``y = 2`` power law is.
"""

from __future__ import annotations

import numpy as np

from sonotile.api.elastic import ElasticSource, KWaveElasticMedium, pstd_elastic_3d
from sonotile.api.types import KSensor, KWaveGrid
from sonotile.model.array import KWaveArray
from sonotile.model.signals import create_cw_signals
from sonotile.planning.acoustics import RunSettings, make_kgrid
from sonotile.planning.geometry import SimulationGrid, kwave_medium
from sonotile.planning.tissue import NP_PER_M_PER_DB_PER_CM, TissueMaps


def elastic_medium(maps: TissueMaps, pad: tuple[int, int, int]) -> KWaveElasticMedium:
    """The elastic medium of tissue maps on the beam grid, padded by ``pad`` points per side
    (edge values): compressional and shear speeds, density, and Kelvin-Voigt coefficients
    [dB/(MHz^2 cm)] equal to the mapped attenuations at the planning frequency."""
    f_mhz = float(maps.provenance["frequency_hz"]) / 1e6
    shear_db_cm = maps.shear_alpha_np_per_m / NP_PER_M_PER_DB_PER_CM

    def padded(v: np.ndarray) -> np.ndarray:
        return np.pad(np.asarray(v, dtype=np.float32), [(p, p) for p in pad], mode="edge")

    return KWaveElasticMedium(
        sound_speed_compression=padded(maps.sound_speed),
        sound_speed_shear=padded(maps.shear_speed),
        density=padded(maps.density),
        alpha_coeff_compression=padded(np.asarray(kwave_medium(maps).alpha_coeff)),
        alpha_coeff_shear=padded(shear_db_cm / f_mhz**2),
    )


def elastic_field(
    maps: TissueMaps,
    grid: SimulationGrid,
    karray: KWaveArray,
    amplitude: np.ndarray,
    phase: np.ndarray,
    frequency: float,
    run: RunSettings | None = None,
) -> np.ndarray:
    """Maximum pressure [Pa] over the last ``run.cw_periods`` periods on ``grid.shape`` of the
    transducer driven with ``amplitude[e] sin(2 pi f t + phase[e])`` [Pa] per element, through
    the elastic medium of ``maps``."""
    run = run or RunSettings()
    fluid = kwave_medium(maps)
    interior = make_kgrid(grid, fluid, frequency, run)
    assert interior.dt is not None and interior.nt is not None  # make_kgrid sets both
    pad = grid.pml_size
    kgrid = KWaveGrid(grid.total_shape, grid.spacing_mm * 1e-3)
    kgrid.dt, kgrid.nt = interior.dt, interior.nt
    sig = create_cw_signals(kgrid.t, frequency, np.asarray(amplitude), np.asarray(phase))
    minus_p = -karray.get_distributed_source_signal(kgrid, sig).astype(np.float32)
    source = ElasticSource(sxx=minus_p, syy=minus_p, szz=minus_p,
                           s_mask=karray.get_array_binary_mask(kgrid))  # fmt: skip
    start = max(1, int(kgrid.nt - np.ceil(run.cw_periods / (frequency * kgrid.dt))))
    mask = np.zeros(kgrid.shape, bool)
    mask[tuple(i + p for i, p in zip(grid.target_index, pad))] = True
    sensor = KSensor(mask=mask, record=("p_max_all",), record_start_index=start)
    out = pstd_elastic_3d(kgrid, elastic_medium(maps, pad), source, sensor, pml_size=list(pad))
    crop = tuple(slice(p, p + n) for p, n in zip(pad, grid.shape))
    return np.asarray(out["p_max_all"])[crop]
