"""The collectives of the decompositions, and the transports that carry them.

:func:`ppermute`, :func:`all_to_all`, :func:`axis_index` and :func:`axis_size` are what
:mod:`.lfb`, :mod:`.pencil` and the sensor gather call. By default they are ``jax.lax``'s (XLA
collectives inside ``shard_map``: gloo between CPU processes, NCCL between GPUs). Traced inside
:func:`using`, a :class:`Transport` carries them instead: the MPI transport of
:mod:`sonotile.parallel.mpi` (MPI calls inside a one-device program per process) or
:class:`LocalCopies` (no communication, for timing the step without it).

Measured on CPU across processes (gloo, ``benchmarks/parallel/collectives.py``): an
``all-reduce`` of 1 KB costs ~9 ms where a ``ppermute`` of the same buffer costs ~0.1-0.2 ms,
so the per-step sensor sum (``psum``) cost more than all the step's overlap exchanges together.
:func:`sum_over` does the same sum with ``ppermute``: a butterfly (``log2 P`` exchanges) when
the axis size ``P`` is a power of two, a ring (``P - 1``) otherwise. On GPUs both are NCCL
transfers of a few bytes.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Protocol

import jax
import jax.numpy as jnp
from jax import lax


class Transport(Protocol):
    """Collectives over named mesh axes, traced into a program of one shard."""

    def ppermute(self, x: jax.Array, name: str, perm: Sequence[tuple[int, int]]) -> jax.Array: ...

    def all_to_all(self, x: jax.Array, name: str, split_axis: int, concat_axis: int) -> jax.Array:
        """``lax.all_to_all(..., tiled=True)``."""
        ...

    def axis_index(self, name: str) -> jax.Array: ...

    def axis_size(self, name: str) -> int: ...


_current: contextvars.ContextVar[Transport | None] = contextvars.ContextVar(
    "sonotile_transport", default=None
)


@contextlib.contextmanager
def using(transport: Transport | None) -> Iterator[None]:
    """Trace the collectives called inside with ``transport`` (None: ``jax.lax``'s)."""
    token = _current.set(transport)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> Transport | None:
    """The transport :func:`using` set, or None."""
    return _current.get()


def ppermute(x: jax.Array, name: str, perm: Sequence[tuple[int, int]]) -> jax.Array:
    """``lax.ppermute``: shard ``i`` sends ``x`` to ``j`` for each ``(i, j)`` in ``perm``."""
    t = _current.get()
    return lax.ppermute(x, name, list(perm)) if t is None else t.ppermute(x, name, perm)


def halos(
    xs: Sequence[jax.Array],
    name: str,
    width: int,
    ends: Sequence[int] | None = None,
    axis: int = 0,
) -> list[tuple[jax.Array, jax.Array]] | None:
    """``(left, right)`` overlaps along array axis ``axis`` of every block of ``xs`` with its
    two neighbours along mesh axis ``name``, in one exchange: ``width`` planes of each
    neighbour's block (the left one's last real planes, ``ends[shard]`` real planes per shard,
    else all; the right one's first). None where the transport does not do it so (then
    :func:`ppermute`)."""
    t = _current.get()
    f = getattr(t, "halos", None)
    return None if f is None else f(xs, name, width, ends, axis)


def all_to_all(x: jax.Array, name: str, split_axis: int, concat_axis: int) -> jax.Array:
    """``lax.all_to_all(x, name, split_axis, concat_axis, tiled=True)``."""
    t = _current.get()
    if t is None:
        return lax.all_to_all(x, name, split_axis, concat_axis, tiled=True)
    return t.all_to_all(x, name, split_axis, concat_axis)


def kept_piece(name: str) -> int | None:
    """This shard's position along mesh axis ``name`` when the transport does all-to-alls that
    keep the shard's own piece where it lies (:func:`transpose_kept`), else None."""
    t = _current.get()
    f = getattr(t, "kept_piece", None)
    return None if f is None else f(name)


def transpose_kept(
    pairs: Sequence[tuple[jax.Array, jax.Array]], name: str
) -> list[jax.Array]:  # fmt: skip
    """All-to-alls of pieces stacked first along axis 0 (``all_to_all(x, name, 0, 0)``), one
    per ``(full, others)`` of ``pairs``, at one meeting, as the transport that offered
    :func:`kept_piece` does them: ``full`` holds only this shard's own piece (at its position),
    ``others`` the pieces for the other shards in order; each result is ``full`` with piece
    ``p`` from shard ``p``."""
    t = _current.get()
    assert t is not None and hasattr(t, "transpose_kept"), "transpose_kept: no such transport"
    return t.transpose_kept(pairs, name)


def axis_index(name: str) -> jax.Array:
    """This shard's position along mesh axis ``name``."""
    t = _current.get()
    return lax.axis_index(name) if t is None else t.axis_index(name)


class LocalCopies:
    """Every collective replaced by a local copy of the same size (no communication, no
    synchronisation; the results are wrong): the step's cost without its transport."""

    def __init__(self, sizes: dict[str, int] | None = None) -> None:
        self.sizes = sizes  # None: ask lax (inside shard_map)

    def ppermute(self, x: jax.Array, name: str, perm: Sequence[tuple[int, int]]) -> jax.Array:
        return x + 0

    def all_to_all(self, x: jax.Array, name: str, split_axis: int, concat_axis: int) -> jax.Array:
        parts = jnp.split(x, self.axis_size(name), axis=split_axis)
        return jnp.concatenate(parts, axis=concat_axis)

    def kept_piece(self, name: str) -> int | None:
        return 0 if self.sizes is not None else None  # a program per process: shard 0's

    def transpose_kept(
        self, pairs: Sequence[tuple[jax.Array, jax.Array]], name: str
    ) -> list[jax.Array]:  # fmt: skip
        return [full.at[1:].set(others) for full, others in pairs]  # the pieces sent, copied

    def axis_index(self, name: str) -> jax.Array:
        return lax.axis_index(name) if self.sizes is None else jnp.int32(0)

    def axis_size(self, name: str) -> int:
        if self.sizes is not None:
            return self.sizes[name]
        size = getattr(lax, "axis_size", None)
        return int(size(name)) if size is not None else int(lax.psum(1, name))


def axis_size(name: str) -> int:
    """Number of devices along mesh axis ``name`` (no communication)."""
    t = _current.get()
    if t is not None:
        return t.axis_size(name)
    size = getattr(lax, "axis_size", None)
    return int(size(name)) if size is not None else int(lax.psum(1, name))


def sum_over(v: jax.Array, names: tuple[str, ...]) -> jax.Array:
    """``lax.psum(v, names)`` through ``ppermute``: the same value on every device.

    Exact whatever the order when at most one device contributes a non-zero per element (the
    sensor samples: each point has one owner); otherwise equal to ``psum`` to round-off.
    """
    for name in names:
        n = axis_size(name)
        if n == 1:
            continue
        if n & (n - 1) == 0:  # butterfly: partner i ^ 2^k
            k = 1
            while k < n:
                v = v + ppermute(v, name, [(i, i ^ k) for i in range(n)])
                k *= 2
        else:  # ring: pass each contribution once around
            x, acc = v, v
            for _ in range(n - 1):
                x = ppermute(x, name, [(i, (i + 1) % n) for i in range(n)])
                acc = acc + x
            v = acc
    return v
