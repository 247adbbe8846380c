"""What a k-Wave user describes: grid, medium, source, sensor (and the options that turn them
into a solver-ready problem). Conventions: arrays indexed ``(x, y, z)``; SI units; masks are
boolean arrays of the grid shape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.grid import make_time
from sonotile.model.problem import ProblemError

if TYPE_CHECKING:
    pass


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
        alpha_power: power-law exponent y (Stokes absorption, ``alpha_mode="stokes"`` or an
            axisymmetric run, takes 2 and warns when given another, as k-Wave does).
        alpha_mode: ``None`` (absorption and dispersion), ``"no_dispersion"`` or ``"stokes"``.
        BonA: nonlinearity parameter B/A (``None``: linear).
        sound_speed_ref: reference sound speed of the k-space correction [m/s] (default max).
        sound_speed_compression: compressional speed of k-Wave's elastic model [m/s]
            (:class:`KWaveElasticMedium`); given, ``simulate`` runs the elastic model and
            ``sound_speed`` is not used.
        sound_speed_shear: shear speed of the elastic model [m/s] (0: fluid).
        alpha_coeff_compression: compressional absorption of the elastic model
            [dB/(MHz^2 cm)].
        alpha_coeff_shear: shear absorption of the elastic model [dB/(MHz^2 cm)].
    """

    sound_speed: ArrayLike
    density: ArrayLike = 1000.0
    alpha_coeff: ArrayLike | None = None
    alpha_power: float = 1.5
    alpha_mode: str | None = None
    BonA: ArrayLike | None = None  # noqa: N815 (k-Wave's name)
    sound_speed_ref: float | None = None
    sound_speed_compression: ArrayLike | None = None
    sound_speed_shear: ArrayLike | None = None
    alpha_coeff_compression: ArrayLike | None = None
    alpha_coeff_shear: ArrayLike | None = None


@dataclass
class KWaveElasticMedium:
    """k-Wave's elastic medium fields, each a number or a grid-shaped array (``simulate`` with
    it runs the elastic model, ``docs/elastic.md``).

    Attributes:
        sound_speed_compression: [m/s].
        sound_speed_shear: [m/s] (0: fluid).
        density: [kg/m^3].
        alpha_coeff_compression: Kelvin-Voigt absorption of compressional waves
            [dB/(MHz^2 cm)]; give both absorptions or neither.
        alpha_coeff_shear: Kelvin-Voigt absorption of shear waves [dB/(MHz^2 cm)].
    """

    sound_speed_compression: ArrayLike
    sound_speed_shear: ArrayLike
    density: ArrayLike
    alpha_coeff_compression: ArrayLike | None = None
    alpha_coeff_shear: ArrayLike | None = None


#: The models a medium selects (:func:`model_of`).
ModelKind = Literal["acoustic", "elastic"]


def is_elastic(medium: Any) -> bool:
    """Whether a medium carries k-Wave's elastic fields (the model is chosen by the medium)."""
    return any(getattr(medium, k, None) is not None
               for k in ("sound_speed_compression", "sound_speed_shear"))  # fmt: skip


def model_of(medium: Any, media: Sequence[Any] = ()) -> ModelKind:
    """The model ``medium`` runs, as k-Wave chooses it by the medium: ``"elastic"`` for k-Wave's
    elastic fields (``sound_speed_compression`` / ``sound_speed_shear``), else ``"acoustic"``.
    With ``media`` (a batch), every one must select the same model: a mix is refused naming
    the first that differs. The one place the API decides which model runs."""
    kind: ModelKind = "elastic" if is_elastic(medium) else "acoustic"
    for i, m in enumerate(media):
        other = "elastic" if is_elastic(m) else "acoustic"
        if other != kind:
            raise ProblemError(f"media[{i}] is {other} and media[0] {kind} "
                               "(sound_speed_compression selects the elastic model); give one "
                               "model per batch")  # fmt: skip
    return kind


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
class ElasticSource:
    """k-Wave's elastic sources, in the user's units (signals ``(Nt_src,)`` for all points or
    ``(N, Nt_src)``, one row per mask point in k-Wave's column-major order).

    Attributes:
        p0: initial pressure [Pa], grid-shaped (enters the normal stresses over the first two
            steps, as in k-Wave; smoothed first by k-Wave's Blackman window with its
            maximum restored, unless ``smooth_p0=False``, as k-Wave's ``'Smooth'``).
        ux, uy, uz: particle velocity [m/s] at ``u_mask``; ``u_mode`` ``"additive"`` (default,
            also ``"additive-no-correction"``) or ``"dirichlet"``.
        sxx, syy, szz, sxy, sxz, syz: stress [Pa] at ``s_mask``; ``s_mode`` as ``u_mode``.
    """

    p0: ArrayLike | None = None
    ux: ArrayLike | None = None
    uy: ArrayLike | None = None
    uz: ArrayLike | None = None
    u_mask: ArrayLike | None = None
    u_mode: str = "additive"
    sxx: ArrayLike | None = None
    syy: ArrayLike | None = None
    szz: ArrayLike | None = None
    sxy: ArrayLike | None = None
    sxz: ArrayLike | None = None
    syz: ArrayLike | None = None
    s_mask: ArrayLike | None = None
    s_mode: str = "additive"


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


class UserLayout(TypedDict):
    """How solver results map back to the user's grid (:func:`build_problem`)."""

    crop: tuple[slice, ...]  # the user's grid within the (PML-padded) solver grid
    points: np.ndarray | None  # the sensor points (N, ndim) on the user's grid


class OptionArgs(TypedDict, total=False):
    """The fields of :class:`Options` as keyword arguments (``simulate``, ``simulate_many``,
    ``make_simulator``)."""

    pml_size: int | Sequence[int] | str | None
    pml_alpha: float | Sequence[float]
    pml_inside: bool
    dtype: str
    smooth_p0: bool
    smooth_c0: bool
    smooth_rho0: bool
    axisymmetric: bool
    radial_symmetry: str
    check_finite: bool


@dataclass(frozen=True)
class Options:
    """How k-Wave-style input becomes a solver-ready problem; one object for ``simulate``,
    ``simulate_many`` and ``make_simulator``.

    Attributes:
        pml_size: PML thickness per axis [points] (default 20 in 1-D/2-D, 10 in 3-D), or
            ``"auto"`` (k-Wave's ``'PMLSize', 'auto'``, with ``pml_inside=False`` only): per
            axis the thickness in 10..40 whose total grid size has the smallest largest prime
            factor, so that the FFTs are fast (:func:`sonotile.fft.sizes.optimal_pml_size`).
        pml_alpha: PML absorption [Np per point] (default 2).
        pml_inside: PML inside the given grid (k-Wave's default) or added around it.
        dtype: ``"float32"`` or ``"float64"`` (JAX's 64-bit mode is switched on for the run).
        smooth_p0: smooth p0 with k-Wave's Blackman window, restoring its maximum (k-Wave's
            default; :func:`sonotile.model.filters.smooth`).
        smooth_c0, smooth_rho0: smooth the sound speed / density fields (default off).
        axisymmetric: k-Wave's ``kspaceFirstOrderAS``: the 2-D grid is x axial and y radial, its
            first row along y on the axis of symmetry (y = 0); the PML is on the outer radial
            edge only, and absorption is Stokes' (``alpha_power`` = 2, as in k-Wave).
        radial_symmetry: the symmetry at the outer radial edge, ``"WSWA"`` (k-Wave's default
            and its C++ solver's) or ``"WSWS"`` (k-Wave's ``-FFT`` names are accepted too).
        check_finite: stop a run at the first chunk of steps whose state holds NaN or Inf with
            :class:`~sonotile.solver.finite.SimulationDiverged` (default); False: run on and
            return what comes (to study an instability).
        elastic_interface: an elastic medium's fluid-solid interfaces: ``"kwave"`` (k-Wave's
            scheme, default) or ``"slip"`` (the slip-aware treatment, docs/elastic.md; one
            device); refused with an acoustic medium.
    """

    pml_size: int | Sequence[int] | str | None = None
    pml_alpha: float | Sequence[float] = 2.0
    pml_inside: bool = True
    dtype: str = "float32"
    smooth_p0: bool = True
    smooth_c0: bool = False
    smooth_rho0: bool = False
    axisymmetric: bool = False
    radial_symmetry: str = "WSWA"
    check_finite: bool = True
    elastic_interface: str = "kwave"

    @classmethod
    def of(cls, options: Options | None, given: Mapping[str, Any], caller: str) -> Options:
        """``options`` (default: the defaults) with the keyword arguments ``given`` of
        ``caller`` applied; a :class:`TypeError` naming any that is not an option."""
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise TypeError(f"{caller}() got unexpected keyword argument(s) {unknown}; its "
                            f"options are {names} (or options=Options(...))")  # fmt: skip
        return replace(options or cls(), **given)


#: What ``simulate`` takes and ``Results.inputs`` / ``load_input`` give back (an elastic run's
#: medium and source are :class:`KWaveElasticMedium` / :class:`ElasticSource` where given so).
Inputs = tuple[KWaveGrid, KWaveMedium, KSource, KSensor]
