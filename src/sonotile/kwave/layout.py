"""k-Wave's array layout: arrays stored ``(z, y, x)`` (x fastest) and indices 1-based in
MATLAB column-major order. The only module that converts between that and sonotile's ``(x, y, z)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike


def to_xyz(a: np.ndarray) -> np.ndarray:
    """A stored ``(Nz, Ny, Nx)`` array as ``(Nx, Ny[, Nz])`` (2-D when Nz == 1)."""
    a = np.transpose(a)
    return a[:, :, 0] if a.shape[2] == 1 else a


def to_zyx(a: ArrayLike) -> np.ndarray:
    """An ``(Nx, Ny[, Nz])`` array as k-Wave stores it, ``(Nz, Ny, Nx)``."""
    a = np.asarray(a)
    if a.ndim == 2:
        a = a[:, :, None]
    return np.ascontiguousarray(np.transpose(a))


class XyzView:
    """A k-Wave dataset stored ``(Nz, Ny, Nx)`` seen as an ``(Nx, Ny[, Nz])`` array that reads
    only the hyperslab asked for: ``view[sx, sy, sz]`` -> numpy. Lets each process of a
    multi-process run read just its shards (:func:`sonotile.parallel.mesh.global_array`).

    With ``stored_xyz`` the dataset is already in ``(x, y[, z])`` order (sonotile's own
    running statistics in checkpoints).
    """

    def __init__(
        self, dset: h5py.Dataset, dtype: DTypeLike | None = None, stored_xyz: bool = False
    ) -> None:
        self.dset, self.stored_xyz = dset, stored_xyz
        self.dtype = np.dtype(dtype or dset.dtype)
        if stored_xyz:
            self.shape = tuple(dset.shape)
        else:
            z, y, x = dset.shape
            self.shape = (x, y) if z == 1 else (x, y, z)
        self.ndim = len(self.shape)

    def __getitem__(self, index: slice | tuple[slice, ...]) -> np.ndarray:
        if not isinstance(index, tuple):
            index = (index,)
        index = tuple(index) + (slice(None),) * (self.ndim - len(index))
        for i in index:
            if not isinstance(i, slice) or i.step not in (None, 1):
                raise IndexError(f"XyzView: contiguous slices only, got {index}")
        if self.stored_xyz:
            return np.asarray(self.dset[index], self.dtype)
        zyx = tuple(reversed(index)) if self.ndim == 3 else (slice(0, 1),) + index[::-1]
        return np.asarray(to_xyz(self.dset[zyx]), self.dtype)

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        a = self[(slice(None),) * self.ndim]
        return a if dtype is None else a.astype(dtype)


def linear_to_grid(lin1: ArrayLike, shape: tuple[int, ...]) -> np.ndarray:
    """1-based MATLAB linear indices -> ``(N, ndim)`` 0-based grid indices (x fastest)."""
    sub = np.unravel_index(np.asarray(lin1, np.int64) - 1, shape, order="F")
    return np.stack(sub, axis=1)


def grid_to_linear(idx: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`linear_to_grid`."""
    return np.ravel_multi_index(tuple(idx.T), shape, order="F").astype(np.uint64) + 1
