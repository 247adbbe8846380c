"""Interpolation stencils for points off the grid: band-limited (BLI), linear and nearest.

A point ``u`` in continuous 0-based grid coordinates (``u = x / dx + N // 2`` for a position
``x`` [m] relative to the grid centre, k-Wave's convention) is read from the grid as a weighted
sum over a stencil of grid points. The band-limited interpolant is the product over axes of
``sinc(j - u)`` (Wise et al., JASA 145:2019), truncated like k-Wave's ``kWaveArray``: offsets
within ``[-K, K]`` per axis with ``|prod(offsets)| <= K``, ``K = ceil(1 / (pi tol))``. Axes on
which the point lies on the grid contribute a Kronecker delta (the sinc's zeros), so an
on-grid point reads its grid value exactly.

The same stencil serves a sensor (gather + weighted sum) and an off-grid source (scatter of the
weights); indices wrap around the grid (the pseudospectral grid is periodic).
"""

from __future__ import annotations

import numpy as np

INTERPOLATIONS = ("bli", "linear", "nearest")


def star_offsets(ndim: int, tol: float) -> np.ndarray:
    """Offsets ``(M, ndim)`` of the truncated BLI stencil for tolerance ``tol`` (0 < tol < 1)."""
    k = int(np.ceil(1 / (np.pi * tol)))
    axes = np.meshgrid(*([np.arange(-k, k + 1)] * ndim), indexing="ij")
    off = np.stack([a.ravel() for a in axes], axis=1)
    return off[np.abs(np.prod(off, axis=1)) <= k]


def _cube_offsets(ndim: int, lo: int, hi: int) -> np.ndarray:
    axes = np.meshgrid(*([np.arange(lo, hi + 1)] * ndim), indexing="ij")
    return np.stack([a.ravel() for a in axes], axis=1)


def stencil(
    coords: np.ndarray, shape: tuple, method: str = "bli", tol: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """Grid points and weights that read a field at off-grid points.

    Args:
        coords: ``(N, ndim)`` continuous 0-based grid coordinates of the points.
        shape: grid shape ``(Nx[, Ny[, Nz]])``.
        method: ``"bli"`` (truncated band-limited), ``"linear"`` (multilinear) or
            ``"nearest"``.
        tol: BLI truncation tolerance (0 < tol < 1; smaller is more accurate and wider).

    Returns:
        ``(index, weight)``: ``(N, M, ndim)`` int64 grid indices (wrapped into the grid) and
        ``(N, M)`` float64 weights; ``value(point n) = sum_m weight[n, m] field[index[n, m]]``.
    """
    u = np.asarray(coords, dtype=np.float64)
    nd = len(shape)
    if method == "nearest":
        near = np.floor(u + 0.5).astype(np.int64)
        return np.mod(near, shape)[:, None, :], np.ones((u.shape[0], 1))
    if method == "linear":
        base = np.floor(u).astype(np.int64)
        off = _cube_offsets(nd, 0, 1)
        frac = u - base
        w = np.prod(np.where(off[None] == 1, frac[:, None], 1 - frac[:, None]), axis=2)
    elif method == "bli":
        base = np.floor(u + 0.5).astype(np.int64)
        off = star_offsets(nd, tol)
        frac = u - base  # in [-1/2, 1/2)
        w = np.prod(np.sinc(off[None] - frac[:, None]), axis=2)
    else:
        raise ValueError(f"method = {method!r}: expected one of {INTERPOLATIONS}")
    idx = np.mod(base[:, None, :] + off[None], np.asarray(shape))
    return idx, w
