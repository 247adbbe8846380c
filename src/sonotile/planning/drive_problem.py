"""What an optimised drive (:func:`~sonotile.planning.optimize.optimize_drive`) needs from a
plan: its grid, tissue, conjugated drive and fields, and how to run and heat a drive there."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sonotile.api.heating.sonication import HeatRun
from sonotile.planning.acoustics import RunSettings, cw_field
from sonotile.planning.exposure import element_areas_mm2, power_weights
from sonotile.planning.geometry import kwave_medium
from sonotile.planning.heating import Box, green_functions, heat_coefficient, sonication_heat
from sonotile.planning.optimize import DriveProblem

if TYPE_CHECKING:
    from sonotile.planning.chain import Plan


def drive_problem(p: Plan, run: RunSettings) -> DriveProblem:
    """What :func:`~sonotile.planning.optimize.optimize_drive` needs from a plan: its grid,
    tissue, conjugated drive and fields, and how to run and heat a drive there."""
    s, g, tr = p.settings, p.grid, p.transducer
    karray, medium = tr.karray(p.pose, g), kwave_medium(p.maps)

    def field_run(amplitude: np.ndarray, phase: np.ndarray) -> np.ndarray:
        amp, ph = cw_field(medium, g, karray, amplitude, phase, s.frequency, run)
        return amp * np.exp(1j * ph)

    def heat_run(q: np.ndarray) -> HeatRun:
        return sonication_heat(q, p.thermal, g.spacing_mm, s.sonication,
                               decomposition=run.decomposition, mesh=run.mesh,
                               points=(g.target_index,))  # fmt: skip

    def green_run(points: list[tuple[int, int, int]], box: Box) -> np.ndarray:
        return green_functions(points, p.thermal, g.spacing_mm, s.sonication, box)

    amplitude, phase = p.drive
    centres = tr.element_centres()
    return DriveProblem(
        g, p.maps.labels, heat_coefficient(p.maps, s.frequency, s.sonication), centres,
        p.pose.to_world(centres), power_weights(element_areas_mm2(tr)),
        amplitude * p.scale, phase, s.frequency, p.beams.steering_speed or 1500.0, p.p_amp,
        p.heat, s.T0, s.duration, s.search_mm, field_run, heat_run, green_run,
    )  # fmt: skip
