"""Sensors: what is sampled inside the time loop, and how it is aggregated.

All sensor points (index points, or every point of every cuboid in order) form one flat list;
sampling gathers each recorded field at those points, giving vectors of length ``Ns``. Running
max/min/sum-of-squares and whole-field max/min are carried through the scan; raw time series are
scan outputs handed to a recorder between chunks. :func:`finish` turns the accumulated values
into k-Wave's quantities on the host.

Points off the grid (``Sensor.positions``) are read through interpolation stencils
(:mod:`sonotile.model.bli`): the flat list is then the union of the stencil points of every
field (each staggered velocity component has its own), and each sample is a weighted sum of
gathered values (:class:`Interp`). The steady-state amplitude and phase (``p_cw``) is a running
single-bin DFT over the last steps, carried like the other statistics.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.fft import backend as fft_backend
from sonotile.model import bli
from sonotile.model.grid import AXES
from sonotile.model.problem import Sensor, cw_window
from sonotile.physics import Records, wave_records
from sonotile.spectral import device

if TYPE_CHECKING:
    from sonotile.spectral.operators import SpectralOps

#: Per-axis integer index arrays of a set of grid points (``field[index]`` gathers them).
PointIndex = tuple[jax.Array, ...]
#: A model's state as sensors read it: ``state.fields()``, the whole-grid fields by name
#: (:mod:`sonotile.physics.base`).
State = Any


class PointGather(Protocol):
    """A decomposed run's sensor index (:class:`sonotile.parallel.mesh.ShardIndex`): each shard
    picks what it holds and one sum over the mesh combines the shards."""

    def gather_all(
        self,
        fields: Sequence[jax.Array],
        line_fields: Sequence[jax.Array] = (),
        lines: Sequence[Lines] = (),
    ) -> tuple[list[jax.Array], list[jax.Array]]:
        """The values of each of ``fields`` at the points and the whole lines ``(L, N)`` of
        each of ``line_fields``, the same on every shard."""
        ...


@dataclass(frozen=True)
class Interp:
    """Off-grid reading: ``sample[n] = sum_m weight[n, m] gathered[rows[n, m]]`` per field.

    Attributes:
        rows: ``{field: (N, M) int32}`` positions in the gathered (stencil) point list.
        weights: ``{field: (N, M)}`` float64 interpolation weights.
    """

    rows: dict[str, np.ndarray]
    weights: dict[str, np.ndarray]

    @property
    def digest(self) -> str:
        """Content hash: the weights are constants of the traced program, so layouts compile
        alike only when these agree."""
        h = hashlib.sha1()
        for f in sorted(self.rows):
            h.update(f.encode() + self.rows[f].tobytes() + self.weights[f].tobytes())
        return h.hexdigest()


@dataclass(frozen=True)
class CwWindow:
    """The single-bin DFT of ``p_cw``: steps ``first <= n < first + steps`` at ``f0 dt``
    cycles per step [1]."""

    first: int
    steps: int
    cycles_per_step: float


@dataclass(frozen=True)
class Lines:
    """The grid lines along ``axis`` through some sampled points, for reading a non-staggered
    velocity there without shifting the whole grid (:func:`line_samples`).

    Attributes:
        axis: the line direction (the velocity component's own axis).
        coords: ``(L, ndim)`` int32 grid indices of each distinct line (0 along ``axis``).
        line_of: ``(K,)`` int32 the line of each point.
        pos: ``(K,)`` int32 each point's index along ``axis``.
        rows: ``(K,)`` int32 positions of the points in the flat point list, or ``None`` (all of
            them, in order).
    """

    axis: int
    coords: np.ndarray
    line_of: np.ndarray
    pos: np.ndarray
    rows: np.ndarray | None = None

    def digest(self) -> bytes:
        """Content bytes: the indices are constants of the traced program."""
        rows = b"" if self.rows is None else self.rows.tobytes()
        parts = (self.coords, self.line_of, self.pos)
        return bytes([self.axis]) + b"".join(a.tobytes() for a in parts) + b"|" + rows


#: Largest share of the grid that the lines through the sampled points of one component may
#: cover for the line path; above it the whole component is shifted (``ops.unstagger``).
#: Measured at 128^3 on the CPU (``benchmarks/performance/unstagger_lines.py``, XLA's FFT, two
#: runs): the line path costs 0.01-0.15 of the whole-grid shift up to 1/8 of the grid, 0.1-0.5 at
#: 1/4, 0.3-0.7 at 1/2, 1.0-1.4 at all lines. A decomposed run sums the lines over the mesh
#: (``L N log2 P`` values per shard), which moves less than the whole-field transposes (about
#: ``2 N_grid / P``) only below ``2 (P-1) / (P^2 log2 P)`` of the grid, 0.15 at P = 8: 1/8
#: suits both.
LINE_SHARE = 0.125


def lines_through(
    points: np.ndarray, axis: int, shape: tuple[int, ...], rows: np.ndarray | None = None
) -> Lines | None:
    """The lines along ``axis`` through ``points[rows]`` (``(N, ndim)`` grid indices), or
    ``None`` when they cover more than :data:`LINE_SHARE` of the grid (or there are none)."""
    pts = np.asarray(points if rows is None else points[rows], np.int64)
    if pts.shape[0] == 0:
        return None
    others = np.delete(pts, axis, axis=1)
    if others.shape[1] == 0:  # a 1-D grid: one line
        uniq, inv = np.zeros((1, 0), np.int64), np.zeros(pts.shape[0], np.int64)
    else:
        uniq, inv = np.unique(others, axis=0, return_inverse=True)
    if uniq.shape[0] * shape[axis] > LINE_SHARE * math.prod(shape):
        return None
    coords = np.insert(uniq, axis, 0, axis=1).astype(np.int32)
    rows_ = None if rows is None else np.asarray(rows, np.int32)
    return Lines(axis, coords, inv.reshape(-1).astype(np.int32), pts[:, axis].astype(np.int32),
                 rows_)  # fmt: skip


@dataclass(frozen=True)
class SensorLayout:
    """Static description of the sensor: the flat point list and what to record.

    Attributes:
        points: ``(Ns, ndim)`` int grid indices (host array).
        cuboid_shapes: per cuboid ``(Cx, Cy, Cz)``, or ``()`` for an index sensor.
        raw: field names sampled every step as time series (``p``, ``ux``, ``ux_non_staggered``).
        stats: ``(field, kind)`` pairs with kind ``max`` | ``min`` | ``rms`` | ``cw_re`` |
            ``cw_im`` (the DFT sums of ``p_cw``).
        whole: ``(field, kind)`` pairs with kind ``max_all`` | ``min_all`` | ``cw_re_all`` |
            ``cw_im_all``.
        final: field names whose final whole-grid values are returned.
        start: first sampled step (0-based).
        interp: off-grid reading of the sampled fields, or ``None`` (points are the samples).
        cw: the ``p_cw`` window, or ``None``.
        lines: ``(field, Lines)`` for the non-staggered velocities read from the lines through
            their points (:func:`line_samples`); the others are shifted whole.
    """

    points: np.ndarray | None
    cuboid_shapes: tuple[tuple[int, ...], ...]
    raw: tuple[str, ...]
    stats: tuple[tuple[str, str], ...]
    whole: tuple[tuple[str, str], ...]
    final: tuple[str, ...]
    start: int
    ndim: int
    interp: Interp | None = None
    cw: CwWindow | None = None
    lines: tuple[tuple[str, Lines], ...] = ()

    @property
    def n_points(self) -> int:
        """Grid points gathered each step (stencil points for off-grid sensors)."""
        return 0 if self.points is None else int(self.points.shape[0])

    @property
    def n_out(self) -> int:
        """Sensor points in the output (the user's points)."""
        if self.interp is not None:
            return int(next(iter(self.interp.rows.values())).shape[0])
        return self.n_points

    @property
    def needs_unstagger(self) -> bool:
        """Some non-staggered velocity is shifted as a whole field (``ops.unstagger``)."""
        on_lines = {f for f, _ in self.lines}
        return any(f.endswith("_non_staggered") and f not in on_lines for f in self.raw)

    @cached_property
    def _lines_digest(self) -> str:
        """Content hash of the lines, computed once (the key is hashed at every call)."""
        h = hashlib.sha1()
        for f, ln in self.lines:
            h.update(f.encode() + ln.digest())
        return h.hexdigest()

    def _key(self) -> tuple:
        # what the traced program depends on: the points themselves are host data that only
        # become index arrays (arguments), so layouts of equally many points compile alike
        return (
            self.cuboid_shapes, self.raw, self.stats, self.whole, self.final, self.start,
            self.ndim, self.n_points, self.n_out, self.cw,
            None if self.interp is None else self.interp.digest,
            self._lines_digest if self.lines else None,
        )  # fmt: skip

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SensorLayout) and self._key() == other._key()


def layout_of(
    sensor: Sensor, shape: tuple, nt: int = 0, dt: float = 0.0, records: Records | None = None
) -> SensorLayout:
    """Expand a validated :class:`Sensor` into the flat layout the scan samples.

    ``shape``: the grid shape; ``nt``, ``dt`` [s]: the time axis (needed for ``p_cw``);
    ``records``: what the model records (:meth:`sonotile.physics.Model.records`; default a
    wave model's, :func:`sonotile.physics.wave_records`).
    """
    ndim = len(shape)
    table = wave_records(ndim) if records is None else records
    rec = set(sensor.record)
    if {"I", "I_avg"} & rec:
        rec |= {"p", "u_non_staggered"}
    raw: list[str] = []
    stats: list[tuple[str, str]] = []
    whole: list[tuple[str, str]] = []
    final: list[str] = []
    for name, (kind, fields) in table.items():
        if name not in rec:
            continue
        if kind == "raw":
            raw += fields
        elif kind in ("max", "min", "rms"):
            stats += [(f, kind) for f in fields]
        elif kind in ("max_all", "min_all"):
            whole += [(f, kind) for f in fields]
        elif kind == "final":
            final += fields
        else:
            raise ValueError(f"record {name!r}: unknown kind {kind!r}")
    cw = None
    if {"p_cw", "p_cw_all"} & rec:
        cw = cw_layout(sensor, nt, dt)
        if "p_cw" in rec:
            stats += [("p", "cw_re"), ("p", "cw_im")]
        if "p_cw_all" in rec:
            whole += [("p", "cw_re_all"), ("p", "cw_im_all")]
    points, interp = sensor.index, None
    shapes: tuple[tuple[int, ...], ...] = ()
    if sensor.positions is not None:
        names = tuple(dict.fromkeys(list(raw) + [f for f, _ in stats]))
        points, interp = interp_layout(sensor, names, shape)
    if sensor.cuboids is not None:
        blocks, shp = [], []
        for lo, hi in sensor.cuboids:
            axes = [np.arange(a, b + 1) for a, b in zip(lo, hi)]
            mesh = np.meshgrid(*axes, indexing="ij")
            blocks.append(np.stack([m.reshape(-1) for m in mesh], axis=1))
            shp.append(tuple(int(b - a + 1) for a, b in zip(lo, hi)))
        points, shapes = np.concatenate(blocks), tuple(shp)
    return SensorLayout(
        points, shapes, tuple(raw), tuple(stats), tuple(whole), tuple(final), sensor.start, ndim,
        interp, cw, line_plans(points, raw, shape, interp),
    )  # fmt: skip


def line_plans(
    points: np.ndarray | None, raw: list[str], shape: tuple, interp: Interp | None
) -> tuple[tuple[str, Lines], ...]:
    """:class:`Lines` of each recorded non-staggered velocity where they are small enough
    (:func:`lines_through`); an off-grid sensor's lines pass through that field's stencil
    points only."""
    if points is None:
        return ()
    out = []
    for a in range(len(shape)):
        name = f"u{AXES[a]}_non_staggered"
        if name not in raw:
            continue
        rows = None
        if interp is not None:
            rows = np.unique(interp.rows[name])
            rows = None if rows.size == points.shape[0] else rows
        ln = lines_through(points, a, shape, rows)
        if ln is not None:
            out.append((name, ln))
    return tuple(out)


def cw_layout(sensor: Sensor, nt: int, dt: float) -> CwWindow:
    """The DFT window of ``p_cw``: the last ``cw_periods`` periods of the run."""
    m = cw_window(sensor, dt)
    assert sensor.cw_frequency is not None  # checked by cw_window
    return CwWindow(nt - m, m, float(sensor.cw_frequency) * dt)


def field_offset(name: str, ndim: int) -> tuple:
    """Where a field's samples sit relative to the grid points [grid spacings]: staggered
    velocity ``ux`` at ``x + dx/2``, an elastic shear stress ``sxy`` at ``x + dx/2, y + dy/2``;
    the rest on the grid points (``p``, normal stresses ``sxx``, ``ux_non_staggered``, the
    elastic split field ``ux_split_p`` / ``ux_split_s``)."""
    off = [0.0] * ndim
    if len(name) == 2 and name[0] == "u":
        off[AXES.index(name[1])] = 0.5
    elif len(name) == 3 and name[0] == "s" and name[1] != name[2]:
        for c in name[1:]:
            off[AXES.index(c)] = 0.5
    return tuple(off)


def interp_layout(sensor: Sensor, names: tuple, shape: tuple) -> tuple[np.ndarray, Interp]:
    """The union of the stencil points of every sampled field and each field's rows/weights.

    A staggered velocity is read on its own grid, so every field is sampled at the same
    physical positions.
    """
    ndim = len(shape)
    per_field = {}
    for f in names:
        coords = sensor.positions - np.asarray(field_offset(f, ndim))
        per_field[f] = bli.stencil(coords, shape, sensor.interpolation, float(sensor.bli_tolerance))
    lin = {f: np.ravel_multi_index(tuple(np.moveaxis(i, -1, 0)), shape) for f, (i, _) in
           per_field.items()}  # fmt: skip
    uniq, inv = np.unique(np.concatenate([v.ravel() for v in lin.values()]), return_inverse=True)
    rows, weights, at = {}, {}, 0
    for f, v in lin.items():
        rows[f] = inv[at : at + v.size].reshape(v.shape).astype(np.int32)
        weights[f] = per_field[f][1]
        at += v.size
    points = np.stack(np.unravel_index(uniq, shape), axis=1)
    return points, Interp(rows, weights)


def sampled_fields(state: State, ops: SpectralOps, layout: SensorLayout) -> dict[str, jax.Array]:
    """Whole-grid fields that sensors read this step (``state.fields()``; non-staggered ones
    computed on demand, except those read from lines, see :func:`line_samples`)."""
    f = dict(state.fields())
    if layout.needs_unstagger:
        on_lines = {name for name, _ in layout.lines}
        for a in range(layout.ndim):
            name = f"u{AXES[a]}_non_staggered"
            if name in layout.raw and name not in on_lines:
                f[name] = ops.unstagger(f[f"u{AXES[a]}"], a)
    return f


def velocities(fields: dict[str, jax.Array], ndim: int) -> list[jax.Array | None]:
    """The staggered velocity components ``ux``... of ``fields`` (None where absent)."""
    return [fields.get(f"u{AXES[a]}") for a in range(ndim)]


def unshift_1d(n: int) -> np.ndarray:
    """``exp(-i k d/2)`` on the ``rfft`` spectrum of ``n`` points (``k d = 2 pi m / n``): the
    half-cell shift of :meth:`FourierOps.unstagger`, complex128."""
    return np.exp(-0.5j * 2 * np.pi * np.fft.rfftfreq(n))


def shift_lines(v: jax.Array) -> jax.Array:
    """Each row of ``v`` ``(L, N)`` shifted by minus half a cell (the same 1-D rfft/irfft and
    shift as the whole-grid path)."""
    cdtype = jnp.complex64 if v.dtype == jnp.float32 else jnp.complex128
    shift = jnp.asarray(unshift_1d(v.shape[1]), cdtype)
    return fft_backend.portable().along_axis([v], 1, [shift])[0]


def line_index(ln: Lines, n: int) -> tuple[jax.Array, ...]:
    """Index of the ``(L, n)`` values of the lines ``ln`` in a field whose ``ln.axis`` holds
    ``n`` points (the other axes as in ``ln.coords``)."""
    return tuple(
        jnp.arange(n, dtype=jnp.int32)[None, :] if b == ln.axis
        else jnp.asarray(ln.coords[:, b])[:, None]
        for b in range(ln.coords.shape[1])
    )  # fmt: skip


def line_samples(
    u: Sequence[jax.Array | None], layout: SensorLayout, index: PointIndex
) -> dict[str, jax.Array]:
    """The non-staggered velocities of ``layout.lines`` at the sensor points ``(Ns,)``, from the
    lines through them: gather the lines, shift them, pick the points.

    Cost ``L N log N`` per component (``L`` lines of ``N`` points) instead of the whole grid. A
    decomposed run gathers each shard's segments and sums them over the mesh instead
    (``PointGather.gather_all``, with the point samples), so every shard shifts whole lines.
    """
    segs = []
    for _, ln in layout.lines:
        ua = u[ln.axis]
        assert ua is not None  # a non-staggered record needs its velocity
        segs.append(ua[line_index(ln, ua.shape[ln.axis])])
    return pick_lines(segs, layout)


def pick_lines(segs: Sequence[jax.Array], layout: SensorLayout) -> dict[str, jax.Array]:
    """The sensor points' values from the whole lines ``segs`` of ``layout.lines``, shifted."""
    out = {}
    for (name, ln), v in zip(layout.lines, segs):
        picked = shift_lines(v)[jnp.asarray(ln.line_of), jnp.asarray(ln.pos)]
        if ln.rows is not None:
            picked = jnp.zeros(layout.n_points, v.dtype).at[jnp.asarray(ln.rows)].set(picked)
        out[name] = picked
    return out


def init_aggregates(
    layout: SensorLayout,
    shape: tuple[int, ...],
    dtype: jax.typing.DTypeLike,
    eager: bool = False,
) -> dict[str, jax.Array]:
    """Initial carry of running statistics (k-Wave starts max/min at -/+ FLT_MAX); ``eager``:
    outside a trace (:func:`sonotile.spectral.device.full`)."""
    big = float(jnp.finfo(dtype).max)
    full = device.full if eager else jnp.full
    agg = {}
    for f, kind in layout.stats:
        init = {"max": -big, "min": big}.get(kind, 0.0)
        agg[f"{f}_{kind}"] = full((layout.n_out,), init, dtype)
    for f, kind in layout.whole:
        init = {"max_all": -big, "min_all": big}.get(kind, 0.0)
        agg[f"{f}_{kind}"] = full(shape, init, dtype)
    return agg


def cw_terms(
    n: jax.Array, cw: CwWindow, dtype: jax.typing.DTypeLike
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(in_window, cos, -sin)`` of the DFT phase at step ``n``, phase 0 at the window start
    (counting from there keeps the float phase small and accurate; reduced modulo one cycle)."""
    k = (n - cw.first).astype(dtype)
    ph = 2 * jnp.pi * jnp.mod(k * jnp.asarray(cw.cycles_per_step, dtype), 1.0)
    return n >= cw.first, jnp.cos(ph), -jnp.sin(ph)


def update(
    agg: dict[str, jax.Array],
    fields: dict[str, jax.Array],
    samples: dict[str, jax.Array],
    recording: jax.Array | bool,
    layout: SensorLayout,
    n: jax.Array | int | None = None,
) -> dict[str, jax.Array]:
    """Fold one step's values into the running statistics when ``recording`` is true
    (``n``: the step index, needed for ``p_cw``)."""
    out = dict(agg)
    if layout.cw is not None:
        if n is None:
            raise ValueError("sensor: recording p_cw needs the step index n in update()")
        in_cw, c, s = cw_terms(jnp.asarray(n), layout.cw, fields["p"].dtype)
        trig = {"cw_re": c, "cw_im": s, "cw_re_all": c, "cw_im_all": s}
    for f, kind in layout.stats + layout.whole:
        if kind.startswith("cw_"):
            key = f"{f}_{kind}"
            v = fields[f] if kind.endswith("_all") else samples[f]
            out[key] = jnp.where(in_cw, agg[key] + v * trig[kind], agg[key])
    for f, kind in layout.stats:
        key, v, a = f"{f}_{kind}", samples[f], agg[f"{f}_{kind}"]
        if kind.startswith("cw_"):
            continue
        if kind == "max":
            new = jnp.maximum(a, v)
        elif kind == "min":
            new = jnp.minimum(a, v)
        else:
            new = a + v * v
        out[key] = jnp.where(recording, new, a)
    for f, kind in layout.whole:
        if kind.startswith("cw_"):
            continue
        key, a = f"{f}_{kind}", agg[f"{f}_{kind}"]
        new = jnp.maximum(a, fields[f]) if kind == "max_all" else jnp.minimum(a, fields[f])
        out[key] = jnp.where(recording, new, a)
    return out


def sums_deferrable(layout: SensorLayout) -> bool:
    """Whether a decomposed run may sum its shards' sensor samples once per chunk instead of
    once per step (:meth:`sonotile.parallel.mesh.ShardIndex.settle`): the samples are linear in
    the shards' parts (point values, lines shifted, off-grid weights), and every running point
    statistic must be of values its owning shard alone holds, so not of the velocities read
    from lines through the points nor of off-grid interpolations."""
    on_lines = {f for f, _ in layout.lines}
    if layout.interp is not None and layout.stats:
        return False
    return not any(f in on_lines for f, _ in layout.stats)


def sample(
    state: State, ops: SpectralOps, layout: SensorLayout, index: PointIndex | PointGather
) -> tuple[dict[str, jax.Array], dict[str, jax.Array]]:
    """Whole fields and point samples of the current state."""
    fields = sampled_fields(state, ops, layout)
    from_lines = {name for name, _ in layout.lines}
    # sorted: every process of a decomposed run must gather the fields in the same order
    names = sorted((set(layout.raw) | {f for f, _ in layout.stats}) - from_lines)
    if isinstance(index, tuple):
        u = velocities(fields, layout.ndim)
        samples = line_samples(u, layout, index) if layout.lines else {}
        samples.update({f: fields[f][index] for f in names})
    else:  # a decomposed run's index: every sample in one sum over the mesh
        points, segs = index.gather_all([fields[f] for f in names],
                                        [fields[f"u{AXES[ln.axis]}"] for _, ln in layout.lines],
                                        [ln for _, ln in layout.lines])  # fmt: skip
        samples = dict(zip(names, points)) | pick_lines(segs, layout)
    if layout.interp is not None:
        samples = {f: interpolate(v, layout.interp, f) for f, v in samples.items()}
    return fields, samples


def interpolate(gathered: jax.Array, interp: Interp, name: str) -> jax.Array:
    """Off-grid samples ``(N,)`` from the gathered stencil values ``(Ns,)`` of one field."""
    w = jnp.asarray(interp.weights[name], gathered.dtype)
    return jnp.sum(w * gathered[jnp.asarray(interp.rows[name])], axis=1)


def finish(
    agg: dict[str, jax.Array], state: State, layout: SensorLayout, nt: int, gather: bool = True,
    traced: bool = False,
) -> dict[str, np.ndarray | jax.Array]:  # fmt: skip
    """k-Wave quantities from the final carry (rms from the sum of squares).

    Point statistics come back as host arrays. Whole-field quantities (``*_max_all``,
    ``*_final``) too when ``gather`` and the field lives on this process's devices; otherwise
    they stay (global, possibly multi-process) device arrays, which a writer takes shard by
    shard (:meth:`sonotile.kwave.output.OutputFile.write_fields`) without gathering a whole
    field anywhere. ``traced``: inside a trace (a differentiable run), everything stays a JAX
    value (``p_cw`` point statistics excluded).
    """
    out: dict[str, np.ndarray | jax.Array] = {}
    n_rec = nt - layout.start
    for f, kind in layout.stats:
        if kind.startswith("cw_"):
            continue
        if traced:
            t = agg[f"{f}_{kind}"]
            out[f"{f}_{kind}"] = jnp.sqrt(t / n_rec) if kind == "rms" else t
            continue
        v = np.asarray(jax.device_get(agg[f"{f}_{kind}"]))
        out[f"{f}_{kind}"] = np.sqrt(v / n_rec) if kind == "rms" else v
    if ("p", "cw_re") in layout.stats and not traced:
        assert layout.cw is not None  # layout_of sets it with the p_cw statistics
        re, im = (np.asarray(jax.device_get(agg[k]), np.float64) for k in ("p_cw_re", "p_cw_im"))
        out["p_cw_amp"], out["p_cw_phase"] = cw_amp_phase(re, im, layout.cw, np)
    fields = state.fields()
    whole = {f"{f}_{kind}": agg[f"{f}_{kind}"] for f, kind in layout.whole if "cw" not in kind}
    if ("p", "cw_re_all") in layout.whole:
        assert layout.cw is not None  # layout_of sets it with the p_cw statistics
        amp, ph = cw_amp_phase(agg["p_cw_re_all"], agg["p_cw_im_all"], layout.cw, jnp)
        whole.update(p_cw_amp_all=amp, p_cw_phase_all=ph)
    whole.update({f"{f}_final": fields[f] for f in layout.final})
    for name, arr in whole.items():
        if traced or not gather:  # a tracer has no addressability to ask about
            out[name] = arr
            continue
        local = getattr(arr, "is_fully_addressable", True)  # host arrays: always
        out[name] = np.asarray(jax.device_get(arr)) if local else arr
    return out


def cw_amp_phase(re: Any, im: Any, window: CwWindow, xp: ModuleType) -> tuple[Any, Any]:
    """Amplitude [Pa] and phase [rad] of ``p = A cos(2 pi f0 t + phase)`` from the DFT sums
    over the window's samples (``t = 0`` at its first step); ``xp``: numpy or jax.numpy.

    The sums give ``Z = 2 (re + i im) / N = P + beta conj(P)`` (``N`` samples, ``P = A
    exp(i phase)``, ``beta = sum_n exp(-2 i theta n) / N`` at ``theta = 2 pi f0 dt``: the
    negative frequency's leak, 0 for whole periods); ``P = (Z - beta conj(Z)) / (1 -
    |beta|^2)`` reads a steady tone exactly from any window, linear in the complex drive. The
    amplitude's derivative is 0 (not NaN) where it is 0: gradients through it stay finite."""
    n, theta = window.steps, 2 * np.pi * window.cycles_per_step
    beta = complex(np.sum(np.exp(-2j * theta * np.arange(n)))) / n
    zr, zi = (2.0 / n) * re, (2.0 / n) * im
    scale = 1.0 / (1.0 - abs(beta) ** 2)
    pr = (zr - (beta.real * zr + beta.imag * zi)) * scale
    pi = (zi - (beta.imag * zr - beta.real * zi)) * scale
    some = (power := pr * pr + pi * pi) > 0
    amp = xp.where(some, xp.sqrt(xp.where(some, power, 1.0)), 0.0)
    return amp, xp.arctan2(pi, pr)
