"""XLA's FFT as an FFT backend (:class:`sonotile.fft.backend.Backend`): ``jnp.fft``, DUCC on
CPUs and cuFFT on GPUs; every dtype, rank and device."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from sonotile.fft import dtt
from sonotile.fft.interface import AxisVec, Epilogue


def real_scale(F: jax.Array, k: jax.Array) -> jax.Array:
    """``F * k`` for a complex spectrum ``F`` and a real operator ``k``, component-wise.

    ``complex * real`` makes XLA convert ``k`` to a complex array (hoisted out of the time
    loop: a second, twice as large copy of every real operator, read at 8 bytes per point);
    scaling the real and imaginary parts reads the real operator as stored. Same values.
    """
    return lax.complex(F.real * k, F.imag * k)


def _half(vec: jax.Array, axis: int, like: jax.Array) -> jax.Array:
    """The first ``n // 2 + 1`` entries of ``vec`` (1-D, or broadcastable along ``axis``) along
    ``axis`` of ``like`` (an ``rfft`` spectrum's bins: its Nyquist entry has the same real
    value at ``-pi/d``)."""
    if vec.ndim != like.ndim:
        vec = jnp.reshape(vec, [-1 if a == axis else 1 for a in range(like.ndim)])
    return lax.slice_in_dim(vec, 0, like.shape[axis] // 2 + 1, axis=axis)


def details() -> dict[str, str]:
    """Where XLA's FFT ran, for an output's provenance: ``xla_fft`` (jaxlib's version and the
    platform)."""
    import jaxlib

    return {"xla_fft": f"jaxlib {jaxlib.__version__} on {jax.default_backend()}"}


@dataclass(frozen=True)
class XlaBackend:
    """XLA's FFT (see the module docstring): spectra in memory between the transforms."""

    name: str = "xla"
    fuses_updates: bool = False
    slab_kernels: bool = False

    def native(self, like: jax.Array) -> bool:
        return True

    def fused(self, like: jax.Array) -> bool:
        return False

    def _scaled(self, F: jax.Array, op: jax.Array | None) -> jax.Array:
        return F if op is None else real_scale(F, op)

    def derivatives(
        self, f: jax.Array, op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue | None] | None = None,
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        assert not epilogues or all(e is None for e in epilogues), "xla: no fused updates"
        P = self._scaled(self.rfftn(f), op)
        return tuple(self.irfftn(P * v, f.shape).astype(f.dtype) for v in vecs)

    def operator(
        self, f: jax.Array, op: jax.Array | None, axis: int | None = None,
        vec: jax.Array | None = None, epilogue: Epilogue | None = None,
    ) -> jax.Array:  # fmt: skip
        assert epilogue is None, "xla: no fused updates"
        F = self._scaled(self.rfftn(f), op)
        return self.irfftn(F if vec is None else F * vec, f.shape).astype(f.dtype)

    def operator_updated(
        self, f: jax.Array, op: jax.Array | None, axis: int | None, vec: jax.Array | None,
        epilogue: Epilogue,
    ) -> tuple[jax.Array, jax.Array]:  # fmt: skip
        raise AssertionError("xla: no fused updates")

    def divergence_updated(
        self, u: Sequence[jax.Array], op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue], rho0: jax.typing.ArrayLike, nonlinear: bool = False,
        src: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array, tuple[jax.Array, ...]]:  # fmt: skip
        raise AssertionError("xla: no fused updates")

    def trig_operator(self, f: jax.Array, op: jax.Array, kind: str) -> jax.Array:
        return dtt.inverse(op * dtt.forward(f, kind), kind)

    def operator_sum(
        self, xs: Sequence[jax.Array], op: jax.Array | None, vecs: Sequence[jax.Array]
    ) -> jax.Array:  # fmt: skip
        total = sum((self.rfftn(x) * v for x, v in zip(xs, vecs)), jnp.zeros((), jnp.complex64))
        return self.irfftn(self._scaled(total, op), xs[0].shape).astype(xs[0].dtype)

    def two_operators(
        self, f: jax.Array, op: jax.Array | None, outs: Sequence[AxisVec], op2: jax.Array
    ) -> list[jax.Array]:  # fmt: skip
        F = self.rfftn(f)
        P = self._scaled(F, op)
        got = [self.irfftn(P if v is None else P * v, f.shape) for _, v in outs]
        return [g.astype(f.dtype) for g in (*got, self.irfftn(real_scale(F, op2), f.shape))]

    def operators(
        self, xs: Sequence[jax.Array], op: jax.Array | None,
        outs: Sequence[tuple[int, int | None, jax.Array | None]],
    ) -> list[jax.Array]:  # fmt: skip
        specs = [self._scaled(self.rfftn(x), op) for x in xs]
        return [
            self.irfftn(specs[s] if v is None else specs[s] * v, xs[s].shape).astype(xs[s].dtype)
            for s, _, v in outs
        ]

    def along_axis(
        self, xs: Sequence[jax.Array], axis: int, vecs: Sequence[jax.Array]
    ) -> list[jax.Array]:  # fmt: skip
        out = []
        for x in xs:
            n, F = x.shape[axis], self.rfft(x, axis)
            out += [self.irfft(F * _half(v, axis, x), n, axis).astype(x.dtype) for v in vecs]
        return out

    def axis_kernel(self, like: jax.Array) -> bool:
        return False

    def axis_operators(
        self, xs: Sequence[jax.Array], outs: Sequence[tuple[int, int, jax.Array]]
    ) -> list[jax.Array]:  # fmt: skip
        return [self.along_axis([xs[s]], a, [v])[0] for s, a, v in outs]

    def axis_update(
        self, srcs: Sequence[jax.Array], axis: int, vec: jax.Array, targets: Sequence[Any],
        after: Sequence[jax.Array] = (),
    ) -> list[jax.Array]:  # fmt: skip
        raise NotImplementedError("xla: no fused single-axis updates (axis_kernel is False)")

    def rfftn(self, x: jax.Array) -> jax.Array:
        return jnp.fft.rfftn(x)

    def irfftn(self, X: jax.Array, shape: Sequence[int]) -> jax.Array:
        return jnp.fft.irfftn(X, s=tuple(shape))

    def rfft(self, x: jax.Array, axis: int) -> jax.Array:
        return jnp.fft.rfft(x, axis=axis)

    def irfft(self, X: jax.Array, n: int, axis: int) -> jax.Array:
        return jnp.fft.irfft(X, n=n, axis=axis)

    def fft(self, X: jax.Array, axis: int) -> jax.Array:
        return jnp.fft.fft(X, axis=axis)

    def ifft(self, X: jax.Array, axis: int) -> jax.Array:
        return jnp.fft.ifft(X, axis=axis)

    def keep(self, x: jax.Array) -> jax.Array:
        return x

    def keep_all(self, xs: Sequence[jax.Array]) -> list[jax.Array]:
        return list(xs)

    def prepare(self, shape: tuple[int, ...]) -> None:
        return None

    def describe(self) -> dict[str, str]:
        import jaxlib

        return {"xla_fft": f"jaxlib {jaxlib.__version__} on {jax.default_backend()}"}


#: The backend object (:func:`sonotile.fft.backend.get`)
BACKEND = XlaBackend()


@dataclass(frozen=True)
class XlaUnnormalised:
    """``jnp.fft`` with the unnormalised inverse (``norm="forward"``: the forward unscaled,
    the inverse without its ``1/N``)."""

    name: str = "xla"

    def forward(self, x: jax.Array, rank: int) -> jax.Array:
        return jnp.fft.rfftn(x, axes=tuple(range(x.ndim - rank, x.ndim)))

    def inverse(self, X: jax.Array, shape: Sequence[int]) -> jax.Array:
        axes = tuple(range(X.ndim - len(shape), X.ndim))
        real = jnp.float32 if X.dtype == jnp.complex64 else jnp.float64
        return jnp.fft.irfftn(X, s=tuple(shape), axes=axes, norm="forward").astype(real)


#: ``jnp.fft`` with the unnormalised inverse (:data:`sonotile.fft.batched.XLA`)
UNNORMALISED = XlaUnnormalised()
