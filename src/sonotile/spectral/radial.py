"""Spectral operators of k-Wave's axisymmetric scheme (kspaceFirstOrderAS): x axial, y radial.

The grid's first row along y lies on the axis (``y = 0``); a field is continued beyond the grid
along y with the symmetry of its quantity and grid, and the derivatives are taken on that
continuation with real FFTs, as k-Wave's ``WSWA-FFT`` / ``WSWS-FFT`` options do (k-Wave's C++
solver computes the same ``WSWA`` operators with discrete trigonometric transforms; the two
agree to rounding). Symmetries (W/H: whole-/half-sample point of symmetry, S/A: symmetric /
antisymmetric; first letter pair at ``y = 0``, second at the outer edge):

============  ===========================  ==========================================
quantity      ``WSWA`` (period ``4 Ny``)   ``WSWS`` (period ``2 Ny - 2``)
============  ===========================  ==========================================
p, ux, rho    WSWA                         WSWS
uy            HAHS                         HAHA (the last column follows from it)
uy / y        HSHA                         HSHS
============  ===========================  ==========================================

Operators (the names of :class:`~sonotile.spectral.operators.SpectralOps`):

* ``grad(p)`` -> ``(dp/dx at x + dx/2, dp/dy at y + dy/2)`` with kappa;
* ``div(u)`` -> ``(dux/dx, duy/dy + uy/y)`` on the collocated grid with kappa: the radial part
  of the cylindrical divergence carries the ``uy / y`` term;
* ``filter_source(s)`` / ``filter_velocity_source(s, axis)``: ``cos(c_ref |k| dt / 2)`` on the
  continuation of a collocated / staggered source grid;
* ``unstagger(u, axis)``: periodic half-cell shift along one axis, as k-Wave's C++ solver
  computes the non-staggered velocity in every coordinate system.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.fft import backend as fft_backend
from sonotile.fft.backend import real_scale
from sonotile.model.grid import along
from sonotile.spectral.device import to_device
from sonotile.spectral.operators import half_kmag, half_wavenumbers, kappa_of

#: Radial symmetries: k-Wave's ``RadialSymmetry`` names without the ``-FFT`` suffix.
SYMMETRIES = ("WSWA", "WSWS")


def period(ny: int, symmetry: str) -> int:
    """Length of the radial continuation of ``ny`` points [points]."""
    return 4 * ny if symmetry == "WSWA" else 2 * ny - 2


def _flip(f: jax.Array) -> jax.Array:
    return jnp.flip(f, axis=-1)


def continue_collocated(f: jax.Array, symmetry: str) -> jax.Array:
    """``f`` (a field on the collocated radial grid ``y = j dy``) over one period of its
    WSWA or WSWS continuation along the last axis."""
    if symmetry == "WSWS":
        return jnp.concatenate([f, _flip(f[:, 1:-1])], axis=-1)
    z = jnp.zeros_like(f[:, :1])
    return jnp.concatenate([f, z, -_flip(f[:, 1:]), -f, z, _flip(f[:, 1:])], axis=-1)


def continue_staggered(f: jax.Array, symmetry: str, odd: bool) -> jax.Array:
    """``f`` (a field on the staggered radial grid ``y = (j + 1/2) dy``) over one period of its
    continuation: antisymmetric about the axis (``odd``: uy; HAHS / HAHA) or symmetric (uy / y;
    HSHA / HSHS). WSWS drops the last column (its symmetry fixes it)."""
    s = -1.0 if odd else 1.0
    if symmetry == "WSWS":
        g = f[:, :-1]
        return jnp.concatenate([g, s * _flip(g)], axis=-1)
    return jnp.concatenate([f, -s * _flip(f), -f, s * _flip(f)], axis=-1)


Children = tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any]


@jax.tree_util.register_pytree_node_class
@dataclass
class RadialOps:
    """Axisymmetric operators on one device (all spectral arrays on the ``rfftn`` half spectrum
    of the continued grid ``(Nx, M)``, ``M`` = :func:`period`).

    Attributes:
        ddx_pos, ddx_neg: ``i kx exp(+-i kx dx/2)``, shape ``(Nx, 1)``.
        ddy_pos, ddy_neg: ``i ky exp(+-i ky dy/2)``, shape ``(1, M/2+1)``.
        y_neg: ``exp(-i ky dy/2)``, shape ``(1, M/2+1)``.
        kappa: ``sinc(c_ref |k| dt/2)``.
        source_kappa: ``cos(c_ref |k| dt/2)`` or None (no additive source).
        inv_r: ``1 / y`` on the staggered radial grid, shape ``(1, Ny)`` [1/m].
        unshift: per axis ``exp(-i k d/2)`` on that axis's own periodic rfft spectrum, or None.
        symmetry: ``"WSWA"`` or ``"WSWS"`` (static).
    """

    ddx_pos: jax.Array
    ddx_neg: jax.Array
    ddy_pos: jax.Array
    ddy_neg: jax.Array
    y_neg: jax.Array
    kappa: jax.Array
    source_kappa: jax.Array | None
    inv_r: jax.Array
    unshift: tuple[jax.Array, ...] | None
    symmetry: str = "WSWA"

    def tree_flatten(self) -> tuple[Children, Any]:
        return (
            self.ddx_pos,
            self.ddx_neg,
            self.ddy_pos,
            self.ddy_neg,
            self.y_neg,
            self.kappa,
            self.source_kappa,
            self.inv_r,
            self.unshift,
        ), self.symmetry

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Children) -> RadialOps:
        return cls(*children, symmetry=aux)

    @classmethod
    def build(
        cls,
        shape: tuple[int, int],
        spacing: tuple[float, float],
        c_ref: float,
        dt: float,
        symmetry: str = "WSWA",
        dtype: str = "float32",
        source_filter: bool = False,
        unstagger: bool = False,
    ) -> RadialOps:
        """Precompute the operators for an ``(Nx, Ny)`` grid of spacing ``(dx, dy)`` [m];
        ``c_ref`` [m/s] and ``dt`` [s] set kappa."""
        if symmetry not in SYMMETRIES:
            raise ValueError(f"radial symmetry {symmetry!r}: expected one of {SYMMETRIES}")
        nx, ny = shape
        dx, dy = spacing
        ext = (nx, period(ny, symmetry))
        cdtype = jnp.complex64 if dtype == "float32" else jnp.complex128
        kx, ky = half_wavenumbers(ext, spacing)
        kmag = half_kmag(ext, spacing, np.float64)

        def vec(v: np.ndarray, ax: int) -> jax.Array:
            return to_device(along(v, ax, 2), cdtype)

        unshift = None
        if unstagger:
            unshift = tuple(
                vec(np.exp(-0.5j * 2 * np.pi * np.fft.rfftfreq(n, d) * d), ax)
                for ax, (n, d) in enumerate(zip(shape, spacing))
            )
        skappa = np.cos(c_ref * kmag * dt / 2) if source_filter else None
        return cls(
            vec(1j * kx * np.exp(0.5j * kx * dx), 0),
            vec(1j * kx * np.exp(-0.5j * kx * dx), 0),
            vec(1j * ky * np.exp(0.5j * ky * dy), 1),
            vec(1j * ky * np.exp(-0.5j * ky * dy), 1),
            vec(np.exp(-0.5j * ky * dy), 1),
            to_device(kappa_of(kmag, c_ref, dt), dtype),
            None if skappa is None else to_device(skappa, dtype),
            to_device(along(1.0 / ((np.arange(ny) + 0.5) * dy), 1, 2), dtype),
            unshift,
            symmetry=symmetry,
        )

    def _spec(self, f: jax.Array) -> jax.Array:
        return fft_backend.portable().rfftn(f)

    def _back(self, F: jax.Array, like: jax.Array) -> jax.Array:
        """The inverse transform of ``F`` on the continued grid, cut to ``like``'s grid."""
        m = period(like.shape[1], self.symmetry)
        full = fft_backend.portable().irfftn(F, (like.shape[0], m))
        return full[:, : like.shape[1]].astype(like.dtype)

    def grad(self, p: jax.Array) -> tuple[jax.Array, ...]:
        P = real_scale(self._spec(continue_collocated(p, self.symmetry)), self.kappa)
        return self._back(P * self.ddx_pos, p), self._back(P * self.ddy_pos, p)

    def div(self, u: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
        ux, uy = u
        sym = self.symmetry
        dux = self._back(real_scale(self._spec(continue_collocated(ux, sym)), self.kappa)
                         * self.ddx_neg, ux)  # fmt: skip
        Uy = self._spec(continue_staggered(uy, sym, odd=True)) * self.ddy_neg
        Ur = self._spec(continue_staggered(uy * self.inv_r, sym, odd=False)) * self.y_neg
        return dux, self._back(real_scale(Uy + Ur, self.kappa), uy)

    def fractional(self, f: jax.Array, which: int) -> jax.Array:
        raise NotImplementedError("power-law absorption is not available on axisymmetric grids")

    def filter_source(self, s: jax.Array) -> jax.Array:
        """The k-space source filter of a source on the collocated grid (p, or ux)."""
        return self.filter_velocity_source(s, 0)

    def filter_velocity_source(self, s: jax.Array, axis: int) -> jax.Array:
        """The k-space source filter of a source on the grid of velocity component ``axis``
        (x: collocated radially; y: the staggered radial grid, HAHS / HAHA)."""
        assert self.source_kappa is not None  # built for additive sources, the only callers
        ext = (
            continue_collocated(s, self.symmetry)
            if axis == 0
            else continue_staggered(s, self.symmetry, odd=True)
        )
        return self._back(real_scale(self._spec(ext), self.source_kappa), s)

    def unstagger(self, u: jax.Array, axis: int) -> jax.Array:
        assert self.unshift is not None  # built when a sensor records non-staggered velocity
        n = u.shape[axis]
        be = fft_backend.portable()
        F = be.rfft(u, axis) * self.unshift[axis]
        return be.irfft(F, n, axis).astype(u.dtype)
