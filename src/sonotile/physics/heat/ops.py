"""Spectral operators of the heat step, with k-Wave's diffusion k-space correction.

``kappa = (1 - exp(-x)) / x``, ``x = dt (D_ref |k|^2 + P_ref)`` (1 at ``x = 0``) makes the
explicit step exact in time for a homogeneous medium (k-Wave's ``kWaveDiffusion``). The step
calls only these methods (as the acoustic step calls :class:`~sonotile.spectral.operators.
FourierOps`), so a decomposed implementation with the same methods can replace this one:

* ``grad(f)`` -> per-axis ``F^-1(i k_a sqrt(kappa) F f)`` (collocated, no staggering; no
  Nyquist component, :func:`odd_wavenumbers`);
* ``div_sum(u)`` -> ``F^-1(sum_a i k_a sqrt(kappa) F u_a)``;
* ``laplacian(f)`` -> ``F^-1(-|k|^2 kappa F f)`` (``div_sum(grad(f))``: no Nyquist terms);
* ``smooth(f)`` -> ``F^-1(kappa F f)``;
* ``propagate(f)`` -> ``F^-1((exp-like decay - 1) F f)``: ``-dt kappa (D |k|^2 + P)``, the whole
  homogeneous update of ``T - Ta`` in one transform pair;
* ``grad_smooth(f)`` / ``laplacian_smooth(f)`` -> both results from one forward transform of
  ``f`` (the perfusion term's smoothing beside the conduction term).

Real FFTs (last axis halved): XLA's, or on the CPU in float32 on 2-D / 3-D grids FFTW's custom
calls (:mod:`sonotile.fft.fftw`; these have no derivative rules: gradients use ``fft="xla"``).
k-Wave's insulating and conducting boundaries (homogeneous media: ``smooth`` and ``propagate``
only) put a DCT-I or DST-I (:mod:`sonotile.fft.dtt`) in place of the FFT, with its
wavenumbers; the operators are then arrays of the grid's shape (the backend's
``trig_operator``: on FFTW one call of two in-place real-to-real transforms, float32; on XLA
real FFTs of the implied periods, differentiable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.fft import backend as fft_backend
from sonotile.fft import dtt
from sonotile.fft.backend import AxisVec, real_scale
from sonotile.model.grid import along
from sonotile.spectral.device import to_device
from sonotile.spectral.operators import half_kmag, half_wavenumbers

Children = tuple[Any, Any, Any, Any, Any]

#: k-Wave's ``medium.boundary_condition`` values and the transform each runs on.
BOUNDARIES = {"periodic": "fft", "insulating": "dct1", "conducting": "dst1"}


def diffusion_kappa(k2: np.ndarray, d_ref: float, p_ref: float, dt: float) -> np.ndarray:
    """k-Wave's diffusion correction ``(1 - exp(-x)) / x``, ``x = dt (d_ref k2 + p_ref)``
    (``k2``: ``|k|^2`` [rad^2/m^2]; ``d_ref`` [m^2/s], ``p_ref`` [1/s], ``dt`` [s])."""
    x = dt * (d_ref * k2 + p_ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(x > 0, -np.expm1(-x) / np.where(x > 0, x, 1.0), 1.0)
    return out


def boundary_k2(shape: tuple[int, ...], spacing: tuple[float, ...], boundary: str) -> np.ndarray:
    """``|k|^2`` [rad^2/m^2] of the spectrum a boundary's transform makes: the ``rfftn`` half
    spectrum (periodic) or the DCT-I / DST-I coefficients (insulating / conducting, the
    grid's shape; kWaveGrid's ``k_dtt``)."""
    kind = BOUNDARIES[boundary]
    if kind == "fft":
        return half_kmag(shape, spacing, np.float64) ** 2
    ndim = len(shape)
    k2 = np.zeros((1,) * ndim)
    for a, (n, d) in enumerate(zip(shape, spacing)):
        k2 = k2 + along(dtt.wavenumbers(n, d, kind) ** 2, a, ndim)
    return k2


def odd_wavenumbers(shape: tuple[int, ...], spacing: tuple[float, ...]) -> list[np.ndarray]:
    """Per-axis wavenumbers [rad/m] of an ``rfftn`` spectrum for first derivatives: the Nyquist
    bin of an even axis set to 0. A derivative's Nyquist component of a real field is
    imaginary and cancels in the real part of the inverse transform (k-Wave's
    ``real(ifftn(...))``); a half-spectrum inverse along the other axes would keep it."""
    out = []
    for k, n in zip(half_wavenumbers(shape, spacing), shape):
        k = k.copy()
        if n % 2 == 0:
            k[np.abs(k) == np.max(np.abs(k))] = 0.0
        out.append(k)
    return out


@jax.tree_util.register_pytree_node_class
@dataclass
class HeatOps:
    """Single-device heat operators (see the module docstring); arrays on the half spectrum.

    Attributes:
        kappa: ``(1 - exp(-x)) / x`` (real).
        root: ``sqrt(kappa)`` or None (built for a heterogeneous conductivity).
        ik: per axis ``i k_a`` as broadcastable 1-D vectors, or None.
        lap: ``-|k|^2 kappa`` or None.
        decay: ``-dt kappa (D |k|^2 + P)`` or None (homogeneous media).
        fft: the FFT backend's name (static, :func:`sonotile.fft.backend.get`).
        boundary: "periodic" (FFT), "insulating" (DCT-I) or "conducting" (DST-I) (static).
        transform: a decomposition's distributed FFT (``spec(f)``, ``back(F, like)``; its
            spectra in its own layout, the arrays above sharded to match) or None: one device
            (static, :meth:`on_mesh`).
    """

    kappa: jax.Array
    root: jax.Array | None = None
    ik: tuple[jax.Array, ...] | None = None
    lap: jax.Array | None = None
    decay: jax.Array | None = None
    fft: str = fft_backend.PORTABLE
    transform: Any = None
    boundary: str = "periodic"

    def tree_flatten(self) -> tuple[Children, Any]:
        aux = (self.fft, self.transform, self.boundary)
        return (self.kappa, self.root, self.ik, self.lap, self.decay), aux

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Children) -> HeatOps:
        return cls(*children, fft=aux[0], transform=aux[1], boundary=aux[2])

    @classmethod
    def build(cls, shape: tuple[int, ...], spacing: tuple[float, ...], dt: float,
              d_ref: float, p_ref: float, dtype: str = "float32", *,
              gradient: bool = False, laplacian: bool = False,
              homogeneous: tuple[float, float] | None = None,
              fft: str = "auto", boundary: str = "periodic") -> HeatOps:  # fmt: skip
        """Operators for a grid (``spacing`` [m], ``dt`` [s]) and reference ``d_ref`` [m^2/s],
        ``p_ref`` [1/s]: ``gradient`` builds grad / div_sum, ``laplacian`` the Laplacian,
        ``homogeneous = (D, P)`` the propagator. ``fft``: "auto" (FFTW on the CPU for float32
        2-D / 3-D grids when available), "xla" or "fftw". ``boundary``: "periodic", or
        "insulating" / "conducting" (DCT-I / DST-I; smooth and propagate only)."""
        ndim = len(shape)
        cdtype = jnp.complex64 if dtype == "float32" else jnp.complex128
        if boundary != "periodic" and (gradient or laplacian):
            raise ValueError(f"{boundary} boundaries: homogeneous media only (smooth, propagate)")
        k2 = boundary_k2(shape, spacing, boundary)
        kap = diffusion_kappa(k2, d_ref, p_ref, dt)
        root = ik = lap = decay = None
        if gradient:
            root = to_device(np.sqrt(kap), dtype)
            ik = tuple(to_device(along(1j * k, a, ndim), cdtype)
                       for a, k in enumerate(odd_wavenumbers(shape, spacing)))  # fmt: skip
        if laplacian:  # div(grad) as grad and div_sum make it: no Nyquist terms
            odd2 = sum(along(k**2, a, ndim) for a, k in enumerate(odd_wavenumbers(shape, spacing)))
            lap = to_device(-odd2 * kap, dtype)
        if homogeneous is not None:
            d, p = homogeneous
            if d == d_ref and p == p_ref:  # exact: exp(-dt (D k^2 + P)) - 1
                dec = np.expm1(-dt * (d * k2 + p))
            else:
                dec = -dt * kap * (d * k2 + p)
            decay = to_device(dec, dtype)
        backend = fft_backend.PORTABLE if ndim == 1 else fft_backend.resolve(fft, dtype)
        return cls(to_device(kap, dtype), root, ik, lap, decay, fft=backend, boundary=boundary)

    def on_mesh(self, transform: Any) -> HeatOps:
        """These operators (this shard's blocks of the arrays) on a decomposition's
        distributed FFT (:class:`sonotile.physics.base.MeshOperators`)."""
        return replace(self, fft=fft_backend.PORTABLE, transform=transform)

    def _on(self, like: jax.Array) -> fft_backend.Backend:
        """The backend for fields like ``like`` on one device: the chosen one where it fuses
        the operators (2-D / 3-D, float32 on FFTW), else the portable one."""
        be = fft_backend.get(self.fft)
        return be if be.fused(like) else fft_backend.portable()

    def _spec(self, f: jax.Array) -> jax.Array:
        """The distributed transform of a shard's block (on a mesh only)."""
        return self.transform.spec(f)

    def _back(self, F: jax.Array, like: jax.Array) -> jax.Array:
        return self.transform.back(F, like)

    def _apply(self, f: jax.Array, op: jax.Array | None) -> jax.Array:
        """``F^-1(op F f)`` for a real operator ``op`` on the half spectrum (or, with an
        insulating or conducting boundary, on the DCT-I / DST-I coefficients)."""
        assert op is not None, "operator not built (see HeatOps.build)"
        kind = BOUNDARIES[self.boundary]
        if kind != "fft":
            return fft_backend.for_array(self.fft, f).trig_operator(f, op, kind)
        if self.transform is None:
            return self._on(f).operator(f, op)
        return self._back(real_scale(self._spec(f), op), f)

    def apply(self, f: jax.Array, op: jax.Array) -> jax.Array:
        """``F^-1(op F f)`` for a real operator ``op`` on this spectrum (one device)."""
        return self._apply(f, op)

    def smooth(self, f: jax.Array) -> jax.Array:
        return self._apply(f, self.kappa)

    def laplacian(self, f: jax.Array) -> jax.Array:
        return self._apply(f, self.lap)

    def propagate(self, f: jax.Array) -> jax.Array:
        return self._apply(f, self.decay)

    def grad(self, f: jax.Array) -> tuple[jax.Array, ...]:
        assert self.root is not None and self.ik is not None, "built without gradient=True"
        if self.transform is None:
            return self._on(f).derivatives(f, self.root, self.ik)
        spec = real_scale(self._spec(f), self.root)
        return tuple(self._back(spec * v, f) for v in self.ik)

    def grad_smooth(self, f: jax.Array) -> tuple[tuple[jax.Array, ...], jax.Array]:
        """``(grad(f), smooth(f))`` from one forward transform of ``f``."""
        assert self.root is not None and self.ik is not None, "built without gradient=True"
        outs = [(a, v) for a, v in enumerate(self.ik)]
        *grads, sm = self._two(f, self.root, outs, self.kappa)
        return tuple(grads), sm

    def laplacian_smooth(self, f: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(laplacian(f), smooth(f))`` from one forward transform of ``f``."""
        assert self.lap is not None, "built without laplacian=True"
        lap, sm = self._two(f, self.lap, [(None, None)], self.kappa)
        return lap, sm

    def _two(self, f: jax.Array, op: jax.Array, outs: Sequence[AxisVec],
             op2: jax.Array) -> list[jax.Array]:  # fmt: skip
        """``F^-1(op vec F f)`` per ``(axis, vec)`` of ``outs``, then ``F^-1(op2 F f)``: one
        forward transform (on a mesh too)."""
        if self.transform is None:
            return self._on(f).two_operators(f, op, outs, op2)
        spec = self._spec(f)
        scaled = real_scale(spec, op)
        got = [self._back(scaled if v is None else scaled * v, f) for _, v in outs]
        return [*got, self._back(real_scale(spec, op2), f)]

    def div_sum(self, u: Sequence[jax.Array]) -> jax.Array:
        assert self.root is not None and self.ik is not None, "built without gradient=True"
        if self.transform is None:
            return self._on(u[0]).operator_sum(u, self.root, self.ik)
        total = sum(self._spec(ua) * v for ua, v in zip(u, self.ik))
        spec = real_scale(total, self.root)  # type: ignore[arg-type]
        return self._back(spec, u[0])
