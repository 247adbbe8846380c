"""Continuous-wave acoustic runs of a plan on its beam grid: the steady-state field of a
transducer driven with per-element amplitudes and phases, the response at the elements to a
point source at the target (for aberration correction), and the focus of a field: its peak,
position, -6 dB volume and -6 dB length and widths.

Each run is a fluid :func:`sonotile.api.simulate` on the grid's interior with the PML outside
(``grid.options()``), long enough for the wave to reach past the target and settle
(:class:`RunSettings`), the steady state read by the single-frequency DFT ``p_cw`` over the
last periods.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import ndimage

from sonotile.api.types import KSensor, KSource, KWaveGrid, KWaveMedium, Options
from sonotile.model.array import KWaveArray
from sonotile.model.problem import ProblemError
from sonotile.model.signals import create_cw_signals
from sonotile.planning.geometry import SimulationGrid

if TYPE_CHECKING:
    from sonotile.planning.saved_runs import SavedRuns


@dataclass(frozen=True)
class RunSettings:
    """How long and how finely a CW run is stepped.

    The time step is the largest Courant number (at the fastest sound speed) between ``cfl``
    and ``cfl_max`` whose phase-speed error at the drive frequency in the slowest medium stays
    within ``phase_error`` (the k-space scheme is exact at the reference speed, the fastest,
    and errs by ``x^2 (1 - (c_min / c_max)^2) / 24`` at ``x = c_max k dt``); fine grids take
    longer steps, up to :data:`STABLE_FRACTION` of the solver's stability limit, which
    power-law absorption sets (:func:`stable_step`). The run lasts until the wave has crossed
    ``crossings`` times the path from the transducer to ``reach_mm`` past the target at the
    slowest speed, plus
    ``settle_periods`` periods (the 4-period start-up ramp and the settling after it).

    Attributes:
        cfl: Courant number always allowed. cfl_max: the largest taken (stable below about
            0.58 in 3-D with the k-space correction at the fastest speed).
        phase_error: the largest relative phase-speed error allowed for a step above ``cfl``.
        crossings: the run lasts this many crossings of the path ...
        reach_mm: ... from the transducer to this far past the target [mm] ...
        settle_periods: ... plus this many periods of the drive frequency.
        cw_periods: periods at the end over which amplitude and phase are taken.
        decomposition, mesh: how each run is spread over devices (``sonotile.api.simulate``'s
            ``decomposition``: single, pencil, lfb or auto; ``mesh``: devices per split axis).
        elastic_cfl: Courant number of the elastic runs (no k-space correction).
        elastic_interface: the elastic runs' fluid-solid interfaces: ``"kwave"`` (k-Wave's
            scheme) or ``"slip"`` (the water slips along the bone; one device:
            :mod:`sonotile.physics.elastic.slip`, docs/elastic.md).
        saved: where finished runs are kept and read back (a plan with a checkpoint,
            :mod:`sonotile.planning.saved_runs`); None: every run is run.
    """

    cfl: float = 0.3
    cfl_max: float = 0.5
    phase_error: float = 0.01
    crossings: float = 1.0
    reach_mm: float = 15.0
    settle_periods: float = 12.0
    cw_periods: float = 3.0
    decomposition: str = "single"
    mesh: tuple[int, ...] | None = None
    elastic_cfl: float = 0.3
    elastic_interface: str = "kwave"
    saved: SavedRuns | None = field(default=None, compare=False, repr=False)

    def courant(self, dx: float, frequency: float, c_min: float, c_max: float) -> float:
        """The Courant number (at ``c_max``) of a fluid run on spacing ``dx`` [m] at
        ``frequency`` [Hz] through speeds ``c_min`` to ``c_max`` [m/s]."""
        spread = 1.0 - (c_min / c_max) ** 2
        if spread <= 0:  # one speed: the k-space step is exact
            return self.cfl_max
        x = np.sqrt(24.0 * self.phase_error / spread)  # c_max k dt at the error allowed
        k_dx = 2 * np.pi * frequency * dx / c_min
        return float(min(self.cfl_max, max(self.cfl, x / k_dx)))

    def run_or_read(self, inputs: tuple[Any, ...], go: Callable[[], Any]) -> Any:
        """``go()``'s records, or (a plan that keeps its runs) those kept in :attr:`saved` for
        the run that ``inputs`` describe, run and kept first when there are none."""
        return go() if self.saved is None else self.saved.run(inputs, go)


#: the decompositions a plan's runs take (``sonotile.api.simulate``'s)
DECOMPOSITIONS = ("single", "pencil", "lfb", "auto")


def check_run(run: RunSettings) -> None:
    """A :class:`ProblemError` naming the first setting of ``run`` out of range."""
    for name in ("cfl", "cfl_max", "phase_error", "crossings", "settle_periods", "cw_periods",
                 "elastic_cfl"):  # fmt: skip
        v = getattr(run, name)
        if not (np.isfinite(v) and v > 0):
            raise ProblemError(f"{name} must be positive, got {v}")
    if run.cfl > run.cfl_max:
        raise ProblemError(f"cfl {run.cfl} is above cfl_max {run.cfl_max}")
    if not run.reach_mm >= 0:
        raise ProblemError(f"reach_mm must be >= 0, got {run.reach_mm}")
    if run.decomposition not in DECOMPOSITIONS:
        raise ProblemError(f"decomposition must be one of {DECOMPOSITIONS}, "
                           f"got {run.decomposition!r}")  # fmt: skip
    if run.mesh is not None and (
        len(run.mesh) not in (1, 2) or any(int(m) != m or m < 1 for m in run.mesh)
    ):
        raise ProblemError(f"mesh must be one or two whole numbers >= 1, got {run.mesh}")
    if run.mesh is not None and run.decomposition == "single":
        raise ProblemError("a mesh needs a decomposition (pencil, lfb or auto)")
    if run.elastic_interface not in ("kwave", "slip"):
        raise ProblemError(f"elastic_interface must be 'kwave' or 'slip', "
                           f"got {run.elastic_interface!r}")  # fmt: skip
    if run.elastic_interface == "slip" and run.decomposition in ("pencil", "lfb"):
        raise ProblemError(f"elastic_interface 'slip' runs on one device: not with "
                           f"decomposition {run.decomposition!r}")  # fmt: skip


#: the fraction of the solver's stability limit a fluid run's time step stays within
STABLE_FRACTION = 0.9


def stable_step(kgrid: KWaveGrid, medium: KWaveMedium, grid: SimulationGrid) -> float:
    """k-Wave's largest stable time step [s] of ``medium`` on ``kgrid`` (with ``grid``'s
    PML): power-law absorption bounds it below the lossless k-space scheme's (no bound)."""
    from sonotile.api.problem import build_problem
    from sonotile.physics.acoustic.checks import stability_limit

    probe = KWaveGrid(kgrid.shape, kgrid.spacing)
    probe.dt, probe.nt = 1e-9, 1
    point = np.zeros(kgrid.shape, bool)
    point.flat[0] = True
    problem, _ = build_problem(probe, medium, KSource(p_mask=point, p=np.zeros((1, 1))),
                               KSensor(mask=point), Options(**grid.options()))  # fmt: skip
    return float(stability_limit(problem))


def steps_per_period(dt: float, frequency: float) -> int:
    """The fewest whole time steps per period of ``frequency`` [Hz] with a step no longer
    than ``dt`` [s]."""
    return int(np.ceil(1.0 / (frequency * dt) - 1e-9))


def make_kgrid(
    grid: SimulationGrid,
    medium: KWaveMedium,
    frequency: float,
    run: RunSettings,
    cfl: float | None = None,
    reach_mm: float | None = None,
) -> KWaveGrid:
    """The k-Wave grid of ``grid``'s interior with its time axis [s] for a CW run (the fluid
    runs' Courant number, :meth:`RunSettings.courant`, unless ``cfl`` is given; the path
    reaches ``reach_mm`` past the target, ``run.reach_mm`` unless given). The step is
    shortened to a whole number of steps per period, so the DFT over the last periods
    (``p_cw``) takes whole periods and an exported run (:mod:`.export`) steps alike."""
    dx = grid.spacing_mm * 1e-3
    kgrid = KWaveGrid(grid.shape, dx)
    c = np.asarray(medium.sound_speed)
    c_min, c_max = float(c.min()), float(c.max())
    courant = run.courant(dx, frequency, c_min, c_max) if cfl is None else cfl
    dt = courant * dx / c_max
    if cfl is None:  # an absorbing medium may need a shorter step (fluid runs)
        dt = min(dt, STABLE_FRACTION * stable_step(kgrid, medium, grid))
    kgrid.dt = 1.0 / (frequency * steps_per_period(dt, frequency))
    target = np.asarray(grid.target_index, dtype=np.float64)
    reach = run.reach_mm if reach_mm is None else reach_mm
    path = dx * float(np.linalg.norm(target - grid.source_index)) + reach * 1e-3
    t_end = run.crossings * path / c_min + run.settle_periods / frequency
    kgrid.nt = int(np.ceil(t_end / kgrid.dt))
    return kgrid


def _simulate(kgrid: KWaveGrid, medium: KWaveMedium, source: KSource, sensor: KSensor,
              grid: SimulationGrid, run: RunSettings) -> Any:  # fmt: skip
    """One fluid run of the plan (read back when ``run.saved`` holds it)."""

    def go() -> Any:
        from sonotile.api.simulation import simulate  # JAX, imported when a run starts

        return simulate(kgrid, medium, source, sensor, progress=False, quiet=True,
                        decomposition=run.decomposition, mesh=run.mesh,
                        **grid.options())  # fmt: skip

    return run.run_or_read((kgrid, medium, source, sensor, grid.options(), run), go)


def cw_source_signals(
    karray: KWaveArray,
    kgrid: KWaveGrid,
    frequency: float,
    amplitude: np.ndarray,
    phase: np.ndarray,
) -> np.ndarray:
    """The array's distributed source signals ``(n_mask_points, Nt)`` (float32) for the drive
    ``amplitude[e] sin(2 pi f t + phase[e])`` [Pa] with k-Wave's 4-period ramp, as
    ``karray.get_distributed_source_signal(kgrid, create_cw_signals(...))`` gives them, made
    from two signals: each point's ``X sin(2 pi f t) + Y cos(2 pi f t)`` (times the ramp) with
    ``X``, ``Y`` its weighted sums of ``amplitude cos(phase)`` and ``amplitude sin(phase)``
    (a fraction of the time and of the memory of one signal per element)."""
    a, ph = np.asarray(amplitude, dtype=np.float64), np.asarray(phase, dtype=np.float64)
    basis = create_cw_signals(kgrid.t, frequency, np.ones(2), np.array([0.0, np.pi / 2]))
    xy = karray.get_distributed_source_signal(kgrid, np.stack([a * np.cos(ph), a * np.sin(ph)], 1))
    return np.asarray(xy, dtype=np.float32) @ basis.astype(np.float32)


def cw_field(
    medium: KWaveMedium,
    grid: SimulationGrid,
    karray: KWaveArray,
    amplitude: np.ndarray,
    phase: np.ndarray,
    frequency: float,
    run: RunSettings | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Steady-state pressure amplitude [Pa] and phase [rad] on ``grid.shape`` of the
    transducer driven with ``amplitude[e] sin(2 pi f t + phase[e])`` [Pa] per element
    (an additive pressure source, k-Wave's 4-period ramp)."""
    run = run or RunSettings()
    kgrid = make_kgrid(grid, medium, frequency, run)
    source = KSource(
        p_mask=karray.get_array_binary_mask(kgrid),
        p=cw_source_signals(karray, kgrid, frequency, amplitude, phase),
        p_mode="additive",
    )
    at_target = np.zeros(grid.shape, bool)
    at_target[grid.target_index] = True
    sensor = KSensor(mask=at_target, record=("p_cw_all",), cw_frequency=frequency,
                     cw_periods=run.cw_periods)  # fmt: skip
    res = _simulate(kgrid, medium, source, sensor, grid, run)
    return np.asarray(res["p_cw_amp_all"]), np.asarray(res["p_cw_phase_all"])


def element_response(
    medium: KWaveMedium,
    grid: SimulationGrid,
    karray: KWaveArray,
    frequency: float,
    run: RunSettings | None = None,
    source_index: tuple[int, int, int] | None = None,
) -> np.ndarray:
    """Complex steady-state pressure ``A exp(i phase)`` at each element (averaged over its
    surface) from a CW point source at ``source_index`` (default: the grid's target point):
    ``(n_elements,)``. Only the elements are read, so the run lasts for the path from the
    target to the transducer (no ``reach_mm`` past the target) plus the settling."""
    run = run or RunSettings()
    kgrid = make_kgrid(grid, medium, frequency, run, reach_mm=0.0)
    mask = np.zeros(grid.shape, bool)
    mask[grid.target_index if source_index is None else source_index] = True
    sig = create_cw_signals(kgrid.t, frequency, np.array([1e3]), np.array([0.0]))
    source = KSource(p_mask=mask, p=sig.astype(np.float32), p_mode="additive")
    element_mask = karray.get_array_binary_mask(kgrid)
    sensor = KSensor(mask=element_mask, record=("p_cw",), cw_frequency=frequency,
                     cw_periods=run.cw_periods)  # fmt: skip
    res = _simulate(kgrid, medium, source, sensor, grid, run)
    return element_phasors(karray, kgrid, res["p_cw_amp"], res["p_cw_phase"])


def element_phasors(
    karray: KWaveArray, kgrid: KWaveGrid, amp: np.ndarray, phase: np.ndarray
) -> np.ndarray:
    """Each element's complex pressure ``A exp(i phase)``, averaged over its surface, from the
    ``p_cw`` amplitude [Pa] and phase [rad] recorded at the array's mask points."""
    amp, phase = np.asarray(amp), np.asarray(phase)
    re = karray.combine_sensor_data(kgrid, (amp * np.cos(phase))[:, None])[:, 0]
    im = karray.combine_sensor_data(kgrid, (amp * np.sin(phase))[:, None])[:, 0]
    return re + 1j * im


@dataclass(frozen=True)
class Focus:
    """The focus of a pressure amplitude field.

    Attributes:
        peak_pa: the largest amplitude within the search sphere [Pa].
        position_mm: its position (sub-voxel, parabolic fit per axis) [mm, RAS].
        error_mm: its distance from the target [mm].
        at_target_pa: the amplitude at the target's grid point [Pa].
        volume_mm3: the -6 dB focal volume: points within the search sphere at or above half
            the peak, connected to it [mm^3].
        length_mm: the -6 dB focal length along the beam axis (the grid's last axis) [mm];
            width_mm: the -6 dB widths across it (the grid's first two axes) [mm]; each from
            the profile through the peak (:func:`focal_size`); None where the profile does
            not fall to half its peak inside the grid.
        peak_voxel_mm: the grid point of the peak [mm, RAS] (``position_mm`` refines it);
            peak_voxel_error_mm: its distance from the target [mm].
    """

    peak_pa: float
    position_mm: tuple[float, float, float]
    error_mm: float
    at_target_pa: float
    volume_mm3: float
    length_mm: float | None = None
    width_mm: tuple[float | None, float | None] = (None, None)
    peak_voxel_mm: tuple[float, float, float] | None = None
    peak_voxel_error_mm: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain values (for JSON)."""
        return asdict(self)


def _refine(p: np.ndarray, i: tuple[int, ...]) -> np.ndarray:
    """Sub-voxel peak position about the integer maximum ``i`` (parabola per axis)."""
    out = np.asarray(i, dtype=np.float64)
    for ax in range(p.ndim):
        if 0 < i[ax] < p.shape[ax] - 1:
            lo, hi = list(i), list(i)
            lo[ax], hi[ax] = i[ax] - 1, i[ax] + 1
            a, b, c = p[tuple(lo)], p[i], p[tuple(hi)]
            den = a - 2 * b + c
            out[ax] += 0.5 * (a - c) / den if den < 0 else 0.0
    return out


def _log_vertex(a: float, b: float, c: float) -> float:
    """Peak of the parabola through ``ln a, ln b, ln c`` at -1, 0, 1, as an amplitude (exact
    for a Gaussian); ``b`` where the three do not bracket a maximum."""
    if min(a, b, c) <= 0:
        return b
    la, lb, lc = np.log([a, b, c])
    den = la - 2 * lb + lc
    return float(np.exp(lb - (la - lc) ** 2 / (8 * den))) if den < 0 else b


def half_width(profile: np.ndarray, i: int) -> float | None:
    """The -6 dB width [samples] of ``profile`` about its maximum at ``i``: between the points
    either side where it falls to half its peak (the peak from a parabola through the log of
    the three samples about ``i``; each crossing interpolated by :func:`_crossing`). None
    where it does not fall to half within the profile."""
    p = np.asarray(profile, dtype=np.float64)
    inner = 0 < i < p.size - 1
    half = (_log_vertex(p[i - 1], p[i], p[i + 1]) if inner else float(p[i])) / 2
    ends = []
    for step in (-1, 1):
        j = i
        while 0 <= j + step < p.size and p[j + step] >= half:
            j += step
        k = j + step
        if not 0 <= k < p.size:
            return None
        ends.append(j + step * _crossing(p, j, step, half))
    return float(ends[1] - ends[0])


def _crossing(p: np.ndarray, j: int, step: int, half: float) -> float:
    """Where, between samples ``j`` (at or above ``half``) and ``j + step`` (below), the
    profile falls to ``half``, as a fraction of a sample: on the parabola through the log of
    samples ``j - step``, ``j``, ``j + step`` (exact for a Gaussian), or on the line through
    the last two."""
    lo, hi = max(float(p[j + step]), 1e-30 * half), float(p[j])
    if hi <= lo:
        return 0.0
    linear = float(np.log(hi / half) / np.log(hi / lo))
    if not 0 <= j - step < p.size or p[j - step] <= 0:
        return linear
    lm, l0, l1 = np.log([float(p[j - step]), hi, lo]) - np.log(half)
    a, b = (l1 - 2 * l0 + lm) / 2, (l1 - lm) / 2
    roots = np.roots([a, b, l0]) if abs(a) > 1e-12 else np.array([linear])
    ok = [float(r.real) for r in roots if abs(r.imag) < 1e-12 and -1e-9 <= r.real <= 1 + 1e-9]
    return min(ok) if ok else linear


def focal_size(
    p_amp: np.ndarray, i: tuple[int, ...], spacing_mm: float
) -> tuple[float | None, tuple[float | None, float | None]]:
    """The -6 dB focal length along the beam (``p_amp``'s last axis) and the widths across it
    (its first two axes) [mm] of the focus at grid point ``i``, from the profiles through
    ``i`` along each axis (:func:`half_width`)."""
    sizes = []
    for ax in range(3):
        line: list[int | slice] = list(i)
        line[ax] = slice(None)
        w = half_width(p_amp[tuple(line)], i[ax])
        sizes.append(None if w is None else w * spacing_mm)
    return sizes[2], (sizes[0], sizes[1])


def find_focus(
    p_amp: np.ndarray, grid: SimulationGrid, target: np.ndarray, search_mm: float = 15.0
) -> Focus:
    """The focus of ``p_amp`` (``grid.shape``): its peak within ``search_mm`` of the target
    [mm] (so that pressure in and near the skull is not taken for the focus)."""
    ijk = np.indices(grid.shape, dtype=np.float32)
    r = np.linalg.norm(ijk - np.reshape(grid.target_index, (3, 1, 1, 1)), axis=0)
    near = r * grid.spacing_mm <= search_mm
    masked = np.where(near, p_amp, 0.0)
    i = tuple(int(v) for v in np.unravel_index(int(np.argmax(masked)), masked.shape))
    peak = float(p_amp[i])
    labels, _ = ndimage.label(near & (p_amp >= peak / 2))
    volume = float(np.count_nonzero(labels == labels[i])) * grid.spacing_mm**3
    pos, vox = grid.world(_refine(p_amp, i)), grid.world(i)
    length, width = focal_size(p_amp, i, grid.spacing_mm)
    t = np.asarray(target, dtype=np.float64)
    return Focus(
        peak, (float(pos[0]), float(pos[1]), float(pos[2])), float(np.linalg.norm(pos - t)),
        float(p_amp[grid.target_index]), volume, length, width,
        (float(vox[0]), float(vox[1]), float(vox[2])), float(np.linalg.norm(vox - t)),
    )  # fmt: skip


#: the focal region reaches this far beyond a focus's -6 dB region [mm]: pressure outside it
#: is a side lobe (:func:`focal_region`)
FOCAL_MARGIN_MM = 2.0


def focal_region(
    p_amp: np.ndarray, grid: SimulationGrid, focus: Focus, margin_mm: float = FOCAL_MARGIN_MM
) -> np.ndarray:
    """The focal region of ``p_amp`` (``grid.shape``) around ``focus``: its -6 dB region (the
    points at or above half the peak, connected to the peak grid point) grown by
    ``margin_mm`` [mm]; boolean, ``grid.shape``."""
    i = tuple(int(v) for v in np.rint(grid.index(focus.peak_voxel_mm or focus.position_mm)))
    labels, _ = ndimage.label(p_amp >= float(p_amp[i]) / 2)
    region = labels == labels[i]
    r = int(np.ceil(margin_mm / grid.spacing_mm))
    if r > 0:
        ball = np.linalg.norm(np.indices((2 * r + 1,) * 3) - r, axis=0) * grid.spacing_mm
        region = ndimage.binary_dilation(region, structure=ball <= margin_mm)
    return region


def side_lobe(p_amp: np.ndarray, where: np.ndarray, region: np.ndarray) -> tuple[float, int]:
    """The largest amplitude of ``p_amp`` in ``where`` (e.g. the brain) outside ``region``
    (:func:`focal_region`) [Pa] and its flat index (-1 where there is no such point)."""
    masked = np.where(where & ~region, p_amp, -np.inf)
    k = int(np.argmax(masked))
    return (float(masked.flat[k]), k) if np.isfinite(masked.flat[k]) else (0.0, -1)
