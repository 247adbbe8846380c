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
            (``corrected`` is None for a bowl or without correction; with re-aiming, the
            pass whose focus lies nearest the target).
        fields: pressure amplitude [Pa] on the grid per run (``"water"``, ``"uncorrected"``,
            ``"corrected"``).
        amplitude, phase: the drive of the plan's run per element [Pa, rad].
        aim_mm: where the corrected drive is aimed [mm, RAS] (None: no correction).
        steering: the phase [rad] per element added to the conjugate phases to move the
            focus from the target to ``aim_mm`` (:func:`steering_phase`; None: none).
        passes: each corrected run's aim and focus, in order (:func:`refocus`).
        steering_speed: the sound speed of the steering phases [m/s].
    """

    water: Focus
    uncorrected: Focus
    corrected: Focus | None
    fields: dict[str, np.ndarray] = field(repr=False)
    amplitude: np.ndarray = field(repr=False)
    phase: np.ndarray = field(repr=False)
    aim_mm: tuple[float, float, float] | None = None
    steering: np.ndarray | None = field(default=None, repr=False)
    passes: list[tuple[np.ndarray, Focus]] = field(default_factory=list, repr=False)
    steering_speed: float | None = None

    @property
    def plan(self) -> Focus:
        """The focus of the drive the plan uses (corrected where there is one)."""
        return self.corrected or self.uncorrected

    def summary(self) -> dict[str, Any]:
        """Every number, as plain values: each focus, the focal shift of the uncorrected beam
        from the water focus [mm], the gain of the correction (peak ratio), the transmission
        loss of the plan's beam against the water path [dB], its -6 dB volume over water's,
        the aim of the corrected drive and each pass of re-aiming."""
        u, w, p = self.uncorrected, self.water, self.plan
        shift = float(np.linalg.norm(np.subtract(u.position_mm, w.position_mm)))
        out: dict[str, Any] = {
            "water": w.as_dict(), "uncorrected": u.as_dict(),
            "corrected": self.corrected.as_dict() if self.corrected else None,
            "uncorrected_shift_from_water_mm": shift,
            "uncorrected_loss_db": float(20 * np.log10(w.peak_pa / u.peak_pa)),
            "transmission_loss_db": float(20 * np.log10(w.peak_pa / p.peak_pa)),
            "volume_ratio_to_water": p.volume_mm3 / w.volume_mm3,
            "aim_mm": self.aim_mm, "steering_speed_m_s": self.steering_speed,
            "refocus": [{"aim_mm": a.tolist(), "peak_pa": f.peak_pa, "error_mm": f.error_mm,
                         "peak_voxel_error_mm": f.peak_voxel_error_mm} for a, f in self.passes],
        }  # fmt: skip
        if self.corrected:
            out["focal_gain"] = self.corrected.peak_pa / u.peak_pa
            out["gain_at_target"] = self.corrected.at_target_pa / u.at_target_pa
            out["corrected_shift_from_water_mm"] = float(
                np.linalg.norm(np.subtract(self.corrected.position_mm, w.position_mm))
            )
        return out


#: re-aiming stops once the corrected focus lies this close to the target [mm]
REFOCUS_TOL_MM = 0.25


def steering_phase(
    elements_mm: np.ndarray, target: np.ndarray, aim: np.ndarray, frequency: float, c: float
) -> np.ndarray:
    """Phase per element [rad] that moves the focus of a drive focused on ``target`` to
    ``aim`` (both [mm, RAS]; ``elements_mm`` ``(n, 3)`` the element centres): the path
    difference ``|x_e - aim| - |x_e - target|`` at the wavenumber ``2 pi f / c`` [Hz, m/s].
    Over a few millimetres the skull's delays hardly change (the isoplanatic patch), so the
    conjugate phases plus this aim the corrected beam between grid points without another
    point-source run."""
    x = np.asarray(elements_mm, dtype=np.float64)
    path = np.linalg.norm(x - np.asarray(aim), axis=1) - np.linalg.norm(x - target, axis=1)
    return 2 * np.pi * frequency / c * path * 1e-3


def _next_aim(aim: np.ndarray, error: np.ndarray, last: tuple[np.ndarray, np.ndarray] | None,
              peak: np.ndarray) -> np.ndarray:  # fmt: skip
    """The aim after ``aim`` whose peak lay at ``peak``, ``error`` from the target: moved by
    the error the other way, the error's part along the last move scaled by the secant gain
    (how far the peak moved per mm of aim along it, from ``last``: an earlier aim and its
    peak), kept within 1/3 to 1.5."""
    if last is None:
        return aim - error
    da, dp = aim - last[0], peak - last[1]
    if not np.linalg.norm(da) > 1e-9:
        return aim - error
    u = da / np.linalg.norm(da)
    gain = float(np.clip((dp @ u) / np.linalg.norm(da), 1 / 3, 1.5))
    along = (error @ u) * u
    return aim - (error - along) - along / gain


def refocus(
    run: Callable[[np.ndarray], Focus],
    target: np.ndarray,
    first_aim: np.ndarray,
    iterations: int = 2,
    tol_mm: float = REFOCUS_TOL_MM,
    prior: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[tuple[np.ndarray, Focus]]:
    """Aim a beam until its focus lies within ``tol_mm`` of ``target`` [mm]: ``run(aim)``
    gives the focus of the beam aimed at ``aim``; the first aim is ``first_aim``, each next
    one the last moved by its focus's offset from the target, the other way (a beam that
    peaks short of its aim, as a phased array with a small Fresnel number does, is aimed
    past the target), the offset along the last move divided by the secant gain of the
    peak's position over the aim's (:func:`_next_aim`; ``prior``: an aim and where its beam
    peaked, for the first move), for at most ``iterations`` more runs. Returns each pass's
    aim and focus."""
    aim, passes, last = np.asarray(first_aim, dtype=np.float64), [], prior
    for i in range(1 + iterations):
        f = run(aim)
        passes.append((aim, f))
        if f.error_mm <= tol_mm or i == iterations:
            break
        peak = np.asarray(f.position_mm)
        aim, last = _next_aim(aim, peak - target, last, peak), (aim, peak)
    return passes


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
    refocus_iterations: int = 0,
    search_mm: float = 15.0,
    run: RunSettings | None = None,
    progress: Progress | None = None,
) -> BeamComparison:
    """The transducer's beam in water and through ``medium`` (on ``grid``), and for an array
    with ``correct`` the phase-conjugated drive from a point source at the grid's target.
    With ``refocus_iterations`` the corrected drive is aimed (:func:`steering_phase`) past
    the target by the water beam's focal offset, then re-aimed by the measured offset of its
    own focus up to that many more times (:func:`refocus`); the pass nearest the target is
    kept. ``source_pressure``: the drive amplitude of each element [Pa]."""
    say = progress or (lambda _msg: None)
    karray = transducer.karray(pose, grid)
    target = grid.world(grid.target_index)
    n = transducer.n_elements
    amp, phase = np.full(n, float(source_pressure)), np.zeros(n)
    fields, foci = {}, {}

    def forward(name: str, m: KWaveMedium, a: np.ndarray, ph: np.ndarray) -> Focus:
        say(f"CW field: {name}")
        fields[name] = cw_field(m, grid, karray, a, ph, frequency, run)[0]
        foci[name] = find_focus(fields[name], grid, target, search_mm)
        return foci[name]

    forward("water", water_medium(), amp, phase)
    forward("uncorrected", medium, amp, phase)
    if not (correct and transducer.kind == "array"):
        return BeamComparison(foci["water"], foci["uncorrected"], None, fields, amp, phase)
    say(f"point source at the target {np.round(target, 1).tolist()} mm, recorded at the "
        "elements (aberration correction)")  # fmt: skip
    response = element_response(medium, grid, karray, frequency, run)
    amp, conj = conjugate_drive(response, source_pressure, amplitudes)
    elements = pose.to_world(transducer.element_centres())
    speed = np.asarray(medium.sound_speed, dtype=np.float64)
    c = float(speed[grid.target_index] if speed.ndim else speed)
    runs: list[tuple[np.ndarray, np.ndarray]] = []

    def aimed(aim: np.ndarray) -> Focus:
        say(f"corrected drive aimed at {np.round(aim, 2).tolist()} mm")
        ph = np.angle(np.exp(1j * (conj + steering_phase(elements, target, aim, frequency, c))))
        f = forward("corrected", medium, amp, ph)
        runs.append((ph, fields["corrected"]))
        say(f"corrected focus {f.error_mm:.2f} mm from the target (its peak grid point "
            f"{f.peak_voxel_error_mm:.2f} mm), {f.peak_pa / 1e3:.1f} kPa")  # fmt: skip
        return f

    water_offset = np.subtract(foci["water"].position_mm, target)
    first = target - water_offset if refocus_iterations > 0 else target
    passes = refocus(aimed, target, first, max(refocus_iterations, 0),
                     prior=(target, np.asarray(foci["water"].position_mm)))  # fmt: skip
    best = min(range(len(passes)), key=lambda i: passes[i][1].error_mm)
    aim, corrected = passes[best]
    phase, fields["corrected"] = runs[best]
    return BeamComparison(foci["water"], foci["uncorrected"], corrected, fields, amp, phase,
                          (float(aim[0]), float(aim[1]), float(aim[2])), phase - conj, passes,
                          c)  # fmt: skip
