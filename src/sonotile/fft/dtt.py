"""Discrete trigonometric transforms of the first kind in JAX: DCT-I and DST-I, real to real.

Both are FFTW's unnormalised ``REDFT00`` and ``RODFT00`` (k-Wave's ``dtt1D`` types 1 and 5),
computed as a real FFT of the sequence's implied period:

* DCT-I (WSWS symmetry, implied period ``M = 2N - 2``):
  ``X_k = x_0 + (-1)^k x_{N-1} + 2 sum_{n=1}^{N-2} x_n cos(pi n k / (N - 1))``,
  wavenumbers ``k_m = pi m / ((N - 1) dx)``, ``m = 0 .. N-1``; zero normal derivative at the
  first and last points.
* DST-I (WAWA symmetry, implied period ``M = 2N + 2``):
  ``X_k = 2 sum_{n=0}^{N-1} x_n sin(pi (n + 1)(k + 1) / (N + 1))``,
  wavenumbers ``k_m = pi (m + 1) / ((N + 1) dx)``, ``m = 0 .. N-1``; zero value one point
  outside the grid at each end.

Each is its own inverse up to ``1 / M``. Along several axes the 1-D transforms are applied
in turn (the implied periods multiply). The FFTs are XLA's (``jnp.fft``): differentiable,
``vmap``-able, float32 or float64; fast where ``M`` has small prime factors.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

#: The transforms: DCT-I (WSWS symmetry) and DST-I (WAWA).
KINDS = ("dct1", "dst1")


def period(n: int, kind: str) -> int:
    """The implied period ``M`` of a length-``n`` sequence: ``2n - 2`` (DCT-I), ``2n + 2``
    (DST-I)."""
    if kind == "dct1":
        return 2 * n - 2
    if kind == "dst1":
        return 2 * n + 2
    raise ValueError(f"kind {kind!r}: expected one of {KINDS}")


def wavenumbers(n: int, dx: float, kind: str) -> np.ndarray:
    """The wavenumbers [rad/m] of the ``n`` coefficients along an axis of spacing ``dx`` [m]
    (kWaveGrid's ``kx_vec_dtt``)."""
    m = period(n, kind)
    idx = np.arange(n) if kind == "dct1" else np.arange(1, n + 1)
    return 2 * np.pi * idx / (m * dx)


def _along(x: jax.Array, axis: int, kind: str) -> jax.Array:
    """The unnormalised transform of ``x`` along ``axis``."""
    y = jnp.moveaxis(x, axis, -1)
    n = y.shape[-1]
    if kind == "dct1":
        if n < 2:
            raise ValueError("a DCT-I needs at least 2 points")
        ext = jnp.concatenate([y, y[..., -2:0:-1]], axis=-1)
        out = jnp.fft.rfft(ext, axis=-1)[..., :n].real
    elif kind == "dst1":
        z = jnp.zeros(y.shape[:-1] + (1,), y.dtype)
        ext = jnp.concatenate([z, y, z, -y[..., ::-1]], axis=-1)
        out = -jnp.fft.rfft(ext, axis=-1)[..., 1 : n + 1].imag
    else:
        raise ValueError(f"kind {kind!r}: expected one of {KINDS}")
    return jnp.moveaxis(out.astype(x.dtype), -1, axis)


def forward(x: jax.Array, kind: str, axes: Sequence[int] | None = None) -> jax.Array:
    """The DCT-I or DST-I (``kind``: "dct1" or "dst1") of ``x`` along ``axes`` (default all),
    unnormalised (FFTW's ``REDFT00`` / ``RODFT00``)."""
    for a in range(x.ndim) if axes is None else axes:
        x = _along(x, a, kind)
    return x


def inverse(X: jax.Array, kind: str, axes: Sequence[int] | None = None) -> jax.Array:  # noqa: N803
    """The inverse of :func:`forward`: the same transform divided by the implied periods."""
    axes = tuple(range(X.ndim)) if axes is None else tuple(axes)
    scale = float(np.prod([period(X.shape[a], kind) for a in axes]))
    return forward(X, kind, axes) * jnp.asarray(1.0 / scale, X.dtype)
