"""The FFT backend interface (:class:`Backend`, :class:`SlabKernels`): what the spectral
operators and the decompositions ask of an FFT. How backends are chosen and what an operator
is: :mod:`sonotile.fft.backend`, which re-exports these protocols."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import jax

#: ``(mode, old, m, s, G)``: a split-field update applied to an operator's real output ``d``
#: as it is made, ``m (m old - coef d)`` with ``coef`` = ``s`` (mode 1), ``s G`` (mode 2) or
#: ``s / mean(G)`` (mode 3: ``G``'s mean with the next point along the output's axis, the last
#: point ``G`` itself); ``m`` a 1-D real vector along that axis, ``s`` a scalar, ``old`` and
#: ``G`` grids of the output's shape. Only backends with ``fuses_updates`` take them.
Epilogue = tuple[int, "jax.Array", "jax.Array", "jax.typing.ArrayLike", "jax.Array | None"]

#: ``(axis, vector)`` of one output of an operator (``axis`` None: no vector)
AxisVec = tuple["int | None", "jax.Array | None"]


class Backend(Protocol):
    """One FFT backend (see the module docstring). ``name``: its key for :func:`get`;
    ``fuses_updates``: derivative outputs can carry :data:`Epilogue` updates;
    ``slab_kernels``: it also has the :class:`SlabKernels`."""

    name: str
    fuses_updates: bool
    slab_kernels: bool

    def native(self, like: jax.Array) -> bool:
        """True when this backend's own transforms take fields like ``like``."""
        ...

    def fused(self, like: jax.Array) -> bool:
        """True when an operator on fields like ``like`` is one call (no spectrum in memory)."""
        ...

    def derivatives(
        self, f: jax.Array, op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue | None] | None = None,
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        """``irfftn(rfftn(f) * op * vecs[a][k_a])`` for each grid axis ``a`` (a gradient), one
        forward transform shared; ``epilogues[a]`` applied to output ``a``."""
        ...

    def operator(
        self, f: jax.Array, op: jax.Array | None, axis: int | None = None,
        vec: jax.Array | None = None, epilogue: Epilogue | None = None,
    ) -> jax.Array:  # fmt: skip
        """``irfftn(rfftn(f) * op * vec[k_axis])`` (``op`` / ``vec`` None: left out)."""
        ...

    def operator_updated(
        self, f: jax.Array, op: jax.Array | None, axis: int | None, vec: jax.Array | None,
        epilogue: Epilogue,
    ) -> tuple[jax.Array, jax.Array]:  # fmt: skip
        """``d = operator(f, op, axis, vec)`` and ``epilogue`` applied with it, both kept (only
        backends with ``fuses_updates``)."""
        ...

    def divergence_updated(
        self, u: Sequence[jax.Array], op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue], rho0: jax.typing.ArrayLike, nonlinear: bool = False,
        src: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array, tuple[jax.Array, ...]]:  # fmt: skip
        """``(rho0 * sum_a d_a, sum_a updated_a, updated)``, ``d_a = operator(u[a], op, a,
        vecs[a])`` and ``updated_a`` its epilogue (one scale and field for all; ``nonlinear``:
        scalar epilogues whose coefficient is ``s (2 sum_a old_a + rho0)``; ``src``: a grid added to
        every update; only backends with ``fuses_updates``)."""
        ...

    def operator_sum(
        self, xs: Sequence[jax.Array], op: jax.Array | None, vecs: Sequence[jax.Array]
    ) -> jax.Array:  # fmt: skip
        """``sum_a irfftn(rfftn(xs[a]) * op * vecs[a][k_a])``: one inverse transform."""
        ...

    def trig_operator(self, f: jax.Array, op: jax.Array, kind: str) -> jax.Array:
        """``T^-1(op T f)``, ``T`` the DCT-I (``kind`` "dct1") or DST-I ("dst1") along every
        axis (:mod:`sonotile.fft.dtt`), ``op`` real and shaped like ``f``."""
        ...

    def two_operators(
        self, f: jax.Array, op: jax.Array | None, outs: Sequence[AxisVec], op2: jax.Array
    ) -> list[jax.Array]:  # fmt: skip
        """``irfftn(rfftn(f) * op * vec[k_axis])`` for each ``(axis, vec)`` of ``outs`` (``(None,
        None)``: no vector), then ``irfftn(rfftn(f) * op2)`` (``op2`` real on the half spectrum,
        even along axis 0 as ``op``): one forward transform for all (a gradient with a smoothing,
        a smoothing with a Laplacian)."""
        ...

    def operators(
        self, xs: Sequence[jax.Array], op: jax.Array | None,
        outs: Sequence[tuple[int, int | None, jax.Array | None]],
    ) -> list[jax.Array]:  # fmt: skip
        """Output ``o`` of ``outs = ((src, axis, vec), ...)`` is ``irfftn(rfftn(xs[src]) * op *
        vec[k_axis])`` (``vec`` along grid ``axis`` in the spectrum's layout: its half length
        on the last axis; ``axis`` and ``vec`` None: none): each input's forward transform
        shared by its outputs. Differentiable in ``xs`` (reverse mode)."""
        ...

    def along_axis(
        self, xs: Sequence[jax.Array], axis: int, vecs: Sequence[jax.Array]
    ) -> list[jax.Array]:  # fmt: skip
        """``irfft(rfft(x, axis) * vec, axis)`` for each ``x`` of ``xs``, each ``vec`` of
        ``vecs`` (broadcastable along ``axis``: ``n`` or ``n // 2 + 1`` values, the first
        ``n // 2 + 1`` used), in the order ``[x0 vec0, x0 vec1, ..., x1 vec0, ...]``: 1-D
        transforms only (derivatives along one axis, half-cell shifts)."""
        ...

    def axis_kernel(self, like: jax.Array) -> bool:
        """True when :meth:`axis_operators` on fields like ``like`` is this backend's own kernel
        (1-D transforms in one call, no transposes: FFTW, rank 3, float32)."""
        ...

    def axis_operators(
        self, xs: Sequence[jax.Array], outs: Sequence[tuple[int, int, jax.Array]]
    ) -> list[jax.Array]:  # fmt: skip
        """Output ``o`` of ``outs = ((src, axis, vec), ...)`` is :meth:`along_axis` of
        ``xs[src]`` with ``vec``; differentiable (reverse mode)."""
        ...

    def axis_update(
        self, srcs: Sequence[jax.Array], axis: int, vec: jax.Array, targets: Sequence[Any],
        after: Sequence[jax.Array] = (),
    ) -> list[jax.Array]:  # fmt: skip
        """Split-field updates made from :meth:`axis_operators` derivatives inside the call
        (where :meth:`axis_kernel` holds; see :func:`sonotile.fft.fftw.axis_update`)."""
        ...

    def rfftn(self, x: jax.Array) -> jax.Array: ...

    def irfftn(self, X: jax.Array, shape: Sequence[int]) -> jax.Array: ...

    def rfft(self, x: jax.Array, axis: int) -> jax.Array: ...

    def irfft(self, X: jax.Array, n: int, axis: int) -> jax.Array: ...

    def fft(self, X: jax.Array, axis: int) -> jax.Array: ...

    def ifft(self, X: jax.Array, axis: int) -> jax.Array: ...

    def keep(self, x: jax.Array) -> jax.Array:
        """``x`` materialised here, a fusion boundary where the backend needs one (FFTW:
        XLA:CPU otherwise fuses a shared value into each consumer); else ``x``."""
        ...

    def keep_all(self, xs: Sequence[jax.Array]) -> list[jax.Array]: ...

    def prepare(self, shape: tuple[int, ...]) -> None:
        """Plan the transforms of a real grid ``shape`` now (a no-op where nothing is planned)."""
        ...

    def describe(self) -> dict[str, str]:
        """What this backend is, for an output's provenance."""
        ...


class SlabKernels(Protocol):
    """The plane-by-plane kernels the slab decompositions use where a backend has them
    (``Backend.slab_kernels`` True: FFTW's ``rfft_split``, ``irfft_join``, ``xpass``,
    ``xpass_halo``, ``planes_c2r``, ``rfft_axes``, ``plane_source``; see
    :mod:`sonotile.fft.fftw`)."""

    slab_kernels: bool

    def rfft_split(self, x: jax.Array, axes: Sequence[int], split_axis: int, pieces: int,
                   keep: int | None = None) -> Any: ...  # fmt: skip

    def irfft_join(self, X: jax.Array, shape: Sequence[int], axes: Sequence[int],
                   split_axis: int, scale: float, axis: int | None = None,
                   vec: jax.Array | None = None) -> jax.Array: ...  # fmt: skip

    def xpass(self, specs: Sequence[jax.Array], shape: Sequence[int], *args: Any,
              **kw: Any) -> list[Any]: ...  # fmt: skip

    def xpass_halo(self, mid: jax.Array, halos: tuple[jax.Array, jax.Array], *args: Any,
                   **kw: Any) -> list[jax.Array]: ...  # fmt: skip

    def planes_c2r(self, spec: jax.Array, shape: Sequence[int], *args: Any,
                   **kw: Any) -> jax.Array: ...  # fmt: skip

    def rfft_axes(self, x: jax.Array, axes: Sequence[int]) -> jax.Array: ...

    def plane_source(self, kernel: jax.Array, plane: jax.Array,
                     shape: Sequence[int]) -> jax.Array: ...  # fmt: skip
