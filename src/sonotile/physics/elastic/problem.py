"""An elastic run put together: operators, constants, sources, sensors.

:func:`build` turns a validated medium, sources and sensor points into an :class:`ElasticRun`,
the problem the common time loop runs (:func:`sonotile.api.elastic.execute`,
``pstd_elastic_2d/3d``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.model.grid import Grid
from sonotile.model.problem import ProblemError, Sensor
from sonotile.physics.elastic import sources
from sonotile.physics.elastic.medium import ElasticMedium
from sonotile.physics.elastic.model import (
    Statics,
    components,
    pml_constants,
    split_constants,
)
from sonotile.physics.elastic.slip import has_interface, slip_constants, unstable_face
from sonotile.spectral.operators import FourierOps

MEDIUM_KEYS = (
    "sound_speed_compression",
    "sound_speed_shear",
    "density",
    "alpha_coeff_compression",
    "alpha_coeff_shear",
)


@dataclass(frozen=True)
class OffGrid:
    """Sensor points off the grid: ``positions`` ``(N, ndim)`` continuous 0-based grid
    coordinates, read by ``interpolation`` (``"linear"`` or ``"bli"``, with
    ``bli_tolerance``) with each field on its own staggered grid
    (:func:`sonotile.solver.sensors.field_offset`)."""

    positions: np.ndarray
    interpolation: str = "linear"
    bli_tolerance: float = 0.05


@dataclass(eq=False)
class ElasticRun:
    """A validated elastic run: the problem the common time loop runs
    (:mod:`sonotile.solver.runner`, the engines of :mod:`sonotile.parallel`: ``grid``,
    ``sensor``, ``dtype``; :class:`~sonotile.physics.elastic.interface.ElasticModel`).
    ``fixed``: constants that do not depend on the medium's speeds and density (PML, source
    and sensor indices, p0); ``points``: sensor points ``(N, ndim)`` or None; ``off_grid``:
    sensor points off the grid instead (:class:`OffGrid`) or None; ``cuboids``: the shape of
    each cuboid whose points (each in C order) make up ``points`` (cuboid sensors), else
    ``()``; ``source_rows``: per source kind (``"u"``, ``"s"``) with a labelled mask, the row
    of the user's signals each source point takes (:class:`~sonotile.physics.elastic.sources.
    SourceSignals`)."""

    medium: ElasticMedium
    spacing: tuple[float, ...]
    dt: float
    nt: int
    dtype: str
    ops: FourierOps
    statics: Statics
    recording: sources.Recording
    xs: dict
    fixed: dict = field(default_factory=dict)
    points: np.ndarray | None = None
    off_grid: OffGrid | None = None
    cuboids: tuple[tuple[int, ...], ...] = ()
    source_rows: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def sensor_points(self) -> np.ndarray | None:
        """The user's sensor points ``(N, ndim)``: grid indices, or continuous grid coordinates
        of points off the grid."""
        return self.points if self.off_grid is None else self.off_grid.positions

    @property
    def shape(self) -> tuple[int, ...]:
        return self.medium.shape

    @property
    def record(self) -> tuple[str, ...]:
        return self.recording.record

    @property
    def grid(self) -> Grid:
        return Grid(self.shape, self.spacing, self.dt, self.nt)

    @property
    def sensor(self) -> Sensor:
        """The sensor as the loop samples it (points, records, first recorded step)."""
        r, at = self.recording, self.off_grid
        off: dict[str, Any] = {} if at is None else {
            "positions": at.positions, "interpolation": at.interpolation,
            "bli_tolerance": at.bli_tolerance}  # fmt: skip
        return Sensor(index=self.points, record=self.record, start=r.start,
                      cw_frequency=r.cw_frequency, cw_periods=r.cw_periods, **off)  # fmt: skip

    def medium_values(self) -> dict[str, Any]:
        """The medium's values by k-Wave name (None where absent)."""
        return {k: getattr(self.medium, k) for k in MEDIUM_KEYS}


def _index(points: np.ndarray) -> tuple[jax.Array, ...]:
    return tuple(jnp.asarray(points[:, a], jnp.int32) for a in range(points.shape[1]))


def source_inputs(
    u: sources.SourceSignals | None,
    s: sources.SourceSignals | None,
    medium: ElasticMedium,
    spacing: Sequence[float],
    dt: float,
    nt: int,
    dtype: str,
) -> tuple[dict, dict, tuple, tuple]:
    """Per-step source inputs, the source indices and the modes (per axis, per component)."""
    nd = len(spacing)
    xs: dict = {"n": jnp.arange(nt, dtype=jnp.int32)}
    c: dict = {}
    u_modes: tuple = (None,) * nd
    s_modes: tuple = ()
    for kind, src, count in (("u", u, nd), ("s", s, len(components(nd)))):
        if src is None:
            continue
        sig = sources.scale_signals(src, kind, medium.sound_speed_compression, spacing, dt)
        xs[kind], xs[f"{kind}_on"] = sources.step_inputs(sig, nt, dtype)
        c[f"{kind}_index"] = _index(src.index)
        modes = tuple(None if g is None else src.mode for g in sig)
        if kind == "u":
            u_modes = modes
        else:
            s_modes = modes
        assert len(modes) == count
    return xs, c, u_modes, s_modes


def check_cw(record: Sequence[str], f: float | None, periods: float, dt: float, n_rec: int) -> None:
    """``p_cw``'s frequency [Hz] and window (``periods`` of it, in the ``n_rec`` recorded
    steps of ``dt`` [s]) in the sensor's names."""
    if not {"p_cw", "p_cw_all"} & set(record):
        return
    if f is None or not np.isfinite(f) or f <= 0:
        raise ProblemError(f"sensor.cw_frequency = {f}: recording p_cw needs a frequency > 0 [Hz]")
    if 2 * f * dt >= 1:
        raise ProblemError(f"sensor.cw_frequency = {f:g} Hz: at or above the Nyquist frequency "
                           f"{0.5 / dt:g} Hz of the time step")  # fmt: skip
    m = int(round(periods / (f * dt))) if periods > 0 else 0
    if not 1 <= m <= n_rec:
        raise ProblemError(f"sensor.cw_periods = {periods}: window of {m} steps must fit in the "
                           f"{n_rec} recorded steps")  # fmt: skip


#: The fluid-solid interface treatments (``interface`` of :func:`build`).
INTERFACES = ("kwave", "slip")


def check_interface(interface: Any, name: str = "interface") -> None:
    """``interface`` (the user's ``name`` for it) one of :data:`INTERFACES`."""
    if interface not in INTERFACES:
        raise ProblemError(f"{name} = {interface!r}: expected 'kwave' (k-Wave's scheme) or "
                           "'slip' (the slip-aware fluid-solid interface)")  # fmt: skip


def _check_pml_and_records(
    shape: tuple[int, ...], pml_size: Sequence[int], record: Sequence[str], start: int, nt: int
) -> None:
    """The PML's thickness per axis, the records' names and the first recorded step
    (``start``, 1-based), refused in the user's names."""
    for a, (size, n) in enumerate(zip(pml_size, shape)):
        if not 0 <= size or 2 * size >= n:
            raise ProblemError(f"pml_size {tuple(pml_size)}: the {'xyz'[a]} layers need "
                               f"2 x {size} < {n} points")  # fmt: skip
    bad = [r for r in record if r not in sources.RECORDS]
    if bad:
        raise ProblemError(f"sensor.record: {bad} not recorded by the elastic model "
                           f"(choose from {', '.join(sources.RECORDS)})")  # fmt: skip
    if not 1 <= start <= nt:
        raise ProblemError(f"sensor.record_start_index = {start}: must be in 1..{nt}")


def build(
    medium: ElasticMedium,
    spacing: Sequence[float],
    dt: float,
    nt: int,
    *,
    p0: np.ndarray | None = None,
    u: sources.SourceSignals | None = None,
    s: sources.SourceSignals | None = None,
    sensor_points: np.ndarray | None = None,
    record: Sequence[str] = ("p",),
    record_start_index: int = 1,
    pml_size: Sequence[int] | None = None,
    pml_alpha: Sequence[float] | None = None,
    mpml_ratio: float = 0.1,
    dtype: str = "float32",
    cw_frequency: float | None = None,
    cw_periods: float = 3.0,
    off_grid: OffGrid | None = None,
    cuboids: Sequence[Sequence[int]] = (),
    interface: str = "kwave",
) -> ElasticRun:
    """Assemble a run (PML inside the grid; defaults as k-Wave: 20 points in 2-D, 10 in 3-D,
    alpha 2). ``sensor_points``: ``(N, ndim)`` 0-based grid indices in recording order;
    ``off_grid``: sensor points off the grid instead (:class:`OffGrid`); ``cuboids``: the
    shapes of the cuboids ``sensor_points`` make up (cuboid sensors; records come back per
    cuboid); ``cw_frequency`` [Hz], ``cw_periods``: the window of ``p_cw`` / ``p_cw_all``;
    ``interface``: ``"kwave"`` (k-Wave's scheme) or ``"slip"`` (the slip-aware fluid-solid
    interface, :mod:`sonotile.physics.elastic.slip`; the same as ``"kwave"`` where the medium
    has no fluid-solid interface)."""
    check_interface(interface)
    shape, nd = medium.shape, len(medium.shape)
    spacing = tuple(float(d) for d in spacing)
    pml_size = tuple(pml_size) if pml_size is not None else ((10,) if nd == 3 else (20,)) * nd
    pml_alpha = tuple(pml_alpha) if pml_alpha is not None else (2.0,) * nd
    _check_pml_and_records(shape, pml_size, record, record_start_index, nt)
    check_cw(record, cw_frequency, cw_periods, dt, nt - record_start_index + 1)
    xs, fixed, u_modes, s_modes = source_inputs(u, s, medium, spacing, dt, nt, dtype)
    fixed.update(pml_constants(shape, spacing, dt, medium.c_max, pml_size, pml_alpha,
                               mpml_ratio, dtype))  # fmt: skip
    if p0 is not None:
        fixed["p0_split"] = jnp.asarray(-np.asarray(p0) / (2 * nd), dtype)
    if sensor_points is not None and len(sensor_points):
        fixed["sensor_index"] = _index(np.asarray(sensor_points))
    if "u_split_field" in record:
        fixed.update(split_constants(shape, spacing, dtype))
    slip = interface == "slip" and has_interface(medium.sound_speed_shear)
    if slip:
        why = unstable_face(np.asarray(medium.sound_speed_shear), pml_size)
        if why is not None:
            raise ProblemError(f"interface = 'slip': {why}")
        fixed.update(slip_constants(np.asarray(medium.sound_speed_shear), dtype, pml_size))
    statics = Statics(nd, medium.kelvin_voigt, u_modes, s_modes, p0 is not None, slip)
    rec = sources.Recording(tuple(record), int(record_start_index) - 1, nd, cw_frequency,
                            float(cw_periods))  # fmt: skip
    ops = FourierOps.build(shape, spacing, medium.c_max, dt, dtype)
    points = None if sensor_points is None or not len(sensor_points) else np.asarray(sensor_points)
    rows = {k: src.rows for k, src in (("u", u), ("s", s)) if src is not None and
            src.rows is not None}  # fmt: skip
    return ElasticRun(medium, spacing, dt, nt, dtype, ops, statics, rec, xs, fixed, points,
                      off_grid, tuple(tuple(int(n) for n in c) for c in cuboids),
                      rows)  # fmt: skip
