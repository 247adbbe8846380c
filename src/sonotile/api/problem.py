"""From k-Wave-style input to a solver-ready :class:`~sonotile.model.problem.Problem`: source
terms scaled to density/velocity units (k-Wave's ``scaleSourceTerms``), densities on the
staggered grids, default time step and PML, PML outside the grid when asked, sensors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np
from numpy.typing import ArrayLike

from sonotile.api import inputs as user_input
from sonotile.api.types import KSensor, KSource, KWaveGrid, KWaveMedium, Options, UserLayout
from sonotile.fft import sizes
from sonotile.model.filters import smooth, smooth_axisymmetric
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
from sonotile.physics.acoustic.sources import pressure_source_scale, velocity_source_scale

if TYPE_CHECKING:
    pass


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


def build_problem(
    kgrid: KWaveGrid,
    medium: KWaveMedium,
    source: KSource,
    sensor: KSensor,
    options: Options | None = None,
) -> tuple[Problem, UserLayout]:
    """The solver-ready :class:`Problem` for k-Wave-style input, and how to map results back.

    Like k-Wave, p0 is smoothed (Blackman window, maximum restored) on the user's grid before
    the PML is added outside it; sound speed and density are smoothed (maximum not restored)
    only when asked.
    """
    try:
        return _build(kgrid, medium, source, sensor, options or Options())
    except ProblemError as e:  # the solver layer's names -> the ones the user wrote
        raise user_input.user_error(e) from None


def _build(
    kgrid: KWaveGrid, medium: KWaveMedium, source: KSource, sensor: KSensor, options: Options
) -> tuple[Problem, UserLayout]:
    shape = tuple(kgrid.shape)
    pml = pml_of(options, shape)
    user_input.check_medium(medium, shape)
    user_input.check_sources(source, shape)
    user_input.check_sensor(sensor, shape)
    symmetry = radial_symmetry(options, shape, sensor)
    if source.p0 is not None and options.smooth_p0:
        if not np.all(np.isfinite(source.p0)):
            raise ProblemError("source.p0: contains NaN or Inf")
        p0 = (smooth(source.p0, restore_max=True) if symmetry is None
              else smooth_axisymmetric(source.p0, symmetry))  # fmt: skip
        source = replace(source, p0=p0)
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
    pad = [(0, 0)] * len(shape) if options.pml_inside else [(s, s) for s in pml.size]
    if symmetry is not None and not options.pml_inside:
        pad[1] = (0, pml.size[1])  # the axis is no boundary: the radial PML is outside only
    full = tuple(n + a + b for n, (a, b) in zip(shape, pad))
    grid = Grid(full, cast("tuple[float, ...]", kgrid.spacing), kgrid.dt, kgrid.nt)
    m = _medium(medium, grid, pad, axisymmetric=symmetry is not None)
    fields: dict[str, Any] = {  # grid-shaped source arrays, padded as the grid is
        k: _pad(getattr(source, k), pad, "constant")
        for k in ("p0", "p_mask", "u_mask", "transducer_mask")
        if getattr(source, k) is not None
    }
    padded = replace(source, **fields)
    sources = scale_sources(padded, grid, m.c0, full)
    offset = np.array([a for a, _ in pad])
    sens, points = build_sensor(sensor, kgrid, offset)
    problem = Problem(grid, m, sources, sens, pml, dtype=options.dtype, radial_symmetry=symmetry)
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


def pml_of(options: Options, shape: tuple[int, ...]) -> Pml:
    """The PML of ``options`` on the user's grid ``shape``: k-Wave's default, the given
    thickness(es), or ``"auto"``'s (k-Wave's ``getOptimalPMLSize``, PML outside only)."""
    nd = len(shape)
    size = options.pml_size
    if isinstance(size, str):
        if size != "auto":
            raise ProblemError(f"pml_size = {size!r}: expected points per axis or 'auto'")
        if options.pml_inside:
            raise ProblemError(
                "pml_size = 'auto' needs pml_inside=False (as in k-Wave): it sizes the PML "
                "added around the grid so that each axis's total is fast for the FFT"
            )
        size = tuple(sizes.optimal_pml_size(n) for n in shape)
        if options.axisymmetric and len(shape) == 2:  # the radial PML: outer edge only
            sym = options.radial_symmetry.upper().removesuffix("-FFT")
            size = (size[0], sizes.optimal_radial_pml_size(shape[1], sym))
    elif size is None:
        size = Pml.default(nd).size
    elif np.isscalar(size):
        size = (int(cast(int, size)),) * nd
    a = options.pml_alpha
    alpha = (float(cast(float, a)),) * nd if np.isscalar(a) else tuple(cast("Sequence[float]", a))
    return Pml(tuple(cast("Sequence[int]", size)), alpha)


def radial_symmetry(options: Options, shape: tuple[int, ...], sensor: KSensor) -> str | None:
    """The problem's radial symmetry: None unless ``options.axisymmetric``; checks what an
    axisymmetric run needs (a 2-D grid, grid masks for sensors)."""
    if not options.axisymmetric:
        return None
    sym = options.radial_symmetry.upper().removesuffix("-FFT")
    if sym not in ("WSWA", "WSWS"):
        raise ProblemError(
            f"radial_symmetry = {options.radial_symmetry!r}: expected 'WSWA' or 'WSWS' (or "
            "k-Wave's 'WSWA-FFT' / 'WSWS-FFT', which give the same)"
        )
    if len(shape) != 2:
        raise ProblemError(
            f"axisymmetric=True needs a 2-D kgrid (x axial, y radial), got {len(shape)}-D"
        )
    if sensor.mask is not None and is_cartesian(sensor.mask, shape):
        raise ProblemError(
            "axisymmetric=True: give sensor.mask as a binary grid mask (Cartesian sensor "
            "points are not supported on axisymmetric grids)"
        )
    return sym


def _medium(
    medium: KWaveMedium, grid: Grid, pad: Sequence[tuple[int, int]], axisymmetric: bool = False
) -> Medium:
    """The solver's medium on the (possibly PML-padded) grid; an axisymmetric one absorbs as
    k-Wave's does (Stokes), and Stokes absorption takes ``alpha_power`` = 2 whatever the user's
    (k-Wave's rule; :func:`sonotile.api.inputs.absorption_warnings` says so)."""
    absorbing = medium.alpha_coeff is not None and np.any(np.asarray(medium.alpha_coeff) != 0)
    if absorbing and medium.alpha_mode not in (None, "no_dispersion", "stokes"):
        raise ProblemError(
            f"medium.alpha_mode = {medium.alpha_mode!r}: expected None, 'no_dispersion' or 'stokes'"
        )
    stokes = medium.alpha_mode == "stokes" or axisymmetric
    mode: Absorption = ("stokes" if stokes else "power_law") if absorbing else "lossless"
    return Medium(
        c0=_pad(medium.sound_speed, pad, "edge"),
        rho0=_pad(medium.density, pad, "edge"),
        grid=grid,
        c_ref=medium.sound_speed_ref,
        bona=_pad(medium.BonA, pad, "edge"),
        alpha_coeff=_pad(medium.alpha_coeff, pad, "edge") if absorbing else None,
        alpha_power=(2.0 if stokes else medium.alpha_power) if absorbing else None,
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
