"""The acoustic Python API's edge: every value of ``simulate``, ``make_simulator`` and
``simulate_many`` checked here, once, before any work starts, in the user's own names
(``kgrid.dt``, ``medium.sound_speed``, ``source.p_mask``, ``sensor.points``; ``media[i]`` /
``sources[i]`` for a batch), and warnings about input that runs but is probably not what was
meant.

:mod:`sonotile.api.problem` then converts checked input into a solver-ready
:class:`~sonotile.model.problem.Problem` without checking it again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.grid import AXES, make_time
from sonotile.model.problem import RECORDABLE, ProblemError, check_real

if TYPE_CHECKING:
    from sonotile.api.types import KSensor, KSource, KWaveGrid, KWaveMedium, Options

#: The source modes the API takes (k-Wave's names and their underscore spelling).
MODES = ("additive", "additive-no-correction", "additive_no_correction", "dirichlet")
INTERPOLATIONS = ("bli", "linear", "nearest")


def check_inputs(
    kgrid: KWaveGrid,
    medium: KWaveMedium,
    source: KSource,
    sensor: KSensor,
    options: Options,
    medium_name: str = "medium",
    source_name: str = "source",
) -> None:
    """Check one acoustic run's input (raises :class:`ProblemError` naming the value as the
    user named it); ``medium_name``/``source_name``: what the caller calls them."""
    shape = check_grid(kgrid)
    check_options(options, shape, sensor)
    check_medium(medium, shape, options, medium_name)
    dt, nt = run_time(kgrid, medium)
    check_sources(source, shape, medium, source_name, medium_name)
    check_sensor(sensor, kgrid, dt, nt)


def check_grid(kgrid: KWaveGrid) -> tuple[int, ...]:
    """``kgrid``'s shape, spacing [m] and any given ``dt`` [s] and ``nt``; returns the shape."""
    shape, spacing = tuple(kgrid.shape), cast("tuple[float, ...]", kgrid.spacing)
    if not 1 <= len(shape) <= 3 or any(n < 2 for n in shape):
        raise ProblemError(f"kgrid.shape = {shape}: 1 to 3 axes of at least 2 points each")
    if len(spacing) != len(shape) or not all(math.isfinite(d) and d > 0 for d in spacing):
        raise ProblemError(
            f"kgrid.spacing = {spacing} m: one per axis of {shape}, each finite and > 0"
        )
    if kgrid.dt is not None and not (np.isfinite(kgrid.dt) and kgrid.dt > 0):
        raise ProblemError(f"kgrid.dt = {kgrid.dt} s: must be finite and > 0")
    if kgrid.nt is not None and (int(kgrid.nt) != kgrid.nt or kgrid.nt < 1):
        raise ProblemError(f"kgrid.nt = {kgrid.nt}: must be a whole number of steps >= 1")
    return shape


def run_time(kgrid: KWaveGrid, medium: KWaveMedium) -> tuple[float, int]:
    """The run's ``(dt [s], Nt)``: the grid's, else k-Wave's defaults (``dt`` at CFL 0.3,
    ``Nt`` to cross the diagonal at the slowest sound speed; a given ``dt`` keeps that end
    time). ``medium.sound_speed`` checked."""
    if kgrid.dt is not None and kgrid.nt is not None:
        return float(kgrid.dt), int(kgrid.nt)
    c = np.asarray(medium.sound_speed, dtype=np.float64)
    spacing = cast("tuple[float, ...]", kgrid.spacing)
    dt, nt = make_time(tuple(kgrid.shape), spacing, float(c.max()), float(c.min()), dt=kgrid.dt)
    return dt, int(kgrid.nt or nt)


def check_options(options: Options, shape: tuple[int, ...], sensor: KSensor) -> None:
    """The PML, dtype and axisymmetric options against the grid ``shape``."""
    nd = len(shape)
    if options.elastic_interface != "kwave":
        raise ProblemError(f"elastic_interface = {options.elastic_interface!r}: an option of "
                           "the elastic model (a medium with sound_speed_compression and "
                           "sound_speed_shear); the acoustic model has no solid")  # fmt: skip
    size = options.pml_size
    if isinstance(size, str):
        if size != "auto":
            raise ProblemError(f"pml_size = {size!r}: expected points per axis or 'auto'")
        if options.pml_inside:
            raise ProblemError(
                "pml_size = 'auto' needs pml_inside=False (as in k-Wave): it sizes the PML "
                "added around the grid so that each axis's total is fast for the FFT"
            )
    elif size is not None:
        _check_pml_size(size, shape, options)
    alpha = np.atleast_1d(np.asarray(options.pml_alpha, dtype=np.float64))
    if (
        alpha.ndim != 1
        or alpha.size not in (1, nd)
        or not np.all(np.isfinite(alpha) & (alpha >= 0))
    ):
        raise ProblemError(
            f"pml_alpha = {options.pml_alpha}: one value or {nd}, each finite and >= 0 [Np/point]"
        )
    if options.dtype not in ("float32", "float64"):
        raise ProblemError(f"dtype = {options.dtype!r}: expected 'float32' or 'float64'")
    if options.axisymmetric:
        check_axisymmetric(options, shape, sensor)


def _check_pml_size(size: int | Sequence[int], shape: tuple[int, ...], options: Options) -> None:
    """PML thicknesses: one or one per axis, whole numbers >= 0 that (inside the grid) leave
    interior points; the radial layer of an axisymmetric grid is on its outer edge only."""
    s = np.atleast_1d(np.asarray(size))
    if s.ndim != 1 or s.size not in (1, len(shape)) or np.any(s != np.round(s)) or np.any(s < 0):
        raise ProblemError(
            f"pml_size = {size}: one whole number >= 0 or {len(shape)}, or 'auto' [points]"
        )
    if not options.pml_inside:
        return
    for ax, (p, n) in enumerate(zip(np.broadcast_to(s, (len(shape),)), shape)):
        sides = 1 if options.axisymmetric and ax == 1 else 2
        if sides * int(p) >= n:
            raise ProblemError(
                f"pml_size = {size}: {sides} x {int(p)} points of PML along {AXES[ax]} leave no "
                f"interior of the grid's {n} (pml_inside=True; or pml_inside=False adds it)"
            )


def check_axisymmetric(options: Options, shape: tuple[int, ...], sensor: KSensor) -> None:
    """What an axisymmetric run needs: a known symmetry, a 2-D grid, grid-mask sensors."""
    if options.radial_symmetry.upper().removesuffix("-FFT") not in ("WSWA", "WSWS"):
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


def check_shape(
    name: str, value: ArrayLike | None, shape: tuple[int, ...], scalar_ok: bool = True
) -> None:
    """A scalar (when allowed) or an array of the grid ``shape``; suggests the transpose when
    that is what matches (arrays are indexed ``(x, y, z)``)."""
    if value is None or (scalar_ok and np.ndim(value) == 0):
        return
    got = tuple(np.shape(value))
    if got == tuple(shape):
        return
    hint = ""
    if got == tuple(shape)[::-1]:
        hint = (
            f"; its transpose has the grid shape: sonotile indexes arrays (x, y, z) like "
            f"k-Wave, pass {name}.T"
        )
    what = "a scalar or " if scalar_ok else ""
    raise ProblemError(f"{name}: shape {got}, expected {what}the grid shape {tuple(shape)}{hint}")


def check_finite(name: str, value: ArrayLike) -> None:
    """No NaN or Inf in ``value``."""
    if not np.all(np.isfinite(np.asarray(value, dtype=np.float64))):
        raise ProblemError(f"{name}: contains NaN or Inf")


def check_medium(
    medium: KWaveMedium, shape: tuple[int, ...], options: Options, name: str = "medium"
) -> None:
    """Shapes and values of the medium, and its absorption settings."""
    for attr in ("sound_speed", "density", "alpha_coeff", "BonA"):
        v = getattr(medium, attr)
        if v is None and attr in ("sound_speed", "density"):
            raise ProblemError(f"{name}.{attr}: missing")
        check_shape(f"{name}.{attr}", v, shape)
        if v is None:
            continue
        check_real(f"{name}.{attr}", v)
        a = np.asarray(v, dtype=np.float64)
        check_finite(f"{name}.{attr}", a)
        if attr in ("sound_speed", "density") and np.any(a <= 0):
            raise ProblemError(f"{name}.{attr}: must be > 0 everywhere (min {a.min():g})")
        if attr == "alpha_coeff" and np.any(a < 0):
            raise ProblemError(f"{name}.alpha_coeff: must be >= 0 dB/(MHz^y cm) (min {a.min():g})")
    check_real(f"{name}.alpha_power", medium.alpha_power)
    ref = medium.sound_speed_ref
    check_real(f"{name}.sound_speed_ref", ref)
    if ref is not None and not (np.isfinite(ref) and ref > 0):
        raise ProblemError(f"{name}.sound_speed_ref = {ref} m/s: must be finite and > 0")
    _check_absorption(medium, options.axisymmetric, name)


def _check_absorption(medium: KWaveMedium, axisymmetric: bool, name: str) -> None:
    """``alpha_mode`` and ``alpha_power`` of an absorbing medium (power law: ``y != 1``, where
    the dispersion term ``tan(pi y / 2)`` is singular; Stokes takes 2)."""
    if medium.alpha_coeff is None or not np.any(np.asarray(medium.alpha_coeff) != 0):
        return
    if medium.alpha_mode not in (None, "no_dispersion", "stokes"):
        raise ProblemError(
            f"{name}.alpha_mode = {medium.alpha_mode!r}: expected None, 'no_dispersion' or 'stokes'"
        )
    if medium.alpha_mode == "stokes" or axisymmetric:
        return
    y = medium.alpha_power
    if y is None or not np.isfinite(y) or not 0 <= y <= 3:
        raise ProblemError(f"{name}.alpha_power = {y}: must be in [0, 3]")
    if abs(float(y) - 1.0) < 1e-12:
        raise ProblemError(
            f"{name}.alpha_power = 1: the power-law dispersion term is singular "
            "(tan(pi y / 2)); use e.g. 1.01, or alpha_mode='stokes' (y = 2)"
        )


def check_mask(name: str, mask: ArrayLike, shape: tuple[int, ...]) -> None:
    """A binary mask of the grid ``shape`` with at least one point set."""
    check_shape(name, mask, shape, scalar_ok=False)
    if not np.any(np.asarray(mask)):
        raise ProblemError(f"{name}: no points are set")


def check_signal(name: str, signal: ArrayLike, n_points: int) -> None:
    """A source signal ``(Nt,)`` for all ``n_points`` of its mask or ``(n_points, Nt)``, one
    row per point; finite, at least one sample."""
    s = np.asarray(signal, dtype=np.float64)
    rows = s.ndim == 2 and s.shape[0] in (1, n_points)
    if s.ndim != 1 and not rows:
        hint = ""
        if s.ndim == 2 and s.shape[1] == n_points:
            hint = f"; its transpose matches: pass {name}.T (one row per source point)"
        raise ProblemError(
            f"{name}: shape {s.shape}, expected (Nt,) or ({n_points}, Nt) for the "
            f"{n_points} points of its mask{hint}"
        )
    if s.shape[-1] == 0:
        raise ProblemError(f"{name}: no samples")
    check_finite(name, s)


def check_mode(name: str, mode: str) -> None:
    if mode not in MODES:
        raise ProblemError(f"{name} = {mode!r}: expected one of {list(MODES)}")


def check_sources(
    source: KSource,
    shape: tuple[int, ...],
    medium: KWaveMedium,
    name: str = "source",
    medium_name: str = "medium",
) -> None:
    """``p0``, the pressure and velocity sources and the transducer source."""
    if source.p0 is not None:
        check_shape(f"{name}.p0", source.p0, shape, scalar_ok=False)
        check_finite(f"{name}.p0", source.p0)
    if source.p is not None:
        if source.p_mask is None:
            raise ProblemError(f"{name}.p given without {name}.p_mask")
        check_mask(f"{name}.p_mask", source.p_mask, shape)
        check_signal(f"{name}.p", source.p, int(np.count_nonzero(source.p_mask)))
        check_mode(f"{name}.p_mode", source.p_mode)
    _check_velocity(source, shape, name)
    _check_transducer(source, shape, medium, name, medium_name)


def _check_velocity(source: KSource, shape: tuple[int, ...], name: str) -> None:
    d = len(shape)
    comps = (source.ux, source.uy, source.uz)
    for ax in range(d, 3):
        if comps[ax] is not None:
            raise ProblemError(f"{name}.u{AXES[ax]} given for a {d}-D grid")
    if all(v is None for v in comps):
        return
    if source.u_mask is None:
        raise ProblemError(f"{name}.ux/uy/uz given without {name}.u_mask")
    check_mask(f"{name}.u_mask", source.u_mask, shape)
    n = int(np.count_nonzero(source.u_mask))
    for ax, v in enumerate(comps[:d]):
        if v is not None:
            check_signal(f"{name}.u{AXES[ax]}", v, n)
    check_mode(f"{name}.u_mode", source.u_mode)


def _check_transducer(
    source: KSource, shape: tuple[int, ...], medium: KWaveMedium, name: str, medium_name: str
) -> None:
    """Mask, signal and delays together; delays whole steps >= 0 within the signal; the
    sound speed uniform over the transducer's points."""
    mask, sig = source.transducer_mask, source.transducer_signal
    if mask is None and sig is None:
        return
    if mask is None or sig is None:
        raise ProblemError(f"{name}.transducer_mask and {name}.transducer_signal go together")
    check_mask(f"{name}.transducer_mask", mask, shape)
    n = int(np.count_nonzero(mask))
    s = np.asarray(sig, dtype=np.float64).reshape(-1)
    check_finite(f"{name}.transducer_signal", s)
    delays = source.transducer_delays
    delays = np.zeros(n, np.int64) if delays is None else np.asarray(delays)
    if delays.shape != (n,) or not np.issubdtype(delays.dtype, np.integer):
        raise ProblemError(
            f"{name}.transducer_delays: expected {n} integer delays [steps], "
            f"got {delays.shape} {delays.dtype}"
        )
    if np.any(delays < 0):
        raise ProblemError(f"{name}.transducer_delays: delays must be >= 0 steps")
    if s.size == 0 or delays.max() > s.size:
        raise ProblemError(
            f"{name}.transducer_signal: {s.size} samples, too short for the largest of "
            f"{name}.transducer_delays ({int(delays.max())} steps)"
        )
    c = np.asarray(medium.sound_speed, dtype=np.float64)
    if c.ndim > 0 and not np.allclose(c[np.asarray(mask, bool)], c.max()):
        raise ProblemError(
            f"{name}.transducer_mask: {medium_name}.sound_speed must be uniform over its points"
        )


def is_cartesian(mask: ArrayLike, shape: tuple[int, ...]) -> bool:
    """A sensor mask given as Cartesian points ``(ndim, N)`` rather than a grid-shaped mask."""
    m = np.asarray(mask)
    return m.shape != shape and m.ndim == 2 and m.shape[0] == len(shape) and m.dtype.kind == "f"


def check_sensor(sensor: KSensor, kgrid: KWaveGrid, dt: float, nt: int) -> None:
    """Where the sensor records (a grid mask, Cartesian points ``(D, N)`` [m], grid indices
    ``points`` or cuboid ``corners``) and what: quantities, first step, the CW window, on the
    run's time axis (``dt`` [s], ``nt``)."""
    shape = tuple(kgrid.shape)
    record = tuple(sensor.record)
    for q in record:
        if q not in RECORDABLE:
            raise ProblemError(f"sensor.record: unknown quantity {q!r}; known: {RECORDABLE}")
    if not 1 <= sensor.record_start_index <= nt:
        raise ProblemError(
            f"sensor.record_start_index = {sensor.record_start_index}: must be in 1..Nt = "
            f"1..{nt} (1-based, as in k-Wave)"
        )
    _check_cw(sensor, record, dt, nt)
    if sensor.corners is not None:
        check_corners(sensor.corners, shape)
    elif sensor.points is not None:
        check_points(sensor.points, shape)
    elif sensor.mask is not None and is_cartesian(sensor.mask, shape):
        check_cartesian(sensor.mask, kgrid, sensor)
    elif sensor.mask is not None:
        check_mask("sensor.mask", sensor.mask, shape)
    elif any(not q.endswith(("_all", "_final")) for q in record):
        raise ProblemError(
            f"sensor: recording {record} needs sensor points (sensor.mask, sensor.points or "
            "sensor.corners)"
        )


def _check_cw(sensor: KSensor, record: tuple[str, ...], dt: float, nt: int) -> None:
    """``cw_frequency`` (> 0, below the time step's Nyquist frequency) and a ``cw_periods``
    window that fits in the recorded steps, where ``p_cw`` is recorded."""
    if not {"p_cw", "p_cw_all"} & set(record):
        return
    f = sensor.cw_frequency
    if f is None or not np.isfinite(f) or f <= 0:
        raise ProblemError(f"sensor.cw_frequency = {f}: recording p_cw needs a frequency > 0 [Hz]")
    if 2 * f * dt >= 1:
        raise ProblemError(
            f"sensor.cw_frequency = {f:g} Hz: at or above the Nyquist frequency "
            f"{0.5 / dt:g} Hz of the time step"
        )
    periods = float(sensor.cw_periods)
    m = int(round(periods / (float(f) * dt))) if np.isfinite(periods) and periods > 0 else 0
    recorded = nt - (sensor.record_start_index - 1)
    if not 1 <= m <= recorded:
        raise ProblemError(
            f"sensor.cw_periods = {sensor.cw_periods}: window of {m} steps must fit in the "
            f"{recorded} recorded steps"
        )


def check_corners(corners: Sequence, shape: tuple[int, ...]) -> None:
    """Cuboid corners: ``(lo, hi)`` pairs of 0-based indices inside the grid, ``hi >= lo``."""
    nd = len(shape)
    try:
        cub = np.array([[lo, hi] for lo, hi in corners], dtype=np.float64)
    except (TypeError, ValueError):
        cub = np.zeros((0,))
    if (cub.ndim != 3 or cub.shape[0] == 0 or cub.shape[2] != nd or np.any(cub != np.round(cub))
            or np.any(cub < 0) or np.any(cub >= np.asarray(shape))):  # fmt: skip
        raise ProblemError(
            f"sensor.corners: expected (lo, hi) pairs of {nd} indices inside the grid {shape}"
        )
    if np.any(cub[:, 1] < cub[:, 0]):
        raise ProblemError("sensor.corners: the second corner (hi) must not be below the first")


def check_points(points: ArrayLike, shape: tuple[int, ...]) -> None:
    """``sensor.points``: ``(N, ndim)`` 0-based grid indices inside the grid, with the
    transpose hinted and metres recognised."""
    p, nd = np.asarray(points), len(shape)
    if p.dtype.kind == "f" and np.any(p != np.round(p)):
        raise ProblemError(
            "sensor.points: non-integer values; points are 0-based grid indices "
            f"(N, {nd}), not positions in metres"
        )
    if p.ndim != 2 or p.shape[1] != nd or p.shape[0] == 0:
        hint = ""
        if p.ndim == 2 and p.shape[0] == nd:
            hint = "; its transpose matches: pass sensor.points.T (one row per point)"
        raise ProblemError(
            f"sensor.points: shape {p.shape}, expected (N, {nd}) 0-based grid indices{hint}"
        )
    bad = np.any((p < 0) | (p >= np.asarray(shape)), axis=1)
    if np.any(bad):
        raise ProblemError(
            f"sensor.points: point {tuple(p[np.argmax(bad)].tolist())} is outside the grid "
            f"{shape}; points are 0-based grid indices (0..N-1 per axis), not metres"
        )


def grid_points(points: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """``sensor.points`` checked (:func:`check_points`), as ``(N, ndim)`` int64 indices."""
    check_points(points, shape)
    return np.asarray(points).astype(np.int64)


def check_cartesian(mask: ArrayLike, kgrid: KWaveGrid, sensor: KSensor) -> None:
    """Cartesian sensor points ``(ndim, N)`` [m] relative to the grid centre (k-Wave's
    ``kgrid.x``: ``x = (i - N // 2) dx``): finite, at least one, inside the grid; and how they
    are interpolated."""
    pts = np.asarray(mask, dtype=np.float64)
    if pts.shape[1] == 0 or not np.all(np.isfinite(pts)):
        raise ProblemError(f"sensor.mask: Cartesian points {pts.shape} must be finite, N >= 1")
    shape = np.asarray(kgrid.shape)
    coords = pts.T / np.asarray(kgrid.spacing) + shape // 2
    if np.any(coords < 0) or np.any(coords > shape - 1):
        raise ProblemError(f"sensor.mask: a Cartesian point lies outside the grid {kgrid.shape}")
    if sensor.cart_interp not in INTERPOLATIONS:
        raise ProblemError(
            f"sensor.cart_interp = {sensor.cart_interp!r}: expected one of {INTERPOLATIONS} "
            "(the interpolation of Cartesian points)"
        )
    if not 0 < float(sensor.bli_tolerance) < 1:
        raise ProblemError(f"sensor.bli_tolerance = {sensor.bli_tolerance}: must be in (0, 1)")


def absorption_warnings(medium: KWaveMedium, axisymmetric: bool) -> list[str]:
    """An ``alpha_power`` other than 2 that the run replaces with 2 (Stokes absorption: an
    axisymmetric run or ``alpha_mode="stokes"``), as k-Wave warns and does."""
    absorbing = medium.alpha_coeff is not None and np.any(np.asarray(medium.alpha_coeff) != 0)
    stokes = axisymmetric or medium.alpha_mode == "stokes"
    if not (absorbing and stokes) or float(np.asarray(medium.alpha_power)) == 2.0:
        return []
    why = "axisymmetric=True" if axisymmetric else "medium.alpha_mode = 'stokes'"
    return [
        f"{why}: absorption is Stokes' (alpha_power = 2, medium.alpha_coeff in dB/(MHz^2 cm)); "
        f"medium.alpha_power = {medium.alpha_power} is ignored, as in k-Wave (set it to 2 to "
        "silence this warning)"
    ]


def record_warnings(record: tuple[str, ...]) -> list[str]:
    """A sensor asked to record nothing (the problem-level warnings are
    :func:`sonotile.physics.acoustic.checks.input_warnings`)."""
    return [] if record else ["sensor.record is empty: nothing will be recorded"]


def with_defaults(defaults: Mapping[str, Any], params: Mapping[str, Any] | None) -> dict:
    """A simulator's ``defaults`` updated by the ``params`` of one call; a name that is not a
    parameter of the simulation is refused."""
    params = {} if params is None else dict(params)
    unknown = set(params) - set(defaults)
    if unknown:
        raise ProblemError(
            f"params: {sorted(unknown)} not parameters of this simulation "
            f"(it takes {sorted(defaults)}; absent effects and sources cannot be added)"
        )
    return {**defaults, **params}
