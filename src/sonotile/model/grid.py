"""The computational grid: shape, spacing and time axis, and its wavenumbers.

Arrays are indexed ``(x, y, z)`` in memory (x first); k-Wave files store ``(z, y, x)`` and the
transposition lives in :mod:`sonotile.kwave.reader` alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

AXES = "xyz"


@dataclass(frozen=True)
class Grid:
    """A uniform Cartesian grid in 1, 2 or 3 dimensions with a uniform time axis.

    Attributes:
        shape: number of points per axis ``(Nx[, Ny[, Nz]])``.
        spacing: grid spacing per axis ``(dx[, dy[, dz]])`` [m].
        dt: time step [s].
        nt: number of time steps (samples ``t = 0, dt, ..., (nt-1) dt``).
    """

    shape: tuple[int, ...]
    spacing: tuple[float, ...]
    dt: float
    nt: int

    def __post_init__(self) -> None:
        shape = tuple(int(n) for n in self.shape)
        spacing = tuple(float(d) for d in self.spacing)
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "spacing", spacing)
        if not 1 <= len(shape) <= 3:
            raise ValueError(f"grid shape must have 1 to 3 axes, got {shape}")
        if len(spacing) != len(shape):
            raise ValueError(f"grid spacing {spacing} does not match shape {shape}")
        if any(n < 2 for n in shape):
            raise ValueError(f"grid shape {shape}: every axis needs at least 2 points")
        if not all(math.isfinite(d) and d > 0 for d in spacing):
            raise ValueError(f"grid spacing {spacing} m: every spacing must be finite and > 0")
        if not (math.isfinite(self.dt) and self.dt > 0):
            raise ValueError(f"time step dt = {self.dt} s: must be finite and > 0")
        if int(self.nt) < 1:
            raise ValueError(f"number of time steps nt = {self.nt}: must be >= 1")
        object.__setattr__(self, "nt", int(self.nt))
        object.__setattr__(self, "dt", float(self.dt))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of grid points (a Python integer: no wrap-around for huge grids)."""
        return math.prod(self.shape)

    @property
    def extent(self) -> tuple[float, ...]:
        """Domain size per axis ``N * d`` [m]."""
        return tuple(n * d for n, d in zip(self.shape, self.spacing))

    def wavenumbers(self, axis: int) -> np.ndarray:
        """Wavenumbers along ``axis`` in FFT order [rad/m], shape ``(N,)``.

        For even N the Nyquist bin holds ``-pi/d`` (k-Wave's and numpy's convention).
        """
        n, d = self.shape[axis], self.spacing[axis]
        return 2 * np.pi * np.fft.fftfreq(n, d)

    def coordinates(self, axis: int) -> np.ndarray:
        """Point positions along ``axis`` centred on the grid middle [m] (k-Wave's convention:
        index ``N//2`` is at 0)."""
        n, d = self.shape[axis], self.spacing[axis]
        return (np.arange(n) - n // 2) * d


def along(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """Reshape a 1-D vector so it broadcasts along ``axis`` of an ``ndim``-D array."""
    shape = [1] * ndim
    shape[axis] = v.shape[0]
    return v.reshape(shape)


def make_time(
    shape: tuple[int, ...],
    spacing: tuple[float, ...],
    c_max: float,
    c_min: float | None = None,
    cfl: float = 0.3,
    t_end: float | None = None,
    dt: float | None = None,
) -> tuple[float, int]:
    """k-Wave's default time axis (``kWaveGrid.makeTime``): ``Nt = floor(t_end / dt) + 1``.

    Args:
        shape, spacing: grid points and spacing [m].
        c_max: largest sound speed [m/s] (sets dt).
        c_min: smallest sound speed [m/s] (sets the default end time); defaults to ``c_max``.
        cfl: Courant number ``c_max dt / min(spacing)``.
        t_end: end time [s]; default: time to cross the grid diagonal at ``c_min``.
        dt: a given time step [s] (then ``cfl`` is not used and ``Nt`` covers ``t_end``).

    Returns:
        ``(dt [s], nt)``.
    """
    if c_min is None:
        c_min = c_max
    if not (c_max > 0 and c_min > 0 and cfl > 0):
        raise ValueError(f"make_time needs positive c_max, c_min and cfl, got {c_max, c_min, cfl}")
    if t_end is None:
        t_end = math.sqrt(sum((n * d) ** 2 for n, d in zip(shape, spacing))) / c_min
    if dt is None:
        dt = cfl * min(spacing) / c_max
    elif not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"make_time: dt = {dt} s must be finite and > 0")
    nt = int(math.floor(t_end / dt + 1e-9)) + 1
    return dt, nt
