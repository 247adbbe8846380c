"""Drives optimised beyond phase conjugation: the least skull heating for the focal pressure.

Phase conjugation gives every element the phase that brings its wave to the target in step
with the others: the most focal pressure for a given drive amplitude, blind to where else the
energy goes. Here the drive is chosen for the least peak temperature rise in the skull at the
focal pressure asked, within the array's limits (per-element amplitude, acoustic power), with
the focus held on the target (the peak within ``focus_mm``), its -6 dB volume bounded, and
pressure in the brain outside the focal region below a fraction of the focus:

1. the elements are split into groups of neighbours and each group's conjugated drive is run
   forward once: basis fields ``F_k`` (:mod:`~sonotile.planning.drive_basis`); every drive
   that scales each group by a complex ``c_k`` has the field ``sum_k c_k F_k`` exactly;
2. the skull's hotspots of the conjugated plan's heating, and for each the temperature rise
   there as a quadratic form ``c^H M_j c`` (:mod:`~sonotile.planning.hotspots`);
3. the convex program over ``c`` (:mod:`~sonotile.planning.drive_program`), solved globally;
4. the chosen drive's field heats the whole grid: hotspots that the program did not know
   and bounded points it exceeded join it, and it is solved again, until the whole-grid
   heating agrees with the program's peak;
5. the drive is run forward (no basis, no linearity assumed) and heated: the plan's figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage

from sonotile.api.heating.sonication import HeatRun
from sonotile.model.problem import ProblemError
from sonotile.planning import hotspots
from sonotile.planning.aberration import steering_phase
from sonotile.planning.acoustics import Focus, find_focus, focal_region
from sonotile.planning.dose_goal import power_scale, target_rise
from sonotile.planning.drive_basis import (
    Basis,
    FieldRun,
    basis_drives,
    element_groups,
    run_basis,
)
from sonotile.planning.drive_program import Program, solve
from sonotile.planning.geometry import SimulationGrid
from sonotile.planning.heating import boiling, heat_summary
from sonotile.planning.optimize_settings import AMPLITUDE_HEADROOM, OptimizeSettings
from sonotile.planning.tissue import BRAIN, TRABECULAR

Progress = Callable[[str], None]


#: a whole-grid rise this far (relative) above the program's peak makes a new hotspot
TOLERANCE = 0.01
#: a pressure this far (relative) above its bound joins the program
BOUND_TOLERANCE = 1e-3
#: the bound next to the region the -6 dB focus may fill, as a fraction of the goal: below
#: half, with room for the forward run's difference from the basis
HALF_LEVEL = 0.49
#: bounded points taken into the program per round
POINTS_PER_ROUND = 300
#: a dose goal is met when the predicted heating's factor to it is within this of 1
DOSE_TOLERANCE = 1e-4
#: the most solves at a new focal pressure for a dose goal (one where no limit binds)
DOSE_ROUNDS = 4


@dataclass
class DriveProblem:
    """The conjugated plan an optimised drive starts from, and how to run and heat a drive.

    Attributes:
        grid, labels: the beam grid and its tissue classes. heat_coefficient: ``Q / |p|^2``
            [W/(m^3 Pa^2)]. elements_local, elements_mm: element centres in the
            transducer's frame and on the grid [mm]. power_weight: each element's
            acoustic power per squared amplitude [W/Pa^2]
            (:func:`~sonotile.planning.exposure.power_weights`).
        amplitude, phase: the conjugated drive as the plan drives it [Pa, rad].
        frequency [Hz], steering_speed [m/s]: for aiming the basis at other points.
        conjugated: its pressure amplitude [Pa]; conjugated_heat: its heating.
        T0: body temperature [degC]; duration: time on [s]; search_mm: focus search radius.
        field_run: a drive's complex pressure; heat_run: ``q [W/m^3] -> HeatRun`` on the
            grid; green_run: rows of the heat model on a box
            (:data:`~sonotile.planning.hotspots.GreenRun`).
    """

    grid: SimulationGrid
    labels: np.ndarray = field(repr=False)
    heat_coefficient: np.ndarray = field(repr=False)
    elements_local: np.ndarray = field(repr=False)
    elements_mm: np.ndarray = field(repr=False)
    power_weight: np.ndarray = field(repr=False)
    amplitude: np.ndarray = field(repr=False)
    phase: np.ndarray = field(repr=False)
    frequency: float
    steering_speed: float
    conjugated: np.ndarray = field(repr=False)
    conjugated_heat: HeatRun = field(repr=False)
    T0: float  # noqa: N815
    duration: float
    search_mm: float
    field_run: FieldRun = field(repr=False)
    heat_run: Callable[[np.ndarray], HeatRun] = field(repr=False)
    green_run: hotspots.GreenRun = field(repr=False)

    @property
    def skull(self) -> np.ndarray:
        """Trabecular and cortical bone."""
        return self.labels >= TRABECULAR

    def rise(self, heat: HeatRun) -> np.ndarray:
        """The highest temperature rise of a heat run [K] on the grid."""
        return np.asarray(heat.data["T_max"]) - self.T0

    def power(self, drive: np.ndarray) -> float:
        """The acoustic power [W] of a complex element drive [Pa]."""
        return float(np.sum(np.abs(drive) ** 2 * self.power_weight))


@dataclass
class OptimizedPlan:
    """A plan's optimised drive and what it does, next to the phase-conjugated plan.

    Attributes:
        amplitude, phase: the drive per element as driven [Pa, rad].
        p_amp: its pressure amplitude on the grid [Pa] (a forward run of the drive).
        focus: its focus (absolute pressures). heat: its heating.
        summary: every number (JSON-able): ``focus`` and ``heat`` with the plan's keys,
            ``drive``, ``goal``, ``limits``, ``predicted`` (the optimiser's own figures),
            ``resimulated``, ``conjugated``, ``trade_off``, ``basis``, ``timings_s``.
    """

    amplitude: np.ndarray = field(repr=False)
    phase: np.ndarray = field(repr=False)
    p_amp: np.ndarray = field(repr=False)
    focus: Focus
    heat: HeatRun = field(repr=False)
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class Goals:
    """The program's pressure goals and bounds on the grid (flat indices).

    Attributes:
        index, lo, theta: goal points, the least in-phase pressure there [Pa], its phase.
        cand: every bounded point; hi: the bound at every grid point [Pa] (inf: none);
        active: the bounded points in the program. side_lobe: the side-lobe level kept
        (a fraction of the goal: the setting's, or the conjugated plan's where higher).
    """

    index: np.ndarray
    lo: np.ndarray
    theta: np.ndarray
    cand: np.ndarray
    hi: np.ndarray
    active: np.ndarray
    side_lobe: float


def _ball(grid: SimulationGrid, centre: np.ndarray) -> np.ndarray:
    """Distance [mm] of every grid point from ``centre`` (grid indices)."""
    ijk = np.indices(grid.shape, dtype=np.float32)
    d = ijk - np.reshape(np.asarray(centre, dtype=np.float32), (3, 1, 1, 1))
    return np.linalg.norm(d, axis=0) * grid.spacing_mm


def _goal_points(prob: DriveProblem, s: OptimizeSettings, goal: float,
                 aims: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Flat indices of the goal points and the least pressure asked at each [Pa]: the aim
    points (the target and ``s.targets``) or every point of the target sphere."""
    g = prob.grid
    if s.volume_mm is None:
        idx = [np.ravel_multi_index(tuple(np.rint(g.index(a)).astype(int)), g.shape) for a in aims]
        return np.asarray(idx), np.full(len(idx), goal)
    inside = np.flatnonzero(_ball(g, np.asarray(g.target_index)) <= s.volume_mm)
    return inside, np.full(inside.size, goal * (1 - s.uniformity))


def _allowed(conj: np.ndarray, search: np.ndarray, focus: Focus, grid: SimulationGrid,
             ratio: float) -> np.ndarray:  # fmt: skip
    """Where the -6 dB region may reach: the largest region about the conjugated focus
    where its field is at or above a level (at most half its peak), connected to the peak
    and inside the search sphere, of at most ``ratio`` times its -6 dB volume."""
    i = tuple(int(v) for v in np.rint(grid.index(focus.peak_voxel_mm or focus.position_mm)))
    most = ratio * focus.volume_mm3 / grid.spacing_mm**3

    def region(level: float) -> np.ndarray:
        labels, _ = ndimage.label(search & (conj >= level * float(conj[i])))
        return labels == labels[i]

    lo, hi = 0.05, 0.5
    for _ in range(20):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if region(mid).sum() > most else (mid, hi)
    return region(hi)


def _bounds(prob: DriveProblem, s: OptimizeSettings, goal: float, conj_focus: Focus,
            goal_index: np.ndarray) -> tuple[np.ndarray, float]:  # fmt: skip
    """The bound on the pressure amplitude at every grid point [Pa] (inf: none) and the
    side-lobe level kept: the focus held on the target, its -6 dB region kept within
    ``volume_ratio`` of the conjugated one's (the points next to it below half the goal), the
    side lobes in the brain below ``side_lobe`` of the goal or the conjugated plan's level
    where that is higher, the volume's top."""
    g, conj = prob.grid, prob.conjugated
    hi = np.full(g.shape, np.inf)
    d = _ball(g, np.asarray(g.target_index))
    search = d <= prob.search_mm
    region = focal_region(conj, g, conj_focus)
    if s.volume_mm is None and not s.targets:
        hi[search & (d > max(s.focus_mm, g.spacing_mm))] = goal  # at least the next points
        allowed = _allowed(conj, search, conj_focus, g, s.volume_ratio)
        shell = ndimage.binary_dilation(allowed) & ~allowed & search  # below the level
        hi[shell] = np.minimum(hi[shell], HALF_LEVEL * goal)
        excluded = region
    else:
        reach = float(np.max(d[region])) if region.any() else prob.search_mm
        goals = np.ones(g.shape, bool)
        goals.flat[goal_index] = False  # the distance to the nearest goal point, in one pass
        near = ndimage.distance_transform_edt(goals).astype(np.float32) * g.spacing_mm
        excluded = near <= reach
    side = (prob.labels == BRAIN) & ~excluded
    level = max(s.side_lobe, float(conj[side].max()) / conj_focus.peak_pa if side.any() else 0)
    hi[side] = np.minimum(hi[side], level * goal)
    if s.volume_mm is not None:
        hi.flat[goal_index] = np.minimum(hi.flat[goal_index], goal * (1 + s.uniformity))
    return hi, level


def goals(prob: DriveProblem, s: OptimizeSettings, goal: float, conj_focus: Focus,
          basis: Basis, aims: list[np.ndarray]) -> Goals:  # fmt: skip
    """The goal points, their phases (each that of the basis fields' sum there), every
    bounded point and the first active ones (the conjugated field scaled to the goal
    coming within 0.7 of the bound)."""
    index, lo = _goal_points(prob, s, goal, aims)
    total = basis.fields.reshape(basis.fields.shape[0], -1)[:, index].sum(axis=0)
    hi, level = _bounds(prob, s, goal, conj_focus, index)
    hi = hi.reshape(-1)
    cand = np.flatnonzero(np.isfinite(hi))
    ratio = prob.conjugated.reshape(-1)[cand] * (goal / conj_focus.peak_pa) / hi[cand]
    order = np.argsort(-ratio)[:POINTS_PER_ROUND]
    active = cand[order[ratio[order] >= 0.7]]
    return Goals(index, lo, np.angle(total), cand, hi, active, level)


@dataclass
class State:
    """The program as it grows: the hotspots and their forms, the goals and bounds."""

    hot: list[hotspots.Index]
    forms: list[np.ndarray]
    goals: Goals
    status: str = "optimal"  # the convex solver's on the last program (cvxpy's name)


def _add_hotspots(prob: DriveProblem, basis: Basis, st: State, new: list[hotspots.Index],
                  half: int) -> None:  # fmt: skip
    """The new hotspots' rows of the heat model (on one box around them all) and their
    quadratic forms into ``st``."""
    if not new:
        return
    box = hotspots.covering_box(new, half, prob.grid.shape)
    inside = [(i - box[0].start, j - box[1].start, k - box[2].start) for i, j, k in new]
    rows = prob.green_run(inside, box)
    for ijk, g in zip(new, rows):
        st.hot.append(ijk)
        st.forms.append(hotspots.quadratic_form(g, box, prob.heat_coefficient, basis.fields))


def program(prob: DriveProblem, basis: Basis, st: State, limits: dict[str, float | None],
            goal: float, t_ref: float, factor: float = 1.0) -> Program:  # fmt: skip
    """The convex program of ``st`` with every pressure goal and bound times ``factor``."""
    flat = basis.fields.reshape(basis.fields.shape[0], -1)
    gs = st.goals
    power = None
    if limits["max_power"] is not None:
        d = basis.drives
        power = (np.conj(d).T * prob.power_weight) @ d
    return Program(st.forms, flat[:, gs.index].T, gs.lo * factor, gs.theta,
                   flat[:, gs.active].T, gs.hi[gs.active] * factor, basis.drives,
                   limits["max_amplitude"], power, limits["max_power"], goal * factor,
                   t_ref)  # fmt: skip


def _round(prob: DriveProblem, basis: Basis, st: State, c: np.ndarray, t: float,
           half: int, per_round: int) -> tuple[bool, HeatRun]:  # fmt: skip
    """Heat the whole grid with the field of ``c``; rescale the hotspots' forms to it
    (:func:`_recalibrate`); add up to ``per_round`` hotspots hotter than the program's peak
    ``t`` [K] and the most exceeded bounds. True when nothing was added or changed."""
    p = basis.field(c)
    amp = np.abs(p)
    heat = prob.heat_run(prob.heat_coefficient * amp**2)
    rise = prob.rise(heat)
    top = float(rise[prob.skull].max()) if prob.skull.any() else 0.0
    recalibrated = _recalibrate(st, c, rise, t)
    new: list[hotspots.Index] = []
    if top > t * (1 + TOLERANCE):
        new = hotspots.select(rise, prob.skull, per_round, fraction=t * (1 + TOLERANCE) / top,
                              apart=0, exclude=st.hot)  # fmt: skip
        _add_hotspots(prob, basis, st, new, half)
    gs = st.goals
    over = amp.reshape(-1)[gs.cand] / gs.hi[gs.cand] - 1
    worst = np.argsort(-over)[:POINTS_PER_ROUND]
    fresh = np.setdiff1d(gs.cand[worst[over[worst] > BOUND_TOLERANCE]], gs.active)
    gs.active = np.union1d(gs.active, fresh)
    old = gs.theta.copy()
    if len(gs.index) > 1:
        gs.theta = np.angle(p.reshape(-1)[gs.index])
    turned = bool(np.max(np.abs(np.angle(np.exp(1j * (gs.theta - old))))) > 0.05)
    return not (new or fresh.size or turned or recalibrated), heat


def _recalibrate(st: State, c: np.ndarray, rise: np.ndarray, t: float) -> bool:
    """Scale each hotspot's form to the whole grid's rise there [K] where they differ by more
    than :data:`TOLERANCE` (the box a form is made on misses what the spectral heat model
    carries from farther away: a few percent through the skull). True when a hotspot that
    binds the program's peak ``t`` [K], or exceeds it on the whole grid, was changed."""
    changed = False
    for j, (ijk, m) in enumerate(zip(st.hot, st.forms)):
        prog, true = float(np.real(np.conj(c) @ m @ c)), float(rise[ijk])
        if prog <= 0 or abs(true / prog - 1) <= TOLERANCE:
            continue
        st.forms[j] = m * (true / prog)
        changed = changed or true > t * (1 + TOLERANCE) or prog >= t * (1 - TOLERANCE)
    return changed


def warnings_of(o: OptimizedPlan) -> list[str]:
    """What a plan's warnings say of the optimised drive ``o``: a program solved only to a
    reduced accuracy, rounds that ended before the program knew every hotspot, and tissue it
    boils."""
    s, out = o.summary, [boiling(o.heat, "the optimised drive")]
    if s.get("solver_status") == "optimal_inaccurate":
        out.insert(
            0,
            "the convex solver found the optimised drive's last program only to "
            "a reduced accuracy (cvxpy: optimal_inaccurate); the figures reported are "
            "the forward re-simulation's of that drive, but a better drive may exist",
        )
    if not s["converged"]:
        out.insert(0, f"the optimised drive's program ended after {s['rounds']} rounds with its "
                   f"own peak skull rise {s['predicted']['program_skull_rise_K']:.3g} K below "
                   f"the whole grid's {s['predicted']['skull_rise_K']:.3g} K: more rounds "
                   "(OptimizeSettings.rounds) may lower it further")  # fmt: skip
    return [w for w in out if w]


def _limits(prob: DriveProblem, s: OptimizeSettings) -> dict[str, float | None]:
    """The amplitude and power caps the drive keeps [Pa, W]."""
    cap = s.max_amplitude
    if cap is None:
        cap = AMPLITUDE_HEADROOM * float(np.max(prob.amplitude))
    return {"max_amplitude": cap, "max_power": s.max_power}


def _aims(prob: DriveProblem, s: OptimizeSettings) -> list[np.ndarray]:
    """The points the basis is aimed at [mm]: the target, the further targets, and for a
    volume six points on its surface along the grid's axes."""
    t = prob.grid.world(prob.grid.target_index)
    aims = [t] + [np.asarray(v, dtype=np.float64) for v in s.targets]
    if s.volume_mm is not None:
        axes = prob.grid.affine[:3, :3] / prob.grid.spacing_mm
        aims += [t + sign * s.volume_mm * axes[:, k] for k in range(3) for sign in (-1, 1)]
    return aims


def _basis(prob: DriveProblem, s: OptimizeSettings, aims: list[np.ndarray],
           say: Progress) -> Basis:  # fmt: skip
    """The basis fields: each group's conjugated drive aimed at each aim point."""
    group = element_groups(prob.elements_local, s.groups)
    target = prob.grid.world(prob.grid.target_index)
    phases = [prob.phase + steering_phase(prob.elements_mm, target, a, prob.frequency,
                                          prob.steering_speed) for a in aims]  # fmt: skip
    drives = basis_drives(prob.amplitude, phases, group)
    return run_basis(drives, int(group.max()) + 1, prob.field_run, say)


def trade_off(prob: DriveProblem, basis: Basis, st: State, limits: dict[str, float | None],
              goal: float, t_ref: float, conj: dict[str, float],
              n: int) -> dict[str, Any]:  # fmt: skip
    """Peak skull rise against focal pressure: the optimised drive's (the program, its
    hotspots as they stand) and the conjugated drive scaled (linear acoustics: the rise
    grows as the pressure squared), each where the limits allow it."""
    factors = np.linspace(0.25, 1.5, n) if n else np.zeros(0)
    opt: list[float | None] = []
    for f in factors:
        try:
            opt.append(solve(program(prob, basis, st, limits, goal, t_ref, float(f)))[1])
        except ProblemError:
            opt.append(None)
    room = float(limits["max_amplitude"] or np.inf) / float(np.max(prob.amplitude))
    if limits["max_power"] is not None:
        room = min(room, np.sqrt(limits["max_power"] / conj["power_w"]))
    pressures = goal * factors
    scaled = [conj["skull_rise_K"] * (q / conj["focal_pressure_pa"]) ** 2
              if q <= conj["focal_pressure_pa"] * room else None for q in pressures]  # fmt: skip
    return {"focal_pressure_pa": pressures.tolist(), "optimized_skull_rise_K": opt,
            "conjugated_skull_rise_K": scaled}  # fmt: skip


def _conjugated(prob: DriveProblem, focus: Focus) -> dict[str, float]:
    """The conjugated plan's figures: focal pressure [Pa], peak skull rise [K], acoustic
    power [W], largest element amplitude [Pa]."""
    rise = prob.rise(prob.conjugated_heat)
    return {"focal_pressure_pa": focus.peak_pa,
            "skull_rise_K": float(rise[prob.skull].max()) if prob.skull.any() else 0.0,
            "power_w": prob.power(prob.amplitude * np.exp(1j * prob.phase)),
            "max_amplitude_pa": float(np.max(prob.amplitude))}  # fmt: skip


def _solve_rounds(prob: DriveProblem, s: OptimizeSettings, basis: Basis, st: State,
                  limits: dict[str, float | None], goal: float, t_ref: float,
                  say: Progress) -> tuple[np.ndarray, float, HeatRun, int]:  # fmt: skip
    """Solve, heat the whole grid, add what the program missed, until nothing is added:
    the coefficients, the program's peak rise [K], the whole-grid heating, the rounds."""
    half = hotspots.box_halfwidth(prob.duration, prob.grid.spacing_mm)
    for r in range(1, s.rounds + 1):
        prog = program(prob, basis, st, limits, goal, t_ref)
        c, t = solve(prog)
        st.status = prog.status
        done, heat = _round(prob, basis, st, c, t, half, s.hotspots)
        say(f"round {r}: skull rise {t:.3g} K by the program ({len(st.hot)} hotspots, "
            f"{st.goals.active.size} bounded points)")  # fmt: skip
        if done:
            break
    return c, t, heat, r


def _solve_for_goal(prob: DriveProblem, s: OptimizeSettings, basis: Basis, st: State,
                    limits: dict[str, float | None], goal: float, conj: dict[str, float],
                    dose: float | None, aims: list[np.ndarray], conj_focus: Focus,
                    say: Progress) -> tuple[np.ndarray, float, HeatRun, int, float]:  # fmt: skip
    """:func:`_solve_rounds` at the focal pressure ``goal`` [Pa]; with a ``dose`` goal at the
    target [CEM43 min], again at the pressure where the drive's heating reaches that dose
    (:func:`~sonotile.planning.dose_goal.power_scale`: exact in one step unless a limit
    binds). Also returns the focal pressure the drive was solved for."""
    for i in range(DOSE_ROUNDS):
        t_ref = max(conj["skull_rise_K"] * (goal / conj["focal_pressure_pa"]) ** 2, 1e-6)
        c, t, heat, rounds = _solve_rounds(prob, s, basis, st, limits, goal, t_ref, say)
        if dose is None:
            break
        k = power_scale(target_rise(heat, prob.T0), prob.T0, heat.dt, dose)
        if abs(k - 1) <= DOSE_TOLERANCE or i == DOSE_ROUNDS - 1:
            break
        goal *= float(np.sqrt(k))
        st.goals = goals(prob, s, goal, conj_focus, basis, aims)
        say(f"dose goal {dose:g} min at the target: focal pressure goal {goal:.4g} Pa")
    return c, t, heat, rounds, goal


def optimize_drive(prob: DriveProblem, s: OptimizeSettings | None = None,
                   goal: float | None = None, progress: Progress | None = None,
                   dose: float | None = None) -> OptimizedPlan:  # fmt: skip
    """The drive with the least peak skull rise for the focal pressure ``goal`` [Pa] (None:
    the conjugated plan's), or for the thermal ``dose`` at the target [CEM43 min] (then
    ``goal`` is where the search starts), within the limits of ``s`` (the module's
    docstring)."""
    say, s = progress or (lambda _msg: None), s or OptimizeSettings()
    s.check()
    if prob.amplitude.size < 2:
        raise ProblemError("an optimised drive needs an array: a bowl has one element")
    clock, timings = time.perf_counter(), {}
    target = prob.grid.world(prob.grid.target_index)
    conj_focus = find_focus(prob.conjugated, prob.grid, target, prob.search_mm)
    conj = _conjugated(prob, conj_focus)
    goal = float(goal or conj_focus.peak_pa)
    limits, aims = _limits(prob, s), _aims(prob, s)
    say(f"optimised drive: {min(s.groups, prob.amplitude.size)} groups x {len(aims)} aim "
        "point(s), one forward run each")  # fmt: skip
    basis = _basis(prob, s, aims, say)
    timings["basis"] = time.perf_counter() - clock
    first = hotspots.select(prob.rise(prob.conjugated_heat), prob.skull, s.hotspots)
    if not first:
        raise ProblemError("the conjugated plan does not heat the skull: nothing to spare")
    st = State([], [], goals(prob, s, goal, conj_focus, basis, aims))
    _add_hotspots(prob, basis, st, first,
                  hotspots.box_halfwidth(prob.duration, prob.grid.spacing_mm))  # fmt: skip
    c, t, heat_p, rounds, goal = _solve_for_goal(prob, s, basis, st, limits, goal, conj, dose,
                                                 aims, conj_focus, say)  # fmt: skip
    t_ref = max(conj["skull_rise_K"] * (goal / conj["focal_pressure_pa"]) ** 2, 1e-6)
    timings["program"] = time.perf_counter() - clock - timings["basis"]
    predicted = basis.field(c)
    drive = basis.drive(c)
    say("forward run of the optimised drive")
    forward = prob.field_run(np.abs(drive), np.angle(drive))
    p_amp = np.abs(forward)
    focus = find_focus(p_amp, prob.grid, target, prob.search_mm)
    heat = prob.heat_run(prob.heat_coefficient * p_amp.astype(np.float64) ** 2)
    timings["forward"] = time.perf_counter() - clock - sum(timings.values())
    curve = trade_off(prob, basis, st, limits, goal, t_ref, conj, s.trade_off_points)
    timings["trade_off"] = time.perf_counter() - clock - sum(timings.values())
    out = OptimizedPlan(np.abs(drive), np.angle(drive), p_amp, focus, heat)
    out.summary = _summary(prob, s, out, basis, predicted, heat_p, t, conj, limits, goal, curve,
                           rounds, len(st.hot), st.goals.side_lobe, timings, dose,
                           st.status)  # fmt: skip
    return out


def _summary(prob: DriveProblem, s: OptimizeSettings, out: OptimizedPlan, basis: Basis,
             predicted: np.ndarray, heat_p: HeatRun, t: float, conj: dict[str, float],
             limits: dict[str, float | None], goal: float, curve: dict[str, Any],
             rounds: int, n_hot: int, side_lobe: float, timings: dict[str, float],
             dose: float | None = None, status: str = "optimal") -> dict[str, Any]:  # fmt: skip
    """Every number of an optimised drive (JSON-able); the conjugated plan's skull rise is
    compared at the same focal pressure, or with a ``dose`` goal at the same dose."""
    g, target = prob.grid, prob.grid.world(prob.grid.target_index)
    pred = find_focus(np.abs(predicted), g, target, prob.search_mm)
    heat = heat_summary(out.heat, prob.labels, g, prob.T0)
    rise_p = prob.rise(heat_p)
    w = out.amplitude * np.exp(1j * out.phase)
    power, top = prob.power(w), float(np.max(out.amplitude))
    binding = [n for n, v, cap in (("max_amplitude", top, limits["max_amplitude"]),
                                   ("max_power", power, limits["max_power"]))
               if cap is not None and v >= cap * (1 - 1e-3)]  # fmt: skip
    conj_at_goal = conj["skull_rise_K"] * (
        (goal / conj["focal_pressure_pa"]) ** 2 if dose is None
        else power_scale(target_rise(prob.conjugated_heat, prob.T0), prob.T0,
                         prob.conjugated_heat.dt, dose))  # fmt: skip
    first = basis.fields[basis.aim == 0].sum(axis=0)
    rise = heat["skull_rise_K"] or 0.0
    return {
        "focus": out.focus.as_dict(), "heat": heat,
        "drive": {"amplitude_pa": out.amplitude.tolist(), "phase_rad": out.phase.tolist(),
                  "power_w": power, "max_amplitude_pa": top},
        "goal": {"focal_pressure_pa": goal, "dose_min": dose,
                 "targets_mm": [target.tolist(), *map(list, s.targets)],
                 "volume_mm": s.volume_mm, "uniformity": s.uniformity},
        "limits": {**limits, "focus_mm": s.focus_mm, "volume_ratio": s.volume_ratio,
                   "side_lobe": s.side_lobe, "side_lobe_kept": side_lobe, "binding": binding},
        "predicted": {"focal_pressure_pa": pred.peak_pa, "at_target_pa": pred.at_target_pa,
                      "error_mm": pred.error_mm, "volume_mm3": pred.volume_mm3,
                      "skull_rise_K": float(rise_p[prob.skull].max()),
                      "program_skull_rise_K": t,
                      "cem43_at_target_min": float(heat_p.data["cem43"][g.target_index])},
        "resimulated": {"max_field_difference": float(np.max(np.abs(out.p_amp - np.abs(predicted)))
                                                      / np.max(np.abs(predicted))),
                        "focal_pressure_pa": out.focus.peak_pa, "skull_rise_K": rise},
        "conjugated": {**conj, "skull_rise_at_goal_K": conj_at_goal},
        "skull_rise_reduction": 1 - rise / conj_at_goal if conj_at_goal > 0 else None,
        "trade_off": {**curve, "conjugated": {"focal_pressure_pa": conj["focal_pressure_pa"],
                                              "skull_rise_K": conj["skull_rise_K"]},
                      "optimized": {"focal_pressure_pa": out.focus.peak_pa, "skull_rise_K": rise}},
        "basis": {"groups": int(basis.group.max()) + 1, "aims": int(basis.aim.max()) + 1,
                  "runs": int(basis.fields.shape[0]),
                  "linearity_error": float(np.max(np.abs(np.abs(first) - prob.conjugated))
                                           / np.max(prob.conjugated))},
        "hotspots": n_hot, "rounds": rounds, "solver_status": status, "settings": asdict(s),
        "converged": bool(float(rise_p[prob.skull].max()) <= t * (1 + TOLERANCE)),
        "timings_s": {k: round(v, 3) for k, v in timings.items()},
    }  # fmt: skip
