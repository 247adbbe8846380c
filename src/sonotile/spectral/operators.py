"""Spectral operators of the k-space scheme: the only place that knows how a derivative is taken.

The step (:mod:`sonotile.physics.acoustic.step`) calls these methods and never sees FFT layouts or
communication.
Every decomposition provides an object with the same methods:

* ``grad(p)`` -> per-axis derivative of a collocated field, evaluated on the staggered grids
  (``x + dx/2``), with the k-space correction kappa;
* ``div(u)`` -> per-axis derivative of each staggered velocity component back on the collocated
  grid (``x - dx/2`` shift), with kappa;
* ``fractional(f, which)`` -> the power-law operators ``F^-1(|k|^(y-2) F f)`` (``which=1``) and
  ``F^-1(|k|^(y-1) F f)`` (``which=2``);
* ``filter_source(s)`` -> ``F^-1(cos(c_ref |k| dt / 2) F s)`` for additive sources;
* ``unstagger(u, axis)`` -> shift a staggered component by ``-d/2`` along its own axis (1-D FFTs).

:class:`FourierOps` is the single-device implementation on real FFTs (last axis halved). It
holds the operators' arrays and calls an FFT backend (:mod:`sonotile.fft.backend`: XLA's FFT,
or FFTW's fused kernels on the CPU), chosen once by ``FourierOps.build(..., fft="auto")`` and
recorded by name; it never calls a backend's module itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import DTypeLike

from sonotile.base import config
from sonotile.fft import backend as fft_backend
from sonotile.model.grid import along
from sonotile.spectral.device import to_device

#: The pytree children of :class:`FourierOps` (its arrays; JAX puts placeholders or tracers
#: there while it transforms a function).
Children = tuple[Any, Any, Any, Any, Any, Any, Any]


class SpectralOps(Protocol):
    """The operators the step and the sensors call (see the module docstring): provided by
    :class:`FourierOps`, :class:`~sonotile.solver.adjoint.AdjointOps` and the decomposed
    operators of :mod:`sonotile.parallel`. A ``keep(f)`` method and a ``barrier`` (a fusion
    boundary for derivative rules, :class:`~sonotile.spectral.linear.Barrier`) are optional."""

    def grad(self, p: jax.Array) -> tuple[jax.Array, ...]: ...

    def div(self, u: Sequence[jax.Array]) -> tuple[jax.Array, ...]: ...

    def fractional(self, f: jax.Array, which: int) -> jax.Array: ...

    def filter_source(self, s: jax.Array) -> jax.Array: ...

    def unstagger(self, u: jax.Array, axis: int) -> jax.Array: ...


def kappa_of(kmag: np.ndarray, c_ref: float, dt: float) -> np.ndarray:
    """k-space correction ``sinc(c_ref |k| dt / 2)`` (unnormalised sinc, 1 at k = 0)."""
    return np.sinc(c_ref * kmag * dt / (2 * np.pi))


def power_law_nablas(kmag: np.ndarray, y: float) -> tuple[np.ndarray, np.ndarray]:
    """``|k|^(y-2)`` and ``|k|^(y-1)`` with the k = 0 singularity set to 0 (k-Wave's rule)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        n1 = np.where(kmag > 0, kmag ** (y - 2.0), 0.0)
        n2 = np.where(kmag > 0, kmag ** (y - 1.0), 0.0)
    n1[~np.isfinite(n1)] = 0.0
    n2[~np.isfinite(n2)] = 0.0
    return n1, n2


def half_wavenumbers(shape: tuple[int, ...], spacing: tuple[float, ...]) -> list[np.ndarray]:
    """Per-axis wavenumbers [rad/m] of an ``rfftn`` spectrum (last axis halved)."""
    ks = [2 * np.pi * np.fft.fftfreq(n, d) for n, d in zip(shape[:-1], spacing[:-1])]
    ks.append(2 * np.pi * np.fft.rfftfreq(shape[-1], spacing[-1]))
    return ks


def half_kmag(
    shape: tuple[int, ...], spacing: tuple[float, ...], dtype: DTypeLike = np.float64
) -> np.ndarray:
    """``|k|`` on the ``rfftn`` half spectrum [rad/m]; Nyquist counted as ``+pi/d``."""
    ndim = len(shape)
    k2 = np.zeros((1,) * ndim, dtype)
    for ax, k in enumerate(half_wavenumbers(shape, spacing)):
        k2 = k2 + along((np.abs(k) ** 2).astype(dtype), ax, ndim)
    return np.sqrt(k2, out=k2)


@jax.tree_util.register_pytree_node_class
@dataclass
class FourierOps:
    """Global Fourier collocation on one device.

    Attributes (all on the ``rfftn`` half spectrum, broadcastable):
        shift_pos, shift_neg: per axis ``i k exp(+-i k d/2)`` as 1-D vectors.
        kappa: ``sinc(c_ref |k| dt/2)``, or ``None`` to skip it.
        nabla1, nabla2: power-law operators or ``None``.
        source_kappa: ``cos(c_ref |k| dt/2)`` or ``None``.
        unshift: per axis ``exp(-i k d/2)`` on that axis's own 1-D rfft spectrum, or ``None``.
        fft: the FFT backend's name (static; resolved by :meth:`build`,
            :func:`sonotile.fft.backend.get` gives the backend).
    """

    shift_pos: tuple[jax.Array, ...]
    shift_neg: tuple[jax.Array, ...]
    kappa: jax.Array | None
    nabla1: jax.Array | None = None
    nabla2: jax.Array | None = None
    source_kappa: jax.Array | None = None
    unshift: tuple[jax.Array, ...] | None = None
    fft: str = "xla"

    def tree_flatten(self) -> tuple[Children, Any]:
        # the static part: ``fft`` here, what a subclass needs in its own (PencilOps: its layout)
        return (
            self.shift_pos,
            self.shift_neg,
            self.kappa,
            self.nabla1,
            self.nabla2,
            self.source_kappa,
            self.unshift,
        ), self.fft

    @classmethod
    def tree_unflatten(cls, aux: Any, children: Children) -> FourierOps:
        return cls(*children, fft=aux)

    @classmethod
    def build(
        cls,
        shape: tuple[int, ...],
        spacing: tuple[float, ...],
        c_ref: float,
        dt: float,
        dtype: str = "float32",
        alpha_power: float | None = None,
        source_filter: bool = False,
        unstagger: bool = False,
        fft: str = "auto",
        settings: config.Settings | None = None,
    ) -> FourierOps:
        """Precompute the operators for a grid; ``alpha_power`` enables the power-law terms.

        ``fft``: ``"auto"`` (``settings.fft``: FFTW on the CPU when available, else XLA; see
        :func:`sonotile.fft.backend.resolve`), ``"xla"`` or ``"fftw"`` (falls back to XLA with a
        note where FFTW cannot be used). ``settings`` (default
        :func:`sonotile.base.config.current`): the FFTW options, recorded in the operators'
        static part (hence in every program's key).
        """
        settings = settings or config.current()
        ndim = len(shape)
        cdtype = jnp.complex64 if dtype == "float32" else jnp.complex128
        ks = half_wavenumbers(shape, spacing)
        kmag = half_kmag(shape, spacing, dtype)  # grid-sized host arrays in the run's dtype
        pos = tuple(
            to_device(along(1j * k * np.exp(0.5j * k * d), ax, ndim), cdtype)
            for ax, (k, d) in enumerate(zip(ks, spacing))
        )
        neg = tuple(
            to_device(along(1j * k * np.exp(-0.5j * k * d), ax, ndim), cdtype)
            for ax, (k, d) in enumerate(zip(ks, spacing))
        )
        kappa = to_device(kappa_of(kmag, c_ref, dt), dtype)
        n1 = n2 = None
        if alpha_power is not None:
            a, b = power_law_nablas(kmag, alpha_power)
            n1, n2 = to_device(a, dtype), to_device(b, dtype)
        skappa = to_device(np.cos(c_ref * kmag * dt / 2), dtype) if source_filter else None
        unshift = None
        if unstagger:
            unshift = tuple(
                to_device(
                    along(np.exp(-0.5j * 2 * np.pi * np.fft.rfftfreq(n, d) * d), ax, ndim), cdtype
                )
                for ax, (n, d) in enumerate(zip(shape, spacing))
            )
        name = fft_backend.resolve(fft, dtype, settings)
        fft_backend.get(name).prepare(tuple(shape))  # plan now, while little memory is in use
        return cls(pos, neg, kappa, n1, n2, skappa, unshift, fft=name)

    @property
    def backend(self) -> fft_backend.Backend:
        """The FFT backend these operators were built for (:func:`sonotile.fft.backend.get`)."""
        return fft_backend.get(self.fft)

    def _on(self, like: jax.Array) -> fft_backend.Backend:
        """The backend that transforms fields like ``like`` (the portable one where the chosen
        backend cannot: FFTW with float64)."""
        return fft_backend.for_array(self.fft, like)

    def native(self, like: jax.Array) -> bool:
        """True when fields like ``like`` go through the chosen backend's own transforms (not
        the portable fallback) and that backend is not the portable one (XLA's)."""
        return self.fft != fft_backend.PORTABLE and self.backend.native(like)

    def fused(self, like: jax.Array) -> bool:
        """True when an operator on fields like ``like`` is one backend call (FFTW, float32,
        2-D / 3-D: plane transforms and a pass along x, the operator applied inside)."""
        return self.backend.fused(like)

    def _spec(self, f: jax.Array) -> jax.Array:
        """The half spectrum of ``f`` on the generic way (:meth:`_scaled`); distributed
        subclasses replace it and :meth:`_back` with their transforms."""
        return fft_backend.portable().rfftn(f)

    def _back(self, F: jax.Array, like: jax.Array) -> jax.Array:
        return fft_backend.portable().irfftn(F, like.shape).astype(like.dtype)

    def spectrum(self, f: jax.Array) -> jax.Array:
        """The ``rfftn`` half spectrum of ``f`` (XLA's FFT), for a k-space operator a model
        applies itself: on a mesh this shard's block of it in the operators' layout (multiply
        it by :meth:`axis_vector`'s vectors; :meth:`field` goes back)."""
        return self._spec(f)

    def field(self, F: jax.Array, like: jax.Array) -> jax.Array:
        """The real field of a :meth:`spectrum` ``F`` (``like``: the field's shape and
        dtype; on a mesh this shard's block)."""
        return self._back(F, like)

    def axis_vector(self, v: jax.Array, axis: int) -> jax.Array:
        """A vector of the half spectrum along ``axis`` (1-D, the whole axis: ``n`` values, or
        ``n // 2 + 1`` on the last axis) shaped to multiply :meth:`spectrum`'s result (on a
        mesh this shard's piece of it)."""
        shape = [1] * len(self.shift_pos)
        shape[axis] = -1
        return jnp.reshape(v, shape)

    def _scaled(self, f: jax.Array, op: jax.Array | None) -> jax.Array:
        """``op`` times the spectrum of ``f`` (the generic way: a spectrum in memory)."""
        assert op is not None  # built for this operator (kappa always, the others on demand)
        return fft_backend.real_scale(self._spec(f), op)

    def grad(self, p: jax.Array) -> tuple[jax.Array, ...]:
        if self.native(p):
            return self.backend.derivatives(p, self.kappa, self.shift_pos)
        P = self._scaled(p, self.kappa)
        return tuple(self._back(P * s, p) for s in self.shift_pos)

    def div(self, u: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
        # one call per component: XLA can then use each part before the next exists
        if self.native(u[0]):
            be = self.backend
            pairs = enumerate(zip(u, self.shift_neg))
            return tuple(be.operator(ua, self.kappa, a, s) for a, (ua, s) in pairs)
        return tuple(self._back(self._scaled(ua, self.kappa) * s, ua)
                     for ua, s in zip(u, self.shift_neg))  # fmt: skip

    def div_sum(self, u: Sequence[jax.Array]) -> jax.Array:
        """``sum_a div(u)[a]``: the divergence's components summed (with ``shift_neg`` set to
        ``conj(shift_pos)``, the adjoint of :meth:`grad`), in one backend call when fused."""
        if self.fused(u[0]):
            return self.backend.operator_sum(u, self.kappa, self.shift_neg)
        parts = self.div(u)  # a subclass's own div (PencilOps: distributed; never fused)
        return sum(parts[1:], parts[0])

    def fractional(self, f: jax.Array, which: int) -> jax.Array:
        nabla = self.nabla1 if which == 1 else self.nabla2
        if self.native(f):
            return self.backend.operator(f, nabla)
        return self._back(self._scaled(f, nabla), f)

    def filter_source(self, s: jax.Array) -> jax.Array:
        if self.native(s):
            return self.backend.operator(s, self.source_kappa)
        return self._back(self._scaled(s, self.source_kappa), s)

    def plane_sources(self, like: jax.Array) -> bool:
        """True when :meth:`filter_plane_source` takes a source on one plane ``x = const`` of
        grids like ``like`` (the single-device FFTW kernels, float32, rank 2-3); else the
        source's grid is filtered by :meth:`filter_source`."""
        be = self.backend
        return (
            type(self) is FourierOps
            and self.source_kappa is not None
            and like.ndim in (2, 3)
            and self.fused(like)
            and be.slab_kernels
        )

    def plane_source_kernel(self, x0: jax.typing.ArrayLike) -> jax.Array:
        """The kernel of :meth:`filter_plane_source` for a source on the plane ``x = x0``:
        ``ifft_x(cos(c_ref |k| dt / 2) exp(-i k_x x0 dx))``, real (the filter is even in
        ``k_x``) on the planes' half spectra, ``[X, *plane bins]``. Made once per run: the
        inverse transform of the filter along x (a real one: the filter is real and even in
        ``k_x``, so its rows ``0 .. X // 2`` are its half spectrum), rolled by ``x0``."""
        op = self.source_kappa
        assert op is not None  # built with the source filter
        n = op.shape[0]
        along_x = jnp.fft.irfft(op[: n // 2 + 1], n, axis=0).astype(op.dtype)
        return jnp.roll(along_x, x0, axis=0)

    def filter_plane_source(self, kernel: jax.Array, plane: jax.Array) -> jax.Array:
        """:meth:`filter_source` of a grid that is zero outside one plane ``x = x0`` whose
        values are ``plane``: ``irfft`` over the plane axes of ``kernel[x] * rfft(plane)``
        (``kernel``: :meth:`plane_source_kernel` of ``x0``), one plane transform forward and
        one per plane back (:meth:`plane_sources` must hold)."""
        shape = (kernel.shape[0], *plane.shape)
        return self.backend.plane_source(kernel, plane, shape)  # type: ignore[attr-defined]

    def keep(self, f: jax.Array) -> jax.Array:
        """``f`` materialised here (a fusion boundary) where the backend needs one; ``f``
        otherwise.

        XLA:CPU otherwise fuses a value shared by several updates into each of them, which
        re-reads its inputs per consumer and keeps copies of overwritten state fields."""
        return self._on(f).keep(f)

    def keep_together(self, fs: Sequence[jax.Array]) -> list[jax.Array]:
        """The fields ``fs`` themselves, all materialised before any is read after this point,
        where the backend needs fusion boundaries (else ``fs``); differentiable (the identity's
        derivative rules)."""
        be = self._on(fs[0])
        return _keep_together(be.name)(list(fs)) if be.name != fft_backend.PORTABLE else list(fs)

    def diffs(self, f: jax.Array, which: Sequence[tuple[int, int]]) -> list[jax.Array]:
        """Derivatives of ``f`` along single axes, without kappa (the elastic model's operator).

        ``which``: ``(axis, shift)`` pairs; ``shift = +1`` gives ``df/dx_axis`` at ``x + d/2``
        (``shift_pos``), ``-1`` at ``x - d/2`` (``shift_neg``); see :meth:`diffs_many` for the
        transforms. Units: ``f``'s per metre.
        """
        return self.diffs_many([f], which)[0]

    def diffs_many(
        self, fs: Sequence[jax.Array], which: Sequence[tuple[int, int]]
    ) -> list[list[jax.Array]]:  # fmt: skip
        """:meth:`diffs` of each field of ``fs`` (one shape): ``out[i][j]`` is
        ``diffs(fs[i], which)[j]``, one call. Where the backend has its own kernel of 1-D
        transforms (FFTW, 3-D float32: :meth:`Backend.axis_kernel
        <sonotile.fft.interface.Backend.axis_kernel>`) each derivative is a transform along its
        axis and back, one pass each way over the grid; else where the backend fuses operators
        (FFTW, 2-D) whole-grid transforms, each field transformed once; otherwise XLA's 1-D
        transforms along each axis asked for, one forward per field and axis."""
        be = self._on(fs[0])
        vecs = [(self.shift_pos if s > 0 else self.shift_neg)[a] for a, s in which]
        if be.axis_kernel(fs[0]):
            outs = [(i, a, v) for i in range(len(fs)) for (a, _), v in zip(which, vecs)]
            got = be.axis_operators(fs, outs)
            return [got[i * len(which) : (i + 1) * len(which)] for i in range(len(fs))]
        if be.fused(fs[0]):
            outs = [(i, a, v) for i in range(len(fs)) for (a, _), v in zip(which, vecs)]
            got = be.operators(fs, None, outs)
            return [got[i * len(which) : (i + 1) * len(which)] for i in range(len(fs))]
        out: list[list[Any]] = [[None] * len(which) for _ in fs]
        for axis in dict.fromkeys(a for a, _ in which):
            picks = [j for j, (a, _) in enumerate(which) if a == axis]
            got = be.along_axis(fs, axis, [vecs[j] for j in picks])
            for i in range(len(fs)):
                for q, j in enumerate(picks):
                    out[i][j] = got[i * len(picks) + q]
        return out

    def unstagger(self, u: jax.Array, axis: int) -> jax.Array:
        assert self.unshift is not None  # built when a sensor records non-staggered velocity
        return self._on(u).along_axis([u], axis, [self.unshift[axis]])[0]


def _keep_together(name: str) -> Any:
    """The backend ``name``'s ``keep_all`` with an identity derivative rule (reverse mode)."""

    def run(xs: list) -> list:
        return fft_backend.get(name).keep_all(xs)

    f = jax.custom_vjp(run)
    f.defvjp(lambda xs: (run(xs), None), lambda _, cts: (list(cts),))
    return f


@dataclass(frozen=True)
class SplitUpdate:
    """A split-field PML update of one component by a derivative ``d``:
    ``m (m old - coef d)``, ``coef = scale`` (``field`` None), ``scale * field``, or
    ``scale / mean_axis(field)`` (``staggered``: ``field`` on the staggered grid of ``axis`` as
    :func:`sonotile.model.staggering.staggered_mean` makes it). The velocity update is
    ``m = pml_sg``, ``coef = dt / rho0_sg`` [s m^3/kg]; the density update ``m = pml``,
    ``coef = dt rho0`` [s kg/m^3]. ``m``: the PML profile along ``axis`` (any shape holding
    ``n_axis`` values)."""

    old: jax.Array
    m: jax.Array
    axis: int
    scale: jax.typing.ArrayLike
    field: jax.Array | None = None
    staggered: bool = False

    def epilogue(self) -> fft_backend.Epilogue:
        """The backend's form of this update (:data:`sonotile.fft.backend.Epilogue`)."""
        mode = 1 if self.field is None else (3 if self.staggered else 2)
        return (mode, self.old, self.m, self.scale, self.field)


def fuses_updates(ops: Any, like: jax.Array) -> bool:
    """True when :func:`grad_update` / :func:`div_update` can run on ``ops`` for fields like
    ``like``: a plain single-device :class:`FourierOps` in fused FFTW mode, or operators that
    say so themselves (``ops.fuses_updates(like)``: LFB blocks taking the planes-first way; other
    subclasses and wrappers are distributed or differentiable and keep the separate update);
    never when :attr:`sonotile.base.config.Settings.fftw_updates` was off when they were built."""
    if type(ops) is FourierOps:
        return ops.fused(like) and ops.backend.fuses_updates
    own = getattr(ops, "fuses_updates", None)
    return bool(own is not None and own(like))


def filter_source_on(ops: SpectralOps, s: jax.Array, axis: int | None = None) -> jax.Array:
    """``ops.filter_source(s)`` for a source on the grid of velocity component ``axis`` (None: a
    pressure source). Operators whose transforms depend on the component's grid say so with a
    ``filter_velocity_source(s, axis)`` method (the axisymmetric ones); on Cartesian grids the
    filter is the same for every grid."""
    own = getattr(ops, "filter_velocity_source", None)
    return ops.filter_source(s) if axis is None or own is None else own(s, axis)


def fractional_pair(
    ops: SpectralOps, f1: jax.Array, f2: jax.Array
) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """``(ops.fractional(f1, 1), ops.fractional(f2, 2))``: the power-law absorption's two
    operators, together where the operators can do them together (``ops.fractionals``: LFB
    blocks exchange both fields' overlaps at one meeting point of the processes, not two)."""
    both = getattr(ops, "fractionals", None)
    if both is not None:
        return both(f1, f2)
    return ops.fractional(f1, 1), ops.fractional(f2, 2)


def grad_update(
    ops: SpectralOps, p: jax.Array, updates: Sequence[SplitUpdate]
) -> tuple[jax.Array, ...]:
    """``updates[a]`` applied with ``ops.grad(p)[a]``, inside the gradient's FFTW calls
    (:func:`fuses_updates` must hold): each component's update is done on each plane as the
    plane is transformed, on all threads, and no gradient component is written to memory.
    Each component overwrites its old field (XLA copies one first if it is still needed)."""
    assert fuses_updates(ops, p) and len(updates) == p.ndim
    assert all(up.axis == a for a, up in enumerate(updates)), "one update per axis, in order"
    if type(ops) is not FourierOps:  # operators with their own way (LFB's planes first)
        return ops.grad_update(p, updates)  # type: ignore[attr-defined]
    assert isinstance(ops, FourierOps)
    return ops.backend.derivatives(p, ops.kappa, ops.shift_pos, [up.epilogue() for up in updates])


def div_update(
    ops: SpectralOps, u: Sequence[jax.Array], updates: Sequence[SplitUpdate]
) -> tuple[jax.Array, ...]:
    """``updates[a]`` applied with ``ops.div(u)[a]``, inside the divergence's FFTW calls
    (:func:`fuses_updates` must hold; one call per component, as :meth:`FourierOps.div`), each
    over its old field as in :func:`grad_update`."""
    assert fuses_updates(ops, u[0]) and len(updates) == len(u)
    assert all(up.axis == a for a, up in enumerate(updates)), "one update per axis, in order"
    if type(ops) is not FourierOps:  # operators with their own way (LFB's planes first)
        return ops.div_update(u, updates)  # type: ignore[attr-defined]
    return div_and_update(ops, u, updates)[1]  # each call's derivative left unread


def fuses_updates_apart(ops: Any, like: jax.Array) -> bool:
    """True when :func:`div_and_update` and :func:`divergence_density` can run on ``ops`` for
    fields like ``like``: a plain single-device :class:`FourierOps` whose backend fuses updates
    (:func:`fuses_updates`)."""
    return type(ops) is FourierOps and fuses_updates(ops, like)


def div_and_update(
    ops: SpectralOps, u: Sequence[jax.Array], updates: Sequence[SplitUpdate]
) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:  # fmt: skip
    """``(ops.div(u), updated)``: each component's derivative and ``updates[a]`` applied with
    it, both made in the divergence's FFTW calls (:func:`fuses_updates_apart` must hold), so no
    separate pass reads the derivatives to update the fields (the absorbing step needs both:
    the densities and ``rho0 div u``). Each update overwrites its old field (XLA copies it
    first if it is still needed)."""
    assert fuses_updates_apart(ops, u[0]) and len(updates) == len(u)
    assert all(up.axis == a for a, up in enumerate(updates)), "one update per axis, in order"
    assert isinstance(ops, FourierOps)
    be = ops.backend
    pairs = [
        be.operator_updated(ua, ops.kappa, a, s, up.epilogue())
        for a, (ua, s, up) in enumerate(zip(u, ops.shift_neg, updates))
    ]
    return tuple(d for d, _ in pairs), tuple(r for _, r in pairs)


def divergence_density(
    ops: SpectralOps, u: Sequence[jax.Array], updates: Sequence[SplitUpdate],
    rho0: jax.typing.ArrayLike, nonlinear: bool = False, src: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, tuple[jax.Array, ...]]:  # fmt: skip
    """``(rho0 div u, sum_a updated_a, updated)``: the density updates of
    :func:`div_and_update` (one scale and field for all components) with the two sums the
    absorbing equation of state reads, in one backend call that writes no derivative
    (:func:`fuses_updates_apart` must hold). ``nonlinear``: updates of scale ``dt`` and no field
    whose coefficient is ``dt (2 sum_a old_a + rho0)``, the nonlinear factor made in the call.
    ``src``: a grid added to every updated field before the sum (an additive pressure source).
    Each update overwrites its old field."""
    assert fuses_updates_apart(ops, u[0]) and len(updates) == len(u)
    assert all(up.axis == a for a, up in enumerate(updates)), "one update per axis, in order"
    assert isinstance(ops, FourierOps)
    epis = [up.epilogue() for up in updates]
    be = ops.backend
    return be.divergence_updated(u, ops.kappa, ops.shift_neg, epis, rho0, nonlinear, src)


def fuses_axis_updates(ops: Any, like: Any) -> bool:
    """True when :func:`axis_update` can run on ``ops`` for fields like ``like``: a plain
    single-device :class:`FourierOps` whose backend fuses updates (:func:`fuses_updates`) and
    has its own single-axis kernel for such fields (FFTW, 3-D float32). ``like``: an array or
    a ``jax.ShapeDtypeStruct``."""
    return type(ops) is FourierOps and fuses_updates(ops, like) and ops.backend.axis_kernel(like)


def axis_update(
    ops: FourierOps, srcs: Sequence[jax.Array], axis: int, shift: int, targets: Sequence[Any],
    after: Sequence[jax.Array] = (),
) -> list[jax.Array]:  # fmt: skip
    """Split-field updates from the derivatives of ``srcs`` along ``axis`` (``shift`` as in
    :meth:`FourierOps.diffs`), made inside the backend's call
    (:func:`sonotile.fft.fftw.axis_update`: ``targets`` are ``(old, m, ((source, G), ...))``;
    the call waits for the arrays ``after``); :func:`fuses_axis_updates` must hold."""
    assert fuses_axis_updates(ops, srcs[0])
    vec = (ops.shift_pos if shift > 0 else ops.shift_neg)[axis]
    return ops.backend.axis_update(srcs, axis, vec, targets, after)
