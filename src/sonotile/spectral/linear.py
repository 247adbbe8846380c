"""Derivative rules for the FFTW-backed spectral operators.

XLA's FFT is differentiable as it stands; FFTW's custom calls (:mod:`sonotile.fft.fftw`) are
opaque to JAX. Every operator of :class:`~sonotile.spectral.operators.FourierOps` is linear in
its field argument, ``A x = irfftn(K rfftn x)`` with a kernel ``K`` that is the half of a
Hermitian-symmetric spectrum (the staggered shift ``i k exp(+-i k d/2)`` is real at Nyquist),
so its adjoint is the spectral operator with kernel ``conj(K)`` and can itself run on FFTW:

* ``grad`` (kernel ``kappa i k_a exp(+i k_a d/2)``): the adjoint sums the per-axis results of a
  ``div`` whose shift vectors are ``conj(shift_pos)`` (``div_sum``: one FFTW call,
  :func:`sonotile.fft.fftw.conv_sum`), and the adjoint of ``div_sum`` is a ``grad`` with
  ``conj(shift_neg)``;
* ``div`` (kernel ``kappa i k_a exp(-i k_a d/2)`` on component a): a ``div`` with
  ``conj(shift_neg)``;
* ``fractional``, ``filter_source`` (real, even kernels) and ``keep`` (identity): self-adjoint.

:class:`AdjointOps` wraps a :class:`FourierOps` on the FFTW backend and calls each operator
through one JAX primitive, ``sonotile_spectral``, which lowers to exactly the custom calls the
wrapped operator makes (no cost in the forward pass) and has a JVP rule (the operator applied to
the tangent), a transpose rule (the adjoint above, again on FFTW) and a batching rule (one call
per batch member, :func:`jax.lax.map`). The operator constants are not differentiable inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.tree_util import PyTreeDef

from sonotile.spectral.operators import FourierOps

spectral_p = Primitive("sonotile_spectral")
spectral_p.multiple_results = True

#: operator name -> ``(ops, xs) -> outputs``: the wrapped operator's own implementation
FORWARD: dict[str, Callable[[FourierOps, list[jax.Array]], Sequence[jax.Array]]] = {
    "grad": lambda ops, xs: ops.grad(xs[0]),
    "div": lambda ops, xs: ops.div(tuple(xs)),
    "div_sum": lambda ops, xs: (ops.div_sum(tuple(xs)),),
    "fractional1": lambda ops, xs: (ops.fractional(xs[0], 1),),
    "fractional2": lambda ops, xs: (ops.fractional(xs[0], 2),),
    "filter": lambda ops, xs: (ops.filter_source(xs[0]),),
    "keep": lambda ops, xs: (ops.keep(xs[0]),),
}


def apply(kind: str, ops: FourierOps, xs: Sequence[jax.Array]) -> list[jax.Array]:
    """``kind`` of :data:`FORWARD` applied by ``ops`` to the fields ``xs``, as the primitive."""
    leaves, treedef = jax.tree_util.tree_flatten(ops)
    out = spectral_p.bind(*xs, *leaves, kind=kind, treedef=treedef, n_x=len(xs))
    return list(out)


def _ops_of(consts: Sequence[Any], treedef: PyTreeDef) -> FourierOps:
    return jax.tree_util.tree_unflatten(treedef, consts)


def _impl(*args: jax.Array, kind: str, treedef: PyTreeDef, n_x: int) -> list[jax.Array]:
    return list(FORWARD[kind](_ops_of(args[n_x:], treedef), list(args[:n_x])))


def _abstract(
    *avals: jax.core.ShapedArray, kind: str, treedef: PyTreeDef, n_x: int
) -> list[jax.core.ShapedArray]:
    x = avals[0]
    n_out = {"grad": len(_ops_of(avals[n_x:], treedef).shift_pos), "div_sum": 1}.get(kind, n_x)
    return [jax.core.ShapedArray(x.shape, x.dtype) for _ in range(n_out)]


def _jvp(
    primals: Sequence[jax.Array],
    tangents: Sequence[Any],
    *,
    kind: str,
    treedef: PyTreeDef,
    n_x: int,
) -> tuple[Sequence[jax.Array], Sequence[Any]]:
    if any(type(t) is not ad.Zero for t in tangents[n_x:]):
        raise TypeError("sonotile_spectral: the operator constants are not differentiable")
    out = spectral_p.bind(*primals, kind=kind, treedef=treedef, n_x=n_x)
    tx = tangents[:n_x]
    if all(type(t) is ad.Zero for t in tx):
        # JAX calls a JVP rule only with some tangent non-zero; kept for completeness
        # (jax.typeof from JAX 0.4.36 on, jax.core.get_aval before it and gone in 0.10)
        typeof = getattr(jax, "typeof", None) or getattr(jax.core, "get_aval")  # noqa: B009
        return out, [ad.Zero(typeof(o).to_tangent_aval()) for o in out]
    tx = [ad.instantiate_zeros(t) for t in tx]
    return out, spectral_p.bind(*tx, *primals[n_x:], kind=kind, treedef=treedef, n_x=n_x)


def adjoint(kind: str, ops: FourierOps, cts: list) -> list:
    """The adjoint of operator ``kind`` applied to the cotangents ``cts`` (one per output)."""
    if kind == "grad":  # the components' adjoints summed, in one call on FFTW
        t = replace(ops, shift_neg=tuple(jnp.conj(s) for s in ops.shift_pos))
        return apply("div_sum", t, cts)
    if kind == "div_sum":
        return apply("grad", replace(ops, shift_pos=tuple(jnp.conj(s) for s in ops.shift_neg)), cts)
    if kind == "div":
        t = replace(ops, shift_neg=tuple(jnp.conj(s) for s in ops.shift_neg))
        return apply("div", t, cts)
    return apply(kind, ops, cts)


def _transpose(
    cts: Sequence[Any], *args: Any, kind: str, treedef: PyTreeDef, n_x: int
) -> list[jax.Array | None]:
    consts = args[n_x:]
    if any(ad.is_undefined_primal(c) for c in consts):
        raise TypeError("sonotile_spectral: the operator constants are not linear inputs")
    cts = [ad.instantiate_zeros(c) for c in cts]
    xs_bar = adjoint(kind, _ops_of(consts, treedef), cts)
    return [b if ad.is_undefined_primal(x) else None for b, x in zip(xs_bar, args[:n_x])] + [
        None
    ] * len(consts)


def _batch(
    args: Sequence[jax.Array],
    dims: Sequence[int | None],
    *,
    kind: str,
    treedef: PyTreeDef,
    n_x: int,
) -> tuple[list[jax.Array], list[int]]:
    if any(d is not None for d in dims[n_x:]):
        raise NotImplementedError("sonotile_spectral: batched operator constants")
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    xs = [
        jnp.broadcast_to(a, (size, *a.shape)) if d is None else jnp.moveaxis(a, d, 0)
        for a, d in zip(args[:n_x], dims[:n_x])
    ]
    consts = args[n_x:]

    def one(xb: list[jax.Array]) -> Sequence[jax.Array]:
        return spectral_p.bind(*xb, *consts, kind=kind, treedef=treedef, n_x=n_x)

    out = lax.map(one, xs)
    return list(out), [0] * len(out)


spectral_p.def_impl(_impl)
spectral_p.def_abstract_eval(_abstract)
ad.primitive_jvps[spectral_p] = _jvp
ad.primitive_transposes[spectral_p] = _transpose
batching.primitive_batchers[spectral_p] = _batch
mlir.register_lowering(spectral_p, mlir.lower_fun(_impl, multiple_results=True))


def keep(f: jax.Array, fft: str) -> jax.Array:
    """``f`` materialised here (a fusion boundary, :meth:`FourierOps.keep`) on the FFTW backend
    ``fft``, through the primitive (so its tangent and its transpose are boundaries too); ``f``
    itself on other backends. Needs no operator arrays: usable inside derivative rules."""
    ops = FourierOps((), (), None, fft=fft)
    return apply("keep", ops, [f])[0] if ops.native(f) else f


@dataclass(frozen=True)
class Barrier:
    """:func:`keep` on a fixed backend as a function of the field alone (no traced values:
    a valid static argument of :func:`jax.custom_jvp`)."""

    fft: str

    def __call__(self, f: jax.Array) -> jax.Array:
        return keep(f, self.fft)


@jax.tree_util.register_pytree_node_class
@dataclass
class AdjointOps:
    """A :class:`FourierOps` whose FFTW operators JAX can differentiate (same results, same
    custom calls); operators on the XLA backend, and ``unstagger``, are passed through."""

    inner: FourierOps

    def tree_flatten(self) -> tuple[tuple[FourierOps], None]:
        return (self.inner,), None

    @classmethod
    def tree_unflatten(cls, aux: None, children: tuple[FourierOps]) -> AdjointOps:
        return cls(*children)

    def _wrapped(self, x: jax.Array) -> bool:
        return self.inner.native(x)

    def grad(self, p: jax.Array) -> tuple[jax.Array, ...]:
        return tuple(apply("grad", self.inner, [p])) if self._wrapped(p) else self.inner.grad(p)

    def div(self, u: Sequence[jax.Array]) -> tuple[jax.Array, ...]:
        if self._wrapped(u[0]):
            return tuple(apply("div", self.inner, list(u)))
        return self.inner.div(u)

    def fractional(self, f: jax.Array, which: int) -> jax.Array:
        if self._wrapped(f):
            return apply(f"fractional{which}", self.inner, [f])[0]
        return self.inner.fractional(f, which)

    def filter_source(self, s: jax.Array) -> jax.Array:
        return (
            apply("filter", self.inner, [s])[0] if self._wrapped(s) else self.inner.filter_source(s)
        )

    def keep(self, f: jax.Array) -> jax.Array:
        return apply("keep", self.inner, [f])[0] if self._wrapped(f) else self.inner.keep(f)

    def unstagger(self, u: jax.Array, axis: int) -> jax.Array:
        return self.inner.unstagger(u, axis)

    @property
    def barrier(self) -> Barrier:
        """A fusion boundary for derivative rules (see :func:`keep`)."""
        return Barrier(self.inner.fft)
