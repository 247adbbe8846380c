"""Aberration correction through the skull, and the beam's focus with and without it.

For a multi-element array: a CW point source at the target is simulated through the skull and
recorded at the elements (time reversal at one frequency: phase conjugation); each element is
then driven with the conjugate of its recorded phase (and, optionally, an amplitude in
proportion to its recorded amplitude), and forward runs give the focus of the corrected and
the uncorrected (geometric) drives and of the same transducer in water: focal position error,
focal gain, -6 dB focal volume and transmission loss. For a single-element bowl there is
nothing to correct: the focal shift and the pressure loss through the skull are reported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sonotile.api.types import KWaveMedium
from sonotile.model.problem import ProblemError
from sonotile.planning.acoustics import Focus, RunSettings, cw_field, element_response, find_focus
from sonotile.planning.geometry import Pose, SimulationGrid
from sonotile.planning.tissue import SOFT_PROPERTIES, WATER
from sonotile.planning.transducers import Transducer

Progress = Callable[[str], None]


def water_medium() -> KWaveMedium:
    """The coupling water of the plans (lossless; the maps' water sound speed and density)."""
    c, rho, _ = SOFT_PROPERTIES[WATER]
    return KWaveMedium(sound_speed=c, density=rho)


def conjugate_drive(
    response: np.ndarray, source_pressure: float, amplitudes: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per-element drive ``(amplitude [Pa], phase [rad])`` focusing on the point whose field
    at the elements is ``response`` (complex): the conjugate phases, relative to the array's
    mean phase and wrapped to (-pi, pi]; amplitudes ``source_pressure`` each, or with
    ``amplitudes`` in proportion to ``|response|`` (the largest at ``source_pressure``)."""
    r = np.asarray(response, dtype=np.complex128)
    if r.ndim != 1 or not np.isfinite(r).all() or not np.abs(r).max() > 0:
        raise ProblemError("element response: no finite, nonzero signal at the elements")
    mean = r.sum() / abs(r.sum()) if abs(r.sum()) > 0 else 1.0
    phase = -np.angle(r * np.conj(mean))
    amp = np.abs(r) / np.abs(r).max() if amplitudes else np.ones(r.size)
    return source_pressure * amp, phase


@dataclass
class BeamComparison:
    """Foci of the water path, the uncorrected drive through the skull and (arrays) the
    corrected drive, with the fields and the drives.

    Attributes:
        water, uncorrected, corrected: each run's :class:`~sonotile.planning.acoustics.Focus`
            (``corrected`` is None for a bowl or without correction).
        fields: pressure amplitude [Pa] on the grid per run (``"water"``, ``"uncorrected"``,
            ``"corrected"``).
        amplitude, phase: the drive of the plan's run per element [Pa, rad].
        aim_mm: where the correction's point source was [mm, RAS] (None: no correction).
    """

    water: Focus
    uncorrected: Focus
    corrected: Focus | None
    fields: dict[str, np.ndarray] = field(repr=False)
    amplitude: np.ndarray = field(repr=False)
    phase: np.ndarray = field(repr=False)
    aim_mm: tuple[float, float, float] | None = None

    @property
    def plan(self) -> Focus:
        """The focus of the drive the plan uses (corrected where there is one)."""
        return self.corrected or self.uncorrected

    def summary(self) -> dict[str, Any]:
        """Every number, as plain values: each focus, the focal shift of the uncorrected beam
        from the water focus [mm], the gain of the correction (peak ratio), the transmission
        loss of the plan's beam against the water path [dB], its -6 dB volume over water's."""
        u, w, p = self.uncorrected, self.water, self.plan
        shift = float(np.linalg.norm(np.subtract(u.position_mm, w.position_mm)))
        out: dict[str, Any] = {
            "water": w.as_dict(), "uncorrected": u.as_dict(),
            "corrected": self.corrected.as_dict() if self.corrected else None,
            "uncorrected_shift_from_water_mm": shift,
            "uncorrected_loss_db": float(20 * np.log10(w.peak_pa / u.peak_pa)),
            "transmission_loss_db": float(20 * np.log10(w.peak_pa / p.peak_pa)),
            "volume_ratio_to_water": p.volume_mm3 / w.volume_mm3,
            "point_source_mm": self.aim_mm,
        }  # fmt: skip
        if self.corrected:
            out["focal_gain"] = self.corrected.peak_pa / u.peak_pa
            out["gain_at_target"] = self.corrected.at_target_pa / u.at_target_pa
        return out


def reaim(grid: SimulationGrid, aim: tuple[int, int, int], focus: Focus) -> tuple[int, int, int]:
    """The point-source grid point moved by the corrected focus's offset from the target, the
    other way, so that a beam that peaks short of (or beyond) its aim peaks on the target."""
    target = grid.world(grid.target_index)
    ijk = np.rint(np.asarray(aim) + grid.index(target) - grid.index(focus.position_mm))
    ijk = np.clip(ijk.astype(int), 0, np.asarray(grid.shape) - 1)
    return (int(ijk[0]), int(ijk[1]), int(ijk[2]))


def compare_beams(
    medium: KWaveMedium,
    grid: SimulationGrid,
    transducer: Transducer,
    pose: Pose,
    frequency: float,
    *,
    source_pressure: float = 60e3,
    correct: bool = True,
    amplitudes: bool = False,
    refocus: bool = False,
    search_mm: float = 15.0,
    run: RunSettings | None = None,
    progress: Progress | None = None,
) -> BeamComparison:
    """The transducer's beam in water and through ``medium`` (on ``grid``), and for an array
    with ``correct`` the phase-conjugated drive from a point source at the grid's target;
    with ``refocus`` the correction is made once more with the point source moved by the
    corrected focus's offset from the target (:func:`reaim`; two more runs).
    ``source_pressure``: the drive amplitude of each element [Pa]."""
    say = progress or (lambda _msg: None)
    karray = transducer.karray(pose, grid)
    target = grid.world(grid.target_index)
    n = transducer.n_elements
    amp, phase = np.full(n, float(source_pressure)), np.zeros(n)
    fields, foci = {}, {}

    def forward(name: str, m: KWaveMedium, a: np.ndarray, ph: np.ndarray) -> None:
        say(f"CW field: {name}")
        fields[name] = cw_field(m, grid, karray, a, ph, frequency, run)[0]
        foci[name] = find_focus(fields[name], grid, target, search_mm)

    forward("water", water_medium(), amp, phase)
    forward("uncorrected", medium, amp, phase)
    aim = None
    if correct and transducer.kind == "array":
        ijk = grid.target_index
        for again in range(1 + int(refocus)):
            ijk = reaim(grid, ijk, foci["corrected"]) if again else ijk
            w = grid.world(ijk)
            aim = (float(w[0]), float(w[1]), float(w[2]))
            say(f"point source at {np.round(w, 1).tolist()} mm, recorded at the elements "
                "(aberration correction)")  # fmt: skip
            response = element_response(medium, grid, karray, frequency, run, ijk)
            amp, phase = conjugate_drive(response, source_pressure, amplitudes)
            forward("corrected", medium, amp, phase)
    return BeamComparison(foci["water"], foci["uncorrected"], foci.get("corrected"), fields,
                          amp, phase, aim)  # fmt: skip
