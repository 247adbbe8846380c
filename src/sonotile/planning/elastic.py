"""The plan's beam through an elastic skull: k-Wave's ``pstdElastic3D``
(:func:`sonotile.api.elastic.pstd_elastic_3d`) on the beam grid, with the mapped shear speed
and shear attenuation in bone (fluid elsewhere: shear speed 0).

The elastic model keeps its PML inside the grid, so the beam grid is padded by its PML with
the edge values of the medium; the transducer's elements drive the three normal stresses
with ``-p`` (an additive pressure source), and the field is the maximum pressure over the last
periods (``p_max_all``) of a run as long as the fluid runs'. Absorption is Kelvin-Voigt
(proportional to f^2), matched to the mapped attenuation at the drive frequency, as the fluid
medium's ``y = 2`` power law is.

With an array and aberration correction, :func:`elastic_beams` also corrects through the
elastic skull: the point source at the target is simulated by the elastic model and recorded
at the elements (:func:`elastic_response`), and the conjugate drive run forward, so that the
drive is corrected for the skull as the elastic model sees it (shear conversion in bone
included); the fluid-corrected drive's focus through the same skull is kept for comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sonotile.api.elastic import ElasticSource, KWaveElasticMedium, pstd_elastic_3d
from sonotile.api.types import KSensor, KWaveGrid
from sonotile.model.array import KWaveArray
from sonotile.model.signals import create_cw_signals
from sonotile.planning.aberration import BeamComparison, conjugate_drive
from sonotile.planning.acoustics import (
    Focus,
    RunSettings,
    element_phasors,
    find_focus,
    make_kgrid,
    steps_per_period,
)
from sonotile.planning.geometry import SimulationGrid, kwave_medium
from sonotile.planning.tissue import NP_PER_M_PER_DB_PER_CM, TissueMaps

Progress = Callable[[str], None]


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


def _elastic_grid(
    maps: TissueMaps, grid: SimulationGrid, frequency: float, run: RunSettings
) -> tuple[KWaveGrid, tuple[int, int, int], int]:
    """The padded k-Wave grid with the fluid runs' time axis, the padding per side, and the
    1-based first step of the last ``run.cw_periods`` periods."""
    interior = make_kgrid(grid, kwave_medium(maps), frequency, run, cfl=run.elastic_cfl)
    assert interior.dt is not None and interior.nt is not None  # make_kgrid sets both
    kgrid = KWaveGrid(grid.total_shape, grid.spacing_mm * 1e-3)
    kgrid.dt, kgrid.nt = interior.dt, interior.nt
    window = int(np.ceil(run.cw_periods * steps_per_period(kgrid.dt, frequency) - 1e-9))
    start = max(1, int(kgrid.nt - window))
    pad = grid.pml_size
    return kgrid, (int(pad[0]), int(pad[1]), int(pad[2])), start


def _run(maps: TissueMaps, kgrid: KWaveGrid, pad: tuple[int, int, int], source: Any,
         sensor: KSensor, run: RunSettings) -> dict[str, Any]:  # fmt: skip
    """One elastic run of the plan on the padded grid, on ``run``'s devices (read back when
    ``run.saved`` holds it)."""
    medium = elastic_medium(maps, pad)

    def go() -> dict[str, Any]:
        return pstd_elastic_3d(kgrid, medium, source, sensor, pml_size=list(pad),
                               decomposition=run.decomposition, mesh=run.mesh,
                               interface=run.elastic_interface)  # fmt: skip

    return run.run_or_read(("elastic", kgrid, medium, source, sensor, pad, run), go)


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
    kgrid, pad, start = _elastic_grid(maps, grid, frequency, run)
    sig = create_cw_signals(kgrid.t, frequency, np.asarray(amplitude), np.asarray(phase))
    minus_p = -karray.get_distributed_source_signal(kgrid, sig).astype(np.float32)
    source = ElasticSource(sxx=minus_p, syy=minus_p, szz=minus_p,
                           s_mask=karray.get_array_binary_mask(kgrid))  # fmt: skip
    mask = np.zeros(kgrid.shape, bool)
    mask[tuple(i + p for i, p in zip(grid.target_index, pad))] = True
    sensor = KSensor(mask=mask, record=("p_max_all",), record_start_index=start)
    out = _run(maps, kgrid, pad, source, sensor, run)
    crop = tuple(slice(p, p + n) for p, n in zip(pad, grid.shape))
    return np.asarray(out["p_max_all"])[crop]


def elastic_response(
    maps: TissueMaps,
    grid: SimulationGrid,
    karray: KWaveArray,
    frequency: float,
    run: RunSettings | None = None,
    source_index: tuple[int, int, int] | None = None,
) -> np.ndarray:
    """Complex steady-state pressure ``A exp(i phase)`` at each element (averaged over its
    surface) from a CW point source (the three normal stresses at ``-p``) at ``source_index``
    (default: the grid's target point) through the elastic medium of ``maps``: the ``p_cw``
    record over the last ``run.cw_periods`` periods, ``(n_elements,)``
    (phases as :func:`sonotile.planning.acoustics.element_response`'s, up to a common
    offset, which :func:`sonotile.planning.aberration.conjugate_drive` removes)."""
    run = run or RunSettings()
    kgrid, pad, _ = _elastic_grid(maps, grid, frequency, run)
    at = grid.target_index if source_index is None else source_index
    point = np.zeros(kgrid.shape, bool)
    point[tuple(i + p for i, p in zip(at, pad))] = True
    sig = -create_cw_signals(kgrid.t, frequency, np.array([1e3]), np.array([0.0]))
    sig = sig.astype(np.float32)
    source = ElasticSource(sxx=sig, syy=sig, szz=sig, s_mask=point)
    sensor = KSensor(mask=karray.get_array_binary_mask(kgrid), record=("p_cw",),
                     cw_frequency=frequency, cw_periods=run.cw_periods)  # fmt: skip
    out = _run(maps, kgrid, pad, source, sensor, run)
    return element_phasors(karray, kgrid, out["p_cw_amp"], out["p_cw_phase"])


@dataclass
class ElasticBeams:
    """The plan's beam through the elastic skull.

    Attributes:
        fluid_drive: the focus of the drive found with the fluid model (fluid-corrected for
            an array with correction, geometric otherwise) through the elastic skull.
        corrected: the focus of the drive corrected through the elastic skull itself (its
            point source recorded by the elastic model), or None (a bowl, or no correction).
        p_amp: pressure amplitude of the plan's drive (``corrected``'s where there is one)
            through the elastic skull [Pa]; amplitude, phase: that drive [Pa, rad].
    """

    fluid_drive: Focus
    corrected: Focus | None
    p_amp: np.ndarray = field(repr=False)
    amplitude: np.ndarray = field(repr=False)
    phase: np.ndarray = field(repr=False)

    @property
    def plan(self) -> Focus:
        """The focus of the drive the plan uses."""
        return self.corrected or self.fluid_drive

    def summary(self) -> dict[str, Any]:
        """Both foci and, with an elastic correction, its gain over the fluid-corrected drive
        (peak ratio and ratio at the target) and its focus's shift from that drive's [mm]."""
        f, c = self.fluid_drive, self.corrected
        out: dict[str, Any] = {"fluid_corrected": f.as_dict(),
                               "elastic_corrected": c.as_dict() if c else None}  # fmt: skip
        if c:
            out["gain_over_fluid_corrected"] = c.peak_pa / f.peak_pa
            out["gain_at_target"] = c.at_target_pa / f.at_target_pa
            out["shift_from_fluid_corrected_mm"] = float(
                np.linalg.norm(np.subtract(c.position_mm, f.position_mm)))  # fmt: skip
        return out


def elastic_beams(
    maps: TissueMaps,
    grid: SimulationGrid,
    karray: KWaveArray,
    beams: BeamComparison,
    frequency: float,
    *,
    amplitudes: bool = False,
    search_mm: float = 15.0,
    run: RunSettings | None = None,
    progress: Progress | None = None,
) -> ElasticBeams:
    """The fluid plan's drive (``beams``) through the elastic skull of ``maps`` and, where
    ``beams`` holds a correction, the drive corrected through the elastic skull: a point
    source at the target recorded at the elements by the elastic model, conjugated
    (:func:`conjugate_drive`, at the fluid drive's largest amplitude), aimed where the fluid
    correction was aimed (``beams.steering``) and run forward."""
    say = progress or (lambda _msg: None)
    target = grid.world(grid.target_index)
    say("elastic skull: the fluid-corrected drive" if beams.corrected else
        "elastic skull: the plan's drive")  # fmt: skip
    p = elastic_field(maps, grid, karray, beams.amplitude, beams.phase, frequency, run)
    fluid = find_focus(p, grid, target, search_mm)
    if beams.corrected is None:
        return ElasticBeams(fluid, None, p, beams.amplitude, beams.phase)
    say("elastic skull: point source at the target, recorded at the elements (aberration "
        "correction)")  # fmt: skip
    response = elastic_response(maps, grid, karray, frequency, run, grid.target_index)
    amp, phase = conjugate_drive(response, float(np.max(beams.amplitude)), amplitudes)
    if beams.steering is not None:
        phase = np.angle(np.exp(1j * (phase + beams.steering)))
    say("elastic skull: the elastic-corrected drive")
    p = elastic_field(maps, grid, karray, amp, phase, frequency, run)
    return ElasticBeams(fluid, find_focus(p, grid, target, search_mm), p, amp, phase)
