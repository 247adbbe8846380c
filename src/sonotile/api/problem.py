"""From k-Wave-style input to a solver-ready :class:`~sonotile.model.problem.Problem`: source
terms scaled to density/velocity units (k-Wave's ``scaleSourceTerms``), densities on the
staggered grids, default time step and PML, PML outside the grid when asked, sensors.

:func:`build_problem` checks its input first (:func:`sonotile.api.inputs.check_inputs`, in the
user's names); :func:`assemble` and the helpers here convert input checked so, and check
nothing again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import ModuleType
from typing import Any, Literal, cast

import numpy as np
from numpy.typing import ArrayLike

from sonotile.api import inputs as user_input
from sonotile.api.types import KSensor, KSource, KWaveGrid, KWaveMedium, Options, UserLayout
from sonotile.fft import sizes
from sonotile.model.filters import smooth, smooth_axisymmetric
from sonotile.model.grid import AXES, Grid
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

MODES: dict[str, SourceMode] = {
    "additive": "additive",
    "additive-no-correction": "additive_no_correction",
    "additive_no_correction": "additive_no_correction",
    "dirichlet": "dirichlet",
}


def mask_points(mask: ArrayLike, shape: tuple[int, ...], name: str) -> np.ndarray:
    """Grid indices ``(N, ndim)`` of a boolean mask in k-Wave (column-major) order, the mask
    checked first (:func:`sonotile.api.inputs.check_mask`, as ``name``)."""
    user_input.check_mask(name, mask, shape)
    return mask_indices(mask, shape)


def mask_indices(mask: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """Grid indices ``(N, ndim)`` of a checked mask in k-Wave (column-major) order."""
    lin = np.flatnonzero(np.asarray(mask).ravel(order="F"))
    return np.stack(np.unravel_index(lin, shape, order="F"), axis=1)


def _at(v: Scalar, idx: np.ndarray) -> np.ndarray:
    a = np.asarray(v)
    return a[tuple(idx.T)] if a.ndim > 0 else np.full(idx.shape[0], float(a))


def _signal(sig: ArrayLike) -> np.ndarray:
    """User layout (Nt,) or (Nsrc, Nt) -> solver layout (Nt,) or (Nt, Nsrc)."""
    s = np.asarray(sig, dtype=np.float64)
    if s.ndim == 2 and s.shape[0] == 1:
        s = s[0]
    return s if s.ndim == 1 else s.T


def _scaled(sig: np.ndarray, scale: np.ndarray, c0: Scalar) -> np.ndarray:
    """A signal ``(Nt,)`` or ``(Nt, Nsrc)`` times a per-point ``scale`` ``(Nsrc,)``."""
    if sig.ndim == 1 and np.ndim(c0) > 0:
        return sig[:, None] * scale[None, :]
    return sig * (scale if sig.ndim == 2 else scale[0])


def _pressure_source(
    src: KSource, grid: Grid, c0: Scalar, shape: tuple[int, ...]
) -> MaskSource | None:
    """``p`` in density units per split component (k-Wave's ``scaleSourceTerms``)."""
    if src.p is None:
        return None
    d, dt, dx = grid.ndim, grid.dt, grid.spacing
    idx = mask_indices(src.p_mask, shape)
    mode = MODES[src.p_mode]
    c = _at(c0, idx)
    scale = pressure_source_scale(c, d, dt, dx[0], mode)
    sig = _signal(src.p)
    return MaskSource(idx, _scaled(sig, scale, c0), mode, "source.p")


def _velocity_sources(
    src: KSource, grid: Grid, c0: Scalar, shape: tuple[int, ...]
) -> list[MaskSource | None]:
    """``ux``/``uy``/``uz``: additive ones as the injected increment ``2 c dt / dx``."""
    d, dt, dx = grid.ndim, grid.dt, grid.spacing
    comps = (src.ux, src.uy, src.uz)[:d]
    if all(v is None for v in comps):
        return []
    idx = mask_indices(src.u_mask, shape)
    mode = MODES[src.u_mode]
    c = _at(c0, idx)
    out: list[MaskSource | None] = []
    for ax, v in enumerate(comps):
        if v is None:
            out.append(None)
            continue
        sig = _signal(v)
        if mode != "dirichlet":
            sig = _scaled(sig, velocity_source_scale(c, dt, dx[ax]), c0)
        out.append(MaskSource(idx, sig, mode, f"source.u{AXES[ax]}"))
    return out


def _transducer_source(
    src: KSource, grid: Grid, c0: Scalar, shape: tuple[int, ...]
) -> TransducerSource | None:
    if src.transducer_mask is None or src.transducer_signal is None:
        return None
    idx = mask_indices(src.transducer_mask, shape)
    delays = src.transducer_delays
    delays = np.zeros(idx.shape[0], np.int64) if delays is None else np.asarray(delays)
    c = float(np.max(c0)) if np.ndim(c0) > 0 else float(np.asarray(c0))  # uniform: checked
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


def _smoothed(v: ArrayLike | None, on: bool) -> ArrayLike | None:
    """A medium property smoothed when asked (fields only; scalars pass through)."""
    if not on or np.ndim(v) == 0:
        return v
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
    options = options or Options()
    user_input.check_inputs(kgrid, medium, source, sensor, options)
    return assemble(kgrid, medium, source, sensor, options)


def assemble(
    kgrid: KWaveGrid, medium: KWaveMedium, source: KSource, sensor: KSensor, options: Options
) -> tuple[Problem, UserLayout]:
    """:func:`build_problem` of input already checked by
    :func:`sonotile.api.inputs.check_inputs` (or its parts); sets ``kgrid``'s default time
    axis where it has none."""
    shape = tuple(kgrid.shape)
    pml = pml_of(options, shape)
    symmetry = radial_symmetry(options)
    if source.p0 is not None and options.smooth_p0:
        p0 = (smooth(source.p0, restore_max=True) if symmetry is None
              else smooth_axisymmetric(source.p0, symmetry))  # fmt: skip
        source = replace(source, p0=p0)
    medium = replace(
        medium,
        sound_speed=_smoothed(medium.sound_speed, options.smooth_c0),
        density=_smoothed(medium.density, options.smooth_rho0),
    )
    kgrid.dt, kgrid.nt = user_input.run_time(kgrid, medium)  # k-Wave's defaults where none
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


def pml_of(options: Options, shape: tuple[int, ...]) -> Pml:
    """The PML of checked ``options`` on the user's grid ``shape``: k-Wave's default, the given
    thickness(es), or ``"auto"``'s (k-Wave's ``getOptimalPMLSize``, PML outside only)."""
    nd = len(shape)
    size = options.pml_size
    if isinstance(size, str):  # "auto"
        size = tuple(sizes.optimal_pml_size(n) for n in shape)
        if options.axisymmetric and len(shape) == 2:  # the radial PML: outer edge only
            sym = options.radial_symmetry.upper().removesuffix("-FFT")
            size = (size[0], sizes.optimal_radial_pml_size(shape[1], sym))
    elif size is None:
        size = Pml.default(nd).size
    else:
        size = tuple(int(v) for v in np.broadcast_to(np.asarray(size), (nd,)))
    a = options.pml_alpha
    alpha = tuple(float(v) for v in np.broadcast_to(np.asarray(a, np.float64), (nd,)))
    return Pml(tuple(cast("Sequence[int]", size)), alpha)


def radial_symmetry(options: Options) -> str | None:
    """The problem's radial symmetry (``"WSWA"`` or ``"WSWS"``): None unless
    ``options.axisymmetric`` (checked by :func:`sonotile.api.inputs.check_axisymmetric`)."""
    if not options.axisymmetric:
        return None
    return options.radial_symmetry.upper().removesuffix("-FFT")


def _medium(
    medium: KWaveMedium, grid: Grid, pad: Sequence[tuple[int, int]], axisymmetric: bool = False
) -> Medium:
    """The solver's medium on the (possibly PML-padded) grid; an axisymmetric one absorbs as
    k-Wave's does (Stokes), and Stokes absorption takes ``alpha_power`` = 2 whatever the user's
    (k-Wave's rule; :func:`sonotile.api.inputs.absorption_warnings` says so)."""
    absorbing = medium.alpha_coeff is not None and np.any(np.asarray(medium.alpha_coeff) != 0)
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


def cartesian_coords(mask: ArrayLike, kgrid: KWaveGrid) -> np.ndarray:
    """Continuous 0-based grid coordinates ``(N, ndim)`` of checked Cartesian points
    ``(ndim, N)`` [m] given relative to the grid centre (``x = (i - N // 2) dx``, k-Wave's
    ``kgrid.x``)."""
    centre = np.array([n // 2 for n in kgrid.shape], dtype=np.float64)
    return np.asarray(mask, dtype=np.float64).T / np.asarray(kgrid.spacing) + centre


def cart2grid(points: np.ndarray, kgrid: KWaveGrid, name: str) -> np.ndarray:
    """Cartesian points ``(ndim, N)`` [m] (origin at the grid centre) as their nearest grid
    indices ``(N, ndim)``, halves rounded away from the centre (k-Wave's ``cart2grid``);
    points outside the grid refused naming ``name``."""
    spacing = np.asarray(np.broadcast_to(kgrid.spacing, (len(kgrid.shape),)), np.float64)
    q = np.asarray(points, np.float64) / spacing[:, None]
    rounded = np.sign(q) * np.floor(np.abs(q) + 0.5)
    idx = (rounded + np.array([n // 2 for n in kgrid.shape])[:, None]).T
    if not np.all(np.isfinite(idx)) or np.any(idx < 0) or np.any(idx >= np.array(kgrid.shape)):
        raise ProblemError(f"{name}: a Cartesian point lies outside the grid {kgrid.shape}")
    return idx.astype(np.int64)


def build_sensor(
    sensor: KSensor, kgrid: KWaveGrid, offset: np.ndarray
) -> tuple[Sensor, np.ndarray | None]:
    """The solver's :class:`Sensor` (indices shifted by ``offset`` for a PML outside the user's
    grid) and the user's points ``(N, ndim)`` as 0-based grid indices (fractional for Cartesian
    points)."""
    shape = tuple(kgrid.shape)
    common: dict[str, Any] = dict(
        record=tuple(sensor.record), start=sensor.record_start_index - 1,
        cw_frequency=sensor.cw_frequency, cw_periods=sensor.cw_periods,
    )  # fmt: skip
    if sensor.corners is not None:
        cub = np.array([[lo, hi] for lo, hi in sensor.corners], dtype=np.int64)
        return Sensor(cuboids=cub + offset, **common), None
    if sensor.points is not None:
        points = np.asarray(sensor.points).astype(np.int64)
        return Sensor(index=points + offset, **common), points
    if sensor.mask is not None and user_input.is_cartesian(sensor.mask, shape):
        coords = cartesian_coords(sensor.mask, kgrid)
        return Sensor(
            positions=coords + offset, interpolation=sensor.cart_interp,
            bli_tolerance=sensor.bli_tolerance, **common,
        ), coords  # fmt: skip
    if sensor.mask is not None:
        points = mask_indices(sensor.mask, shape)
        return Sensor(index=points + offset, **common), points
    return Sensor(**common), None


def fourier_shift(x: Any, shift: float, xp: ModuleType = np) -> Any:
    """Shift sampled signals along their last axis by ``shift`` samples (band-limited; k-Wave's
    ``fourierShift``); ``xp``: numpy or jax.numpy."""
    n = x.shape[-1]
    k = 2 * np.pi * np.fft.rfftfreq(n)
    return xp.fft.irfft(xp.fft.rfft(x, axis=-1) * np.exp(1j * k * shift), n=n, axis=-1)
