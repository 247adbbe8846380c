"""Sources, sensors and a chunked time loop for the elastic model.

:func:`run` drives :func:`sonotile.physics.elastic.model.step` with ``lax.scan`` over chunks of
steps, sampling the sensors inside the scan (whole fields are never stored per step). It is the
one place to replace when the model runs through the common loop.

Sources follow k-Wave's ``kspaceFirstOrder_scaleSourceTerms`` for the elastic codes: additive
velocity sources are scaled by ``2 c_p dt / d_axis``, additive stress sources by
``2 c_p dt / (ndim dx)`` (dx for every axis, as k-Wave), Dirichlet stress sources by
``1 / ndim`` (each split gets that share; for a shear component in 3-D only two splits exist,
so the enforced total is 2/3 of the given value, as in k-Wave). ``c_p`` is taken at each source
point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.model.grid import AXES
from sonotile.physics.elastic.model import (
    AxisDiffOps,
    State,
    Statics,
    component_names,
    non_staggered,
    pressure,
    split_field,
    step,
    total,
    zero_state,
)

#: What :func:`run` can record (k-Wave's elastic names, plus ``s`` / ``s_final``: the stress
#: components at the points / on the whole grid).
RECORDS = (
    "p", "p_max", "p_min", "p_rms", "p_final", "p_max_all", "p_min_all",
    "u", "u_max", "u_min", "u_rms", "u_final", "u_max_all", "u_min_all", "u_non_staggered",
    "u_split_field",
    "s", "s_final",
)  # fmt: skip


@dataclass(frozen=True)
class Recording:
    """What to record (static). ``start``: first recorded step, 0-based."""

    record: tuple[str, ...]
    start: int
    ndim: int

    def wants(self, *names: str) -> bool:
        return any(n in self.record for n in names)


@dataclass
class SourceSignals:
    """One mask source: grid indices ``(N, ndim)`` and per field a signal ``(N|1, Nt_src)`` in
    the user's units (m/s or Pa) or None; ``mode``: ``additive`` or ``dirichlet``."""

    index: np.ndarray
    signals: tuple[np.ndarray | None, ...]
    mode: str


def scale_signals(
    src: SourceSignals, kind: str, cp: Any, spacing: Sequence[float], dt: float
) -> list[np.ndarray | None]:
    """k-Wave's source scaling (module docstring); ``kind``: ``"u"`` or ``"s"``; ``cp``: the
    compressional speed (number or grid) [m/s]."""
    nd = len(spacing)
    c0 = np.broadcast_to(np.asarray(cp, dtype=np.float64), ()) if np.ndim(cp) == 0 else None
    if c0 is None:
        c0 = np.asarray(cp)[tuple(src.index.T)][:, None]  # per point
    out: list[np.ndarray | None] = []
    for a, sig in enumerate(src.signals):
        if sig is None:
            out.append(None)
            continue
        if kind == "u":
            scale = 1.0 if src.mode == "dirichlet" else 2 * c0 * dt / spacing[a]
        else:
            scale = 1 / nd if src.mode == "dirichlet" else 2 * dt * c0 / (nd * spacing[0])
        out.append(np.asarray(sig, dtype=np.float64) * scale)
    return out


def step_inputs(signals: Sequence[np.ndarray | None], nt: int, dtype: Any) -> tuple[Any, Any]:
    """Per-step values ``(nt, N|1)`` (zero past a signal's end) and ``on`` flags ``(nt,)``."""
    vals: list[jax.Array | None] = []
    ons: list[jax.Array | None] = []
    for sig in signals:
        if sig is None:
            vals.append(None)
            ons.append(None)
            continue
        m = min(sig.shape[1], nt)
        v = np.zeros((nt, sig.shape[0]))
        v[:m] = sig[:, :m].T
        vals.append(jnp.asarray(v, dtype))
        ons.append(jnp.asarray(np.arange(nt) < sig.shape[1]))
    return tuple(vals), tuple(ons)


def sample(state: State, c: dict, rec: Recording) -> dict[str, jax.Array]:
    """The whole fields the records need this step: ``p``, ``ux``..., ``sxx``..., and the
    compressional/shear split ``ux_split_p``, ``ux_split_s``... (k-Wave's names)."""
    nd = rec.ndim
    out: dict[str, jax.Array] = {}
    if rec.wants("p", "p_max", "p_min", "p_rms", "p_max_all", "p_min_all"):
        out["p"] = pressure(state)
    if rec.wants("u", "u_max", "u_min", "u_rms", "u_max_all", "u_min_all", "u_non_staggered",
                 "u_split_field"):  # fmt: skip
        u = [total(ui) for ui in state.u_split]
        for i in range(nd):
            out[f"u{AXES[i]}"] = u[i]
        if rec.wants("u_non_staggered"):
            for i, v in enumerate(non_staggered(u, c)):
                out[f"u{AXES[i]}_non_staggered"] = v
        if rec.wants("u_split_field"):
            up, us = split_field(u, c)
            for i in range(nd):
                out[f"u{AXES[i]}_split_p"], out[f"u{AXES[i]}_split_s"] = up[i], us[i]
    if rec.wants("s"):
        for name, parts in zip(component_names(nd), state.s_split):
            out[name] = total(parts)
    return out


def _is_u(name: str) -> bool:
    return name.startswith("u") and "split" not in name


def init_stats(c: dict, rec: Recording, shape: tuple[int, ...], dtype: Any) -> dict:
    """Running max / min / sum of squares, at the sensor points and on the whole grid."""
    npts = c["sensor_index"][0].shape[0] if "sensor_index" in c else 0
    stats: dict[str, jax.Array] = {}
    for q in ("p",) + tuple(f"u{AXES[i]}" for i in range(rec.ndim)):
        base = q[0]
        for stat, fill in (("max", -jnp.inf), ("min", jnp.inf), ("rms", 0.0)):
            if rec.wants(f"{base}_{stat}"):
                stats[f"{q}_{stat}"] = jnp.full((npts,), fill, dtype)
            if stat != "rms" and rec.wants(f"{base}_{stat}_all"):
                stats[f"{q}_{stat}_all"] = jnp.full(shape, fill, dtype)
    return stats


def update_stats(stats: dict, fields: dict, c: dict, on: jax.Array) -> dict:
    """``stats`` with this step's fields (unchanged before the first recorded step)."""
    new = {}
    for key, old in stats.items():
        q, stat = key.split("_", 1)
        f = fields[q] if stat.endswith("_all") else fields[q][c["sensor_index"]]
        if stat.startswith("max"):
            v = jnp.maximum(old, f)
        elif stat.startswith("min"):
            v = jnp.minimum(old, f)
        else:
            v = old + f * f
        new[key] = jnp.where(on, v, old)
    return new


@partial(jax.jit, static_argnames=("st", "rec"))
def run_chunk(
    state: State, stats: dict, xs: dict, c: dict, ops: AxisDiffOps, st: Statics, rec: Recording
) -> tuple[State, dict, dict]:
    """Steps ``xs["n"]`` under ``lax.scan``: the state, the running statistics and the time
    series at the sensor points (``(steps, N)`` per name)."""
    series_names = [n for n in ("p",) if rec.wants("p")]
    if rec.wants("u"):
        series_names += [f"u{AXES[i]}" for i in range(rec.ndim)]
    if rec.wants("u_non_staggered"):
        series_names += [f"u{AXES[i]}_non_staggered" for i in range(rec.ndim)]
    if rec.wants("u_split_field"):
        series_names += [f"u{AXES[i]}_split_{w}" for i in range(rec.ndim) for w in "ps"]
    if rec.wants("s"):
        series_names += component_names(rec.ndim)

    def body(carry: tuple, x: dict) -> tuple[tuple, dict]:
        state, stats = carry
        state = step(state, x, c, ops, st)
        fields = sample(state, c, rec)
        stats = update_stats(stats, fields, c, x["n"] >= rec.start)
        return (state, stats), {k: fields[k][c["sensor_index"]] for k in series_names}

    (state, stats), series = jax.lax.scan(body, (state, stats), xs)
    return state, stats, series


def finish(
    series: list[dict], stats: dict, state: State, rec: Recording, nt: int
) -> dict[str, jax.Array]:
    """Records in k-Wave's layout: series ``(N, recorded steps)``, statistics ``(N,)``, whole
    fields the grid's shape."""
    out: dict[str, jax.Array] = {}
    if series and series[0]:
        for k in series[0]:
            out[k] = jnp.concatenate([s[k] for s in series])[rec.start :].T
    count = nt - rec.start
    for k, v in stats.items():
        out[k] = jnp.sqrt(v / count) if k.endswith("_rms") else v
    if rec.wants("p_final"):
        out["p_final"] = pressure(state)
    if rec.wants("u_final"):
        for i, ui in enumerate(state.u_split):
            out[f"u{AXES[i]}_final"] = total(ui)
    if rec.wants("s_final"):
        for name, parts in zip(component_names(rec.ndim), state.s_split):
            out[f"{name}_final"] = total(parts)
    return out


def run(
    c: dict,
    ops: AxisDiffOps,
    st: Statics,
    rec: Recording,
    xs: dict,
    shape: tuple[int, ...],
    nt: int,
    dtype: Any,
    chunk: int = 64,
    state: State | None = None,
) -> tuple[dict[str, jax.Array], State]:
    """Run ``nt`` steps from ``state`` (default: rest) in chunks of ``chunk`` steps (one compiled
    program per chunk length). ``xs``: per-step inputs of
    :func:`~sonotile.physics.elastic.model.step` with a leading step axis (``n`` included).
    Differentiable (``jax.grad`` through ``c``; each chunk is rematerialised in the backward
    pass, so a gradient keeps one state per chunk plus one chunk's steps)."""
    if state is None:
        state = zero_state(shape, dtype)
    stats = init_stats(c, rec, shape, dtype)
    # under jax.grad a chunk's steps are recomputed in the backward pass: only the states
    # between chunks are kept, not every step's
    chunk_fn = jax.checkpoint(partial(run_chunk, st=st, rec=rec))
    series = []
    for n0 in range(0, nt, chunk):
        part = jax.tree_util.tree_map(lambda a, n0=n0: a[n0 : n0 + chunk], xs)
        state, stats, s = chunk_fn(state, stats, part, c, ops)
        series.append(s)
    return finish(series, stats, state, rec, nt), state
