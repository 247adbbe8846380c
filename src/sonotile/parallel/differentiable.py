"""A whole run on a device mesh as one traced, differentiable function of its constants.

The engines of :mod:`sonotile.parallel.engine` place host-built constants on the mesh once and
advance chunk by chunk from Python. For gradients the medium constants are functions of traced
parameters and the whole time loop is one function, so :func:`mesh_runner` returns
``run(consts, xs) -> (raw, aggregates, state)`` that shards the constants it is given (fields
like the state, 1-D PML profiles along their axis, the rest replicated) and runs the shared
time loop (:func:`sonotile.solver.runner.scan_body` under
:func:`sonotile.solver.adjoint.checkpointed_scan`) inside :func:`shard_map`. Overlap exchange
(``ppermute``), transposes (``all_to_all``) and sensor gathers (``psum``) are differentiated by
JAX; the acoustic FFTW operators of LFB blocks by :class:`sonotile.spectral.linear.AdjointOps`,
a model's own box operators (the elastic single-axis derivatives) by the FFT backends' rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

from sonotile.model.problem import Problem
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.decomposition import Decomposition
from sonotile.parallel.lfb import LfbOps, lfb_constants
from sonotile.parallel.mesh import AXIS_NAMES, ShardIndex, field_spec, local_index, make_mesh
from sonotile.parallel.mesh import shard_map as smap
from sonotile.parallel.pencil import pencil_operators
from sonotile.physics import model_for, point_index_keys
from sonotile.solver import sensors as sens
from sonotile.spectral.linear import AdjointOps

if TYPE_CHECKING:
    from sonotile.spectral.operators import FourierOps

#: ``run(consts, xs, fixed) -> (raw, aggregates, state)`` of :func:`mesh_runner`
MeshRun = Callable[[dict[str, Any], dict[str, jax.Array], tuple], tuple[dict, dict, tuple]]


def const_spec(leaf: jax.Array, shape: tuple[int, ...], m: int) -> P:
    """How a constant is sharded: grid-shaped like the state, a broadcastable 1-D profile
    along its axis (when that axis is split), anything else replicated."""
    shp, d = tuple(jnp.shape(leaf)), len(shape)
    if shp == tuple(shape):
        return field_spec(d, m)
    if len(shp) == d and sum(s != 1 for s in shp) == 1:
        a = next(i for i, s in enumerate(shp) if s != 1)
        if a < m and shp[a] == shape[a]:
            return P(*(AXIS_NAMES[a] if i == a else None for i in range(d)))
    return P()


def _check(problem: Problem, decomposition: Decomposition, mesh_shape: tuple[int, ...]) -> None:
    d, m = problem.grid.ndim, len(mesh_shape)
    if decomposition not in (Decomposition.PENCIL, Decomposition.LFB):
        raise ValueError(f"decomposition = {decomposition!r}: expected single, pencil or lfb")
    if d < 2:
        raise ValueError("decomposed runs need a 2-D or 3-D grid")
    if m > (d - 1 if decomposition == Decomposition.PENCIL else d):
        raise ValueError(f"{decomposition}: mesh {mesh_shape} has too many axes for a {d}-D grid")
    for a, p in enumerate(mesh_shape):  # uneven blocks: forward runs only (docs/decomposition.md)
        if problem.grid.shape[a] % p:
            raise ValueError(
                f"{decomposition} gradients: grid axis {a} has {problem.grid.shape[a]} points, "
                f"not divisible by mesh size {p} (differentiable runs need even blocks)"
            )


def _ops_parts(
    problem: Problem, decomposition: Decomposition, mesh_shape: tuple[int, ...], overlap: int,
    bell_width: float, unstagger: bool,
) -> tuple[Any, Any, Callable[[Any], FourierOps | LfbOps]]:  # fmt: skip
    """``(arrays, specs, make_ops)`` of the decomposition's spectral operators."""
    if decomposition == Decomposition.PENCIL:
        return pencil_operators(problem, Blocks(problem.grid.shape, mesh_shape), unstagger,
                                slab_kernels=False)  # fmt: skip
    own = getattr(model_for(problem), "box_operators", None)  # a model's own box operators
    if not isinstance(problem, Problem) and own is None:  # LFB's operators are Fourier operators
        raise ValueError(f"lfb: the {type(model_for(problem)).__name__} is differentiated on "
                         "one device or on a pencil mesh")  # fmt: skip
    inner, bells, unshift, lmeta = lfb_constants(
        problem, Blocks(problem.grid.shape, mesh_shape), int(overlap), float(bell_width), unstagger
    )
    lfb_arrays = (inner, bells, unshift)
    specs = jax.tree_util.tree_map(lambda _: P(), lfb_arrays)
    # the acoustic operators through AdjointOps; a model's own (the elastic single-axis
    # derivatives, FourierOps.diffs) are differentiable as they are (the backends' rules)
    wrap = AdjointOps if own is None else (lambda o: o)
    return lfb_arrays, specs, lambda a: LfbOps(wrap(a[0]), a[1], a[2], meta=lmeta)


def replicated(
    x: jax.Array, mesh_shape: tuple[int, ...], devices: Sequence[jax.Device] | None = None
) -> jax.Array:
    """``x`` (traced, whole-grid) held whole on every device of the mesh :func:`mesh_runner`
    makes: what computes it runs unsplit. For values made by whole-grid FFTs before the run
    (k-Wave's smoothing of p0): XLA's partitioner, left to split such a 3-D FFT the way the
    run's blocks are split, gave XLA:CPU an FFT on a layout it refuses (``fft_thunk``)."""
    sharding = jax.sharding.NamedSharding(make_mesh(mesh_shape, devices), P())
    return jax.lax.with_sharding_constraint(x, sharding)


def _localised(
    consts: dict[str, Any], shape: tuple[int, ...], mesh_shape: tuple[int, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Point index arrays per shard ``(mesh..., Nsrc)`` (global order, out-of-range where not
    owned) taken out of ``consts`` (the keys of :func:`sonotile.physics.point_index_keys`: a
    tuple of per-axis arrays, or a tuple over axes of such tuples or None); returns
    ``(rest, indices)``."""
    rest = dict(consts)

    def loc(t: Any) -> Any:
        if t is None or not t:
            return t
        if isinstance(t[0], tuple) or t[0] is None:
            return tuple(loc(i) for i in t)
        pts = np.stack([np.asarray(i) for i in t], axis=1)
        return tuple(jnp.asarray(x) for x in local_index(pts, shape, mesh_shape)[0])

    return rest, {k: loc(rest.pop(k)) for k in point_index_keys(rest)}


def mesh_runner(
    problem: Problem,
    layout: sens.SensorLayout,
    local_run: Callable[..., tuple[dict[str, jax.Array], dict[str, jax.Array], Any]],
    decomposition: Decomposition,
    mesh_shape: tuple[int, ...],
    overlap: int = 16,
    bell_width: float = 0.5,
    devices: Sequence[jax.Device] | None = None,
) -> tuple[MeshRun, tuple]:
    """``(run, fixed)``: ``run(consts, xs, fixed) -> (raw, aggregates, state)`` on a mesh
    (global arrays in and out); ``fixed`` holds the operators and sensor indices (pass it as an
    argument of a jitted caller rather than closing over it: no constants in the program).

    ``local_run(consts, index, ops, xs, local_shape)`` is the per-shard time loop; ``consts``
    the step's constants as global arrays (grid-shaped fields, broadcastable profiles, source
    index tuples ``(Nsrc,)`` per axis in global coordinates) and Python floats.
    """
    mesh_shape = tuple(int(s) for s in mesh_shape)
    _check(problem, decomposition, mesh_shape)
    g, m = problem.grid, len(mesh_shape)
    mesh = make_mesh(mesh_shape, devices)
    fspec, names = field_spec(g.ndim, m), AXIS_NAMES[:m]
    local_shape = tuple(n // mesh_shape[a] if a < m else n for a, n in enumerate(g.shape))
    ops_arrays, ops_specs, make_ops = _ops_parts(
        problem, decomposition, mesh_shape, overlap, bell_width, layout.needs_unstagger
    )
    ispec = P(*names, None)
    sidx = sidx_specs = None
    if layout.points is not None:
        loc, owned = local_index(layout.points, g.shape, mesh_shape)
        sidx = (tuple(jnp.asarray(x) for x in loc), jnp.asarray(owned))
        sidx_specs = (tuple(ispec for _ in loc), ispec)
    # the model's state as a tuple of its parts, each spec'd like the grid
    zero = model_for(problem).zero_state((2,) * g.ndim, jnp.float32)
    state_spec = tuple(jax.tree_util.tree_map(lambda _: fspec, zero))
    agg_specs = {f"{f}_{k}": P() for f, k in layout.stats} | {
        f"{f}_{k}": fspec for f, k in layout.whole}  # fmt: skip
    out_specs = ({f: P() for f in layout.raw}, agg_specs, state_spec)

    def run(consts: dict[str, Any], xs: dict[str, jax.Array],
            fixed: tuple) -> tuple[dict, dict, tuple]:  # fmt: skip
        rest, idx = _localised(consts, g.shape, mesh_shape)
        leaves, treedef = jax.tree_util.tree_flatten(rest)
        traced = [isinstance(v, jax.Array) for v in leaves]
        arrays = [v for v, t in zip(leaves, traced) if t]
        specs = [const_spec(v, g.shape, m) for v in arrays]
        idx_specs = jax.tree_util.tree_map(lambda _: ispec, idx)

        def local(arrs: list[jax.Array], idx_l: dict[str, Any], sidx_l: tuple | None, ops_l: Any,
                  xs_l: dict[str, jax.Array]) -> tuple[dict, dict, tuple]:  # fmt: skip
            it = iter(arrs)
            c = jax.tree_util.tree_unflatten(
                treedef, [next(it) if t else v for v, t in zip(leaves, traced)]
            )
            c.update(jax.tree_util.tree_map(lambda i: i.reshape(-1), idx_l))
            index = () if sidx_l is None else ShardIndex(
                tuple(i.reshape(-1) for i in sidx_l[0]), sidx_l[1].reshape(-1), names,
                Blocks(tuple(g.shape), mesh_shape),
            )  # fmt: skip
            raw, agg, state = local_run(c, index, make_ops(ops_l), xs_l, local_shape)
            return raw, agg, tuple(state)

        in_specs = (specs, idx_specs, sidx_specs, ops_specs, P())
        f = smap(local, mesh, in_specs, out_specs)
        return f(arrays, idx, fixed[0], fixed[1], xs)

    return run, (sidx, ops_arrays)
