"""Where the skull heats most, and the temperature rise there as a quadratic form of a drive.

The heating is linear in its source: the temperature rise at the end of the sonication at a
point ``x_j`` is ``dT_j = sum_x g_j(x) Q(x)``, with ``g_j`` the row of the heat model that
gives it (its adjoint from ``x_j``: :func:`sonotile.planning.heating.green_functions`).
Heat spreads ``sqrt(2 kappa t)`` in a sonication of ``t`` seconds (about 2 mm in 10 s), so
the rows are computed on a box around the hotspots a few diffusion lengths wider. With the field a
linear combination of basis fields, ``p = sum_m c_m F_m``, and ``Q = a |p|^2``:
``dT_j = c^H M_j c`` with ``M_j[m, n] = sum_x g_j(x) a(x) conj(F_m(x)) F_n(x)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import ndimage

from sonotile.planning.heating import Box

#: the largest thermal diffusivity of the mapped tissues [m^2/s] (water's, 1.4e-7): sizes
#: the boxes of the Green's functions
KAPPA_MAX = 1.5e-7
#: a box reaches this many diffusion lengths from its hotspot
BOX_REACH = 4.0

#: ``green(points, box) -> (len(points), *box shape)``: the rise [K] at each point (indices
#: in the box) per unit heat source [W/m^3] everywhere in the box
GreenRun = Callable[[list[tuple[int, int, int]], Box], np.ndarray]


def box_halfwidth(duration: float, spacing_mm: float) -> int:
    """Voxels from a hotspot to its box's faces for a sonication of ``duration`` [s] on a
    grid of ``spacing_mm``: :data:`BOX_REACH` diffusion lengths and one voxel, at least 3."""
    reach_mm = BOX_REACH * np.sqrt(2 * KAPPA_MAX * duration) * 1e3 + spacing_mm
    return int(max(3, np.ceil(reach_mm / spacing_mm)))


Index = tuple[int, int, int]


def select(rise: np.ndarray, where: np.ndarray, n: int, fraction: float = 0.5,
           apart: int = 2, exclude: list[Index] | None = None) -> list[Index]:  # fmt: skip
    """Up to ``n`` hotspots of the temperature rise ``rise`` [K] in ``where``: local maxima
    at or above ``fraction`` of its largest value there, hottest first, no two within
    ``apart`` voxels, none within ``apart`` of the points ``exclude`` ``(k, 3)``."""
    r = np.where(where, rise, -np.inf)
    top = float(r.max()) if where.any() else -np.inf
    if not np.isfinite(top) or top <= 0:
        return []
    peaks = (r == ndimage.maximum_filter(r, size=3)) & (r >= fraction * top)
    order = np.argsort(-r[peaks], kind="stable")
    picked: list[np.ndarray] = [] if exclude is None else [np.asarray(e) for e in exclude]
    out: list[tuple[int, int, int]] = []
    for ijk in np.argwhere(peaks)[order]:
        if len(out) >= n:
            break
        if all(np.abs(ijk - q).max() > apart for q in picked):
            picked.append(ijk)
            out.append((int(ijk[0]), int(ijk[1]), int(ijk[2])))
    return out


def covering_box(points: list[Index], half: int, shape: tuple[int, ...]) -> Box:
    """The box holding every one of ``points`` with ``half`` voxels around each (cut to the
    grid)."""
    p = np.asarray(points)
    lo = np.maximum(p.min(axis=0) - half, 0)
    hi = np.minimum(p.max(axis=0) + half + 1, shape)
    return (slice(int(lo[0]), int(hi[0])), slice(int(lo[1]), int(hi[1])),
            slice(int(lo[2]), int(hi[2])))  # fmt: skip


def quadratic_form(g: np.ndarray, box: Box, coefficient: np.ndarray,
                   basis: np.ndarray) -> np.ndarray:  # fmt: skip
    """``M[m, n] = sum_x g(x) a(x) conj(F_m(x)) F_n(x)`` over the box (``basis`` ``(M,
    *grid)`` complex fields [Pa], ``coefficient`` ``a`` [W/(m^3 Pa^2)]): the rise [K] at the
    hotspot is ``c^H M c`` for the field ``sum_m c_m F_m``; Hermitian, positive semidefinite."""
    f = basis[(slice(None), *box)].reshape(basis.shape[0], -1)
    w = (g * coefficient[box]).reshape(-1)
    m = (np.conj(f) * w) @ f.T
    return 0.5 * (m + m.conj().T)
