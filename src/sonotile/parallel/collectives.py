"""Collectives built from point-to-point ``ppermute``: the ones the CPU transports do slowly.

Measured on CPU across processes (gloo, ``benchmarks/collectives.py``, docs/scaling.md): an
``all-reduce`` of 1 KB costs ~9 ms where a ``ppermute`` of the same buffer costs ~0.1-0.2 ms,
so the per-step sensor sum (``psum``) cost more than all the step's overlap exchanges together.
:func:`sum_over` does the same sum with ``ppermute``: a butterfly (``log2 P`` exchanges) when
the axis size ``P`` is a power of two, a ring (``P - 1``) otherwise. On GPUs both are NCCL
transfers of a few bytes.
"""

from __future__ import annotations

import jax
from jax import lax


def axis_size(name: str) -> int:
    """Number of devices along mesh axis ``name`` (inside ``shard_map``; no communication)."""
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
                v = v + lax.ppermute(v, name, [(i, i ^ k) for i in range(n)])
                k *= 2
        else:  # ring: pass each contribution once around
            x, acc = v, v
            for _ in range(n - 1):
                x = lax.ppermute(x, name, [(i, (i + 1) % n) for i in range(n)])
                acc = acc + x
            v = acc
    return v
