"""Sensors: what is sampled inside the time loop, and how it is aggregated.

All sensor points (index points, or every point of every cuboid in order) form one flat list;
sampling gathers each recorded field at those points, giving vectors of length ``Ns``. Running
max/min/sum-of-squares and whole-field max/min are carried through the scan; raw time series are
scan outputs handed to a recorder between chunks. :func:`finish` turns the accumulated values
into k-Wave's quantities on the host.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.model.grid import AXES
from sonotile.model.problem import Sensor


@dataclass(frozen=True)
class SensorLayout:
    """Static description of the sensor: the flat point list and what to record.

    Attributes:
        points: ``(Ns, ndim)`` int grid indices (host array).
        cuboid_shapes: per cuboid ``(Cx, Cy, Cz)``, or ``()`` for an index sensor.
        raw: field names sampled every step as time series (``p``, ``ux``, ``ux_non_staggered``).
        stats: ``(field, kind)`` pairs with kind ``max`` | ``min`` | ``rms``.
        whole: ``(field, kind)`` pairs with kind ``max_all`` | ``min_all``.
        final: field names whose final whole-grid values are returned.
        start: first sampled step (0-based).
    """

    points: np.ndarray | None
    cuboid_shapes: tuple
    raw: tuple
    stats: tuple
    whole: tuple
    final: tuple
    start: int
    ndim: int

    @property
    def n_points(self) -> int:
        return 0 if self.points is None else int(self.points.shape[0])

    @property
    def needs_unstagger(self) -> bool:
        return any(f.endswith("_non_staggered") for f in self.raw)

    def _key(self) -> tuple:
        # what the traced program depends on: the points themselves are host data that only
        # become index arrays (arguments), so layouts of equally many points compile alike
        return (
            self.cuboid_shapes, self.raw, self.stats, self.whole, self.final, self.start,
            self.ndim, self.n_points,
        )  # fmt: skip

    def __hash__(self) -> int:
        return hash(self._key())

    def __eq__(self, other) -> bool:
        return isinstance(other, SensorLayout) and self._key() == other._key()


def _u_names(ndim: int, suffix: str = "") -> list[str]:
    return [f"u{AXES[a]}{suffix}" for a in range(ndim)]


def layout_of(sensor: Sensor, ndim: int) -> SensorLayout:
    """Expand a validated :class:`Sensor` into the flat layout the scan samples."""
    rec = set(sensor.record)
    if {"I", "I_avg"} & rec:
        rec |= {"p", "u_non_staggered"}
    raw: list[str] = []
    if "p" in rec:
        raw.append("p")
    if "u" in rec:
        raw += _u_names(ndim)
    if "u_non_staggered" in rec:
        raw += _u_names(ndim, "_non_staggered")
    stats, whole, final = [], [], []
    for base, fields in (("p", ["p"]), ("u", _u_names(ndim))):
        for kind in ("max", "min", "rms"):
            if f"{base}_{kind}" in rec:
                stats += [(f, kind) for f in fields]
        for kind in ("max_all", "min_all"):
            if f"{base}_{kind}" in rec:
                whole += [(f, kind) for f in fields]
        if f"{base}_final" in rec:
            final += fields
    points = sensor.index
    shapes: tuple[tuple[int, ...], ...] = ()
    if sensor.cuboids is not None:
        blocks, shp = [], []
        for lo, hi in sensor.cuboids:
            axes = [np.arange(a, b + 1) for a, b in zip(lo, hi)]
            mesh = np.meshgrid(*axes, indexing="ij")
            blocks.append(np.stack([m.reshape(-1) for m in mesh], axis=1))
            shp.append(tuple(int(b - a + 1) for a, b in zip(lo, hi)))
        points, shapes = np.concatenate(blocks), tuple(shp)
    return SensorLayout(
        points, shapes, tuple(raw), tuple(stats), tuple(whole), tuple(final), sensor.start, ndim
    )


def sampled_fields(state, ops, layout: SensorLayout) -> dict:
    """Whole-grid fields that sensors read this step (non-staggered ones computed on demand)."""
    f = {"p": state.p}
    for a, ua in enumerate(state.u):
        f[f"u{AXES[a]}"] = ua
    if layout.needs_unstagger:
        for a, ua in enumerate(state.u):
            name = f"u{AXES[a]}_non_staggered"
            if name in layout.raw:
                f[name] = ops.unstagger(ua, a)
    return f


def gather(field, index):
    """Values of a field at the sensor points (``index``: per-axis int arrays).

    A decomposed run passes an index object with a ``gather(field)`` method instead (it picks the
    points its shard owns and combines the shards), see :mod:`sonotile.parallel`.
    """
    if hasattr(index, "gather"):
        return index.gather(field)
    return field[index]


def init_aggregates(layout: SensorLayout, shape: tuple, dtype) -> dict:
    """Initial carry of running statistics (k-Wave starts max/min at -/+ FLT_MAX)."""
    big = float(jnp.finfo(dtype).max)
    agg = {}
    for f, kind in layout.stats:
        init = {"max": -big, "min": big, "rms": 0.0}[kind]
        agg[f"{f}_{kind}"] = jnp.full((layout.n_points,), init, dtype)
    for f, kind in layout.whole:
        init = -big if kind == "max_all" else big
        agg[f"{f}_{kind}"] = jnp.full(shape, init, dtype)
    return agg


def update(agg: dict, fields: dict, samples: dict, recording, layout: SensorLayout) -> dict:
    """Fold one step's values into the running statistics when ``recording`` is true."""
    out = dict(agg)
    for f, kind in layout.stats:
        key, v, a = f"{f}_{kind}", samples[f], agg[f"{f}_{kind}"]
        if kind == "max":
            new = jnp.maximum(a, v)
        elif kind == "min":
            new = jnp.minimum(a, v)
        else:
            new = a + v * v
        out[key] = jnp.where(recording, new, a)
    for f, kind in layout.whole:
        key, a = f"{f}_{kind}", agg[f"{f}_{kind}"]
        new = jnp.maximum(a, fields[f]) if kind == "max_all" else jnp.minimum(a, fields[f])
        out[key] = jnp.where(recording, new, a)
    return out


def sample(state, ops, layout: SensorLayout, index) -> tuple[dict, dict]:
    """Whole fields and point samples of the current state."""
    fields = sampled_fields(state, ops, layout)
    names = set(layout.raw) | {f for f, _ in layout.stats}
    samples = {f: gather(fields[f], index) for f in names}
    return fields, samples


def finish(agg: dict, state, layout: SensorLayout, nt: int, gather: bool = True) -> dict:
    """k-Wave quantities from the final carry (rms from the sum of squares).

    Point statistics come back as host arrays. Whole-field quantities (``*_max_all``,
    ``*_final``) too when ``gather`` and the field lives on this process's devices; otherwise
    they stay (global, possibly multi-process) device arrays, which a writer takes shard by
    shard (:meth:`sonotile.kwave.output.OutputFile.write_fields`) without gathering a whole
    field anywhere.
    """
    out = {}
    n_rec = nt - layout.start
    for f, kind in layout.stats:
        v = np.asarray(jax.device_get(agg[f"{f}_{kind}"]))
        out[f"{f}_{kind}"] = np.sqrt(v / n_rec) if kind == "rms" else v
    fields = {"p": state.p, **{f"u{AXES[a]}": u for a, u in enumerate(state.u)}}
    whole: dict = {f"{f}_{kind}": agg[f"{f}_{kind}"] for f, kind in layout.whole}
    whole.update({f"{f}_final": fields[f] for f in layout.final})
    for name, v in whole.items():
        local = getattr(v, "is_fully_addressable", True)  # host arrays: always
        out[name] = np.asarray(jax.device_get(v)) if gather and local else v
    return out
