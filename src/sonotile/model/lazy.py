"""Grid fields made piece by piece, so that a process of a distributed run reads and computes
only the hyperslabs its devices hold.

``LazyField(shape, fn, *sources)[index]`` evaluates ``fn`` on the same hyperslab of each source
(a numpy array, another lazy field, a :class:`sonotile.kwave.layout.XyzView` over an HDF5
dataset, or a scalar) and checks the piece it made: finite, and > 0 or >= 0 when asked, with
an error naming the field. ``np.asarray(field)`` makes the whole field (single-process use).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing.TypeIs from Python 3.13

#: An index of a hyperslab: slices (or what numpy takes), one per leading axis.
Index = Any


class Sliceable(Protocol):
    """A grid-shaped source read by hyperslabs: a numpy array, a :class:`LazyField`, a
    :class:`sonotile.kwave.layout.XyzView`."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...

    def __getitem__(self, index: Index, /) -> Any: ...


def _piece(src: Sliceable | float, index: Index) -> Any:
    """The hyperslab ``index`` of ``src``; a scalar (``ndim`` 0) as it is."""
    return src[index] if getattr(src, "ndim", 0) > 0 else src  # type: ignore[index]


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

    def __init__(self, shape: tuple[int, ...], fn: Callable[..., ArrayLike],
                 *sources: Sliceable | float, dtype: DTypeLike = np.float32,
                 name: str = "field", check: str | None = "finite") -> None:  # fmt: skip
        self.shape = tuple(int(n) for n in shape)
        self.ndim = len(self.shape)
        self.dtype = np.dtype(dtype)
        self.fn, self.sources, self.name, self.check = fn, sources, name, check

    @classmethod
    def of(
        cls, view: Sliceable, name: str, check: str = "finite", dtype: DTypeLike | None = None
    ) -> LazyField:
        """A checked lazy field over a sliceable source (e.g. an HDF5 view)."""
        return cls(view.shape, lambda a: a, view, dtype=dtype or view.dtype, name=name,
                   check=check)  # fmt: skip

    def __getitem__(self, index: Index) -> np.ndarray:
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

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        a = self[(slice(None),) * self.ndim]
        return a if dtype is None else a.astype(dtype)

    def __repr__(self) -> str:
        return f"LazyField({self.name}, shape={self.shape}, dtype={self.dtype})"


def is_lazy(v: object) -> TypeIs[LazyField]:
    return isinstance(v, LazyField)
