"""What reverse-mode differentiation of a run needs from the solver layer.

* :func:`checkpointed_scan` — the time loop as a scan over chunks of steps with
  :func:`jax.checkpoint` around each chunk (and optionally each step): the backward pass keeps
  the state at chunk boundaries and recomputes one chunk at a time, so the memory of a
  gradient grows like ``nt / chunk + chunk`` states instead of ``nt`` steps of intermediates.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from sonotile.solver.tape import Tape
from sonotile.spectral import linear

#: ``(carry, x) -> (carry, y)``: one step of a scan (carry, x and y are pytrees)
ScanBody = Callable[[Any, Any], tuple[Any, Any]]
#: ``(params, consts, carry, x) -> (carry, y)``: one step of :func:`taped_scan` (pytrees)
TapedBody = Callable[[Any, Any, Any, Any], tuple[Any, Any]]


def _scan(body: ScanBody, carry: Any, xs: Any, remat_step: bool) -> tuple[Any, Any]:
    step = jax.checkpoint(body, prevent_cse=False) if remat_step else body
    return lax.scan(step, carry, xs)


def checkpointed_scan(
    body: ScanBody, carry: Any, xs: Any, chunk: int | None, remat_step: bool = False
) -> tuple[Any, Any]:
    """``lax.scan(body, carry, xs)`` with the steps grouped in chunks of ``chunk`` (``None``:
    plain scan), each chunk under :func:`jax.checkpoint` (its intermediates recomputed in the
    backward pass); ``remat_step`` also recomputes each step from its input state."""
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    if not chunk or chunk >= n:
        return _scan(body, carry, xs, remat_step)
    k = int(chunk)
    nc, rest = divmod(n, k)
    head = jax.tree_util.tree_map(lambda a: a[: nc * k].reshape(nc, k, *a.shape[1:]), xs)

    @jax.checkpoint
    def one_chunk(c: Any, xk: Any) -> tuple[Any, Any]:
        return _scan(body, c, xk, remat_step)

    carry, ys = lax.scan(one_chunk, carry, head)
    ys = jax.tree_util.tree_map(lambda a: a.reshape(nc * k, *a.shape[2:]), ys)
    if rest:
        tail = jax.tree_util.tree_map(lambda a: a[nc * k :], xs)
        carry, yt = _scan(body, carry, tail, remat_step)
        ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), ys, yt)
    return carry, ys


def default_chunk(nt: int) -> int:
    """Steps per checkpointed chunk: ``sqrt(nt)`` balances stored boundaries against one
    chunk's recomputed steps."""
    return max(1, int(np.ceil(np.sqrt(nt))))


def _shard_id(axes: tuple[str, ...]) -> jax.Array:
    """This shard's number on the mesh axes ``axes`` (0 outside :func:`shard_map`)."""
    sid = jnp.int32(0)
    for name in axes:
        sid = sid * lax.psum(1, name) + lax.axis_index(name)
    return sid


def _buffer_callback() -> Callable[..., Any] | None:
    """JAX's ``buffer_callback`` (from JAX 0.7), or None where it does not exist."""
    try:
        from jax.experimental.buffer_callback import buffer_callback
    except ImportError:
        return None
    return buffer_callback


def _store(tape: Tape, sid: jax.Array, j: jax.Array, carry: Any) -> jax.Array:
    """``tape.store(sid, j, *leaves of carry)`` from the program; returns its token.

    Through ``buffer_callback`` the tape reads XLA's own buffers; :func:`jax.pure_callback`
    first copies every argument into a new array (on a 128^3 grid, 56 MB of freshly mapped
    memory per stored state: about as long as a time step)."""
    token = jax.ShapeDtypeStruct((), jnp.int32)
    leaves = jax.tree_util.tree_leaves(carry)
    buffer_callback = _buffer_callback()
    if buffer_callback is None:
        return jax.pure_callback(tape.store, token, sid, j, *leaves)

    def store(ctx: Any, out: Any, *args: Any) -> None:
        np.asarray(out)[...] = tape.store(*(np.asarray(a) for a in args))

    return buffer_callback(store, token)(sid, j, *leaves)


def _load(tape: Tape, sid: jax.Array, j: jax.Array, token: jax.Array, like: Any) -> Any:
    """The state ``tape.load(sid, j, token)``, shaped like ``like``; written straight into
    XLA's buffers through ``buffer_callback`` where JAX has it."""
    leaves, tree = jax.tree_util.tree_flatten(like)
    shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in leaves]
    buffer_callback = _buffer_callback()
    if buffer_callback is None:
        out = jax.pure_callback(tape.load, shapes, sid, j, token)
        return jax.tree_util.tree_unflatten(tree, list(out))

    def load(ctx: Any, outs: list[Any], *args: Any) -> None:
        shard, index, tok = (np.asarray(x) for x in args)
        tape.load_into(shard, index, tok, [np.asarray(o) for o in outs])

    out = buffer_callback(load, shapes)(sid, j, token)
    return jax.tree_util.tree_unflatten(tree, list(out))


def _spectral(prim: Any, *_: Any, **__: Any) -> bool:
    """Checkpoint policy: keep the outputs of the spectral operators (FFTW's custom calls or
    XLA's FFTs: the costly part of a step), recompute the element-wise work from them."""
    return prim is linear.spectral_p or prim.name == "fft"


def _chunks(xs: Any, k: int) -> Any:
    """``xs`` (leading axis ``n``, a multiple of ``k``) as ``(n / k, k, ...)``."""
    return jax.tree_util.tree_map(lambda a: a.reshape(a.shape[0] // k, k, *a.shape[1:]), xs)


def _unchunk(ys: Any) -> Any:
    return jax.tree_util.tree_map(lambda a: a.reshape(a.shape[0] * a.shape[1], *a.shape[2:]), ys)


def _inexact(a: jax.typing.ArrayLike) -> bool:
    return jnp.issubdtype(jnp.result_type(a), jnp.inexact)


def _zero_cotangent(a: jax.typing.ArrayLike) -> jax.Array | np.ndarray:
    if _inexact(a):
        return jnp.zeros_like(a)
    return np.zeros(np.shape(a), jax.dtypes.float0)


@partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _taped(
    body: TapedBody,
    tape: Tape,
    k: int,
    axes: tuple[str, ...],
    remat_step: bool,
    params: Any,
    consts: Any,
    carry: Any,
    xs: Any,
) -> tuple[Any, Any]:
    return lax.scan(lambda c, x: body(params, consts, c, x), carry, xs)


def _taped_fwd(
    body: TapedBody,
    tape: Tape,
    k: int,
    axes: tuple[str, ...],
    remat_step: bool,
    params: Any,
    consts: Any,
    carry: Any,
    xs: Any,
) -> tuple[tuple[Any, Any], tuple[Any, Any, Any, Any, jax.Array]]:
    sid = _shard_id(axes)

    def chunk(c: Any, jx: tuple[jax.Array, Any]) -> tuple[Any, tuple[Any, jax.Array]]:
        j, xk = jx
        token = _store(tape, sid, j, c)
        c, ys = lax.scan(lambda c, x: body(params, consts, c, x), c, xk)
        return c, (ys, token)

    nc = jax.tree_util.tree_leaves(xs)[0].shape[0] // k
    carry_n, (ys, tokens) = lax.scan(chunk, carry, (jnp.arange(nc), _chunks(xs, k)))
    return (carry_n, _unchunk(ys)), (params, consts, carry_n, xs, tokens)


def _taped_bwd(
    body: TapedBody,
    tape: Tape,
    k: int,
    axes: tuple[str, ...],
    remat_step: bool,
    res: tuple[Any, Any, Any, Any, jax.Array],
    g: tuple[Any, Any],
) -> tuple[Any, Any, Any, Any]:
    params, consts, like, xs, tokens = res
    g_carry, g_ys = g
    sid = _shard_id(axes)
    x_leaves, x_tree = jax.tree_util.tree_flatten(xs)
    is_f = [_inexact(a) for a in x_leaves]
    step = lambda p, c, x: body(p, consts, c, x)  # noqa: E731
    # the chunk's steps keep their spectral results, the element-wise work is recomputed (or,
    # remat_step, nothing is kept: every step rematerialised, which k = 1 never needs)
    policy = None if remat_step and k > 1 else _spectral
    step = jax.checkpoint(step, prevent_cse=False, policy=policy)

    def chunk(
        acc: tuple[Any, Any], inp: tuple[jax.Array, Any, Any, jax.Array]
    ) -> tuple[tuple[Any, Any], list[jax.Array]]:
        g_c, g_p = acc
        j, xk, g_yk, token = inp
        xl = jax.tree_util.tree_leaves(xk)

        def run(p: Any, c: Any, xf: list[jax.Array]) -> tuple[Any, Any]:
            it = iter(xf)
            xfull = [next(it) if f else a for a, f in zip(xl, is_f)]
            x = jax.tree_util.tree_unflatten(x_tree, xfull)
            return lax.scan(lambda c, x: step(p, c, x), c, x)

        c0 = _load(tape, sid, j, token, like)
        _, vjp = jax.vjp(run, params, c0, [a for a, f in zip(xl, is_f) if f])
        d_p, d_c, d_xf = vjp((g_c, g_yk))
        return (d_c, jax.tree_util.tree_map(jnp.add, g_p, d_p)), d_xf

    nc = x_leaves[0].shape[0] // k
    zero_p = jax.tree_util.tree_map(jnp.zeros_like, params)
    inputs = (jnp.arange(nc), _chunks(xs, k), _chunks(g_ys, k), tokens)
    (g_c, g_p), d_xf = lax.scan(chunk, (g_carry, zero_p), inputs, reverse=True)
    it = iter(_unchunk(d_xf))
    g_x = [next(it) if f else _zero_cotangent(a) for a, f in zip(x_leaves, is_f)]
    g_consts = jax.tree_util.tree_map(_zero_cotangent, consts)
    return g_p, g_consts, g_c, jax.tree_util.tree_unflatten(x_tree, g_x)


_taped.defvjp(_taped_fwd, _taped_bwd)


def taped_scan(
    body: TapedBody,
    params: Any,
    consts: Any,
    carry: Any,
    xs: Any,
    tape: Tape,
    chunk: int = 1,
    axes: tuple = (),
    remat_step: bool = False,
) -> tuple[Any, Any]:
    """``lax.scan(lambda c, x: body(params, consts, c, x), carry, xs)`` whose backward pass
    takes its states from ``tape`` instead of device memory.

    The forward pass stores the carry every ``chunk`` steps on the tape (host memory or disk);
    the backward pass reads them back newest first and recomputes one chunk at a time, so
    device memory holds one chunk's intermediates whatever the step count (with
    ``remat_step``, one chunk's ``chunk`` states and one step's intermediates). Only reverse mode
    (``jax.grad``, ``jax.vjp``) is defined: use :func:`checkpointed_scan` for forward mode.

    Args:
        body: ``body(params, consts, carry, x) -> (carry, y)``. It must not close over traced
            arrays: pass them in ``params`` or ``consts``.
        params: pytree whose float array leaves are differentiated (other leaves: constants).
        consts: pytree of arrays treated as constants (no cotangent), e.g. operators, indices.
        carry, xs: pytrees (``xs`` with a leading step axis); the float leaves of both are
            differentiated.
        tape: the storage.
        chunk: steps between stored states (a leading remainder runs as an ordinary
            :func:`checkpointed_scan`).
        axes: inside :func:`shard_map`, the mesh axes the state is split over (each shard
            keys its own block).
        remat_step: recompute each step of a chunk from its input state in the backward pass
            (the chunk's states kept instead of its steps' intermediates: less memory, one more
            forward pass of time).
    """
    leaves, tree = jax.tree_util.tree_flatten(params)
    diff = [isinstance(a, jax.Array | np.ndarray) and _inexact(a) for a in leaves]
    arrays = [isinstance(a, jax.Array | np.ndarray) for a in leaves]

    def body_d(  # differentiated float arrays, other arrays, Python values
        pd: list[jax.Array], cs: tuple[list[Any], Any], c: Any, x: Any
    ) -> tuple[Any, Any]:
        it_d, it_c = iter(pd), iter(cs[0])
        full = [
            next(it_d) if d else next(it_c) if arr else a for a, d, arr in zip(leaves, diff, arrays)
        ]
        return body(jax.tree_util.tree_unflatten(tree, full), cs[1], c, x)

    params = [a for a, d in zip(leaves, diff) if d]
    consts = ([a for a, d, arr in zip(leaves, diff, arrays) if arr and not d], consts)
    n = jax.tree_util.tree_leaves(xs)[0].shape[0]
    k = max(1, int(chunk))
    rest = n % k
    if n == 0:  # nothing to store: an empty scan
        return lax.scan(lambda c, x: body_d(params, consts, c, x), carry, xs)
    if rest:
        head = jax.tree_util.tree_map(lambda a: a[:rest], xs)
        xs = jax.tree_util.tree_map(lambda a: a[rest:], xs)
        carry, y0 = checkpointed_scan(
            lambda c, x: body_d(params, consts, c, x), carry, head, None, True
        )
    if n - rest == 0:
        return carry, y0
    carry, ys = _taped(body_d, tape, k, tuple(axes), remat_step, params, consts, carry, xs)
    if rest:
        ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), y0, ys)
    return carry, ys
