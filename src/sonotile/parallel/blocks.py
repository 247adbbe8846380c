"""How a grid is cut into blocks over a device mesh, for any axis length on any mesh.

Grid axis ``a`` (``a < len(mesh_shape)``) is split over mesh axis ``a`` into ``p`` blocks of
``n // p`` or ``n // p + 1`` points (the larger ones first). JAX shards arrays into equal
pieces, so every block is stored in a slot of ``b = ceil(n / p)`` points: its own points first,
then ``b - count`` *dead* points (at most one). The *padded* axis has ``p * b`` points. Dead
points hold copies of their block's last point in the medium constants (so that every
element-wise update stays finite) and never reach a real point: the pencil transform drops them
before each FFT and the LFB exchange sends real points only. Whole fields leave the engine
through :meth:`Blocks.to_true`, which removes them. With ``n % p == 0`` nothing is padded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

if TYPE_CHECKING:
    from numpy.typing import DTypeLike


class Sliceable(Protocol):
    """A whole field that reads ``x[index]`` into an array: a numpy or JAX array, or a view
    that reads only the hyperslab asked for (an HDF5 view, a lazily made field)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...

    def __getitem__(self, index: Any, /) -> Any: ...

    def __array__(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Blocks:
    """Blocks of a grid of ``shape`` on a mesh of ``mesh_shape`` (mesh axis j splits grid axis
    j; grid axes beyond the mesh are not split)."""

    shape: tuple[int, ...]
    mesh_shape: tuple[int, ...]

    def parts(self, a: int) -> int:
        """Devices along grid axis ``a``."""
        return self.mesh_shape[a] if a < len(self.mesh_shape) else 1

    def block(self, a: int) -> int:
        """Slot length ``b`` along axis ``a`` [points]."""
        return -(-self.shape[a] // self.parts(a))

    def counts(self, a: int) -> np.ndarray:
        """Real points of each block along axis ``a``, shape ``(p,)``."""
        n, p = self.shape[a], self.parts(a)
        return n // p + (np.arange(p) < n % p)

    def starts(self, a: int) -> np.ndarray:
        """First global index of each block along axis ``a``, shape ``(p,)``."""
        return np.concatenate([[0], np.cumsum(self.counts(a))[:-1]]).astype(np.int64)

    def even(self, a: int) -> bool:
        return self.shape[a] % self.parts(a) == 0

    @property
    def all_even(self) -> bool:
        return all(self.even(a) for a in range(len(self.shape)))

    @property
    def padded_shape(self) -> tuple[int, ...]:
        return tuple(self.parts(a) * self.block(a) for a in range(len(self.shape)))

    @property
    def local_shape(self) -> tuple[int, ...]:
        """Shape of one device's block (its slot)."""
        return tuple(self.block(a) for a in range(len(self.shape)))

    def check(self, what: str) -> None:
        """Every block must hold at least one point."""
        for a in range(len(self.mesh_shape)):
            if self.counts(a).min() < 1:
                raise ValueError(
                    f"{what}: grid axis {a} has {self.shape[a]} points, fewer than the "
                    f"{self.parts(a)} devices along it"
                )

    @cached_property
    def _real(self) -> tuple[np.ndarray, ...]:
        out = []
        for a in range(len(self.shape)):
            b = self.block(a)
            out.append(np.concatenate([i * b + np.arange(c) for i, c in enumerate(self.counts(a))]))
        return tuple(out)

    def real_positions(self, a: int) -> np.ndarray:
        """Padded positions of the ``n`` real points of axis ``a`` in global order."""
        return self._real[a]

    def source_positions(self, a: int) -> np.ndarray:
        """For each padded position of axis ``a`` the global index it holds (dead points: their
        block's last point)."""
        b = self.block(a)
        src = np.empty(self.parts(a) * b, np.int64)
        for i, (s, c) in enumerate(zip(self.starts(a), self.counts(a))):
            src[i * b : (i + 1) * b] = s + np.minimum(np.arange(b), c - 1)
        return src

    def to_true(self, x: np.ndarray) -> np.ndarray:
        """A padded whole field (host array) without its dead points."""
        x = np.asarray(x)
        for a in range(min(x.ndim, len(self.shape))):
            if not self.even(a) and x.shape[a] == self.padded_shape[a]:
                x = np.take(x, self.real_positions(a), axis=a)
        return x

    def true_index(
        self, index: tuple[slice, ...], shape: tuple[int, ...]
    ) -> tuple[tuple[slice, ...], list[np.ndarray | None]]:
        """For a padded slice ``index`` of an array of padded ``shape``: the contiguous true
        slices to read and, per axis, the positions within what was read (None: as read)."""
        read: list[slice] = []
        take: list[np.ndarray | None] = []
        for a, sl in enumerate(index):
            start, stop, _ = sl.indices(shape[a])
            if a < len(self.shape) and not self.even(a) and shape[a] == self.padded_shape[a]:
                src = self.source_positions(a)[start:stop]
                lo, hi = int(src.min()), int(src.max()) + 1
                read.append(slice(lo, hi))
                take.append(src - lo)
            else:
                read.append(slice(start, stop))
                take.append(None)
        return tuple(read), take

    def read_padded(
        self, x: Sliceable, index: tuple[slice, ...], padded: tuple[int, ...], dtype: DTypeLike
    ) -> np.ndarray:
        """The piece ``index`` of the padded version of ``x`` (an array or anything sliceable
        with contiguous slices, e.g. an HDF5 view), reading only the hyperslab it needs."""
        read, take = self.true_index(index, padded)
        piece = np.asarray(x[read] if np.ndim(x) else x, dtype)
        for a, t in enumerate(take):
            if t is not None:
                piece = np.take(piece, t, axis=a)
        return piece

    def padded_shape_of(self, shape: tuple[int, ...], sharded: tuple[bool, ...]) -> tuple[int, ...]:
        """Padded shape of an array of ``shape`` whose axes ``sharded[a]`` are split."""
        return tuple(
            self.padded_shape[a] if sharded[a] and n == self.shape[a] else n
            for a, n in enumerate(shape)
        )

    def _padded_axis(self, a: int, n: int) -> bool:
        return a < len(self.shape) and not self.even(a) and n == self.padded_shape[a]

    def true_shape_of(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of a padded array without its dead points."""
        return tuple(self.shape[a] if self._padded_axis(a, n) else n for a, n in enumerate(shape))

    def true_piece(
        self, index: tuple[slice, ...], block: np.ndarray, shape: tuple[int, ...]
    ) -> tuple[tuple[slice, ...], np.ndarray]:
        """A device's piece ``block`` at padded ``index`` of an array of padded ``shape`` as
        ``(true index, data)``: its real points and where they go in the true array."""
        out_index = []
        for a, sl in enumerate(index):
            start, stop, _ = sl.indices(shape[a])
            if not self._padded_axis(a, shape[a]):
                out_index.append(slice(start, stop))
                continue
            src = self.source_positions(a)[start:stop]
            real = np.isin(np.arange(start, stop), self.real_positions(a))
            block = np.take(block, np.nonzero(real)[0], axis=a)
            out_index.append(slice(int(src[real].min()), int(src[real].max()) + 1))
        return tuple(out_index), block

    def owner(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Block coordinates ``(N, m)`` and local (slot) indices ``(N, d)`` of grid points
        ``(N, d)``."""
        m = len(self.mesh_shape)
        owner = np.zeros((points.shape[0], m), np.int64)
        local = np.array(points, np.int64, copy=True)
        for a in range(m):
            starts = self.starts(a)
            owner[:, a] = np.searchsorted(starts, points[:, a], side="right") - 1
            local[:, a] = points[:, a] - starts[owner[:, a]]
        return owner, local

    @property
    def devices(self) -> int:
        return math.prod(self.mesh_shape)


def real_positions(counts: Sequence[int] | np.ndarray) -> np.ndarray:
    """Positions of the real points in a padded axis whose blocks hold ``counts`` points."""
    slot = int(max(counts))
    return np.concatenate([i * slot + np.arange(c) for i, c in enumerate(counts)])


def compact(x: jax.Array, counts: Sequence[int] | np.ndarray, axis: int) -> jax.Array:
    """A padded axis made whole by a transpose, without its dead points (traced arrays)."""
    return jnp.take(x, jnp.asarray(real_positions(counts), jnp.int32), axis=axis)


def expand(x: jax.Array, counts: Sequence[int] | np.ndarray, axis: int) -> jax.Array:
    """Inverse of :func:`compact`: zeros at the dead points."""
    real = real_positions(counts)
    n = len(real)
    slots = np.full(len(counts) * int(max(counts)), n)  # dead -> the zero appended below
    slots[real] = np.arange(n)
    return jnp.take(resize(x, n + 1, axis), jnp.asarray(slots, jnp.int32), axis=axis)


def resize(x: jax.Array, n: int, axis: int) -> jax.Array:
    """Cut or zero-pad ``x`` to length ``n`` along ``axis`` (traced arrays)."""
    if x.shape[axis] > n:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if x.shape[axis] < n:
        pad = [(0, 0)] * x.ndim
        pad[axis] = (0, n - x.shape[axis])
        return jnp.pad(x, pad)
    return x
