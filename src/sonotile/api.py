"""The Python API a k-Wave user finds natural: grid, medium, source, sensor -> ``simulate``.

It does what k-Wave's MATLAB/Python front end does before its solver runs (scaling source terms
to density/velocity units, densities on the staggered grids, default time step and PML, PML
outside the grid when asked, intensity post-processing) and then runs the very same core that
``sonotile-kwave`` runs.

Conventions: arrays are indexed ``(x, y, z)``; SI units throughout; masks are boolean arrays of
the grid shape; source points and sensor points are ordered as k-Wave orders them (MATLAB
column-major ``find`` order: x fastest).

Example::

    grid = KWaveGrid((128, 128), (1e-4, 1e-4))
    medium = KWaveMedium(sound_speed=1500.0, density=1000.0)
    source = KSource(p0=disc)
    sensor = KSensor(mask=ring, record=("p", "p_max"))
    res = simulate(grid, medium, source, sensor)
    res["p"]  # (n_sensors, n_steps) [Pa]
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import KeysView, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

import numpy as np
from numpy.typing import ArrayLike

from sonotile import user_input
from sonotile.model.filters import smooth
from sonotile.model.grid import AXES, Grid, make_time
from sonotile.model.problem import (
    Absorption,
    MaskSource,
    Medium,
    Pml,
    Problem,
    ProblemError,
    Scalar,
    Sensor,
    SourceMode,
    Sources,
    TransducerSource,
)
from sonotile.physics.acoustic import checks
from sonotile.physics.acoustic.sources import pressure_source_scale, velocity_source_scale

if TYPE_CHECKING:
    import jax


@dataclass
class KWaveGrid:
    """Grid points and spacing; time axis set by :meth:`make_time` or by ``simulate``.

    Attributes:
        shape: points per axis ``(Nx[, Ny[, Nz]])``.
        spacing: ``(dx[, dy[, dz]])`` [m] (a single float for all axes).
        dt: time step [s] (``None``: k-Wave's default from CFL 0.3).
        nt: number of time steps (``None``: time to cross the grid diagonal).
    """

    shape: tuple[int, ...]
    spacing: tuple[float, ...] | float
    dt: float | None = None
    nt: int | None = None

    def __post_init__(self) -> None:
        self.shape = tuple(int(n) for n in self.shape)
        if np.isscalar(self.spacing):
            self.spacing = (float(cast(float, self.spacing)),) * len(self.shape)
        self.spacing = tuple(float(d) for d in cast("tuple[float, ...]", self.spacing))

    def make_time(
        self, sound_speed: ArrayLike, cfl: float = 0.3, t_end: float | None = None
    ) -> None:
        """k-Wave's ``makeTime``: ``dt = cfl min(d) / max(c)``, end time from the diagonal."""
        c = np.asarray(sound_speed)
        spacing = cast("tuple[float, ...]", self.spacing)  # per axis since __post_init__
        self.dt, self.nt = make_time(
            self.shape, spacing, float(c.max()), float(c.min()), cfl, t_end
        )

    @property
    def t(self) -> np.ndarray:
        """Time of each step [s]."""
        return np.arange(self.nt) * self.dt


@dataclass
class KWaveMedium:
    """Acoustic medium; each property a scalar or an array of the grid shape.

    Attributes:
        sound_speed: [m/s].
        density: [kg/m^3].
        alpha_coeff: absorption prefactor [dB/(MHz^y cm)] (``None``: lossless).
        alpha_power: power-law exponent y.
        alpha_mode: ``None`` (absorption and dispersion), ``"no_dispersion"`` or ``"stokes"``.
        BonA: nonlinearity parameter B/A (``None``: linear).
        sound_speed_ref: reference sound speed of the k-space correction [m/s] (default max).
    """

    sound_speed: ArrayLike
    density: ArrayLike = 1000.0
    alpha_coeff: ArrayLike | None = None
    alpha_power: float = 1.5
    alpha_mode: str | None = None
    BonA: ArrayLike | None = None  # noqa: N815 (k-Wave's name)
    sound_speed_ref: float | None = None


@dataclass
class KSource:
    """Sources as k-Wave takes them (unscaled physical units).

    Attributes:
        p0: initial pressure [Pa], grid-shaped.
        p: pressure signal(s) [Pa]: ``(Nt_src,)`` for all points or ``(Nsrc, Nt_src)``.
        p_mask: boolean mask of the pressure source points.
        p_mode: ``"additive"`` (default), ``"additive-no-correction"`` or ``"dirichlet"``.
        ux, uy, uz: velocity signal(s) [m/s], same layouts as ``p``.
        u_mask: boolean mask of the velocity source points.
        u_mode: as ``p_mode``.
        transducer_mask: boolean mask of the points of a k-Wave transducer source (a beamformed
            signal added to ``ux``, k-Wave's ``kWaveTransducerSimple`` as seen by its solver).
        transducer_signal: its input signal ``(Nt_in,)`` [m/s].
        transducer_delays: per point (mask order) delay [time steps], integers >= 0; the point
            receives ``signal[delay + n]`` at step n.
    """

    p0: np.ndarray | None = None
    p: np.ndarray | None = None
    p_mask: np.ndarray | None = None
    p_mode: str = "additive"
    ux: np.ndarray | None = None
    uy: np.ndarray | None = None
    uz: np.ndarray | None = None
    u_mask: np.ndarray | None = None
    u_mode: str = "additive"
    transducer_mask: np.ndarray | None = None
    transducer_signal: np.ndarray | None = None
    transducer_delays: np.ndarray | None = None


@dataclass
class KSensor:
    """Sensor points and what to record.

    Attributes:
        mask: boolean mask of the grid's shape (points in k-Wave order), or Cartesian points
            ``(ndim, N)`` [m] relative to the grid centre (k-Wave's convention), read off the
            grid by ``cart_interp`` in the given order; or ``None`` with ``corners``/``points``.
        points: ``(N, ndim)`` integer grid indices (0-based), recorded in the given order.
        corners: list of ``(lo, hi)`` inclusive 0-based corner index pairs of cuboids.
        record: quantities (k-Wave names): p, p_max, p_min, p_rms, p_final, p_max_all,
            p_min_all, u, u_non_staggered, u_max, u_min, u_rms, u_final, u_max_all,
            u_min_all, I, I_avg; and ``p_cw`` (at the points) / ``p_cw_all`` (whole grid):
            steady-state amplitude ``p_cw_amp[_all]`` [Pa] and phase ``p_cw_phase[_all]`` [rad]
            at ``cw_frequency``.
        record_start_index: first recorded step, 1-based as in k-Wave.
        cart_interp: Cartesian points are read by ``"bli"`` (band-limited, default),
            ``"linear"`` (multilinear) or ``"nearest"``.
        bli_tolerance: truncation of the band-limited stencil (smaller: wider, more accurate).
        cw_frequency: frequency [Hz] of ``p_cw`` / ``p_cw_all``.
        cw_periods: the DFT window: the last ``cw_periods`` periods of the run.
    """

    mask: np.ndarray | None = None
    corners: list | None = None
    points: np.ndarray | None = None
    record: tuple[str, ...] = ("p",)
    record_start_index: int = 1
    cart_interp: str = "bli"
    bli_tolerance: float = 0.05
    cw_frequency: float | None = None
    cw_periods: float = 3.0


@dataclass
class Results:
    """Simulation output: ``results[name]`` as numpy arrays, plus metadata.

    Index and Cartesian sensors give time series as ``(n_sensors, n_recorded_steps)`` and
    statistics as ``(n_sensors,)``; cuboid sensors give per cuboid ``(Cx, Cy, Cz,
    n_recorded_steps)`` lists. Whole-field quantities have the grid shape (the user's grid when
    the PML was outside). ``sensor_points``: ``(n_sensors, ndim)`` 0-based grid indices of the
    user's grid (fractional for Cartesian points).
    """

    data: dict[str, Quantity]
    grid: Grid
    t: np.ndarray
    sensor_points: np.ndarray | None
    warnings: list[str] = field(default_factory=list)
    inputs: Inputs | None = None  # (kgrid, medium, source, sensor) as given to simulate
    options: dict[str, Any] = field(default_factory=dict)  # simulate's keyword options

    def save(self, path: str) -> None:
        """Write every quantity with its unit, and the input, to an HDF5 file that
        :func:`sonotile.load_input` reads back for a re-run (see :mod:`sonotile.results_io`)."""
        from sonotile.results_io import save_results

        save_results(path, self, self.inputs, self.options)

    def __getitem__(self, k: str) -> Quantity:
        return self.data[k]

    def __contains__(self, k: str) -> bool:
        return k in self.data

    def keys(self) -> KeysView[str]:
        return self.data.keys()


#: A recorded quantity: an array, or per cuboid a list of arrays (cuboid sensors).
Quantity = np.ndarray | list[np.ndarray]
#: What ``simulate`` takes and ``Results.inputs`` / ``load_input`` give back.
Inputs = tuple[KWaveGrid, KWaveMedium, KSource, KSensor]


class UserLayout(TypedDict):
    """How solver results map back to the user's grid (:func:`build_problem`)."""

    crop: tuple[slice, ...]  # the user's grid within the (PML-padded) solver grid
    points: np.ndarray | None  # the sensor points (N, ndim) on the user's grid


MODES: dict[str, SourceMode] = {
    "additive": "additive",
    "additive-no-correction": "additive_no_correction",
    "additive_no_correction": "additive_no_correction",
    "dirichlet": "dirichlet",
}


def mask_points(mask: ArrayLike, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Grid indices ``(N, ndim)`` of a boolean mask in k-Wave (column-major) order."""
    m = np.asarray(mask)
    if m.shape != shape:
        raise ProblemError(f"{name}: shape {m.shape}, expected the grid shape {shape}")
    lin = np.flatnonzero(m.ravel(order="F"))
    if lin.size == 0:
        raise ProblemError(f"{name}: no points are set")
    return np.stack(np.unravel_index(lin, shape, order="F"), axis=1)


def _at(v: Scalar, idx: np.ndarray) -> np.ndarray:
    a = np.asarray(v)
    return a[tuple(idx.T)] if a.ndim > 0 else np.full(idx.shape[0], float(a))


def _signal(sig: ArrayLike, n_points: int, name: str) -> np.ndarray:
    """User layout (Nt,) or (Nsrc, Nt) -> solver layout (Nt,) or (Nt, Nsrc)."""
    s = np.asarray(sig, dtype=np.float64)
    if s.ndim == 2 and s.shape[0] == 1:
        s = s[0]
    if s.ndim == 1:
        return s
    if s.ndim != 2 or s.shape[0] != n_points:
        hint = ""
        if s.ndim == 2 and s.shape[1] == n_points:
            hint = f"; its transpose matches: pass {name}.T (one row per source point)"
        raise ProblemError(
            f"{name}: shape {s.shape}, expected (Nt,) or ({n_points}, Nt) for the "
            f"{n_points} points of its mask{hint}"
        )
    return s.T


def _scaled(sig: np.ndarray, scale: np.ndarray, c0: Scalar) -> np.ndarray:
    """A signal ``(Nt,)`` or ``(Nt, Nsrc)`` times a per-point ``scale`` ``(Nsrc,)``."""
    if sig.ndim == 1 and np.ndim(c0) > 0:
        return sig[:, None] * scale[None, :]
    return sig * (scale if sig.ndim == 2 else scale[0])


def _mode(mode: str, name: str) -> SourceMode:
    if mode not in MODES:
        raise ProblemError(f"{name} = {mode!r}: expected one of {list(MODES)}")
    return MODES[mode]


def _pressure_source(
    src: KSource, grid: Grid, c0: Scalar, shape: tuple[int, ...]
) -> MaskSource | None:
    """``p`` in density units per split component (k-Wave's ``scaleSourceTerms``)."""
    if src.p is None:
        return None
    if src.p_mask is None:
        raise ProblemError("source.p given without source.p_mask")
    d, dt, dx = grid.ndim, grid.dt, grid.spacing
    idx = mask_points(src.p_mask, shape, "source.p_mask")
    mode = _mode(src.p_mode, "source.p_mode")
    c = _at(c0, idx)
    scale = pressure_source_scale(c, d, dt, dx[0], mode)
    sig = _signal(src.p, idx.shape[0], "source.p")
    return MaskSource(idx, _scaled(sig, scale, c0), mode, "source.p")


def _velocity_sources(
    src: KSource, grid: Grid, c0: Scalar, shape: tuple[int, ...]
) -> list[MaskSource | None]:
    """``ux``/``uy``/``uz``: additive ones as the injected increment ``2 c dt / dx``."""
    d, dt, dx = grid.ndim, grid.dt, grid.spacing
    for ax, v in enumerate((src.ux, src.uy, src.uz)[d:]):
        if v is not None:
            raise ProblemError(f"source.u{AXES[d + ax]} given for a {d}-D grid")
    comps = (src.ux, src.uy, src.uz)[:d]
    if all(v is None for v in comps):
        return []
    if src.u_mask is None:
        raise ProblemError("source.ux/uy/uz given without source.u_mask")
    idx = mask_points(src.u_mask, shape, "source.u_mask")
    mode = _mode(src.u_mode, "source.u_mode")
    c = _at(c0, idx)
    out: list[MaskSource | None] = []
    for ax, v in enumerate(comps):
        if v is None:
            out.append(None)
            continue
        sig = _signal(v, idx.shape[0], f"source.u{AXES[ax]}")
        if mode != "dirichlet":
            sig = _scaled(sig, velocity_source_scale(c, dt, dx[ax]), c0)
        out.append(MaskSource(idx, sig, mode, f"source.u{AXES[ax]}"))
    return out


def _transducer_source(
    src: KSource, grid: Grid, c0: Scalar, shape: tuple[int, ...]
) -> TransducerSource | None:
    if src.transducer_mask is None and src.transducer_signal is None:
        return None
    if src.transducer_mask is None or src.transducer_signal is None:
        raise ProblemError("source.transducer_mask and source.transducer_signal go together")
    idx = mask_points(src.transducer_mask, shape, "source.transducer_mask")
    delays = src.transducer_delays
    delays = np.zeros(idx.shape[0], np.int64) if delays is None else np.asarray(delays)
    if delays.shape != (idx.shape[0],) or not np.issubdtype(delays.dtype, np.integer):
        raise ProblemError(
            f"source.transducer_delays: expected {idx.shape[0]} integer delays [steps], "
            f"got {delays.shape} {delays.dtype}"
        )
    c = float(np.max(c0)) if np.ndim(c0) > 0 else float(np.asarray(c0))
    if np.ndim(c0) > 0 and not np.allclose(_at(c0, idx), c):
        raise ProblemError("source.transducer: sound speed must be uniform over its points")
    scale = velocity_source_scale(c, grid.dt, grid.spacing[0])
    sig = np.asarray(src.transducer_signal, dtype=np.float64).reshape(-1) * scale
    return TransducerSource(idx, sig, delays)


def scale_sources(src: KSource, grid: Grid, c0: Scalar, shape: tuple[int, ...]) -> Sources:
    """k-Wave's ``scaleSourceTerms``: pressure to density units per split component, additive
    velocity to the injected increment."""
    return Sources(
        p0=src.p0,
        p=_pressure_source(src, grid, c0, shape),
        u=tuple(_velocity_sources(src, grid, c0, shape)),
        transducer=_transducer_source(src, grid, c0, shape),
    )


def _smoothed(v: ArrayLike | None, shape: tuple[int, ...], on: bool, name: str) -> ArrayLike | None:
    """A medium property smoothed when asked (fields only; scalars pass through)."""
    if not on or np.ndim(v) == 0:
        return v
    if np.shape(v) != shape or not np.all(np.isfinite(v)):
        raise ProblemError(f"{name}: expected finite values of the grid shape {shape}")
    return smooth(np.asarray(v))


def _pad(
    v: ArrayLike | None, pad: Sequence[tuple[int, int]], mode: Literal["constant", "edge"]
) -> Scalar | None:
    """``v`` padded as the grid is; a scalar (or None) as it is."""
    if np.ndim(v) == 0 or v is None:
        return cast("Scalar | None", v)
    return np.pad(np.asarray(v), pad, mode=mode)


@dataclass(frozen=True)
class Options:
    """How k-Wave-style input becomes a solver-ready problem (see :func:`simulate`)."""

    pml_size: int | Sequence[int] | None = None
    pml_alpha: float | Sequence[float] = 2.0
    pml_inside: bool = True
    dtype: str = "float32"
    smooth_p0: bool = True
    smooth_c0: bool = False
    smooth_rho0: bool = False


def build_problem(
    kgrid: KWaveGrid,
    medium: KWaveMedium,
    source: KSource,
    sensor: KSensor,
    options: Options = Options(),
) -> tuple[Problem, UserLayout]:
    """The solver-ready :class:`Problem` for k-Wave-style input, and how to map results back.

    Like k-Wave, p0 is smoothed (Blackman window, maximum restored) on the user's grid before
    the PML is added outside it; sound speed and density are smoothed (maximum not restored)
    only when asked.
    """
    try:
        return _build(kgrid, medium, source, sensor, options)
    except ProblemError as e:  # the solver layer's names -> the ones the user wrote
        raise user_input.user_error(e) from None


def _build(
    kgrid: KWaveGrid, medium: KWaveMedium, source: KSource, sensor: KSensor, options: Options
) -> tuple[Problem, UserLayout]:
    shape = tuple(kgrid.shape)
    user_input.check_medium(medium, shape)
    user_input.check_sources(source, shape)
    user_input.check_sensor(sensor, shape)
    if source.p0 is not None and options.smooth_p0:
        if not np.all(np.isfinite(source.p0)):
            raise ProblemError("source.p0: contains NaN or Inf")
        source = replace(source, p0=smooth(source.p0, restore_max=True))
    medium = replace(
        medium,
        sound_speed=_smoothed(medium.sound_speed, shape, options.smooth_c0, "medium.sound_speed"),
        density=_smoothed(medium.density, shape, options.smooth_rho0, "medium.density"),
    )
    _time_axis(kgrid, medium)
    if not 1 <= sensor.record_start_index <= kgrid.nt:
        raise ProblemError(
            f"sensor.record_start_index = {sensor.record_start_index}: must be in 1..Nt = "
            f"1..{kgrid.nt} (1-based, as in k-Wave)"
        )
    pml = _pml(options, len(shape))
    pad = [(0, 0)] * len(shape) if options.pml_inside else [(s, s) for s in pml.size]
    full = tuple(n + a + b for n, (a, b) in zip(shape, pad))
    grid = Grid(full, cast("tuple[float, ...]", kgrid.spacing), kgrid.dt, kgrid.nt)
    m = _medium(medium, grid, pad)
    fields: dict[str, Any] = {  # grid-shaped source arrays, padded as the grid is
        k: _pad(getattr(source, k), pad, "constant")
        for k in ("p0", "p_mask", "u_mask", "transducer_mask")
        if getattr(source, k) is not None
    }
    padded = replace(source, **fields)
    sources = scale_sources(padded, grid, m.c0, full)
    offset = np.array([a for a, _ in pad])
    sens, points = build_sensor(sensor, kgrid, offset)
    problem = Problem(grid, m, sources, sens, pml, dtype=options.dtype)
    crop = tuple(slice(a, n - b) for (a, b), n in zip(pad, full))
    return problem, {"crop": crop, "points": points}


def _time_axis(kgrid: KWaveGrid, medium: KWaveMedium) -> None:
    """k-Wave's default ``dt`` (CFL 0.3) and ``Nt`` (time to cross the diagonal at the
    slowest sound speed) where the grid has none; a given ``dt`` keeps that end time."""
    if kgrid.dt is not None and kgrid.nt is not None:
        return
    shape = tuple(kgrid.shape)
    c = np.asarray(medium.sound_speed, dtype=np.float64)
    if not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise ProblemError("medium.sound_speed: must be finite and > 0")
    if kgrid.dt is not None and not (np.isfinite(kgrid.dt) and kgrid.dt > 0):
        raise ProblemError(f"kgrid.dt = {kgrid.dt} s: must be finite and > 0")
    spacing = cast("tuple[float, ...]", kgrid.spacing)  # per axis since __post_init__
    dt, nt = make_time(shape, spacing, float(c.max()), float(c.min()), dt=kgrid.dt)
    kgrid.dt = dt
    kgrid.nt = kgrid.nt or nt


def _pml(options: Options, nd: int) -> Pml:
    size = options.pml_size
    if size is None:
        size = Pml.default(nd).size
    elif np.isscalar(size):
        size = (int(cast(int, size)),) * nd
    a = options.pml_alpha
    alpha = (float(cast(float, a)),) * nd if np.isscalar(a) else tuple(cast("Sequence[float]", a))
    return Pml(tuple(cast("Sequence[int]", size)), alpha)


def _medium(medium: KWaveMedium, grid: Grid, pad: Sequence[tuple[int, int]]) -> Medium:
    """The solver's medium on the (possibly PML-padded) grid."""
    absorbing = medium.alpha_coeff is not None and np.any(np.asarray(medium.alpha_coeff) != 0)
    if absorbing and medium.alpha_mode not in (None, "no_dispersion", "stokes"):
        raise ProblemError(
            f"medium.alpha_mode = {medium.alpha_mode!r}: expected None, 'no_dispersion' or 'stokes'"
        )
    mode: Absorption = (
        ("stokes" if medium.alpha_mode == "stokes" else "power_law") if absorbing else "lossless"
    )
    return Medium(
        c0=_pad(medium.sound_speed, pad, "edge"),
        rho0=_pad(medium.density, pad, "edge"),
        grid=grid,
        c_ref=medium.sound_speed_ref,
        bona=_pad(medium.BonA, pad, "edge"),
        alpha_coeff=_pad(medium.alpha_coeff, pad, "edge") if absorbing else None,
        alpha_power=medium.alpha_power if absorbing else None,
        absorption=mode,
        dispersion=medium.alpha_mode != "no_dispersion",
    )


def is_cartesian(mask: ArrayLike, shape: tuple[int, ...]) -> bool:
    """A sensor mask given as Cartesian points ``(ndim, N)`` rather than a grid-shaped mask."""
    m = np.asarray(mask)
    return m.shape != shape and m.ndim == 2 and m.shape[0] == len(shape) and m.dtype.kind == "f"


def cartesian_coords(mask: ArrayLike, kgrid: KWaveGrid) -> np.ndarray:
    """Continuous 0-based grid coordinates ``(N, ndim)`` of Cartesian points ``(ndim, N)`` [m]
    given relative to the grid centre (``x = (i - N // 2) dx``, k-Wave's ``kgrid.x``)."""
    pts = np.asarray(mask, dtype=np.float64)
    if pts.shape[1] == 0 or not np.all(np.isfinite(pts)):
        raise ProblemError(f"sensor.mask: Cartesian points {pts.shape} must be finite, N >= 1")
    centre = np.array([n // 2 for n in kgrid.shape], dtype=np.float64)
    coords = pts.T / np.asarray(kgrid.spacing) + centre
    if np.any(coords < 0) or np.any(coords > np.array(kgrid.shape) - 1):
        raise ProblemError(f"sensor.mask: a Cartesian point lies outside the grid {kgrid.shape}")
    return coords


def build_sensor(
    sensor: KSensor, kgrid: KWaveGrid, offset: np.ndarray
) -> tuple[Sensor, np.ndarray | None]:
    """The solver's :class:`Sensor` (indices shifted by ``offset`` for a PML outside the user's
    grid) and the user's points ``(N, ndim)`` as 0-based grid indices (fractional for Cartesian
    points)."""
    shape, nd = tuple(kgrid.shape), len(kgrid.shape)
    common: dict[str, Any] = dict(
        record=tuple(sensor.record), start=sensor.record_start_index - 1,
        cw_frequency=sensor.cw_frequency, cw_periods=sensor.cw_periods,
    )  # fmt: skip
    if sensor.corners is not None:
        cub = np.array([[lo, hi] for lo, hi in sensor.corners], dtype=np.int64)
        if cub.ndim != 3 or cub.shape[2] != nd or np.any(cub < 0) or np.any(cub >= shape):
            raise ProblemError(
                f"sensor.corners: expected (lo, hi) pairs of {nd} indices inside the grid {shape}"
            )
        return Sensor(cuboids=cub + offset, **common), None
    if sensor.points is not None:
        points = user_input.grid_points(sensor.points, shape)
        return Sensor(index=points + offset, **common), points
    if sensor.mask is not None and is_cartesian(sensor.mask, shape):
        coords = cartesian_coords(sensor.mask, kgrid)
        return Sensor(
            positions=coords + offset, interpolation=sensor.cart_interp,
            bli_tolerance=sensor.bli_tolerance, **common,
        ), coords  # fmt: skip
    if sensor.mask is not None:
        points = mask_points(sensor.mask, shape, "sensor.mask")
        return Sensor(index=points + offset, **common), points
    return Sensor(**common), None


def fourier_shift(x: np.ndarray, shift: float) -> np.ndarray:
    """Shift sampled signals along their last axis by ``shift`` samples (band-limited)."""
    n = x.shape[-1]
    k = 2 * np.pi * np.fft.rfftfreq(n)
    return np.fft.irfft(np.fft.rfft(x, axis=-1) * np.exp(1j * k * shift), n=n, axis=-1)


def simulate(
    kgrid: KWaveGrid,
    medium: KWaveMedium,
    source: KSource,
    sensor: KSensor,
    pml_size: int | Sequence[int] | None = None,
    pml_alpha: float | Sequence[float] = 2.0,
    pml_inside: bool = True,
    dtype: str = "float32",
    smooth_p0: bool = True,
    smooth_c0: bool = False,
    smooth_rho0: bool = False,
    decomposition: str = "single",
    mesh: tuple[int, ...] | None = None,
    overlap: int | None = None,
    accuracy: float = 1e-3,
    progress: bool | None = None,
    quiet: bool = False,
    device: jax.Device | None = None,
    devices: Sequence[jax.Device] | None = None,
) -> Results:
    """Run a simulation (k-Wave's ``kspaceFirstOrder1D/2D/3D``) on the default device.

    Args:
        kgrid, medium, source, sensor: the k-Wave-style description.
        pml_size: PML thickness per axis [points] (default 20 in 1-D/2-D, 10 in 3-D).
        pml_alpha: PML absorption [Np per point] (default 2).
        pml_inside: PML inside the given grid (k-Wave's default) or added around it.
        dtype: ``"float32"`` or ``"float64"`` (JAX's 64-bit mode is switched on for the run).
        smooth_p0: smooth p0 with k-Wave's Blackman window, restoring its maximum (k-Wave's
            default; :func:`sonotile.model.filters.smooth`).
        smooth_c0, smooth_rho0: smooth the sound speed / density fields (default off).
        decomposition: ``"single"`` (one device), ``"pencil"`` (distributed FFT, exact),
            ``"lfb"`` (local Fourier basis, nearest-neighbour exchange) or ``"auto"`` (chosen
            from grid, devices and ``accuracy``); see ``docs/decomposition.md``.
        mesh: devices per split axis, e.g. ``(2, 4)`` (default: all devices on x).
        overlap: LFB overlap [points] (default: auto's pick, else 16).
        accuracy: relative accuracy target for ``decomposition="auto"``.
        progress: print progress (default: when stderr is a terminal).
        quiet: do not print warnings or the memory estimate.
        device: the one device to run on (a ``jax.Device``; default: JAX's default device).
        devices: the devices of a decomposition (default: all).

    Returns:
        :class:`Results`.
    """
    from sonotile.base import runtime

    runtime.prepare()  # XLA flags (if JAX has not started), allocator, compilation cache
    options = Options(pml_size, pml_alpha, pml_inside, dtype, smooth_p0, smooth_c0, smooth_rho0)
    problem, mapping = build_problem(kgrid, medium, source, sensor, options)
    notes = checks.stability_warnings(problem) + checks.resolution_warnings(problem)
    notes += checks.input_warnings(problem) + user_input.record_warnings(tuple(sensor.record))
    for w in notes:
        warnings.warn(w, stacklevel=2)
    if not quiet and (progress or (progress is None and sys.stderr.isatty())):
        mb = checks.memory_estimate(problem) / 2**20
        print(
            f"sonotile: grid {problem.grid.shape}, {problem.grid.nt} steps, about {mb:.0f} MB",
            file=sys.stderr,
        )
    raw, final = _run(problem, decomposition, mesh, overlap, accuracy, progress, quiet, device,
                      devices)  # fmt: skip
    data = shape_results(problem, raw, final, mapping["crop"])
    t = np.arange(problem.sensor.start, problem.grid.nt) * problem.grid.dt  # recorded steps
    opts = dict(pml_size=pml_size, pml_alpha=pml_alpha, pml_inside=pml_inside, dtype=dtype,
                smooth_p0=smooth_p0, smooth_c0=smooth_c0, smooth_rho0=smooth_rho0)  # fmt: skip
    inputs = (kgrid, medium, source, sensor)
    return Results(data, problem.grid, t, mapping["points"], notes, inputs, opts)


def _run(
    problem: Problem,
    decomposition: str,
    mesh: tuple[int, ...] | None,
    overlap: int | None,
    accuracy: float,
    progress: bool | None,
    quiet: bool,
    device: jax.Device | None,
    devices: Sequence[jax.Device] | None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run on the device(s) asked for; float64 runs switch JAX's 64-bit mode on for the run."""
    import contextlib

    import jax

    from sonotile.solver import runner

    x64: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if problem.dtype == "float64" and not jax.enable_x64.value:
        x64 = jax.enable_x64(True)
    with x64:
        if decomposition == "single":
            if devices is not None and len(devices) > 1:
                raise ValueError(
                    f"devices: {len(devices)} devices for decomposition 'single'; choose "
                    "pencil, lfb or auto, or pass device="
                )
            dev = device if device is not None else (devices[0] if devices else None)
            ctx = jax.default_device(dev) if dev is not None else contextlib.nullcontext()
            with ctx:
                return runner.run_engine(runner.single_engine(problem), progress=progress)
        from sonotile.parallel.engine import engine_for

        engine, reason = engine_for(
            problem, decomposition, mesh, overlap, accuracy=accuracy, devices=devices
        )
        if not quiet:
            print(f"sonotile: running {engine.describe} ({reason})", file=sys.stderr)
        return runner.run_engine(engine, progress=progress)


def shape_results(
    problem: Problem,
    raw: dict[str, np.ndarray],
    final: dict[str, np.ndarray],
    crop: tuple[slice, ...],
) -> dict[str, Quantity]:
    """The runner's raw series and final quantities in the user's layout (see :class:`Results`),
    whole fields cropped to the user's grid."""
    sensor = problem.sensor
    nd = problem.grid.ndim
    shapes = None
    if sensor.cuboids is not None:
        shapes = [tuple(int(h - lo + 1) for lo, h in zip(c[0], c[1])) for c in sensor.cuboids]
        splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def series(v: np.ndarray) -> Quantity:  # (Ts, Ns) -> (Ns, Ts) or per-cuboid (Cx, Cy, Cz, Ts)
        if shapes is None:
            return np.ascontiguousarray(v.T)
        return [
            np.moveaxis(b.reshape((v.shape[0],) + s), 0, -1)
            for b, s in zip(np.split(v, splits, axis=1), shapes)
        ]

    def stat(v: np.ndarray) -> Quantity:
        if shapes is None:
            return v
        return [b.reshape(s) for b, s in zip(np.split(v, splits), shapes)]

    out: dict[str, Quantity] = {}
    rec = set(sensor.record)
    for name, v in raw.items():
        base = (
            "u_non_staggered" if name.endswith("_non_staggered") else ("p" if name == "p" else "u")
        )
        if base in rec:
            out[name] = series(v)
    for name, v in final.items():
        out[name] = v[crop] if (name.endswith("_all") or name.endswith("_final")) else stat(v)
    if {"I", "I_avg"} & rec:
        p = raw["p"].T
        for a in range(nd):
            u = fourier_shift(raw[f"u{AXES[a]}_non_staggered"].T, 0.5)
            inten = p * u
            if "I" in rec:
                out[f"I{AXES[a]}"] = series(inten.T)
            if "I_avg" in rec:
                out[f"I{AXES[a]}_avg"] = stat(inten.mean(axis=-1))
    return out


__all__ = [
    "KWaveGrid", "KWaveMedium", "KSource", "KSensor", "Options", "Results", "simulate",
    "build_problem",
]  # fmt: skip
