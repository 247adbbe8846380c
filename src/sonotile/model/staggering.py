"""k-Wave's interpolation of a medium property onto a staggered grid, written once for numpy
and JAX arrays (the array's own namespace does the work)."""

from __future__ import annotations

from typing import Any, TypeVar

A = TypeVar("A")


def staggered_mean(r: A, axis: int) -> A:
    """``r`` at ``x + d/2`` along ``axis``: the mean of neighbours, the last plane keeping ``r``
    itself (k-Wave's linear interpolation of the density). ``r``: a numpy or JAX array; a 0-d
    array is returned as it is."""
    a: Any = r
    if a.ndim == 0:
        return r
    xp = a.__array_namespace__()
    ahead = [slice(None)] * a.ndim
    ahead[axis] = slice(1, None)
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, 1)
    # slice + pad (not a concatenate): XLA fuses it into the consumer, where a concatenate along
    # the contiguous axis runs as a separate copy
    nxt = xp.pad(a[tuple(ahead)], widths)
    shape = [1] * a.ndim
    shape[axis] = a.shape[axis]
    last = xp.reshape(xp.arange(a.shape[axis]) == a.shape[axis] - 1, shape)
    return xp.where(last, a, 0.5 * (a + nxt))
