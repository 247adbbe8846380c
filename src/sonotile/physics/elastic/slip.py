"""A slip-aware fluid-solid interface for the elastic model (``interface="slip"``; k-Wave's
scheme is the default).

A fluid slips along a solid: the tangential velocity jumps across the interface and the shear
stress vanishes on it. k-Wave's scheme takes spectral derivatives straight across the jump, and
they ring into both media (an error of first order in the grid spacing, docs/elastic.md). With
this option, for every shear component ``sigma_ab`` (a != b):

- the solid's shear strain ``d u_b / dx_a`` is taken from ``u_b`` continued from the solid into
  the fluid along ``a`` (``C u_b``): quadratic extrapolation of the first three solid points of
  each grid line (linear or constant where the solid is thinner), tapered to 0 over 8 points;
- the velocity update takes the transpose: ``d sigma_ab / dx_a`` into ``u_b`` becomes
  ``C^T d sigma_ab / dx_a``: a fluid ``u_b`` point gets none of it (a fluid carries no shear
  stress) and what the derivative gives at the fluid points next to the solid is folded back
  onto the solid points the continuation reads, with its weights. The pair stays the negative
  transpose of each other, as k-Wave's staggered derivatives are, so the scheme conserves the
  same energy and is as stable.

Each continuation is a gather along grid lines, precomputed from the shear-speed field (any
geometry, stair-stepped): a ``u_b`` point is solid where the shear speed is > 0 at both grid
points it lies between along ``b`` (then the shear-stress points between two solid ``u_b``
points along ``a`` are those whose harmonic shear modulus is > 0). In a fluid gap between two
solids each fluid point is continued from the nearer solid, the taper reaching 0 at the gap's
middle. The step is linear in the fields, so it is differentiable; the fluid/solid pattern is
fixed when the run is built.

No continuation writes or reads a point inside the PML along its own axis (:func:`outside_pml`):
there a fluid ``u_b`` is only left out of the solid's shear strain (the gather's part of ``C``
dropped, ``C`` the solid mask). A continuation reaching into the layer is unstable: a solid
touching the grid's last plane along ``a`` has a live shear-stress point across the periodic
wrap (k-Wave's staggered modulus keeps the last plane's own value), and the quadratic
extrapolation from the layer's most damped points into the fluid on the other side of the
wrap, paired with the split-field PML, grows by 1e5 every 3000 steps (PML 100, alpha 2) where
k-Wave's scheme stays bounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: The continuations reach 0 at this many points from the solid (the taper ``cos^2(pi j / 18)``).
TAPER = 9

#: A gather: flat destination indices ``(M,)``, flat source indices ``(M, 3)``, weights
#: ``(M, 3)``.
Gather = tuple[np.ndarray, np.ndarray, np.ndarray]


def pairs(ndim: int) -> list[tuple[int, int]]:
    """The ``(b, a)`` pairs, a != b: ``d u_b / dx_a`` and ``d sigma_ab / dx_a`` (into ``u_b``)."""
    return [(b, a) for b in range(ndim) for a in range(ndim) if a != b]


def _next(f: np.ndarray, axis: int) -> np.ndarray:
    """``f`` at the next point along ``axis``, the last plane repeated (as the model's)."""
    return np.concatenate([np.take(f, range(1, f.shape[axis]), axis),
                           np.take(f, [f.shape[axis] - 1], axis)], axis)  # fmt: skip


def solid_velocity(solid: np.ndarray, b: int) -> np.ndarray:
    """Solid ``u_b`` points: both grid points they lie between along ``b`` solid."""
    return solid & _next(solid, b)


def _distance(inside: np.ndarray, axis: int, s: int, far: int) -> np.ndarray:
    """Points to the first inside point from each point along ``s * axis`` (periodic), 1..far,
    else inf (0 inside)."""
    d = np.full(inside.shape, np.inf)
    for k in range(far, 0, -1):
        d = np.where(np.roll(inside, -s * k, axis), k, d)
    return np.where(inside, 0.0, d)


def _run(inside: np.ndarray, axis: int, s: int, cap: int) -> np.ndarray:
    """Inside points in a row from each point along ``s * axis``, at most ``cap``."""
    acc, r = inside.copy(), inside.astype(int)
    for k in range(1, cap):
        acc &= np.roll(inside, -s * k, axis)
        r += acc
    return r


def _lagrange(t: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Weights ``(M, 3)`` on the nodes 0, 1, 2 of the polynomial through the first ``order``
    (1..3) of them, at ``t``."""
    w = np.zeros((t.size, 3))
    w[order == 1, 0] = 1.0
    two = order == 2
    w[two, 0], w[two, 1] = 1 - t[two], t[two]
    q, tq = order >= 3, t[order >= 3]
    w[q, 0], w[q, 1], w[q, 2] = (tq - 1) * (tq - 2) / 2, -tq * (tq - 2), tq * (tq - 1) / 2
    return w


def line_gather(inside: np.ndarray, axis: int, allowed: np.ndarray | None = None) -> Gather:
    """The continuation of a field from its ``inside`` points to the others along ``axis``:
    polynomial extrapolation of the nearer inside run (up to quadratic), tapered over
    :data:`TAPER` points (to the middle of a narrower gap); lines periodic. ``allowed``
    (broadcastable to ``inside``; None: everywhere): the points a continuation may write and
    read; a continued point that needs any other is left out."""
    n, far = inside.shape[axis], 2 * TAPER
    dp, dm = _distance(inside, axis, 1, far), _distance(inside, axis, -1, far)
    s = np.where(dp <= dm, 1, -1)
    d = np.minimum(dp, dm)
    lt = np.minimum(TAPER, (dp + dm) / 2)
    keep = ~inside & (d >= 1) & (d < lt)
    dst = np.flatnonzero(keep)
    s, d, lt = s.flat[dst], d.flat[dst].astype(int), lt.flat[dst]
    taper = np.cos(np.pi * d / (2 * lt)) ** 2
    coords = np.unravel_index(dst, inside.shape)
    first = coords[axis] + s * d  # the first inside point
    runs = [_run(inside, axis, sg, 3) for sg in (1, -1)]
    at = list(coords)
    at[axis] = first % n
    r = np.where(s > 0, runs[0][tuple(at)], runs[1][tuple(at)])
    w = _lagrange(-d.astype(float), r) * taper[:, None]
    src = []
    for q in range(3):
        at[axis] = (first + s * q) % n
        src.append(np.ravel_multi_index(tuple(at), inside.shape))
    src_ = np.stack(src, 1).reshape(dst.size, 3)
    if allowed is not None:
        ok = np.broadcast_to(allowed, inside.shape).reshape(-1)
        use = ok[dst] & ok[src_].all(axis=1)
        dst, src_, w = dst[use], src_[use], w[use]
    return dst, src_, w


def outside_pml(shape: tuple[int, ...], pml_size: Sequence[int], axis: int) -> np.ndarray:
    """The points outside the PML along ``axis`` (``pml_size`` points at each end), a boolean
    array broadcastable to ``shape``."""
    i = np.arange(shape[axis])
    size = int(pml_size[axis])
    keep = (i >= size) & (i < shape[axis] - size)
    return keep.reshape([-1 if a == axis else 1 for a in range(len(shape))])


def unstable_face(cs: np.ndarray, pml_size: Sequence[int]) -> str | None:
    """Where the slip-aware interface is known to grow without bound, what to say; else None.

    With no PML along some axis, a fluid-solid face normal to another axis inside that axis's
    PML (between neighbours, not across the grid's periodic edge) grows with either scheme
    (docs/elastic.md, Stability); the slip-aware one refuses it."""
    solid = np.asarray(cs) > 0
    names = "xyz"
    bare = [a for a in range(solid.ndim) if int(pml_size[a]) == 0]
    if not bare or solid.ndim < 2:
        return None
    for a in range(solid.ndim):
        if int(pml_size[a]) == 0:
            continue
        lo, hi = [slice(None)] * solid.ndim, [slice(None)] * solid.ndim
        lo[a], hi[a] = slice(0, -1), slice(1, None)
        in_pml = np.broadcast_to(~outside_pml(solid.shape, pml_size, a), solid.shape)
        face = (solid[tuple(lo)] != solid[tuple(hi)]) & (in_pml[tuple(lo)] | in_pml[tuple(hi)])
        if face.any():
            at = tuple(int(i) for i in np.argwhere(face)[0])
            return (f"a fluid-solid face at grid point {at} lies inside the PML along "
                    f"{names[a]} while the grid has no PML along "
                    f"{', '.join(names[c] for c in bare)}: such a face grows without bound "
                    "(with either scheme); keep fluid-solid faces out of the PML, or give "
                    "every axis a PML")  # fmt: skip
    return None


def has_interface(cs: Any) -> bool:
    """True when the shear speed field [m/s] holds both fluid (0) and solid (> 0) points."""
    cs = np.asarray(cs)
    return cs.ndim > 0 and bool(np.any(cs > 0)) and bool(np.any(cs <= 0))


def slip_constants(cs: np.ndarray, dtype: Any, pml_size: Sequence[int] | None = None) -> dict:
    """What the slip-aware step reads, from the shear speed field ``cs`` [m/s] and the PML's
    thickness per axis [points] (None: no PML): per ``(b, a)`` of :func:`pairs` the gather
    ``slip_u`` (``u_b`` continued along ``a``, outside the PML along ``a``) and per axis
    ``slip_solid_u`` (solid ``u_b`` points, bool)."""
    solid = np.asarray(cs) > 0
    su = [solid_velocity(solid, b) for b in range(solid.ndim)]
    pml = tuple(pml_size) if pml_size is not None else (0,) * solid.ndim

    def dev(g: Gather) -> tuple[jax.Array, ...]:
        return (jnp.asarray(g[0], jnp.int32), jnp.asarray(g[1], jnp.int32),
                jnp.asarray(g[2], dtype))  # fmt: skip

    return {
        "slip_u": tuple(
            dev(line_gather(su[b], a, outside_pml(solid.shape, pml, a)))
            for b, a in pairs(solid.ndim)
        ),
        "slip_solid_u": tuple(jnp.asarray(m) for m in su),
    }


def stored_bytes(c: dict, itemsize: int) -> int:
    """Device memory of the slip constants in ``c`` [bytes] (masks one byte a point; indices
    int32, weights ``itemsize`` bytes)."""
    masks = sum(int(np.prod(m.shape)) for m in c["slip_solid_u"])
    gathers = sum(g[0].size * 4 + g[1].size * 4 + g[2].size * itemsize for g in c["slip_u"])
    return int(masks + gathers)


def continued(f: jax.Array, inside: jax.Array, g: tuple[jax.Array, ...]) -> jax.Array:
    """``f`` on its ``inside`` points, 0 elsewhere, plus the gather ``g`` (:func:`line_gather`)
    of it: the continued field (linear in ``f``)."""
    dst, src, w = g
    out = jnp.where(inside, f, jnp.zeros((), f.dtype))
    if dst.shape[0] == 0:
        return out
    flat = f.reshape(-1)
    vals = jnp.sum(w.astype(f.dtype) * flat[src], axis=1)
    return out.reshape(-1).at[dst].add(vals).reshape(f.shape)


def folded(d: jax.Array, inside: jax.Array, g: tuple[jax.Array, ...]) -> jax.Array:
    """The transpose of :func:`continued` applied to ``d``: ``d`` on the ``inside`` points, 0
    elsewhere, plus each continued point's ``d`` added onto the points it was continued from
    with their weights (linear in ``d``)."""
    dst, src, w = g
    out = jnp.where(inside, d, jnp.zeros((), d.dtype))
    if dst.shape[0] == 0:
        return out
    vals = w.astype(d.dtype) * d.reshape(-1)[dst][:, None]
    return out.reshape(-1).at[src.reshape(-1)].add(vals.reshape(-1)).reshape(d.shape)
