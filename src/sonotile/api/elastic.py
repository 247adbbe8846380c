"""Elastic simulations as k-Wave's ``pstdElastic2D`` / ``pstdElastic3D`` and k-wave-python's
``pstd_elastic_2d`` / ``pstd_elastic_3d`` take them (see ``docs/elastic.md``).

The medium is any object with k-Wave's elastic fields (``sound_speed_compression``,
``sound_speed_shear``, ``density``, optionally ``alpha_coeff_compression`` /
``alpha_coeff_shear``); the source any object with k-Wave's elastic source fields
(:class:`ElasticSource`, or :class:`sonotile.KSource` for ``p0`` and velocity sources); the grid
a :class:`sonotile.KWaveGrid`; the sensor a :class:`sonotile.KSensor` (binary mask, grid
points or Cartesian points: :mod:`sonotile.api.elastic_sensor`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from sonotile.api.elastic_intensity import with_intensity
from sonotile.api.elastic_reversal import boundary_data_inputs
from sonotile.api.elastic_sensor import by_cuboid, sensor_points
from sonotile.api.elasticrun import run_checkpointed
from sonotile.api.heatrun import Checkpoint
from sonotile.api.problem import mask_points
from sonotile.api.results import Results
from sonotile.api.types import ElasticSource, KSensor, KWaveElasticMedium, KWaveGrid, Options
from sonotile.fft import backend as fft_backend
from sonotile.model.filters import smooth
from sonotile.model.grid import AXES, make_time
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import Decomposition
from sonotile.parallel.engine import engine_for
from sonotile.physics.elastic import ElasticMedium, build
from sonotile.physics.elastic.interface import ElasticModel
from sonotile.physics.elastic.model import State, component_names
from sonotile.physics.elastic.problem import ElasticRun, check_interface
from sonotile.physics.elastic.sources import SourceSignals
from sonotile.solver import runner
from sonotile.solver import sensors as sens
from sonotile.solver.tape import Tape

MODES = {"additive": "additive", "additive-no-correction": "additive", "dirichlet": "dirichlet"}


def _signal(v: ArrayLike, n: int, name: str, labels: int = 0) -> np.ndarray:
    """A signal as ``(N|1, Nt)``; with a labelled mask of ``labels`` labels ``(L, Nt)``."""
    s = np.asarray(v, dtype=np.float64)
    s = s[None, :] if s.ndim == 1 else s
    if labels:
        if s.ndim != 2 or s.shape[0] != labels or not np.all(np.isfinite(s)):
            kind = "u" if name.startswith("u") else "s"
            raise ProblemError(
                f"source.{name}: shape {np.shape(v)}, expected finite ({labels}, Nt): one row "
                f"per label of source.{kind}_mask (labels 1..{labels})"
            )
        return s
    if s.ndim != 2 or s.shape[0] not in (1, n) or not np.all(np.isfinite(s)):
        raise ProblemError(
            f"source.{name}: shape {np.shape(v)}, expected finite (Nt,) or ({n}, Nt) for the "
            f"{n} points of its mask"
        )
    return s


def mask_labels(mask: ArrayLike, name: str) -> np.ndarray | None:
    """The labels ``(N,)`` of a labelled source mask at its set points, in k-Wave's
    (column-major) order, checked to be the integers ``1..L`` each used (k-Wave's labelled
    masks); None for a binary mask (values 0 and 1 only)."""
    m = np.asarray(mask)
    at = m.ravel(order="F")[np.flatnonzero(m.ravel(order="F"))]
    values = np.unique(at)
    if values.size == 0 or (values.size == 1 and values[0] == 1):
        return None
    if m.dtype.kind not in "biuf" or not np.all(np.isfinite(values)) or np.any(
            values != np.arange(1, values.size + 1)):  # fmt: skip
        shown = ", ".join(f"{v:g}" for v in values[:6]) + (", ..." if values.size > 6 else "")
        raise ProblemError(
            f"{name}: a labelled mask takes the integer labels 1..L, each used at least once "
            f"(0 elsewhere); found {shown}"
        )
    return at.astype(np.int64)


def _mask_source(
    source: Any, kind: str, names: Sequence[str], nd: int, shape: tuple[int, ...]
) -> SourceSignals | None:
    """``source.<kind>_mask`` and its signals (``names``), validated; None when absent. A
    labelled mask (k-Wave's) takes one signal row per label, expanded here to its points."""
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
    labels = mask_labels(mask, f"source.{kind}_mask")
    count = 0 if labels is None else int(labels.max())
    mode = getattr(source, f"{kind}_mode", "additive")
    if mode not in MODES:
        raise ProblemError(f"source.{kind}_mode = {mode!r}: expected one of {list(MODES)}")
    sig = tuple(None if given[n] is None else _signal(given[n], len(idx), n, count)
                for n in names)  # fmt: skip
    if all(s is None for s in sig):
        raise ProblemError(f"source.{kind}_mask given without any of {', '.join(names)}")
    if labels is None:
        return SourceSignals(idx, sig, MODES[mode])
    rows = labels - 1
    return SourceSignals(idx, tuple(None if s is None else s[rows] for s in sig), MODES[mode],
                         rows)  # fmt: skip


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


def _cw(sensor: KSensor | None) -> dict[str, Any]:
    """The sensor's ``p_cw`` window (``cw_frequency`` [Hz], ``cw_periods``)."""
    return {"cw_frequency": getattr(sensor, "cw_frequency", None),
            "cw_periods": float(getattr(sensor, "cw_periods", 3.0))}  # fmt: skip


def execute(
    run: ElasticRun,
    values: Mapping[str, Any] | None = None,
    chunk: int = 64,
    state: State | None = None,
    decomposition: Decomposition | str = "single",
    mesh_shape: Sequence[int] | None = None,
    xs: Mapping[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    overlap: int = 16,
    bell_width: float = 0.5,
    tape: Tape | None = None,
) -> dict[str, jax.Array]:
    """An elastic run (:func:`sonotile.physics.elastic.build`) as one traced function of the
    medium (the common scan body, :func:`sonotile.solver.runner.traced_run`): ``values``:
    medium values by k-Wave name replacing the medium's (may be traced: ``jax.grad`` of a
    function of the records with respect to them); from ``state`` (default: rest; one device
    only); each ``chunk`` of steps rematerialised in the backward pass. ``decomposition=
    "pencil"`` or ``"lfb"``: on a mesh of ``mesh_shape`` devices (default all on one axis; even
    blocks; LFB's ``overlap`` [points] and ``bell_width``). ``xs``: per-step source inputs
    replacing the run's (traced: gradients with respect to source signals;
    :func:`traced_inputs`); ``extra``: constants replacing the run's (``p0_split``); ``tape``:
    the backward pass's states there, one every ``chunk`` steps, instead of on the device
    (:class:`sonotile.Tape`; on a mesh each shard its own block). Returns the records in
    k-Wave's layout (series ``(N, recorded steps)``; per cuboid lists for a cuboid sensor)."""
    check_single(run.statics.slip, decomposition)
    model = ElasticModel.of(run)
    layout = sens.layout_of(run.sensor, run.shape, run.nt, run.dt, model.records())
    steps: dict = jax.tree_util.tree_map(jnp.asarray, dict(run.xs if xs is None else xs))
    if Decomposition.parse(decomposition) == "single":
        c = model.constants(run, tuple(range(len(run.shape))), values) | dict(extra or {})
        pts = layout.points
        index = () if pts is None else tuple(jnp.asarray(pts[:, a], jnp.int32)
                                             for a in range(pts.shape[1]))  # fmt: skip
        ops = model.operators(run, layout.needs_unstagger)
        if getattr(ops, "fft", None):  # traced: the updates outside the backend's calls
            ops = dataclasses.replace(ops, fft=fft_backend.unfused(ops.fft))
        raw, agg, end = runner.traced_run(model, layout, c, ops, index, steps, run.shape, run.dtype,
                                          state, chunk, tape)  # fmt: skip
    else:
        if state is not None:
            raise ProblemError("execute: a start state runs on one device only")
        from sonotile.parallel.differentiable import mesh_runner
        from sonotile.parallel.mesh import AXIS_NAMES

        mesh = tuple(mesh_shape) if mesh_shape is not None else (len(jax.devices()),)

        axes = AXIS_NAMES[: len(mesh)]  # the tape's shard keys

        def local(c: dict, index: Any, ops: Any, xs: dict, shape: tuple[int, ...]) -> tuple:
            return runner.traced_run(model, layout, c, ops, index, xs, shape, run.dtype,
                                     chunk=chunk, tape=tape, axes=axes)  # fmt: skip

        go, fixed = mesh_runner(run, layout, local, str(decomposition),  # type: ignore[arg-type]
                                mesh, overlap, bell_width)  # fmt: skip
        raw, agg, parts = go(model.constants(run, (), values) | dict(extra or {}), steps, fixed)
        end = State(*parts)
    out: dict[str, Any] = {k: v[layout.start :].T for k, v in raw.items()}
    out = with_intensity(out, run.record, len(run.shape), jnp)
    out |= sens.finish(agg, end, layout, run.nt, traced=True)
    return by_cuboid(out, run.cuboids, jnp)


def check_single(slip: bool, decomposition: Decomposition | str, name: str = "interface") -> None:
    """``interface="slip"`` (``name``: the user's name of the option) runs on one device:
    refused by name on a mesh."""
    dec = Decomposition.parse(decomposition)
    if slip and dec not in ("single", "auto"):
        raise ProblemError(
            f"{name}='slip' with decomposition={str(dec)!r}: the slip-aware "
            "interface runs on one device only (its continuations reach along "
            f"whole grid lines); use decomposition='single' or {name}='kwave'"
        )


def x64(dtype: str) -> contextlib.AbstractContextManager[Any]:
    """JAX's 64-bit mode for a float64 run."""
    return jax.enable_x64(True) if dtype == "float64" else contextlib.nullcontext()


def _no_pressure_source(source: Any) -> None:
    """The acoustic sources the elastic model has no counterpart for, refused by name."""
    for name in ("p", "p_mask"):
        if getattr(source, name, None) is not None:
            raise ProblemError(
                f"source.{name}: the elastic model has no pressure source (nor has k-Wave's "
                "pstdElastic); give a stress source: s_mask with sxx = syy [= szz] = -p"
            )
    if getattr(source, "transducer_mask", None) is not None:
        raise ProblemError("source.transducer_mask: not a source of the elastic model; give "
                           "u_mask with ux/uy/uz")  # fmt: skip


def prepare(
    kgrid: KWaveGrid,
    medium: Any,
    source: Any,
    sensor: KSensor | None,
    pml_size: int | Sequence[int] | str | None = None,
    pml_alpha: float | Sequence[float] = 2.0,
    multi_axial_pml_ratio: float = 0.1,
    dtype: str = "float32",
    smooth_p0: bool = True,
    interface: str = "kwave",
) -> ElasticRun:
    """k-Wave-style elastic input validated in the user's names and built into a run
    (:func:`sonotile.physics.elastic.build`; arguments as :func:`pstd_elastic_2d`)."""
    shape = tuple(kgrid.shape)
    nd = len(shape)
    if dtype not in ("float32", "float64"):
        raise ProblemError(f"dtype = {dtype!r}: expected 'float32' or 'float64'")
    check_interface(interface)
    m = _medium(medium, shape)
    spacing = tuple(float(d) for d in np.broadcast_to(kgrid.spacing, (nd,)))
    dt, nt = kgrid.dt, kgrid.nt
    if dt is None or nt is None:
        dt0, nt0 = make_time(shape, spacing, m.c_max, m.c_min, 0.3)
        dt, nt = dt if dt is not None else dt0, nt if nt is not None else nt0
    _no_pressure_source(source)
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
    at = sensor_points(sensor, kgrid)
    if isinstance(pml_size, str):
        raise ProblemError(f"pml_size = {pml_size!r}: the elastic model takes points per axis")
    size = (pml_size,) * nd if isinstance(pml_size, int) else pml_size
    alpha = tuple(np.broadcast_to(np.asarray(pml_alpha, dtype=float), (nd,)))
    with x64(dtype):
        run = build(m, spacing, float(dt), int(nt), p0=p0, u=u, s=s, sensor_points=at.index,
                    record=at.record, record_start_index=at.start, pml_size=size,
                    pml_alpha=alpha, mpml_ratio=multi_axial_pml_ratio, dtype=dtype,
                    off_grid=at.off_grid, cuboids=at.cuboids, interface=interface,
                    **_cw(sensor))  # fmt: skip
    needs = [r for r in at.record if not (r.endswith("_all") or r.endswith("_final"))]
    if run.sensor_points is None and needs:
        raise ProblemError(f"sensor: recording {needs} needs sensor points (mask or points)")
    return run


def run_elastic(
    run: ElasticRun,
    decomposition: Decomposition | str = "single",
    mesh_shape: Sequence[int] | None = None,
    progress: bool | None = False,
    check_finite: bool = True,
    checkpoint: Checkpoint | None = None,
    **engine_args: Any,
) -> tuple[dict[str, np.ndarray], str]:
    """A built run through the common loop on the engine asked for (``engine_args``: of
    :func:`sonotile.parallel.engine.engine_for`): the records in k-Wave's layout (series
    ``(N, recorded steps)``) and what ran it. ``check_finite``, ``checkpoint``: see
    :func:`pstd_elastic_2d`."""
    dec = Decomposition.parse(decomposition)
    check_single(run.statics.slip, dec)
    if dec == "lfb" and "u_split_field" in run.record:
        raise ProblemError(
            "sensor.record: u_split_field is not available with decomposition='lfb' (the split "
            "into compressional and shear parts is a projection over the whole grid, which "
            "LFB's local blocks do not make); use decomposition='pencil'"
        )
    mesh = None if mesh_shape is None else tuple(mesh_shape)
    with x64(run.dtype):
        if checkpoint is not None:
            raw, final, how = run_checkpointed(run, checkpoint, dec, mesh, progress, check_finite,
                                               **engine_args)  # fmt: skip
        else:
            engine, reason = engine_for(run, dec, mesh, **engine_args)  # type: ignore[arg-type]
            raw, final = runner.run_engine(engine, progress=progress, check_finite=check_finite)
            how = f"{engine.describe} ({reason})"
    out = {k: np.asarray(v).T for k, v in raw.items()}  # (N, recorded steps), k-Wave's layout
    out = with_intensity(out, run.record, len(run.shape), np)
    out |= {k: np.asarray(v) for k, v in final.items()}
    return by_cuboid(out, run.cuboids), how


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
    overlap: int | None = None,
    checkpoint: Checkpoint | None = None,
    interface: str = "kwave",
) -> dict[str, np.ndarray]:
    """Validate, build and run through the common time loop (see :func:`pstd_elastic_2d`)."""
    shape = tuple(kgrid.shape)
    if len(shape) != nd:
        raise ProblemError(f"kgrid: {len(shape)}-D grid {shape} given to pstd_elastic_{nd}d")
    check_interface(interface)
    check_single(interface == "slip", decomposition)
    if getattr(sensor, "time_reversal_boundary_data", None) is not None:
        source, sensor = boundary_data_inputs(kgrid, source, sensor)
    run = prepare(kgrid, medium, source, sensor, pml_size, pml_alpha, multi_axial_pml_ratio,
                  dtype, smooth_p0, interface)  # fmt: skip
    return run_elastic(run, decomposition, mesh_shape, progress, check_finite, checkpoint,
                       overlap=overlap)[0]  # fmt: skip


def check_options(medium: Any, options: Options) -> None:
    """The acoustic options and medium fields the elastic model has no use for, refused by
    name (``simulate`` with an elastic medium)."""
    refused = {
        "pml_inside": (not options.pml_inside, "the elastic model's PML is inside the grid "
                       "(as k-Wave's pstdElastic); enlarge kgrid instead"),
        "smooth_c0": (options.smooth_c0, "not available for the elastic model (smooth the "
                      "medium's fields first: sonotile.model.filters.smooth)"),
        "smooth_rho0": (options.smooth_rho0, "as smooth_c0"),
        "axisymmetric": (options.axisymmetric, "the elastic model is 2-D or 3-D Cartesian"),
    }  # fmt: skip
    for name, (bad, why) in refused.items():
        if bad:
            raise ProblemError(f"{name}: {why}")
    for name, why in (
        (
            "alpha_coeff",
            "give alpha_coeff_compression and alpha_coeff_shear (Kelvin-Voigt absorption)",
        ),
        ("BonA", "the elastic model is linear"),
    ):
        if getattr(medium, name, None) is not None:
            raise ProblemError(f"medium.{name}: not a field of the elastic model; {why}")


def simulate_elastic(
    kgrid: KWaveGrid,
    medium: Any,
    source: Any,
    sensor: KSensor,
    options: Options,
    decomposition: Decomposition | str = "single",
    mesh: tuple[int, ...] | None = None,
    overlap: int | None = None,
    accuracy: float = 1e-3,
    progress: bool | None = None,
    quiet: bool = False,
    devices: Sequence[jax.Device] | None = None,
    checkpoint: Checkpoint | None = None,
) -> Results:
    """:func:`sonotile.simulate` with an elastic medium (arguments as there; ``pml_inside``,
    ``smooth_c0``/``smooth_rho0`` and ``axisymmetric`` refused by name; ``checkpoint``: as
    :func:`pstd_elastic_2d`'s)."""
    check_options(medium, options)
    check_interface(options.elastic_interface, "elastic_interface")
    check_single(options.elastic_interface == "slip", decomposition, "elastic_interface")
    if checkpoint is not None:
        checkpoint.check()
    run = prepare(kgrid, medium, source, sensor, options.pml_size, options.pml_alpha,
                  dtype=options.dtype, smooth_p0=options.smooth_p0,
                  interface=options.elastic_interface)  # fmt: skip
    notes = [] if run.record else ["sensor.record is empty: nothing will be recorded"]
    if not quiet and (progress or (progress is None and sys.stderr.isatty())):
        mb = ElasticModel.of(run).memory_estimate(run) / 2**20
        print(f"sonotile: elastic, grid {run.shape}, {run.nt} steps, about {mb:.0f} MB",
              file=sys.stderr)  # fmt: skip
    data, how = run_elastic(run, decomposition, mesh, progress, options.check_finite,
                            checkpoint, overlap=overlap, accuracy=accuracy,
                            devices=devices)  # fmt: skip
    if not quiet and Decomposition.parse(decomposition) != "single":
        print(f"sonotile: running {how}", file=sys.stderr)
    t = np.arange(run.recording.start, run.nt) * run.dt
    inputs = (kgrid, medium, source, sensor)
    points = None if run.cuboids else run.sensor_points  # per cuboid, as the acoustic model
    return Results(dict(data), run.grid, t, points, notes, inputs,
                   dataclasses.asdict(options))  # fmt: skip


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
    overlap: int | None = None,
    checkpoint: Checkpoint | None = None,
    interface: str = "kwave",
) -> dict[str, np.ndarray]:
    """2-D elastic simulation (k-Wave's ``pstdElastic2D``), PML inside the grid.

    Args:
        kgrid: grid and time axis (``dt``/``nt`` None: k-Wave's ``makeTime`` at CFL 0.3 on the
            largest compressional speed).
        medium: k-Wave's elastic medium fields (module docstring).
        source: :class:`ElasticSource` fields.
        sensor: :class:`sonotile.KSensor` (``mask`` binary or Cartesian ``(2, N)`` [m] read by
            ``cart_interp``, or ``points``; ``record`` from
            :data:`sonotile.physics.elastic.sources.RECORDS`).
        pml_size: PML thickness [points] (default 20), pml_alpha: absorption [Np per point]
            (default 2), multi_axial_pml_ratio: k-Wave's ``MultiAxialPMLRatio`` (0.1).
        dtype: ``"float32"`` or ``"float64"``.
        smooth_p0: smooth ``source.p0`` first (k-Wave's ``'Smooth'``, default on).
        decomposition, mesh_shape: where the steps run: ``"single"`` (one device),
            ``"pencil"`` (a distributed FFT over ``mesh_shape`` devices, default all),
            ``"lfb"`` (local Fourier bases: blocks padded with ``overlap`` points, default 16;
            the derivatives along a split axis are approximate, see docs/decomposition.md) or
            ``"auto"``; progress: report progress (None: on a terminal).
        check_finite: stop at the first chunk of steps whose state holds NaN or Inf with
            :class:`~sonotile.solver.finite.SimulationDiverged` (default); False: run on.
        overlap: LFB's overlap [points] (``decomposition="lfb"``).
        checkpoint: save and stop, and resume (:class:`~sonotile.api.heatrun.Checkpoint`:
            ``path``, ``interval`` [s], ``steps``; :mod:`sonotile.api.elasticrun`): raises
            :class:`~sonotile.api.heatrun.RunStopped` when it stops; the same call goes on.
        interface: the fluid-solid interfaces: ``"kwave"`` (default: k-Wave's scheme, its
            numbers to round-off) or ``"slip"`` (the water slips along the solid: the shear
            terms continued across each fluid-solid face, :mod:`sonotile.physics.elastic.slip`;
            reflection between the critical angles within 1 % at 15 points per wavelength
            where k-Wave's is up to 5 % high, docs/elastic.md); one device only.

    A sensor with ``time_reversal_boundary_data`` ``(N, Nt)`` [Pa] (k-Wave's) makes a time
    reversal: the data, reversed, enforced on the sensor's points as the normal stresses
    ``-p`` (Dirichlet; the source must be empty), returning ``{"p_final": the reconstruction}``
    (:mod:`sonotile.api.elastic_reversal`).

    Returns:
        ``{name: array}``: series ``(N, recorded steps)`` (``p``, ``ux``, ``uy``, ``sxx``...,
        ``ux_split_p``/``_s``..., ``Ix``...), statistics ``(N,)`` (``p_max``, ``ux_rms``,
        ``Ix_avg``...), whole fields
        of the grid's shape (``p_final``, ``ux_final``, ``p_max_all``...).
    """
    return _pstd_elastic(2, kgrid, medium, source, sensor, pml_size, pml_alpha,
                         multi_axial_pml_ratio, dtype, smooth_p0, decomposition,
                         mesh_shape, progress, check_finite, overlap,
                         checkpoint, interface)  # fmt: skip


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
    overlap: int | None = None,
    checkpoint: Checkpoint | None = None,
    interface: str = "kwave",
) -> dict[str, np.ndarray]:
    """3-D elastic simulation (k-Wave's ``pstdElastic3D``); as :func:`pstd_elastic_2d`
    (default PML 10 points; ``decomposition="pencil"`` with ``mesh_shape`` of one or two
    axes: slabs or pencils; ``"lfb"`` with up to three)."""
    return _pstd_elastic(3, kgrid, medium, source, sensor, pml_size, pml_alpha,
                         multi_axial_pml_ratio, dtype, smooth_p0, decomposition,
                         mesh_shape, progress, check_finite, overlap,
                         checkpoint, interface)  # fmt: skip


__all__ = [
    "ElasticSource", "KWaveElasticMedium", "check_options", "execute", "prepare", "pstd_elastic_2d",
    "pstd_elastic_3d", "run_elastic", "simulate_elastic", "x64",
]  # fmt: skip
