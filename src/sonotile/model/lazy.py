"""Grid fields made piece by piece, so that a process of a distributed run reads and computes
only the hyperslabs its devices hold.

``LazyField(shape, fn, *sources)[index]`` evaluates ``fn`` on the same hyperslab of each source
(a numpy array, another lazy field, a :class:`sonotile.kwave.layout.XyzView` over an HDF5
dataset, or a scalar) and checks the piece it made: finite, and > 0 or >= 0 when asked, with
an error naming the field. ``np.asarray(field)`` makes the whole field (single-process use).
"""

from __future__ import annotations

import numpy as np


def _piece(src, index):
    return src[index] if getattr(src, "ndim", 0) > 0 else src


class LazyField:
    """A grid-shaped field computed on demand (see the module docstring).

    Args:
        shape: the field's shape ``(Nx, Ny[, Nz])``.
        fn: ``fn(*pieces) -> array`` applied to the same hyperslab of every source.
        sources: arrays, lazy fields, views or scalars.
        dtype: dtype of the pieces returned.
        name: parameter named in errors, e.g. ``"medium.c0 [m/s]"``.
        check: ``None``, ``"finite"``, ``"positive"`` or ``"nonnegative"``.
    """

    def __init__(self, shape, fn, *sources, dtype=np.float32, name: str = "field",
                 check: str | None = "finite") -> None:  # fmt: skip
        self.shape = tuple(int(n) for n in shape)
        self.ndim = len(self.shape)
        self.dtype = np.dtype(dtype)
        self.fn, self.sources, self.name, self.check = fn, sources, name, check

    @classmethod
    def of(cls, view, name: str, check: str = "finite", dtype=None) -> LazyField:
        """A checked lazy field over a sliceable source (e.g. an HDF5 view)."""
        return cls(view.shape, lambda a: a, view, dtype=dtype or view.dtype, name=name,
                   check=check)  # fmt: skip

    def __getitem__(self, index) -> np.ndarray:
        if not isinstance(index, tuple):
            index = (index,)
        index = tuple(index) + (slice(None),) * (self.ndim - len(index))
        out = np.asarray(self.fn(*(_piece(s, index) for s in self.sources)), self.dtype)
        if self.check and not np.all(np.isfinite(out)):
            raise ValueError(f"{self.name}: contains NaN or Inf")
        if self.check == "positive" and np.any(out <= 0):
            raise ValueError(f"{self.name}: must be > 0 everywhere (min {out.min():g})")
        if self.check == "nonnegative" and np.any(out < 0):
            raise ValueError(f"{self.name}: must be >= 0 everywhere (min {out.min():g})")
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        a = self[(slice(None),) * self.ndim]
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        return f"LazyField({self.name}, shape={self.shape}, dtype={self.dtype})"


def is_lazy(v) -> bool:
    return isinstance(v, LazyField)
