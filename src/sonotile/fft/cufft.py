"""cuFFT through XLA's FFI: batched real transforms on a GPU, the inverse unnormalised.

The custom calls (``csrc/cufft_ffi.cu``: ``sonotile_cufft_forward`` / ``sonotile_cufft_inverse``,
platform CUDA) are built by ``benchmarks/gpu/build_cufft.sh`` with the machine's nvcc and JAX's
FFI headers; this module loads the library named by the setting ``cufft_lib``
(``SONOTILE_CUFFT_LIB``, :class:`sonotile.base.config.Settings`) and registers them once per
process. Nothing is compiled or loaded on import.

Two faces:

* :data:`BATCHED` (:class:`sonotile.fft.batched.BatchedFFT`): ``forward`` / ``inverse`` over
  the last 1-3 axes of a buffer, the leading axes a batch of fields transformed in one call
  (under ``jax.vmap`` the mapped axis joins that batch); the inverse leaves out ``1/N``.
  Differentiable: derivatives go through XLA's FFT (:func:`with_portable_derivatives`).
* :data:`BACKEND` (:class:`sonotile.fft.interface.Backend`): the operators' backend; XLA's
  backend with its whole-grid transforms replaced by cuFFT's (the ``1/N`` folded into the
  spectrum's multiply, a gradient's components inverted in one batched call); 1-D transforms
  stay XLA's.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.base import config
from sonotile.fft.interface import Epilogue
from sonotile.fft.xla import UNNORMALISED, XlaBackend

#: the environment variable naming the built library (read as ``Settings.cufft_lib``)
ENV = "SONOTILE_CUFFT_LIB"
_TARGETS = ("sonotile_cufft_forward", "sonotile_cufft_inverse")
#: JAX's names of the platforms the calls run on
PLATFORMS = ("gpu", "cuda")
_lock = threading.Lock()
_loaded: dict[str, object] = {}


def library_path() -> str | None:
    """The library ``Settings.cufft_lib`` (``SONOTILE_CUFFT_LIB``) names, or None."""
    return config.current().cufft_lib or None


def load() -> str | None:
    """Load the library and register its custom calls once per process; None when that
    worked, else why not (no path set, no such file, the library does not load; a library of
    another path loaded already)."""
    with _lock:
        path = library_path()
        if "lib" in _loaded and _loaded["path"] != path:
            return f"{ENV}={path}: the library {_loaded['path']} is loaded in this process"
        if _loaded.get("path", False) == path:
            return _loaded["why"]  # type: ignore[return-value]
        why = None
        if path is None:
            why = f"{ENV} is not set (build with benchmarks/gpu/build_cufft.sh)"
        elif not os.path.exists(path):
            why = f"{ENV}={path}: no such file"
        else:
            try:
                lib = ctypes.CDLL(path)
                for name in _TARGETS:
                    jax.ffi.register_ffi_target(
                        name, jax.ffi.pycapsule(getattr(lib, name)), platform="CUDA"
                    )
                _loaded["lib"] = lib
            except (OSError, AttributeError) as e:
                why = f"{ENV}={path}: {e}"
        _loaded["path"], _loaded["why"] = path, why
        return why


def unavailable() -> str | None:
    """None where the cuFFT calls can run (a GPU is JAX's default backend and the library
    loaded), else why not."""
    if jax.default_backend() not in PLATFORMS:
        return f"JAX's default backend is {jax.default_backend()!r}, not a GPU"
    return load()


def available() -> bool:
    """Whether the cuFFT calls can run in this process (:func:`unavailable`)."""
    return unavailable() is None


def named() -> bool:
    """Whether a library is named (``SONOTILE_CUFFT_LIB``): ``auto`` considers cuFFT only then."""
    return library_path() is not None


def details() -> dict[str, str]:
    """Where the transforms ran, for an output's provenance: ``cufft`` (the library, plans)."""
    return BACKEND.describe()


def plans() -> int:
    """How many cuFFT plans this process has cached (0 before the library is loaded)."""
    lib = _loaded.get("lib")
    return int(lib.sonotile_cufft_plans()) if lib is not None else 0  # type: ignore[attr-defined]


def _complex(dtype: jax.typing.DTypeLike) -> jnp.dtype:
    return jnp.dtype(jnp.complex64 if jnp.dtype(dtype) == jnp.float32 else jnp.complex128)


def _real(dtype: jax.typing.DTypeLike) -> jnp.dtype:
    return jnp.dtype(jnp.float32 if jnp.dtype(dtype) == jnp.complex64 else jnp.float64)


def _check_rank(rank: int, ndim: int) -> None:
    if not 1 <= rank <= min(3, ndim):
        raise ValueError(f"cuFFT transform rank {rank}: expected 1-3 and at most {ndim}")


def with_portable_derivatives(call: Callable, portable: Callable) -> Callable:
    """``call(x, static)`` (a custom call: no derivative rules of its own) made differentiable
    as the linear map it is: its tangents, and by transposition its cotangents, go through
    ``portable(t, static)``, XLA's transform of the same convention. Gradients through the
    cuFFT calls (``make_simulator``) thus run the primal on cuFFT and the derivatives on XLA's
    FFT."""
    f = jax.custom_jvp(call, nondiff_argnums=(1,))
    f.defjvp(lambda static, xs, ts: (call(xs[0], static), portable(ts[0], static)))
    return f


def _forward_call(x: jax.Array, rank: int) -> jax.Array:
    half = (*x.shape[:-1], x.shape[-1] // 2 + 1)
    out = jax.ShapeDtypeStruct(half, _complex(x.dtype))
    call = jax.ffi.ffi_call("sonotile_cufft_forward", out, vmap_method="broadcast_all")
    return call(x, rank=np.int32(rank))


def _inverse_call(X: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    rank = len(shape)
    real = jax.ShapeDtypeStruct((*X.shape[: X.ndim - rank], *shape), _real(X.dtype))
    spent = jax.ShapeDtypeStruct(X.shape, X.dtype)  # X's buffer, overwritten by cuFFT
    call = jax.ffi.ffi_call(
        "sonotile_cufft_inverse", (real, spent), vmap_method="broadcast_all",
        input_output_aliases={0: 1},
    )  # fmt: skip
    return call(X, rank=np.int32(rank))[0]


_forward = with_portable_derivatives(_forward_call, UNNORMALISED.forward)
_inverse = with_portable_derivatives(_inverse_call, UNNORMALISED.inverse)


@dataclass(frozen=True)
class CufftBatched:
    """cuFFT's batched transforms (see the module docstring)."""

    name: str = "cufft"

    def forward(self, x: jax.Array, rank: int) -> jax.Array:
        _check_rank(rank, x.ndim)
        return _forward(x, rank)

    def inverse(self, X: jax.Array, shape: Sequence[int]) -> jax.Array:
        rank = len(shape)
        _check_rank(rank, X.ndim)
        if tuple(X.shape[X.ndim - rank : -1]) != tuple(shape[:-1]) or (
            X.shape[-1] != shape[-1] // 2 + 1
        ):
            raise ValueError(f"spectrum {X.shape} is not the half spectrum of a {shape} grid")
        return _inverse(X, tuple(int(n) for n in shape))


#: cuFFT as a :class:`sonotile.fft.batched.BatchedFFT`
BATCHED = CufftBatched()


@dataclass(frozen=True)
class CufftBackend(XlaBackend):
    """The operators' backend on cuFFT (see the module docstring); float32 / float64 fields of
    rank 1-3 (others: XLA's, through :func:`sonotile.fft.backend.for_array`)."""

    name: str = "cufft"

    def native(self, like: jax.Array) -> bool:
        return like.dtype in (jnp.float32, jnp.float64) and 1 <= like.ndim <= 3

    def derivatives(
        self, f: jax.Array, op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue | None] | None = None,
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        assert not epilogues or all(e is None for e in epilogues), "cufft: no fused updates"
        P = self._scaled(BATCHED.forward(f, f.ndim), op) * (1.0 / f.size)
        out = BATCHED.inverse(jnp.stack([P * v for v in vecs]), f.shape)
        return tuple(out[a] for a in range(len(vecs)))

    def rfftn(self, x: jax.Array) -> jax.Array:
        return BATCHED.forward(x, x.ndim)

    def irfftn(self, X: jax.Array, shape: Sequence[int]) -> jax.Array:
        # 1/N on the spectrum: XLA fuses it into the multiply that made X
        return BATCHED.inverse(X * (1.0 / int(np.prod(shape))), shape)

    def describe(self) -> dict[str, str]:
        return {"cufft": f"{library_path()} (cuFFT through XLA's FFI), {plans()} plans"}


#: The backend object (for :func:`sonotile.fft.backend.get`)
BACKEND = CufftBackend()
