"""One call from a CT to a sonication plan: :func:`plan`.

CT (Hounsfield units) -> tissue properties (a named mapping) -> the transducer placed from a
target and an entry point -> a beam-aligned grid -> CW acoustic runs (water path, uncorrected,
and for an array the aberration-corrected drive; fluid skull) -> heating and thermal dose of
the sonication -> results back on the CT's grid (:mod:`sonotile.planning.outputs`). Inputs are
checked, in the caller's names, before any work starts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from sonotile.api.heating.checkpoint import Checkpoint
from sonotile.api.heating.sonication import HeatRun
from sonotile.base.version import __version__
from sonotile.model.problem import ProblemError
from sonotile.planning.aberration import BeamComparison, compare_beams
from sonotile.planning.acoustics import RunSettings, check_run
from sonotile.planning.dose_goal import power_scale, target_rise
from sonotile.planning.drive_problem import drive_problem
from sonotile.planning.elastic import ElasticBeams, elastic_beams
from sonotile.planning.exposure import exposure_summary
from sonotile.planning.geometry import (
    Pose,
    SimulationGrid,
    beam_grid,
    kwave_medium,
    resample_maps,
)
from sonotile.planning.heating import (
    Sonication,
    boiling,
    heat_coefficient,
    heat_summary,
    sonication_heat,
)
from sonotile.planning.imagecheck import (
    HU_RANGE,
    TARGET_OVERRIDES,
    check_hu,
    check_target,
    image_warnings,
)
from sonotile.planning.images import CTImage, read_ct
from sonotile.planning.memory import GRID_BYTES_PER_POINT, check_memory
from sonotile.planning.optimize import (
    OptimizedPlan,
    OptimizeSettings,
    optimize_drive,
    warnings_of,
)
from sonotile.planning.saved_runs import check_runs_folder, runs_folder, saved_runs
from sonotile.planning.skullpath import skull_path
from sonotile.planning.thermal import ThermalMaps, thermal_properties
from sonotile.planning.tissue import (
    MAPPINGS,
    WATER,
    BoneParameters,
    TissueMaps,
    tissue_properties,
)
from sonotile.planning.transducers import Transducer, parse_transducer

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PlanSettings:
    """What a plan simulates (SI units unless named otherwise).

    Attributes:
        frequency: drive frequency [Hz]. points_per_wavelength: at 1500 m/s.
        mapping: HU -> properties (``sonotile.planning.MAPPINGS``).
        source_pressure: drive amplitude of each element [Pa] (an additive pressure source).
        focal_pressure: if given, the drive is scaled (linear acoustics) to this focal peak [Pa].
        target_dose: if given (instead of ``focal_pressure``), the drive is scaled so that the
            thermal dose at the target reaches this [CEM43 min] (:mod:`.dose_goal`).
        correct: phase-conjugate an array's drive through the skull; amplitudes: and weight
            its elements by their recorded amplitudes; refocus: aim the corrected drive past
            the target by the water beam's focal offset, then re-aim it by its own focus's
            offset from the target up to this many times, until within 0.25 mm
            (:func:`~sonotile.planning.aberration.refocus`); 0: aimed at the target itself.
        duration: sonication time [s]; cooling: time simulated after it [s].
        duty: fraction of the time on; with ``period`` [s] the source is pulsed, without it the
            heat source is time-averaged (pulses much shorter than thermal times).
        heat_dt: thermal time step [s]; T0: body and arterial blood temperature [degC].
        specific_heat [J/(kg K)], conductivity [W/(m K)], perfusion: blood perfusion rate
            [1/s]: None (default) takes each tissue class's value
            (:mod:`sonotile.planning.thermal`, IT'IS database), a number sets it everywhere.
        elastic: also run the plan's drive through an elastic skull (shear waves in bone,
            :mod:`sonotile.planning.elastic`) and heat with that field; for an array with
            ``correct``, the correction is made through the elastic skull too and the plan
            drives the elastic-corrected phases.
        search_mm: the focus is the peak within this distance of the target [mm].
        margin_mm, beyond_mm: the grid's margin beside the aperture and length past the
            target [mm].
        hu_max: HU of zero porosity in the bone mappings [HU]; None: a high percentile of
            the skull's HU (:func:`~sonotile.planning.tissue.robust_hu_max`).
        clip_hu: clip HU outside :data:`~sonotile.planning.imagecheck.HU_RANGE` into it
            instead of refusing the image.
        allow_target_in: classes besides soft tissue and brain the target may lie in
            (``"water"``: air or water around the head, ``"bone"``).
    """

    frequency: float = 500e3
    points_per_wavelength: float = 6.0
    mapping: str = "aubry2003"
    source_pressure: float = 60e3
    focal_pressure: float | None = None
    target_dose: float | None = None
    correct: bool = True
    amplitudes: bool = False
    refocus: int = 2
    duration: float = 10.0
    cooling: float = 0.0
    duty: float = 1.0
    period: float | None = None
    heat_dt: float = 0.1
    T0: float = 37.0  # noqa: N815
    perfusion: float | None = None
    specific_heat: float | None = None
    conductivity: float | None = None
    elastic: bool = False
    search_mm: float = 15.0
    margin_mm: float = 5.0
    beyond_mm: float = 20.0
    hu_max: float | None = None
    clip_hu: bool = False
    allow_target_in: tuple[str, ...] = ()

    def check(self, names: Mapping[str, str] | None = None) -> None:
        """A :class:`ProblemError` naming the first setting out of range (by its name in
        ``names`` where given there, e.g. a command's flag)."""
        names = names or {}
        for name, (lo, hi, closed, unit) in RANGES.items():
            v = getattr(self, name)
            if v is None:
                continue
            ok = isinstance(v, int | float | np.number) and np.isfinite(v)
            if not (ok and (lo <= v if closed else lo < v) and v <= hi):
                raise ProblemError(f"{names.get(name, name)} must be "
                                   f"{_range_text(lo, hi, closed, unit)}, got {v}")  # fmt: skip
        self._check_times(names)
        if self.focal_pressure is not None and self.target_dose is not None:
            raise ProblemError(f"{names.get('focal_pressure', 'focal_pressure')} and "
                               f"{names.get('target_dose', 'target_dose')}: give one goal, "
                               "not both")  # fmt: skip
        if not (isinstance(self.refocus, int | np.integer) and 0 <= self.refocus <= 10):
            raise ProblemError(f"refocus must be a whole number from 0 to 10, got {self.refocus}")
        if self.mapping not in MAPPINGS:
            raise ProblemError(f"unknown mapping {self.mapping!r}; known: {sorted(MAPPINGS)}")
        unknown = sorted(set(self.allow_target_in) - set(TARGET_OVERRIDES))
        if unknown:
            raise ProblemError(f"{names.get('allow_target_in', 'allow_target_in')} {unknown}: "
                               f"choose from {sorted(TARGET_OVERRIDES)}")  # fmt: skip

    @property
    def sonication(self) -> Sonication:
        """When the source is on and how the heat run steps."""
        return Sonication(self.duration, self.cooling, self.duty, self.period, self.heat_dt,
                          self.T0)  # fmt: skip

    def _check_times(self, names: Mapping[str, str]) -> None:
        """The thermal step within the sonication, and a pulse's on and off times no shorter
        than the step (else the heating would not see the pulses)."""
        dt, n = self.heat_dt, (lambda k: names.get(k, k))
        if dt > self.duration:
            raise ProblemError(f"{n('heat_dt')} {dt:g} s is longer than {n('duration')} "
                               f"{self.duration:g} s")  # fmt: skip
        if self.period is not None and self.duty < 1:
            on, off = self.period * self.duty, self.period * (1 - self.duty)
            if min(on, off) < dt:
                raise ProblemError(
                    f"{n('period')} {self.period:g} s at {n('duty')} {self.duty:g} is on "
                    f"{on:g} s and off {off:g} s: each must be at least {n('heat_dt')} "
                    f"{dt:g} s"
                )


#: Each numeric setting of :class:`PlanSettings`: (low, high, low included, unit); the high
#: end is included. Wide enough for any plan, narrow enough to catch a wrong unit or a typo.
RANGES: dict[str, tuple[float, float, bool, str]] = {
    "frequency": (20e3, 20e6, True, "Hz"),
    "points_per_wavelength": (2.0, 100.0, True, "points"),
    "source_pressure": (0.0, 100e6, False, "Pa"),
    "focal_pressure": (0.0, 100e6, False, "Pa"),
    "target_dose": (0.0, 1e6, False, "min"),
    "duration": (0.0, 3600.0, False, "s"),
    "cooling": (0.0, 3600.0, True, "s"),
    "duty": (0.0, 1.0, False, ""),
    "period": (0.0, 3600.0, False, "s"),
    "heat_dt": (0.0, 60.0, False, "s"),
    "T0": (20.0, 45.0, True, "degC"),
    "perfusion": (0.0, 1.0, True, "1/s"),
    "specific_heat": (0.0, 1e4, False, "J/(kg K)"),
    "conductivity": (0.0, 10.0, False, "W/(m K)"),
    "search_mm": (0.0, 100.0, False, "mm"),
    "margin_mm": (0.0, 100.0, True, "mm"),
    "beyond_mm": (0.0, 200.0, True, "mm"),
    "hu_max": (250.0, HU_RANGE[1], False, "HU"),
}


def _range_text(lo: float, hi: float, closed: bool, unit: str) -> str:
    """``"positive and at most 10 s"``, ``"from 0 to 10 s"`` or ``"above 1 and at most 10"``."""
    end = f"{hi:g} {unit}".rstrip()
    if closed:
        return f"from {lo:g} to {end}"
    return f"positive and at most {end}" if lo == 0 else f"above {lo:g} and at most {end}"


@dataclass
class Plan:
    """A simulated sonication plan.

    Attributes:
        ct: the image. target, entry: [mm, RAS]. transducer, pose, grid, settings: the setup.
        maps: tissue properties on the grid. thermal: the thermal fields of the heating
            (per tissue class). beams: the water / uncorrected / corrected runs.
        scale: the factor from ``settings.source_pressure`` to the plan's drive.
        p_amp: the plan's pressure amplitude on the grid [Pa]. heat: the thermal run.
        summary: every number and the provenance (JSON-able). timings: seconds per stage.
        elastic: the plan's beams through the elastic skull (at
            ``settings.source_pressure``), when ``settings.elastic``.
        warnings: what the checks of the image found worth saying (one sentence each).
        optimized: the drive optimised for the least skull heating, when asked
            (:mod:`sonotile.planning.optimize`); ``summary["optimized"]`` holds its numbers.
    """

    ct: CTImage
    target: np.ndarray
    entry: np.ndarray
    transducer: Transducer
    settings: PlanSettings
    pose: Pose
    grid: SimulationGrid
    maps: TissueMaps
    thermal: ThermalMaps
    beams: BeamComparison
    scale: float
    p_amp: np.ndarray
    heat: HeatRun
    summary: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    elastic: ElasticBeams | None = None
    warnings: list[str] = field(default_factory=list)
    optimized: OptimizedPlan | None = None

    @property
    def drive(self) -> tuple[np.ndarray, np.ndarray]:
        """The drive the plan uses per element at ``settings.source_pressure`` (amplitude
        [Pa], phase [rad]): the elastic-corrected one where there is one."""
        d = self.elastic or self.beams
        return d.amplitude, d.phase


#: The least distance from the entry point to the target [mm]: closer, the coordinates were
#: most likely given in another unit.
MIN_ENTRY_MM = 1.0


def check_inputs(
    ct: CTImage, target: Sequence[float], entry: Sequence[float], transducer: Transducer | str
) -> tuple[np.ndarray, np.ndarray, Transducer]:
    """Target and entry [mm] as vectors and the transducer, or a :class:`ProblemError`
    saying what is wrong in the caller's terms."""
    t, e = (np.asarray(v, dtype=np.float64).reshape(-1) for v in (target, entry))
    for name, v in (("target", t), ("entry", e)):
        if v.shape != (3,) or not np.isfinite(v).all():
            raise ProblemError(f"{name} must be 3 finite coordinates [mm], got {v.tolist()}")
    gap = float(np.linalg.norm(t - e))
    if gap < 1e-6:
        raise ProblemError(f"entry {e.tolist()} is the target: the beam needs a direction")
    if gap < MIN_ENTRY_MM:
        raise ProblemError(f"entry {e.tolist()} is {gap:.3g} mm from target {t.tolist()}: "
                           "coordinates are millimetres (RAS); were they given in metres "
                           "or centimetres?")  # fmt: skip
    if not ct.contains(t):
        lo, hi = ct.bounds_mm()
        box = ", ".join(f"{a} {u:.1f} .. {v:.1f}" for a, u, v in zip("xyz", lo, hi))
        raise ProblemError(
            f"target {t.tolist()} mm lies outside the image (voxel "
            f"{ct.voxel(t).round(1).tolist()} of {list(ct.shape)}; the image spans {box} mm)"
        )
    tr = transducer if isinstance(transducer, Transducer) else parse_transducer(transducer)
    return t, e, tr


def _check_settings(s: PlanSettings, run: RunSettings, checkpoint: Checkpoint | None) -> None:
    """Each setting of a plan, or a :class:`ProblemError` naming the first one out of range."""
    s.check()
    check_run(run)
    if checkpoint is not None:
        checkpoint.check()
        check_runs_folder(runs_folder(checkpoint.path))


def _check_coupling(maps: TissueMaps, grid: SimulationGrid, tr: Transducer, pose: Pose) -> None:
    """The transducer must sit in the coupling water, not inside the head."""
    ijk = np.rint(grid.index(pose.to_world(tr.element_centres()))).astype(int)
    inside = np.all((ijk >= 0) & (ijk < np.asarray(grid.shape)), axis=1)
    labels = maps.labels[tuple(ijk[inside].T)]
    if np.any(labels != WATER):
        raise ProblemError(
            f"the transducer ({tr.spec}) placed {tr.radius_mm:g} mm from the target along the "
            "entry line touches the head: move the entry or take a longer focal length"
        )


def _summary(p: Plan) -> dict[str, Any]:
    """Every number of a plan and its provenance."""
    s, beams = p.settings, p.beams
    focus = p.elastic.plan if p.elastic else beams.plan
    amplitude, phase = p.drive
    out = {
        "sonotile": __version__, "ct": p.ct.source, "ct_shape": list(p.ct.shape),
        "target_mm": p.target.tolist(), "entry_mm": p.entry.tolist(),
        "transducer": p.transducer.as_dict(),
        "pose": {"position_mm": p.pose.position.tolist(), "axis": p.pose.axis.tolist()},
        "settings": asdict(s), "grid": p.grid.as_dict(), "tissue": p.maps.provenance,
        "thermal": p.thermal.provenance,
        "drive": {"source_pressure_pa": s.source_pressure * p.scale,
                  "amplitude_pa": (amplitude * p.scale).tolist(),
                  "phase_rad": phase.tolist()},
        "beams_at_source_pressure": beams.summary(),
        "elastic_at_source_pressure": None if p.elastic is None else {
            **p.elastic.plan.as_dict(), "over_fluid": p.elastic.plan.peak_pa / beams.plan.peak_pa,
            **p.elastic.summary()},
        "focus": {**focus.as_dict(), "peak_pa": focus.peak_pa * p.scale,
                  "at_target_pa": focus.at_target_pa * p.scale},
        "heat": heat_summary(p.heat, p.maps.labels, p.grid, s.T0),
        "exposure": exposure_summary(p.p_amp, focus, p.grid, p.maps, p.transducer,
                                     amplitude * p.scale, s.frequency, s.duty),
        "skull_path": skull_path(p.maps.labels, p.grid, p.transducer, p.pose, p.target),
        "timings_s": p.timings, "warnings": p.warnings,
    }  # fmt: skip
    o = p.optimized
    if o is not None:  # the optimiser's numbers, with the exposure of its drive
        out["optimized"] = {
            **o.summary,
            "exposure": exposure_summary(
                o.p_amp, o.focus, p.grid, p.maps, p.transducer, o.amplitude, s.frequency, s.duty
            ),
        }
    return out


@dataclass(frozen=True)
class Setup:
    """What a plan simulates on, every input checked (:func:`setup`).

    Attributes:
        image: the CT (clipped where ``clip_hu`` asked). target, entry: [mm, RAS].
        transducer, pose, grid: the transducer, where it is, the simulation grid.
        maps: tissue properties on the grid. warnings: what the checks found worth saying.
    """

    image: CTImage
    target: np.ndarray
    entry: np.ndarray
    transducer: Transducer
    pose: Pose
    grid: SimulationGrid
    maps: TissueMaps
    warnings: list[str]


def setup(
    ct: CTImage | str | os.PathLike,
    target: Sequence[float],
    entry: Sequence[float],
    transducer: Transducer | str,
    settings: PlanSettings,
    *,
    progress: Progress | None = None,
    lap: Callable[[str], None] | None = None,
    also: Sequence[Sequence[float]] = (),
) -> Setup:
    """Read and check everything a plan needs before any simulation: the image (finite HU in
    the physical range, :mod:`~sonotile.planning.imagecheck`), target and entry, the tissue
    properties, the target's tissue, the grid's memory and the transducer in the coupling
    water; a :class:`ProblemError` for the first problem, ``progress`` for each warning.
    ``also``: further targets [mm], checked as the target is."""
    say, lap = progress or (lambda _msg: None), lap or (lambda _name: None)
    s = settings
    s.check()
    image = ct if isinstance(ct, CTImage) else read_ct(ct)
    image, warnings = check_hu(image, clip=s.clip_hu)
    warnings += image_warnings(image)
    for w in warnings:
        say(f"warning: {w}")
    t, e, tr = check_inputs(image, target, entry, transducer)
    lap("image")
    say(f"tissue properties ({s.mapping}) at {s.frequency / 1e3:g} kHz")
    bone = BoneParameters(hu_max=s.hu_max)
    maps = tissue_properties(image.hu, s.mapping, frequency=s.frequency, bone=bone)
    check_target(maps.labels, image, t, s.allow_target_in)
    for extra in also:
        v = np.asarray(extra, dtype=np.float64)
        if not image.contains(v):
            raise ProblemError(f"further target {v.tolist()} mm lies outside the image")
        check_target(maps.labels, image, v, s.allow_target_in)
    pose = Pose.from_target_entry(t.tolist(), e.tolist(), focal_length_mm=tr.radius_mm)
    grid = beam_grid(pose, t.tolist(), s.frequency, points_per_wavelength=s.points_per_wavelength,
                     aperture_mm=tr.aperture_mm, margin_mm=s.margin_mm,
                     beyond_mm=s.beyond_mm)  # fmt: skip
    check_memory(float(np.prod(grid.total_shape, dtype=np.float64)) * GRID_BYTES_PER_POINT,
                 f"the simulation grid {grid.total_shape} ({grid.spacing_mm:.3g} mm)",
                 ": lower the frequency or the points per wavelength, or narrow the margin "
                 "or the length past the target")  # fmt: skip
    on_grid = resample_maps(maps, image, grid)
    _check_coupling(on_grid, grid, tr, pose)
    lap("properties")
    return Setup(image, t, e, tr, pose, grid, on_grid, warnings)


def plan(
    ct: CTImage | str | os.PathLike,
    target: Sequence[float],
    entry: Sequence[float],
    transducer: Transducer | str,
    settings: PlanSettings | None = None,
    *,
    run: RunSettings | None = None,
    progress: Progress | None = None,
    checkpoint: Checkpoint | None = None,
    optimize: OptimizeSettings | bool | None = None,
) -> Plan:
    """Simulate a sonication: the beam from ``transducer`` (a :class:`Transducer` or its spec,
    e.g. ``"array:128:64:64:4"``) placed on the line from ``entry`` to ``target`` [mm, RAS]
    with its geometric focus on the target, through the skull of ``ct`` (a
    :class:`CTImage` or a NIfTI / DICOM path), and the heating it causes. ``progress``
    receives one line per stage. ``run``: how the acoustic runs are stepped and spread over
    devices (:class:`RunSettings`; the heating takes the same devices). ``checkpoint``: the
    finished acoustic runs are kept beside it (:mod:`sonotile.planning.saved_runs`) and the
    heating saves its state there; the plan stops between runs or in the heating (raising
    :class:`~sonotile.api.heating.RunStopped`) and the same call goes on from there. ``optimize``
    (True or an :class:`OptimizeSettings`): after the phase-conjugated plan, the drive with
    the least skull heating at the same focal pressure (:mod:`sonotile.planning.optimize`),
    as ``Plan.optimized``. Write the results with
    :func:`sonotile.planning.outputs.write_plan`."""
    s, run = settings or PlanSettings(), run or RunSettings()
    _check_settings(s, run, checkpoint)
    opt = _optimize_settings(optimize, s, transducer)
    with saved_runs(checkpoint) as kept:
        if kept is not None:
            run = replace(run, saved=kept)
        return _plan(ct, target, entry, transducer, s, run, progress or (lambda _msg: None),
                     checkpoint, opt)  # fmt: skip


def _plan(ct: CTImage | str | os.PathLike, target: Sequence[float], entry: Sequence[float],
          transducer: Transducer | str, s: PlanSettings, run: RunSettings, say: Progress,
          checkpoint: Checkpoint | None, opt: OptimizeSettings | None) -> Plan:  # fmt: skip
    """:func:`plan` with its settings checked (``run.saved``: the finished runs kept)."""
    clock, timings = time.perf_counter(), {}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name], clock = round(now - clock, 3), now

    ready = setup(ct, target, entry, transducer, s, progress=say, lap=lap,
                  also=opt.targets if opt is not None else ())  # fmt: skip
    image, t, e, tr = ready.image, ready.target, ready.entry, ready.transducer
    pose, grid, on_grid = ready.pose, ready.grid, ready.maps
    if opt is not None:
        _check_goals(opt, grid)
    say(f"grid {grid.shape} (+PML {grid.total_shape}) at {grid.spacing_mm:.3g} mm")
    beams, elastic, p_amp = _beams(ready, s, run, say)
    lap("acoustics")
    peak = (elastic.plan if elastic else beams.plan).peak_pa
    say(f"heating: {s.duration:g} s on at duty {s.duty:g}, {s.cooling:g} s cooling")
    thermal = thermal_properties(on_grid, specific_heat=s.specific_heat,
                                 conductivity=s.conductivity, perfusion=s.perfusion)  # fmt: skip
    if run.saved is not None and checkpoint is not None:
        run.saved.check_stop()  # a signal after the last acoustic run
        checkpoint = run.saved.heating(checkpoint)
    scale, p_amp, heat = _heating(ready, s, run, thermal, p_amp, peak, checkpoint, say)
    lap("heat")
    p = Plan(image, t, e, tr, s, pose, grid, on_grid, thermal, beams, scale, p_amp, heat, {},
             timings, elastic, ready.warnings)  # fmt: skip
    _warn(p, boiling(heat, "the plan"), say)
    p.summary = _summary(p)
    if opt is not None:
        p.optimized = optimize_drive(
            drive_problem(p, run), opt, s.focal_pressure, say, dose=s.target_dose
        )
        lap("optimize")
        for w in warnings_of(p.optimized):
            _warn(p, w, say)
        p.summary = _summary(p)
    return p


def _heating(ready: Setup, s: PlanSettings, run: RunSettings, thermal: ThermalMaps,
             p_amp: np.ndarray, peak: float, checkpoint: Checkpoint | None,
             say: Progress) -> tuple[float, np.ndarray, HeatRun]:  # fmt: skip
    """The plan's factor on the drive, its pressure amplitude [Pa] and heating: scaled to
    ``s.focal_pressure`` (``peak``: the unscaled focal peak [Pa]) or to ``s.target_dose`` (a
    first heat run gives the target's rise history, :mod:`.dose_goal`; only the last run is
    checkpointed)."""
    grid = ready.grid
    coefficient = heat_coefficient(ready.maps, s.frequency, s.sonication)

    def heat(factor: float, saved: Checkpoint | None) -> HeatRun:
        q = coefficient * (p_amp.astype(np.float64) * factor) ** 2
        return sonication_heat(q, thermal, grid.spacing_mm, s.sonication,
                               decomposition=run.decomposition, mesh=run.mesh,
                               checkpoint=saved, points=(grid.target_index,))  # fmt: skip

    scale = 1.0 if s.focal_pressure is None else s.focal_pressure / peak
    if s.target_dose is not None:
        probe = heat(scale, None)
        scale *= np.sqrt(power_scale(target_rise(probe, s.T0), s.T0, probe.dt, s.target_dose))
        say(f"dose goal {s.target_dose:g} min at the target: focal peak {peak * scale:.4g} Pa")
    return scale, p_amp * scale, heat(scale, checkpoint)


def _warn(p: Plan, w: str | None, say: Progress) -> None:
    """Keep the warning ``w`` (if any) with the plan and say it."""
    if w:
        p.warnings.append(w)
        say(f"warning: {w}")


def _beams(ready: Setup, s: PlanSettings, run: RunSettings,
           say: Progress) -> tuple[BeamComparison, ElasticBeams | None, np.ndarray]:  # fmt: skip
    """The plan's acoustic runs: the water, uncorrected and corrected beams, through the
    elastic skull too where asked, and the pressure amplitude of the plan's drive [Pa]."""
    grid, tr, pose, on_grid = ready.grid, ready.transducer, ready.pose, ready.maps
    beams = compare_beams(kwave_medium(on_grid), grid, tr, pose, s.frequency,
                          source_pressure=s.source_pressure, correct=s.correct,
                          amplitudes=s.amplitudes, refocus_iterations=s.refocus,
                          search_mm=s.search_mm, run=run, progress=say)  # fmt: skip
    if not s.elastic:
        return beams, None, beams.fields["corrected" if beams.corrected else "uncorrected"]
    elastic = elastic_beams(on_grid, grid, tr.karray(pose, grid), beams, s.frequency,
                            amplitudes=s.amplitudes, search_mm=s.search_mm, run=run,
                            progress=say)  # fmt: skip
    return beams, elastic, elastic.p_amp


def _optimize_settings(optimize: OptimizeSettings | bool | None, s: PlanSettings,
                       transducer: Transducer | str) -> OptimizeSettings | None:  # fmt: skip
    """The optimiser's settings, checked before any work (None: no optimised drive)."""
    if optimize is None or optimize is False:
        return None
    opt = optimize if isinstance(optimize, OptimizeSettings) else OptimizeSettings()
    opt.check()
    tr = transducer if isinstance(transducer, Transducer) else parse_transducer(transducer)
    if tr.kind != "array":
        raise ProblemError(f"an optimised drive needs an array; {tr.spec} has one element")
    if s.elastic:
        raise ProblemError("an optimised drive is found with the fluid model: not with elastic")
    if not s.correct:
        raise ProblemError("an optimised drive starts from the corrected drive: not with "
                           "correct=False")  # fmt: skip
    return opt


def _check_goals(opt: OptimizeSettings, grid: SimulationGrid) -> None:
    """Each further target and the target volume inside the grid's interior."""
    for t in opt.targets:
        i = grid.index(t)
        if np.any(i < 1) or np.any(i > np.asarray(grid.shape) - 2):
            raise ProblemError(f"target {list(t)} mm lies outside the simulation grid around "
                               "the target: take targets nearer the first one")  # fmt: skip
    if opt.volume_mm is not None:
        room = min(min(t, n - 1 - t) for t, n in zip(grid.target_index, grid.shape))
        if opt.volume_mm / grid.spacing_mm > room - 1:
            raise ProblemError(f"a target volume of {opt.volume_mm:g} mm radius does not fit "
                               "the simulation grid around the target")  # fmt: skip
