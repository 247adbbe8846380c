"""Batched, unnormalised real transforms: the FFT a step on stacked fields asks for.

``forward(x, rank)`` is the ``rfftn`` half spectrum over the last ``rank`` axes of ``x`` (the
leading axes a batch: several fields stored as one buffer, transformed in one call);
``inverse(X, shape)`` is the inverse over the last ``len(shape)`` axes WITHOUT the ``1/N``
(``N = prod(shape)``): whoever multiplies the spectrum folds ``1/N`` into that multiply, so no
scaling pass runs after the transform. Two implementations: :data:`XLA` (``jnp.fft``: the CPU
stand-in, and what tests check the step's algebra with) and :data:`sonotile.fft.cufft.BATCHED`
(cuFFT through XLA's FFI, on a GPU); :func:`get` gives one by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import jax

from sonotile.fft.xla import UNNORMALISED


class BatchedFFT(Protocol):
    """See the module docstring. ``name``: its key for :func:`get`."""

    @property
    def name(self) -> str: ...

    def forward(self, x: jax.Array, rank: int) -> jax.Array: ...

    def inverse(self, X: jax.Array, shape: Sequence[int]) -> jax.Array: ...


#: ``jnp.fft`` as a :class:`BatchedFFT`
XLA = UNNORMALISED


def get(name: str) -> BatchedFFT:
    """The batched FFT of ``name``: ``xla`` or ``cufft`` (which must be loadable:
    :func:`sonotile.fft.cufft.unavailable` says why not)."""
    if name == "xla":
        return XLA
    if name == "cufft":
        from sonotile.fft import cufft

        why = cufft.unavailable()
        if why is not None:
            raise RuntimeError(f"FFT 'cufft' cannot be used here: {why}")
        return cufft.BATCHED
    raise ValueError(f"unknown batched FFT {name!r} (xla, cufft)")
