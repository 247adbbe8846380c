"""Spatial filters applied to inputs before a run (numpy on the host; :func:`smooth` also in
jax.numpy, for inputs that are differentiated)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np


def blackman(m: int, alpha: float = 0.16) -> np.ndarray:
    """The ``m``-point symmetric Blackman window (``alpha = 0.16`` is the classic one)."""
    if m == 1:
        return np.ones(1)
    n = np.arange(m)
    a0, a1, a2 = (1 - alpha) / 2, 0.5, alpha / 2
    return a0 - a1 * np.cos(2 * np.pi * n / (m - 1)) + a2 * np.cos(4 * np.pi * n / (m - 1))


def smoothing_window(shape: tuple[int, ...]) -> np.ndarray:
    """k-Wave's frequency-domain smoothing window (``getWin(..., 'Blackman', 'Rotation', true)``),
    in centred (fftshifted) order.

    Along an axis of even length the window is built on ``N + 1`` points and the last dropped,
    so that its DC value is exactly 1. In 2-D and 3-D it is the 1-D window of the longest axis,
    rotated: evaluated (linear interpolation between its samples) at the radial distance.
    """
    ext = [n + (1 - n % 2) for n in shape]
    if len(shape) == 1:
        return blackman(ext[0])[: shape[0]]
    length = max(ext)
    radius = (length - 1) / 2
    ref = np.linspace(-radius, radius, length)
    axes = [np.linspace(-radius, radius, m)[:n] for m, n in zip(ext, shape)]
    mesh = np.meshgrid(*axes, indexing="ij")
    r = np.minimum(np.sqrt(sum(x * x for x in mesh)), radius)
    return np.abs(np.interp(r, ref, blackman(length)))


def smooth(field: Any, restore_max: bool = False, xp: ModuleType = np) -> Any:
    """Low-pass a field with :func:`smoothing_window` (k-Wave's ``smooth``).

    Args:
        field: real array (any 1-3-D shape).
        restore_max: rescale so the maximum magnitude equals the input's.
        xp: ``numpy`` (the field taken as float64) or ``jax.numpy`` (the field's own dtype,
            traced values allowed: differentiable).

    Returns:
        The smoothed field (float64 for numpy; the field's dtype for JAX).
    """
    a = np.asarray(field, dtype=np.float64) if xp is np else field
    win = xp.asarray(np.fft.ifftshift(smoothing_window(a.shape)), a.dtype)
    out = xp.real(xp.fft.ifftn(xp.fft.fftn(a) * win)).astype(a.dtype)
    if not restore_max:
        return out
    peak = xp.max(xp.abs(out))
    some = peak > 0
    return out * xp.where(some, xp.max(xp.abs(a)) / xp.where(some, peak, 1.0), 1.0)


def radial_continuation(field: np.ndarray, symmetry: str) -> np.ndarray:
    """A 2-D field on an axisymmetric grid (y radial, first row on the axis) continued over one
    period along y: WSWA (``4 Ny`` points) or WSWS (``2 Ny - 2``), as k-Wave mirrors it."""
    f = np.asarray(field, dtype=np.float64)
    if symmetry == "WSWS":
        return np.concatenate([f, f[:, -2:0:-1]], axis=1)
    z = np.zeros_like(f[:, :1])
    return np.concatenate([f, z, -f[:, :0:-1], -f, z, f[:, :0:-1]], axis=1)


def smooth_axisymmetric(field: np.ndarray, symmetry: str) -> np.ndarray:
    """:func:`smooth` (maximum restored) of a field on an axisymmetric grid, applied to its
    radial continuation (:func:`radial_continuation`) and cut back, as k-Wave smooths p0."""
    ny = np.shape(field)[1]
    return smooth(radial_continuation(field, symmetry), restore_max=True)[:, :ny]
