"""FFTW on the CPU as XLA custom calls: an FFT backend (:class:`FftwBackend`,
:class:`sonotile.fft.backend.Backend`) with fused spectral-operator kernels, float32 only.

The extension is built and loaded by :mod:`sonotile.fft.fftw_library`; its custom calls are
:mod:`sonotile.fft.fftw_ops` (whole operators, single-axis derivatives) and
:mod:`sonotile.fft.fftw_slabs` (planes, slabs, whole grids, fusion boundaries); this module
re-exports their public names. When the backend is used (CPU, float32, the extension
available) is :mod:`sonotile.fft.backend`'s choice.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sonotile.fft import interface
from sonotile.fft.fftw_library import (
    ConvOut,
    available,
    build,
    cache_dir,
    column_kernel,
    cpu_signature,
    default_threads,
    details,
    find_library,
    library_version,
    load,
    plan_effort,
    reason,
    reset,
    summary,
    threads,
    vector_width,
    versions,
)
from sonotile.fft.fftw_ops import (
    AxisTarget,
    axis_diff,
    axis_diff_vjp,
    axis_kernel,
    axis_update,
    conv,
    conv_sum,
    div_density,
    hermitian,
)
from sonotile.fft.fftw_slabs import (
    c2r,
    fft_axis,
    irfft_axes,
    irfft_join,
    keep,
    keep_all,
    plane_source,
    planes_c2r,
    prepare,
    r2c,
    r2r_operator,
    rfft_axes,
    rfft_split,
    xpass,
    xpass_halo,
)

if TYPE_CHECKING:  # jax is imported when a transform is first made
    import jax

Epilogue = interface.Epilogue
AxisVec = interface.AxisVec

__all__ = [
    "AxisTarget",
    "AxisVec",
    "BACKEND",
    "ConvOut",
    "Epilogue",
    "FftwBackend",
    "SEPARATE_UPDATES",
    "available",
    "axis_diff",
    "axis_kernel",
    "axis_update",
    "build",
    "c2r",
    "cache_dir",
    "column_kernel",
    "conv",
    "conv_sum",
    "cpu_signature",
    "div_density",
    "default_threads",
    "details",
    "fft_axis",
    "find_library",
    "hermitian",
    "irfft_axes",
    "irfft_join",
    "keep",
    "keep_all",
    "library_version",
    "load",
    "main",
    "plan_effort",
    "plane_source",
    "planes_c2r",
    "prepare",
    "r2c",
    "r2r_operator",
    "reason",
    "reset",
    "rfft_axes",
    "rfft_split",
    "summary",
    "threads",
    "vector_width",
    "versions",
    "xpass",
    "xpass_halo",
]


@dataclass(frozen=True)
class FftwBackend:
    """FFTW as an FFT backend (:class:`sonotile.fft.backend.Backend` and
    :class:`~sonotile.fft.backend.SlabKernels`): float32 fields of rank 1-3. On 2-D / 3-D grids
    an operator is one :func:`conv` call (plane transforms and one pass along the outer axis,
    the operator applied inside; a gradient's components after the first from the spectrum
    that pass leaves, :func:`planes_c2r`); on 1-D grids an :func:`r2c` call and a
    multiply-and-C2R call. Several inputs' outputs along any axes: one :func:`conv` call
    (differentiable, :func:`_conv_vjp`).
    ``fuses_updates``: derivative outputs take split-field updates (:data:`Epilogue`)."""

    name: str = "fftw"
    fuses_updates: bool = True
    slab_kernels: bool = True

    def native(self, like: jax.Array) -> bool:
        import jax.numpy as jnp

        return like.dtype == jnp.float32 and 1 <= like.ndim <= 3

    def fused(self, like: jax.Array) -> bool:
        return self.native(like) and like.ndim >= 2

    def derivatives(
        self, f: jax.Array, op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue | None] | None = None,
    ) -> tuple[jax.Array, ...]:  # fmt: skip
        epi = list(epilogues) if epilogues is not None else [None] * len(vecs)
        if not self.fused(f):
            assert all(e is None for e in epi), "fftw: updates on 2-D / 3-D grids only"
            spec = r2c(f)
            return tuple(c2r(spec, f.shape, op, v, axis=a) for a, v in enumerate(vecs))
        # the x component and the spectrum after the pass along x in one call, then each
        # other component from that spectrum: one derivative exists at a time; each update
        # over its old field
        outs: list[ConvOut] = [(0, 0, vecs[0]), (0, "spectrum", None)]
        apart = [epi[0] is not None, False]
        first, spec, *update = conv([f], op, outs, [epi[0], None], apart=apart)
        first = update[0] if update else first
        rest = [planes_c2r(spec, f.shape, a, v, epilogue=epi[a]) for a, v in enumerate(vecs) if a]
        return (first, *rest)

    def operator(
        self, f: jax.Array, op: jax.Array | None, axis: int | None = None,
        vec: jax.Array | None = None, epilogue: Epilogue | None = None,
    ) -> jax.Array:  # fmt: skip
        if self.fused(f) and epilogue is not None:  # an update over its old field
            return self.operator_updated(f, op, axis, vec, epilogue)[1]
        if self.fused(f):
            return conv([f], op, [(0, axis if vec is not None else None, vec)])[0]
        assert epilogue is None, "fftw: updates on 2-D / 3-D grids only"
        return c2r(r2c(f), f.shape, op, vec, axis=axis or 0)

    def operator_updated(
        self, f: jax.Array, op: jax.Array | None, axis: int | None, vec: jax.Array | None,
        epilogue: Epilogue,
    ) -> tuple[jax.Array, jax.Array]:  # fmt: skip
        assert self.fused(f), "fftw: updates on 2-D / 3-D grids only"
        out = (0, axis if vec is not None else None, vec)
        d, updated = conv([f], op, [out], [epilogue], apart=[True])
        return d, updated

    def divergence_updated(
        self, u: Sequence[jax.Array], op: jax.Array | None, vecs: Sequence[jax.Array],
        epilogues: Sequence[Epilogue], rho0: jax.typing.ArrayLike, nonlinear: bool = False,
        src: jax.Array | None = None,
    ) -> tuple[jax.Array, jax.Array, tuple[jax.Array, ...]]:  # fmt: skip
        """``(rho0 * sum_a d_a, sum_a updated_a, updated)``: each component's derivative
        ``d_a`` with its update (one scale and field for all; ``nonlinear``: the factor
        ``2 sum_a old_a + rho0`` made in the call; ``src`` added to each), in one call
        (:func:`div_density`; only with ``fuses_updates``)."""
        assert self.fused(u[0]), "fftw: updates on 2-D / 3-D grids only"
        return div_density(u, op, vecs, epilogues, rho0, nonlinear, src)

    def trig_operator(self, f: jax.Array, op: jax.Array, kind: str) -> jax.Array:
        from sonotile.fft import dtt

        scale = 1.0
        for n in f.shape:
            scale /= dtt.period(n, kind)
        return r2r_operator(f, op, kind, scale)

    def operator_sum(
        self, xs: Sequence[jax.Array], op: jax.Array | None, vecs: Sequence[jax.Array]
    ) -> jax.Array:  # fmt: skip
        assert self.fused(xs[0]), "fftw: summed operators on 2-D / 3-D grids"
        return conv_sum(list(xs), op, list(enumerate(vecs)))

    def two_operators(
        self, f: jax.Array, op: jax.Array | None, outs: Sequence[AxisVec], op2: jax.Array
    ) -> list[jax.Array]:  # fmt: skip
        if not self.fused(f):
            from sonotile.fft import xla

            return xla.BACKEND.two_operators(f, op, outs, op2)
        # outputs along x or with no vector from the call, the others (plane axes) from the
        # spectrum after the pass along x, one at a time (as ``derivatives``)
        direct = [o for o, (a, _) in enumerate(outs) if a is None or a == 0]
        planes = [o for o in range(len(outs)) if o not in direct]
        calls: list[ConvOut] = [(0, outs[o][0], outs[o][1]) for o in direct]
        calls += [(0, "op2", None)] + ([(0, "spectrum", None)] if planes else [])
        got = conv([f], op, calls, op2=op2)
        result: list[Any] = [None] * len(outs)
        for o, g in zip(direct, got):
            result[o] = g
        for o in planes:
            result[o] = planes_c2r(got[-1], f.shape, outs[o][0], outs[o][1])
        return [*result, got[len(direct)]]

    def operators(
        self, xs: Sequence[jax.Array], op: jax.Array | None,
        outs: Sequence[tuple[int, int | None, jax.Array | None]],
    ) -> list[jax.Array]:  # fmt: skip
        if not self.fused(xs[0]):
            from sonotile.fft import xla

            return xla.BACKEND.operators(xs, op, outs)
        where = tuple((s, a) for s, a, _ in outs)
        return _conv_vjp()(list(xs), op, where, [v for _, _, v in outs])

    def axis_kernel(self, like: jax.Array) -> bool:
        return axis_kernel(like)

    def axis_operators(
        self, xs: Sequence[jax.Array], outs: Sequence[tuple[int, int, jax.Array]]
    ) -> list[jax.Array]:  # fmt: skip
        if not axis_kernel(xs[0]):
            from sonotile.fft import xla

            return xla.BACKEND.axis_operators(xs, outs)
        where = tuple((s, a) for s, a, _ in outs)
        return axis_diff_vjp()(list(xs), where, [v for _, _, v in outs])

    def axis_update(
        self, srcs: Sequence[jax.Array], axis: int, vec: jax.Array,
        targets: Sequence[AxisTarget], after: Sequence[jax.Array] = (),
    ) -> list[jax.Array]:  # fmt: skip
        return axis_update(srcs, axis, vec, targets, after)

    def along_axis(
        self, xs: Sequence[jax.Array], axis: int, vecs: Sequence[jax.Array]
    ) -> list[jax.Array]:  # fmt: skip
        from sonotile.fft import xla  # 1-D transforms: no FFTW kernel of their own

        return xla.BACKEND.along_axis(xs, axis, vecs)

    def rfftn(self, x: jax.Array) -> jax.Array:
        return r2c(x)

    def irfftn(self, X: jax.Array, shape: Sequence[int]) -> jax.Array:
        return c2r(X, shape)

    def rfft(self, x: jax.Array, axis: int) -> jax.Array:
        from sonotile.fft import xla

        return xla.BACKEND.rfft(x, axis)  # FFTW's 1-D transforms run fused (along_axis)

    def irfft(self, X: jax.Array, n: int, axis: int) -> jax.Array:
        from sonotile.fft import xla

        return xla.BACKEND.irfft(X, n, axis)

    def fft(self, X: jax.Array, axis: int) -> jax.Array:
        return fft_axis(X, axis)

    def ifft(self, X: jax.Array, axis: int) -> jax.Array:
        return fft_axis(X, axis, inverse=True)

    def keep(self, x: jax.Array) -> jax.Array:
        return keep(x)

    def keep_all(self, xs: Sequence[jax.Array]) -> list[jax.Array]:
        return keep_all(xs)

    def prepare(self, shape: tuple[int, ...]) -> None:
        prepare(shape)

    def describe(self) -> dict[str, str]:
        return details()

    # the slab decompositions' kernels (backend.SlabKernels): this module's functions
    def rfft_split(self, *args: Any, **kw: Any) -> Any:
        return rfft_split(*args, **kw)

    def irfft_join(self, *args: Any, **kw: Any) -> jax.Array:
        return irfft_join(*args, **kw)

    def xpass(self, *args: Any, **kw: Any) -> list[Any]:
        return xpass(*args, **kw)

    def xpass_halo(self, *args: Any, **kw: Any) -> list[jax.Array]:
        return xpass_halo(*args, **kw)

    def planes_c2r(self, *args: Any, **kw: Any) -> jax.Array:
        return planes_c2r(*args, **kw)

    def rfft_axes(self, x: jax.Array, axes: Sequence[int]) -> jax.Array:
        return rfft_axes(x, axes)

    def plane_source(self, kernel: jax.Array, plane: jax.Array, shape: Sequence[int]) -> jax.Array:
        return plane_source(kernel, plane, shape)


def _operators(xs: list, op: Any, outs: list) -> list:
    """:func:`conv`'s outputs ``outs``, those along grid axes >= 1 made by :func:`planes_c2r`
    from each input's spectrum after the pass along x (as a gradient's components): the
    pass along x back once per input, not once per output, and one such output made at a
    time. Outputs along axis 0 or without a vector come from the :func:`conv` call."""
    direct = [o for o, (_, a, _) in enumerate(outs) if a is None or a == 0]
    planes = [o for o in range(len(outs)) if o not in direct]
    srcs = sorted({outs[o][0] for o in planes})
    got = conv(xs, op, [outs[o] for o in direct] + [(i, "spectrum", None) for i in srcs])
    result: list[Any] = [None] * len(outs)
    for o, g in zip(direct, got):
        result[o] = g
    spectra = dict(zip(srcs, got[len(direct) :]))
    for o in planes:
        i, a, v = outs[o]
        result[o] = planes_c2r(spectra[i], xs[i].shape, a, v)
    return result


@functools.cache
def _conv_vjp() -> Any:
    """:func:`conv` of real outputs along grid axes (no epilogues) with a reverse-mode rule
    (the custom call is opaque to JAX): each output is linear in its input with the kernel
    ``op vec``, half of a Hermitian-symmetric spectrum, so the adjoint of the outputs of one
    input is :func:`conv_sum` of their cotangents with ``conj(vec)``: one call per input. The
    operator and the vectors are constants (zero cotangents)."""
    import jax
    import jax.numpy as jnp

    def run(xs: list, op: Any, where: list, vecs: list) -> list:
        return _operators(xs, op, [(s, a, v) for (s, a), v in zip(where, vecs)])

    def fwd(xs: list, op: Any, where: list, vecs: list) -> tuple[list, tuple]:
        return run(xs, op, where, vecs), (op, vecs, len(xs))

    def bwd(where: list, res: tuple, cts: list) -> tuple:
        op, vecs, n_in = res
        bars = []
        for i in range(n_in):
            mine = [o for o, (s, _) in enumerate(where) if s == i]
            pairs = [(where[o][1], jnp.conj(vecs[o])) for o in mine]
            bars.append(conv_sum([cts[o] for o in mine], op, pairs))
        zero = None if op is None else jnp.zeros_like(op)
        return bars, zero, [jnp.zeros_like(v) for v in vecs]

    f = jax.custom_vjp(run, nondiff_argnums=(2,))
    f.defvjp(fwd, bwd)
    return f


#: The backend objects (:func:`sonotile.fft.backend.get`): with fused split-field updates, and
#: without (``Settings.fftw_updates`` off)
BACKEND = FftwBackend()
SEPARATE_UPDATES = FftwBackend(name="fftw-separate-updates", fuses_updates=False)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sonotile.fft.fftw``: build the extension now (scripts/setup.sh calls this)."""
    so = build(verbose=True)
    if so is None:
        print(f"sonotile: FFTW extension not built, XLA's FFT will be used ({reason()})")
        return 0
    print(f"sonotile: FFTW extension {so}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
