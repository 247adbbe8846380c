"""The solver-ready problem: pure data (numpy), validated when built, no JAX.

This is the lowest layer, the one k-Wave's C++ solver reads from its input file: source terms are
already scaled to the units the step injects (density units for pressure sources, m/s for velocity
sources), and the densities on the staggered grids are given. :mod:`sonotile.api` builds it from
k-Wave-style user input; :mod:`sonotile.kwave.reader` builds it from a k-Wave input file.

Shapes use the grid's ``(x, y, z)`` order. A medium property is either a Python float
(homogeneous) or a float array of the grid's shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, TypeGuard

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.grid import AXES, Grid
from sonotile.model.lazy import LazyField, Sliceable, is_lazy
from sonotile.model.staggering import staggered_mean

#: A medium property: a float (homogeneous), an array of the grid's shape, or a lazily read field.
Scalar = float | np.ndarray | LazyField
Absorption = Literal["lossless", "power_law", "stokes"]
SourceMode = Literal["dirichlet", "additive", "additive_no_correction"]
SOURCE_MODES = ("dirichlet", "additive_no_correction", "additive")  # k-Wave's 0, 1, 2


class ProblemError(ValueError):
    """Invalid simulation input; the message names the parameter."""


def check_real(name: str, value: object) -> None:
    """Refuse ``value`` (a number, an array or a lazily read field: its dtype alone, nothing
    read) in the user's ``name`` when it holds complex numbers (whatever their imaginary part:
    a medium property is real) or anything that is not a number."""
    dtype = getattr(value, "dtype", None)
    arr = None if dtype is not None and not isinstance(value, np.ndarray) else np.asarray(value)
    found = np.dtype(dtype if arr is None else arr.dtype)
    if found.kind == "c":
        raise ProblemError(f"{name}: complex values ({found}) found; expected real numbers "
                           "(the imaginary part is not dropped)")  # fmt: skip
    if found.kind in "biuf" or arr is None:
        return
    try:
        np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError):
        raise ProblemError(f"{name}: expected real numbers, found {found} values such as "
                           f"{arr.reshape(-1)[:1].tolist()}") from None  # fmt: skip


#: The per-hyperslab checks of a lazy field that each check implies.
_IMPLIED = {"finite": ("finite", "positive", "nonnegative"), "positive": ("positive",),
            "nonnegative": ("nonnegative", "positive")}  # fmt: skip


def _checked_lazily(value: Sliceable, name: str, check: str) -> LazyField:
    """A field read piece by piece, checked as each piece is made: a lazy field that already
    checks so (made by a front end's edge, in its user's names) as it is."""
    if is_lazy(value) and value.check in _IMPLIED[check]:
        return value
    return LazyField.of(value, name, check)


def _field(
    name: str,
    value: ArrayLike | Sliceable | None,
    grid: Grid,
    *,
    positive: bool = False,
    allow_none: bool = False,
) -> Scalar | None:
    """Validate a scalar-or-field property and return it as float or float32/float64 array
    (float32 input, e.g. a k-Wave file, stays float32: no host copy at twice the size)."""
    if value is None:
        if allow_none:
            return None
        raise ProblemError(f"{name}: missing")
    check_real(name, value)
    if is_lazy(value) or (is_field(value) and not isinstance(value, np.ndarray)):
        # read piece by piece (a distributed run's hyperslabs), checked as each piece is made
        if tuple(value.shape) != grid.shape:
            raise ProblemError(
                f"{name}: shape {tuple(value.shape)} is not the grid shape {grid.shape}"
            )
        return _checked_lazily(value, name, "positive" if positive else "finite")
    arr = np.asarray(value)
    if arr.dtype != np.float32:
        arr = np.asarray(value, dtype=np.float64)
    if arr.size == 1:
        arr = arr.reshape(())
    elif arr.shape != grid.shape:
        raise ProblemError(
            f"{name}: shape {arr.shape} is neither a scalar nor the grid shape {grid.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ProblemError(f"{name}: contains NaN or Inf")
    if positive and np.any(arr <= 0):
        raise ProblemError(f"{name}: must be > 0 everywhere (min {arr.min():g})")
    return float(arr) if arr.ndim == 0 else arr


def is_field(v: object) -> TypeGuard[Sliceable]:
    """True when a medium property is a full grid field (an array, or a lazily read field)
    rather than a scalar."""
    return getattr(v, "ndim", 0) > 0 and hasattr(v, "shape")


@dataclass(frozen=True)
class Medium:
    """Solver-ready medium.

    Attributes:
        c0: sound speed [m/s].
        rho0: ambient density [kg/m^3].
        rho0_sg: density on each staggered grid (``x + dx/2`` for axis x, ...) [kg/m^3], one
            per axis, each scalar or field. ``None`` means "interpolate from rho0" (k-Wave's rule).
        c_ref: reference sound speed of the k-space correction and PML [m/s]; default max(c0).
        bona: nonlinearity parameter B/A (dimensionless) or ``None`` for a linear medium.
        alpha_coeff: absorption prefactor [dB/(MHz^y cm)], or ``None`` when lossless.
        alpha_power: power-law exponent y (0 < y < 3, y != 1 for power-law absorption).
        absorption: ``"lossless"``, ``"power_law"`` (absorption and dispersion) or ``"stokes"``.
        dispersion: keep the dispersive (eta) term of the power-law model; switching it off
            gives absorption without dispersion (for studies and tests; k-Wave keeps it).
    """

    c0: Scalar
    rho0: Scalar
    grid: Grid
    rho0_sg: tuple[Scalar, ...] | None = None
    c_ref: float | None = None
    bona: Scalar | None = None
    alpha_coeff: Scalar | None = None
    alpha_power: float | None = None
    absorption: Absorption = "lossless"
    dispersion: bool = True

    def __post_init__(self) -> None:
        g = self.grid
        set_ = object.__setattr__
        set_(self, "c0", _field("medium.c0 [m/s]", self.c0, g, positive=True))
        set_(self, "rho0", _field("medium.rho0 [kg/m^3]", self.rho0, g, positive=True))
        if self.rho0_sg is None:
            rho0 = np.asarray(self.rho0) if is_lazy(self.rho0) else self.rho0
            set_(self, "rho0_sg", staggered_density(rho0, g.ndim))
        else:
            if len(self.rho0_sg) != g.ndim:
                raise ProblemError(
                    f"medium.rho0_sg: need {g.ndim} staggered densities, got {len(self.rho0_sg)}"
                )
            set_(
                self,
                "rho0_sg",
                tuple(
                    _field(f"medium.rho0_sg{AXES[i]}", r, g, positive=True)
                    for i, r in enumerate(self.rho0_sg)
                ),
            )
        check_real("medium.c_ref", self.c_ref)
        c_ref = float(np.max(np.asarray(self.c0))) if self.c_ref is None else float(self.c_ref)
        if not (np.isfinite(c_ref) and c_ref > 0):
            raise ProblemError(f"medium.c_ref = {self.c_ref}: must be finite and > 0")
        set_(self, "c_ref", c_ref)
        set_(self, "bona", _field("medium.BonA", self.bona, g, allow_none=True))
        if self.absorption not in ("lossless", "power_law", "stokes"):
            raise ProblemError(
                f"medium.absorption = {self.absorption!r}: expected lossless, power_law or stokes"
            )
        if self.absorption != "lossless":
            alpha = _field("medium.alpha_coeff", self.alpha_coeff, g)
            if is_lazy(alpha):
                alpha = _checked_lazily(alpha, "medium.alpha_coeff [dB/(MHz^y cm)]", "nonnegative")
            elif np.any(np.asarray(alpha) < 0):
                raise ProblemError("medium.alpha_coeff: must be >= 0 dB/(MHz^y cm)")
            set_(self, "alpha_coeff", alpha)
            y = self.alpha_power
            check_real("medium.alpha_power", y)
            if y is None or not np.isfinite(y) or not 0 <= y <= 3:
                raise ProblemError(f"medium.alpha_power = {y}: must be in [0, 3]")
            if self.absorption == "power_law" and abs(float(y) - 1.0) < 1e-12:
                raise ProblemError(
                    "medium.alpha_power = 1: the power-law dispersion term is singular "
                    "(tan(pi y / 2)); use e.g. 1.01, or absorption='stokes' with y = 2"
                )
            set_(self, "alpha_power", float(y))

    @property
    def nonlinear(self) -> bool:
        return self.bona is not None

    @property
    def heterogeneous(self) -> bool:
        return any(is_field(v) for v in (self.c0, self.rho0, self.bona, self.alpha_coeff))


def staggered_density(rho0: float | np.ndarray, ndim: int) -> tuple[Scalar, ...]:
    """k-Wave's densities on the staggered grids (:func:`~sonotile.model.staggering.staggered_mean`
    along each axis), in at least float32."""
    if not is_field(rho0):
        return tuple(float(rho0) for _ in range(ndim))
    rho = np.asarray(rho0)
    rho = rho.astype(np.result_type(rho, np.float32), copy=False)
    return tuple(staggered_mean(rho, ax) for ax in range(ndim))


def _index_array(name: str, index: ArrayLike, grid: Grid) -> np.ndarray:
    idx = np.asarray(index)
    if idx.ndim != 2 or idx.shape[1] != grid.ndim:
        raise ProblemError(
            f"{name}: expected an (N, {grid.ndim}) array of grid indices, got {idx.shape}"
        )
    if idx.shape[0] == 0:
        raise ProblemError(f"{name}: no points")
    if not np.issubdtype(idx.dtype, np.integer):
        raise ProblemError(f"{name}: indices must be integers, got {idx.dtype}")
    hi = np.asarray(grid.shape)
    bad = np.any((idx < 0) | (idx >= hi), axis=1)
    if np.any(bad):
        first = idx[np.argmax(bad)]
        raise ProblemError(f"{name}: point {tuple(first)} is outside the grid {grid.shape}")
    return idx.astype(np.int64)


@dataclass(frozen=True)
class MaskSource:
    """A time-varying source on a set of grid points, solver-ready (already scaled).

    Attributes:
        index: ``(Nsrc, ndim)`` integer grid indices (0-based), in signal-column order.
        signal: ``(Nt_src,)`` one signal for all points, or ``(Nt_src, Nsrc)`` one per point.
            Pressure sources in density units [kg/m^3] (per split component); velocity sources
            in [m/s]. Applied at steps ``n < Nt_src``.
        mode: ``"dirichlet"`` (replace), ``"additive_no_correction"`` (add at the points) or
            ``"additive"`` (add, filtered in k-space by ``cos(c_ref k dt / 2)``).
    """

    index: np.ndarray
    signal: np.ndarray
    mode: SourceMode = "additive"
    name: str = "source"

    def validate(self, grid: Grid) -> MaskSource:
        idx = _index_array(f"{self.name}.index", self.index, grid)
        sig = np.asarray(self.signal, dtype=np.float64)
        if sig.ndim == 2 and sig.shape[1] == 1 and idx.shape[0] != 1:
            sig = sig[:, 0]
        if sig.ndim not in (1, 2) or (sig.ndim == 2 and sig.shape[1] != idx.shape[0]):
            raise ProblemError(
                f"{self.name}.signal: shape {sig.shape}; expected (Nt_src,) or (Nt_src, "
                f"{idx.shape[0]}) for {idx.shape[0]} source points"
            )
        if sig.shape[0] == 0:
            raise ProblemError(f"{self.name}.signal: empty")
        if not np.all(np.isfinite(sig)):
            raise ProblemError(f"{self.name}.signal: contains NaN or Inf")
        if self.mode not in SOURCE_MODES:
            raise ProblemError(f"{self.name}.mode = {self.mode!r}: expected one of {SOURCE_MODES}")
        return MaskSource(idx, sig, self.mode, self.name)

    @property
    def length(self) -> int:
        """Number of steps the source is applied for."""
        return int(np.shape(self.signal)[0])

    @property
    def common_signal(self) -> np.ndarray | None:
        """The one signal ``(Nt_src,)`` that every point carries, or None where they differ."""
        sig = np.asarray(self.signal)
        if sig.ndim == 1:
            return sig
        return sig[:, 0] if bool(np.all(sig == sig[:, :1])) else None

    @property
    def many(self) -> bool:
        return np.ndim(self.signal) == 2


@dataclass(frozen=True)
class TransducerSource:
    """k-Wave's transducer source: one signal, a delay per point, added to ``ux`` (solver-ready).

    ``ux[index[i]] += signal[delay[i] + n]`` for steps ``n < length``.

    Attributes:
        index: ``(Nsrc, ndim)`` grid indices (0-based).
        signal: ``(Nt_in,)`` input signal, already scaled [m/s].
        delay: ``(Nsrc,)`` integer delays [steps], 0-based.
        length: number of steps the source is applied; default ``Nt_in - max(delay)``.
    """

    index: np.ndarray
    signal: np.ndarray
    delay: np.ndarray
    length: int | None = None

    def validate(self, grid: Grid) -> TransducerSource:
        idx = _index_array("transducer.index", self.index, grid)
        sig = np.asarray(self.signal, dtype=np.float64).reshape(-1)
        delay = np.asarray(self.delay).reshape(-1)
        if delay.shape[0] != idx.shape[0]:
            raise ProblemError(
                f"transducer.delay: {delay.shape[0]} delays for {idx.shape[0]} source points"
            )
        if np.any(delay < 0):
            raise ProblemError("transducer.delay: delays must be >= 0 steps")
        length = int(sig.shape[0] - delay.max()) if self.length is None else int(self.length)
        if length < 0 or delay.max() + length > sig.shape[0]:
            raise ProblemError(
                f"transducer: signal of {sig.shape[0]} samples is too short for max delay "
                f"{int(delay.max())} + {length} steps"
            )
        if not np.all(np.isfinite(sig)):
            raise ProblemError("transducer.signal: contains NaN or Inf")
        return TransducerSource(idx, sig, delay.astype(np.int64), length)


@dataclass(frozen=True)
class Sources:
    """All sources of a simulation (solver-ready).

    Attributes:
        p0: initial pressure [Pa], scalar or grid field, or ``None``.
        p: pressure (mass) source, signal in density units per split component, or ``None``.
        u: velocity sources per axis (``None`` entries for absent components).
        transducer: k-Wave transducer source on ``ux``, or ``None``.
    """

    p0: np.ndarray | LazyField | None = None
    p: MaskSource | None = None
    u: tuple[MaskSource | None, ...] = ()
    transducer: TransducerSource | None = None

    def validate(self, grid: Grid) -> Sources:
        p0: np.ndarray | LazyField | None = None
        if self.p0 is not None and (is_lazy(self.p0) or not isinstance(self.p0, np.ndarray)
                                    and is_field(self.p0)):  # fmt: skip
            if tuple(self.p0.shape) != grid.shape:
                raise ProblemError(
                    f"source.p0: shape {tuple(self.p0.shape)}, expected the grid shape {grid.shape}"
                )
            p0 = _checked_lazily(self.p0, "source.p0 [Pa]", "finite")
        elif self.p0 is not None:
            p0 = np.asarray(self.p0, dtype=np.float64)
            if p0.shape != grid.shape:
                raise ProblemError(
                    f"source.p0: shape {p0.shape}, expected the grid shape {grid.shape}"
                )
            if not np.all(np.isfinite(p0)):
                raise ProblemError("source.p0: contains NaN or Inf")
        u = tuple(self.u) + (None,) * (grid.ndim - len(self.u))
        if len(u) != grid.ndim:
            raise ProblemError(f"source.u: {len(self.u)} components for a {grid.ndim}-D grid")
        return Sources(
            p0=p0,
            p=None if self.p is None else self.p.validate(grid),
            u=tuple(None if s is None else s.validate(grid) for s in u),
            transducer=None if self.transducer is None else self.transducer.validate(grid),
        )


#: Quantities a sensor can record (k-Wave names; ``u`` stands for ux, uy, uz).
RECORDABLE = (
    "p", "p_max", "p_min", "p_rms", "p_final", "p_max_all", "p_min_all",
    "u", "u_non_staggered", "u_max", "u_min", "u_rms", "u_final", "u_max_all", "u_min_all",
    "I", "I_avg", "p_cw", "p_cw_all",
)  # fmt: skip


@dataclass(frozen=True)
class Sensor:
    """Where and what to record.

    Attributes:
        index: ``(Ns, ndim)`` integer grid indices (0-based); output columns follow this order.
        cuboids: ``(Nc, 2, ndim)`` inclusive corner indices (0-based) of cuboid regions; used
            instead of ``index`` when given.
        positions: ``(Ns, ndim)`` continuous 0-based grid coordinates of points off the grid
            (read by ``interpolation``); used instead of ``index`` when given.
        record: quantities from :data:`RECORDABLE`.
        start: first recorded step (0-based); applies to all but the ``*_final`` fields.
        interpolation: ``"bli"``, ``"linear"`` or ``"nearest"`` (:mod:`sonotile.model.bli`).
        bli_tolerance: truncation tolerance of the band-limited stencil (0 < tol < 1).
        cw_frequency: frequency [Hz] of ``p_cw`` / ``p_cw_all`` (steady-state amplitude and
            phase from a single-bin DFT over the last ``cw_periods`` periods).
        cw_periods: length of that window [periods of ``cw_frequency``].
    """

    index: np.ndarray | None = None
    cuboids: np.ndarray | None = None
    record: tuple[str, ...] = ("p",)
    start: int = 0
    positions: np.ndarray | None = None
    interpolation: str = "bli"
    bli_tolerance: float = 0.05
    cw_frequency: float | None = None
    cw_periods: float = 3.0

    def validate(self, grid: Grid) -> Sensor:
        record = tuple(dict.fromkeys(self.record))
        for q in record:
            if q not in RECORDABLE:
                raise ProblemError(f"sensor.record: unknown quantity {q!r}; known: {RECORDABLE}")
        if not 0 <= int(self.start) < grid.nt:
            raise ProblemError(f"sensor.start = {self.start}: must be in [0, nt) = [0, {grid.nt})")
        _check_cw(self, record, grid)
        needs_points = any(not (q.endswith("_all") or q.endswith("_final")) for q in record)
        index = cuboids = positions = None
        if self.cuboids is not None:
            c = np.asarray(self.cuboids)
            if c.ndim != 3 or c.shape[1:] != (2, grid.ndim) or c.shape[0] == 0:
                raise ProblemError(
                    f"sensor.cuboids: shape {c.shape}, expected (Nc, 2, {grid.ndim})"
                )
            _index_array("sensor.cuboids", c.reshape(-1, grid.ndim), grid)
            if np.any(c[:, 1] < c[:, 0]):
                raise ProblemError("sensor.cuboids: second corner must not be below the first")
            cuboids = c.astype(np.int64)
        elif self.positions is not None:
            positions = _positions(self, grid)
        elif self.index is not None:
            index = _index_array("sensor.index", self.index, grid)
        elif needs_points:
            raise ProblemError(f"sensor: recording {record} needs sensor points (index or cuboids)")
        return replace(
            self, index=index, cuboids=cuboids, positions=positions, record=record,
            start=int(self.start),
        )  # fmt: skip


def _positions(sensor: Sensor, grid: Grid) -> np.ndarray:
    """Validated off-grid sensor coordinates ``(Ns, ndim)`` (continuous grid indices)."""
    pos = np.asarray(sensor.positions, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[1] != grid.ndim or pos.shape[0] == 0:
        raise ProblemError(f"sensor.positions: shape {pos.shape}, expected (Ns, {grid.ndim})")
    if not np.all(np.isfinite(pos)):
        raise ProblemError("sensor.positions: contains NaN or Inf")
    if np.any(pos < 0) or np.any(pos > np.array(grid.shape) - 1):
        raise ProblemError(f"sensor.positions: a point lies outside the grid {grid.shape}")
    if sensor.interpolation not in ("bli", "linear", "nearest"):
        raise ProblemError(
            f"sensor.interpolation = {sensor.interpolation!r}: expected bli, linear or nearest"
        )
    if not 0 < float(sensor.bli_tolerance) < 1:
        raise ProblemError(f"sensor.bli_tolerance = {sensor.bli_tolerance}: must be in (0, 1)")
    return pos


def cw_window(sensor: Sensor, dt: float) -> int:
    """Steps in the CW window: ``cw_periods`` periods of ``cw_frequency``, rounded (``dt`` [s])."""
    assert sensor.cw_frequency is not None  # asked for p_cw only, where validation requires it
    return int(round(float(sensor.cw_periods) / (float(sensor.cw_frequency) * dt)))


def _check_cw(sensor: Sensor, record: tuple, grid: Grid) -> None:
    if not {"p_cw", "p_cw_all"} & set(record):
        return
    f = sensor.cw_frequency
    if f is None or not np.isfinite(f) or f <= 0:
        raise ProblemError(f"sensor.cw_frequency = {f}: recording p_cw needs a frequency > 0 [Hz]")
    if 2 * f * grid.dt >= 1:
        raise ProblemError(
            f"sensor.cw_frequency = {f:g} Hz: at or above the Nyquist frequency "
            f"{0.5 / grid.dt:g} Hz of the time step"
        )
    m = cw_window(sensor, grid.dt) if sensor.cw_periods > 0 else 0
    if not 1 <= m <= grid.nt - int(sensor.start):
        raise ProblemError(
            f"sensor.cw_periods = {sensor.cw_periods}: window of {m} steps must fit in the "
            f"{grid.nt - int(sensor.start)} recorded steps"
        )


@dataclass(frozen=True)
class Pml:
    """Split-field perfectly matched layer inside the grid.

    Attributes:
        size: thickness per axis [grid points].
        alpha: absorption per axis [Nepers per grid point] (k-Wave's default 2).
    """

    size: tuple[int, ...]
    alpha: tuple[float, ...]

    def validate(self, grid: Grid, one_sided: tuple[int, ...] = ()) -> Pml:
        """Checked against ``grid``; ``one_sided``: axes whose layer is on one edge only (the
        radial axis of an axisymmetric grid)."""
        size = tuple(int(s) for s in self.size)
        alpha = tuple(float(a) for a in self.alpha)
        if len(size) != grid.ndim or len(alpha) != grid.ndim:
            raise ProblemError(f"pml: size {size} / alpha {alpha} need {grid.ndim} entries")
        for ax, (s, n) in enumerate(zip(size, grid.shape)):
            if s < 0 or (1 if ax in one_sided else 2) * s >= n:
                raise ProblemError(
                    f"pml_{AXES[ax]}_size = {s}: must be >= 0 and leave interior points "
                    f"(grid has {n})"
                )
        if not all(np.isfinite(a) and a >= 0 for a in alpha):
            raise ProblemError(f"pml alpha {alpha}: must be finite and >= 0")
        return Pml(size, alpha)

    @staticmethod
    def default(ndim: int) -> Pml:
        """k-Wave's defaults: 20 points in 1-D/2-D, 10 in 3-D, alpha 2."""
        n = 10 if ndim == 3 else 20
        return Pml((n,) * ndim, (2.0,) * ndim)


def pml_profile(
    n: int, size: int, alpha: float, c_ref: float, d: float, dt: float, staggered: bool
) -> np.ndarray:
    """k-Wave's ``getPML`` along one axis of ``n`` points: the multiplier (1 outside the layer),
    shape ``(n,)``, float64.

    ``exp(-alpha (c_ref/d) (dt/2) (x/size)^4)`` with x the depth into the layer of ``size``
    points, shifted by +1/2 on the staggered grid; ``alpha`` [Np per point], ``c_ref`` [m/s],
    ``d`` the spacing [m], ``dt`` [s].
    """
    prof = np.ones(n)
    if size == 0 or alpha == 0:
        return prof
    i = np.arange(size, dtype=np.float64)
    shift = 0.5 if staggered else 0.0
    left = ((size - i - shift) / size) ** 4
    right = ((i + 1 + shift) / size) ** 4
    rate = alpha * (c_ref / d) * (dt / 2)
    prof[:size] = np.exp(-rate * left)
    prof[n - size :] = np.exp(-rate * right)
    return prof


@dataclass(frozen=True)
class Problem:
    """A complete, validated, solver-ready simulation.

    ``radial_symmetry``: None for a Cartesian grid; ``"WSWA"`` or ``"WSWS"`` for k-Wave's
    axisymmetric coordinates on a 2-D grid (x axial, y radial with its first row on the axis;
    the symmetry of the radial continuation at the outer edge, see
    :mod:`sonotile.spectral.radial`)."""

    grid: Grid
    medium: Medium
    sources: Sources
    sensor: Sensor
    pml: Pml | None = None
    dtype: str = "float32"
    extras: dict = field(default_factory=dict)
    radial_symmetry: str | None = None

    def __post_init__(self) -> None:
        g = self.grid
        if self.medium.grid != g:
            raise ProblemError("medium was built for a different grid")
        object.__setattr__(self, "sources", self.sources.validate(g))
        object.__setattr__(self, "sensor", self.sensor.validate(g))
        pml = Pml.default(g.ndim) if self.pml is None else self.pml
        one_sided = (1,) if self.radial_symmetry is not None else ()
        object.__setattr__(self, "pml", pml.validate(g, one_sided))
        if self.dtype not in ("float32", "float64"):
            raise ProblemError(f"dtype = {self.dtype!r}: expected float32 or float64")
        if self.radial_symmetry is not None:
            _check_axisymmetric(self)


def _check_axisymmetric(problem: Problem) -> None:
    """What k-Wave's axisymmetric model allows: a 2-D grid, no power-law absorption."""
    if problem.radial_symmetry not in ("WSWA", "WSWS"):
        raise ProblemError(
            f"radial_symmetry = {problem.radial_symmetry!r}: expected 'WSWA' or 'WSWS'"
        )
    if problem.grid.ndim != 2:
        raise ProblemError(
            f"axisymmetric: needs a 2-D grid (x axial, y radial), got {problem.grid.ndim}-D"
        )
    if problem.medium.absorption == "power_law":
        raise ProblemError(
            "axisymmetric: power-law absorption is not available (k-Wave's axisymmetric model "
            "absorbs as alpha_power = 2: use absorption='stokes')"
        )
