"""Elastic simulations as k-Wave's ``pstdElastic2D`` / ``pstdElastic3D`` and k-wave-python's
``pstd_elastic_2d`` / ``pstd_elastic_3d`` take them (see ``docs/elastic.md``).

The medium is any object with k-Wave's elastic fields (``sound_speed_compression``,
``sound_speed_shear``, ``density``, optionally ``alpha_coeff_compression`` /
``alpha_coeff_shear``); the source any object with k-Wave's elastic source fields
(:class:`ElasticSource`, or :class:`sonotile.KSource` for ``p0`` and velocity sources); the grid
a :class:`sonotile.KWaveGrid`; the sensor a :class:`sonotile.KSensor` (binary mask or grid
points).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from sonotile.api import KSensor, KWaveGrid, mask_points
from sonotile.model.filters import smooth
from sonotile.model.grid import AXES, make_time
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import Decomposition
from sonotile.parallel.engine import engine_for
from sonotile.physics.elastic import ElasticMedium, build
from sonotile.physics.elastic.interface import ElasticModel
from sonotile.physics.elastic.model import State, component_names
from sonotile.physics.elastic.problem import ElasticRun
from sonotile.physics.elastic.sources import SourceSignals
from sonotile.solver import runner
from sonotile.solver import sensors as sens


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
class KWaveElasticMedium:
    """k-Wave's elastic medium fields, each a number or a grid-shaped array.

    Attributes:
        sound_speed_compression: [m/s]. sound_speed_shear: [m/s] (0: fluid).
        density: [kg/m^3].
        alpha_coeff_compression, alpha_coeff_shear: Kelvin-Voigt absorption
            [dB/(MHz^2 cm)], both or neither.
    """

    sound_speed_compression: ArrayLike
    sound_speed_shear: ArrayLike
    density: ArrayLike
    alpha_coeff_compression: ArrayLike | None = None
    alpha_coeff_shear: ArrayLike | None = None


MODES = {"additive": "additive", "additive-no-correction": "additive", "dirichlet": "dirichlet"}


def _signal(v: ArrayLike, n: int, name: str) -> np.ndarray:
    """A signal as ``(N|1, Nt)``."""
    s = np.asarray(v, dtype=np.float64)
    s = s[None, :] if s.ndim == 1 else s
    if s.ndim != 2 or s.shape[0] not in (1, n) or not np.all(np.isfinite(s)):
        raise ProblemError(
            f"source.{name}: shape {np.shape(v)}, expected finite (Nt,) or ({n}, Nt) for the "
            f"{n} points of its mask"
        )
    return s


def _mask_source(
    source: Any, kind: str, names: Sequence[str], nd: int, shape: tuple[int, ...]
) -> SourceSignals | None:
    """``source.<kind>_mask`` and its signals (``names``), validated; None when absent."""
    all_names = [f"u{a}" for a in AXES] if kind == "u" else component_names(3)
    given = {n: getattr(source, n, None) for n in all_names}
    extra = [n for n, v in given.items() if v is not None and n not in names]
    if extra:
        raise ProblemError(f"source.{extra[0]}: not a source of a {nd}-D grid")
    mask = getattr(source, f"{kind}_mask", None)
    if mask is None:
        if any(v is not None for v in given.values()):
            raise ProblemError(f"source.{kind}_mask: missing (source.{kind}... are given)")
        return None
    idx = mask_points(mask, shape, f"source.{kind}_mask")
    if np.unique(np.asarray(mask)[np.asarray(mask) != 0]).size > 1:
        raise ProblemError(f"source.{kind}_mask: labelled masks are not supported; use 0/1")
    mode = getattr(source, f"{kind}_mode", "additive")
    if mode not in MODES:
        raise ProblemError(f"source.{kind}_mode = {mode!r}: expected one of {list(MODES)}")
    sig = tuple(None if given[n] is None else _signal(given[n], len(idx), n) for n in names)
    if all(s is None for s in sig):
        raise ProblemError(f"source.{kind}_mask given without any of {', '.join(names)}")
    return SourceSignals(idx, sig, MODES[mode])


def _medium(medium: Any, shape: tuple[int, ...]) -> ElasticMedium:
    """The user's medium validated (any object with k-Wave's elastic field names)."""
    if getattr(medium, "sound_speed_compression", None) is None:
        raise ProblemError(
            "medium.sound_speed_compression: missing (the elastic model needs "
            "sound_speed_compression, sound_speed_shear and density)"
        )
    return ElasticMedium(
        medium.sound_speed_compression,
        getattr(medium, "sound_speed_shear", None),
        getattr(medium, "density", None),
        shape,
        getattr(medium, "alpha_coeff_compression", None),
        getattr(medium, "alpha_coeff_shear", None),
    )


def _sensor(
    sensor: KSensor | None, shape: tuple[int, ...]
) -> tuple[np.ndarray | None, tuple[str, ...], int]:
    """Sensor points ``(N, ndim)`` (binary mask in k-Wave's order, or grid indices)."""
    if sensor is None:
        return None, ("p",), 1
    if getattr(sensor, "corners", None) is not None:
        raise ProblemError("sensor.corners: cuboid sensors are not supported by the elastic "
                           "model yet; give sensor.mask or sensor.points")  # fmt: skip
    points = getattr(sensor, "points", None)
    mask = getattr(sensor, "mask", None)
    if mask is not None and np.shape(mask) != shape:
        raise ProblemError(
            f"sensor.mask: shape {np.shape(mask)}; the elastic model takes a binary mask of "
            f"the grid shape {shape} or sensor.points (Cartesian points are not supported)"
        )
    if mask is not None:
        points = mask_points(mask, shape, "sensor.mask")
    if points is not None:
        points = np.asarray(points, dtype=int)
        if (
            points.ndim != 2
            or points.shape[1] != len(shape)
            or np.any(points < 0)
            or np.any(points >= np.asarray(shape))
        ):
            raise ProblemError(f"sensor.points: expected (N, {len(shape)}) indices in the grid")
    record = tuple(getattr(sensor, "record", ("p",)))
    return points, record, int(getattr(sensor, "record_start_index", 1))


def execute(
    run: ElasticRun,
    values: Mapping[str, Any] | None = None,
    chunk: int = 64,
    state: State | None = None,
    decomposition: Decomposition | str = "single",
    mesh_shape: Sequence[int] | None = None,
) -> dict[str, jax.Array]:
    """An elastic run (:func:`sonotile.physics.elastic.build`) as one traced function of the
    medium (the common scan body, :func:`sonotile.solver.runner.traced_run`): ``values``:
    medium values by k-Wave name replacing the medium's (may be traced: ``jax.grad`` of a
    function of the records with respect to them); from ``state`` (default: rest; one device
    only); each ``chunk`` of steps rematerialised in the backward pass. ``decomposition=
    "pencil"``: on a pencil mesh of ``mesh_shape`` devices (default all on one axis; even
    blocks). Returns the records in k-Wave's layout (series ``(N, recorded steps)``)."""
    model = ElasticModel.of(run)
    layout = sens.layout_of(run.sensor, run.shape, run.nt, run.dt, model.records())
    xs = jax.tree_util.tree_map(jnp.asarray, run.xs)
    if Decomposition.parse(decomposition) == "single":
        c = model.constants(run, tuple(range(len(run.shape))), values)
        pts = layout.points
        index = () if pts is None else tuple(jnp.asarray(pts[:, a], jnp.int32)
                                             for a in range(pts.shape[1]))  # fmt: skip
        ops = model.operators(run, layout.needs_unstagger)
        raw, agg, end = runner.traced_run(model, layout, c, ops, index, xs, run.shape, run.dtype,
                                          state, chunk)  # fmt: skip
    else:
        if state is not None:
            raise ProblemError("execute: a start state runs on one device only")
        from sonotile.parallel.differentiable import mesh_runner

        def local(c: dict, index: Any, ops: Any, xs: dict, shape: tuple[int, ...]) -> tuple:
            return runner.traced_run(model, layout, c, ops, index, xs, shape, run.dtype,
                                     chunk=chunk)  # fmt: skip

        mesh = tuple(mesh_shape) if mesh_shape is not None else (len(jax.devices()),)
        go, fixed = mesh_runner(run, layout, local, str(decomposition), mesh)  # type: ignore[arg-type]
        raw, agg, parts = go(model.constants(run, (), values), xs, fixed)
        end = State(*parts)
    out = {k: v[layout.start :].T for k, v in raw.items()}
    return out | sens.finish(agg, end, layout, run.nt, traced=True)  # type: ignore[return-value]


def _pstd_elastic(
    nd: int,
    kgrid: KWaveGrid,
    medium: Any,
    source: Any,
    sensor: KSensor | None,
    pml_size: int | Sequence[int] | None,
    pml_alpha: float | Sequence[float],
    multi_axial_pml_ratio: float,
    dtype: str,
    smooth_p0: bool = True,
    decomposition: Decomposition | str = "single",
    mesh_shape: Sequence[int] | None = None,
    progress: bool | None = False,
    check_finite: bool = True,
) -> dict[str, np.ndarray]:
    """Validate, build and run through the common time loop (see :func:`pstd_elastic_2d`)."""
    shape = tuple(kgrid.shape)
    if len(shape) != nd:
        raise ProblemError(f"kgrid: {len(shape)}-D grid {shape} given to pstd_elastic_{nd}d")
    if dtype not in ("float32", "float64"):
        raise ProblemError(f"dtype = {dtype!r}: expected 'float32' or 'float64'")
    m = _medium(medium, shape)
    spacing = tuple(float(d) for d in np.broadcast_to(kgrid.spacing, (nd,)))
    dt, nt = kgrid.dt, kgrid.nt
    if dt is None or nt is None:
        dt0, nt0 = make_time(shape, spacing, m.c_max, m.c_min, 0.3)
        dt, nt = dt if dt is not None else dt0, nt if nt is not None else nt0
    p0 = getattr(source, "p0", None)
    if p0 is not None and np.shape(p0) != shape:
        raise ProblemError(f"source.p0: shape {np.shape(p0)}, expected the grid shape {shape}")
    if p0 is not None and smooth_p0:
        p0 = smooth(np.asarray(p0, dtype=np.float64), restore_max=True)
    u = _mask_source(source, "u", [f"u{a}" for a in AXES[:nd]], nd, shape)
    s = _mask_source(source, "s", component_names(nd), nd, shape)
    if p0 is not None and s is not None:
        raise ProblemError("source.p0 and source.s_mask: give one of them (k-Wave's p0 is a "
                           "stress source over the whole grid)")  # fmt: skip
    points, record, start = _sensor(sensor, shape)
    size = (pml_size,) * nd if isinstance(pml_size, int) else pml_size
    alpha = tuple(np.broadcast_to(np.asarray(pml_alpha, dtype=float), (nd,)))
    x64 = jax.enable_x64(True) if dtype == "float64" else contextlib.nullcontext()
    with x64:
        run = build(m, spacing, float(dt), int(nt), p0=p0, u=u, s=s, sensor_points=points,
                    record=record, record_start_index=start, pml_size=size, pml_alpha=alpha,
                    mpml_ratio=multi_axial_pml_ratio, dtype=dtype)  # fmt: skip
        needs = [r for r in record if not (r.endswith("_all") or r.endswith("_final"))]
        if points is None and needs:
            raise ProblemError(f"sensor: recording {needs} needs sensor points (mask or points)")
        engine, _ = engine_for(run, Decomposition.parse(decomposition),  # type: ignore[arg-type]
                               None if mesh_shape is None else tuple(mesh_shape))  # fmt: skip
        raw, final = runner.run_engine(engine, progress=progress, check_finite=check_finite)
    out = {k: np.asarray(v).T for k, v in raw.items()}  # (N, recorded steps), k-Wave's layout
    return out | {k: np.asarray(v) for k, v in final.items()}


def pstd_elastic_2d(
    kgrid: KWaveGrid,
    medium: Any,
    source: Any,
    sensor: KSensor | None,
    pml_size: int | Sequence[int] | None = None,
    pml_alpha: float | Sequence[float] = 2.0,
    multi_axial_pml_ratio: float = 0.1,
    dtype: str = "float32",
    smooth_p0: bool = True,
    decomposition: Decomposition | str = "single",
    mesh_shape: Sequence[int] | None = None,
    progress: bool | None = False,
    check_finite: bool = True,
) -> dict[str, np.ndarray]:
    """2-D elastic simulation (k-Wave's ``pstdElastic2D``), PML inside the grid.

    Args:
        kgrid: grid and time axis (``dt``/``nt`` None: k-Wave's ``makeTime`` at CFL 0.3 on the
            largest compressional speed).
        medium: k-Wave's elastic medium fields (module docstring).
        source: :class:`ElasticSource` fields.
        sensor: :class:`sonotile.KSensor` (``mask`` binary or ``points``; ``record`` from
            :data:`sonotile.physics.elastic.sources.RECORDS`).
        pml_size: PML thickness [points] (default 20), pml_alpha: absorption [Np per point]
            (default 2), multi_axial_pml_ratio: k-Wave's ``MultiAxialPMLRatio`` (0.1).
        dtype: ``"float32"`` or ``"float64"``.
        smooth_p0: smooth ``source.p0`` first (k-Wave's ``'Smooth'``, default on).
        decomposition, mesh_shape: where the steps run: ``"single"`` (one device) or
            ``"pencil"`` (a distributed FFT over ``mesh_shape`` devices, default all);
            progress: report progress (None: on a terminal).
        check_finite: stop at the first chunk of steps whose state holds NaN or Inf with
            :class:`~sonotile.solver.finite.SimulationDiverged` (default); False: run on.

    Returns:
        ``{name: array}``: series ``(N, recorded steps)`` (``p``, ``ux``, ``uy``, ``sxx``...,
        ``ux_split_p``/``_s``...), statistics ``(N,)`` (``p_max``, ``ux_rms``...), whole fields
        of the grid's shape (``p_final``, ``ux_final``, ``p_max_all``...).
    """
    return _pstd_elastic(2, kgrid, medium, source, sensor, pml_size, pml_alpha,
                         multi_axial_pml_ratio, dtype, smooth_p0, decomposition,
                         mesh_shape, progress, check_finite)  # fmt: skip


def pstd_elastic_3d(
    kgrid: KWaveGrid,
    medium: Any,
    source: Any,
    sensor: KSensor | None,
    pml_size: int | Sequence[int] | None = None,
    pml_alpha: float | Sequence[float] = 2.0,
    multi_axial_pml_ratio: float = 0.1,
    dtype: str = "float32",
    smooth_p0: bool = True,
    decomposition: Decomposition | str = "single",
    mesh_shape: Sequence[int] | None = None,
    progress: bool | None = False,
    check_finite: bool = True,
) -> dict[str, np.ndarray]:
    """3-D elastic simulation (k-Wave's ``pstdElastic3D``); as :func:`pstd_elastic_2d`
    (default PML 10 points; ``decomposition="pencil"`` with ``mesh_shape`` of one or two
    axes: slabs or pencils)."""
    return _pstd_elastic(3, kgrid, medium, source, sensor, pml_size, pml_alpha,
                         multi_axial_pml_ratio, dtype, smooth_p0, decomposition,
                         mesh_shape, progress, check_finite)  # fmt: skip
