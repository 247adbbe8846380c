"""What reverse-mode differentiation of a run needs from the solver layer.

* :func:`medium_constants` — the plan's medium constants (``c0^2``, ``dt/rho0`` on the staggered
  grids, ``B/A / (2 rho0)``, the absorption factor tau) computed in JAX from medium values that
  may be traced (the plan, :func:`sonotile.solver.plan.medium_constants`, computes them once in
  numpy); same keys, same formulas.
* :func:`checkpointed_scan` — the time loop as a scan over chunks of steps with
  :func:`jax.checkpoint` around each chunk (and optionally each step): the backward pass keeps
  the state at chunk boundaries and recomputes one chunk at a time, so the memory of a
  gradient grows like ``nt / chunk + chunk`` states instead of ``nt`` steps of intermediates.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from sonotile.model.grid import along
from sonotile.model.problem import Problem
from sonotile.solver.plan import pml_profile

#: alpha_coeff [dB/(MHz^y cm)] -> Np/((rad/s)^y m) is ``100 (1e-6 / 2 pi)^y / NEPER_DB``
NEPER_DB = 20 * math.log10(math.e)

#: ``(carry, x) -> (carry, y)``: one step of a scan (carry, x and y are pytrees)
ScanBody = Callable[[Any, Any], tuple[Any, Any]]


def staggered(r: jax.Array, axis: int) -> jax.Array:
    """k-Wave's density on the staggered grid of ``axis`` (mean of neighbours, the last plane
    keeping ``r``); scalars pass through."""
    if jnp.ndim(r) == 0:
        return r
    last = lax.slice_in_dim(r, r.shape[axis] - 1, None, axis=axis)
    nxt = jnp.concatenate([lax.slice_in_dim(r, 1, None, axis=axis), last], axis=axis)
    return 0.5 * (r + nxt)


def pml_constants(problem: Problem) -> dict:
    """The PML profiles of the plan (broadcastable 1-D arrays, collocated and staggered)."""
    g, m, pml = problem.grid, problem.medium, problem.pml
    assert pml is not None  # set by Problem

    def profiles(stag: bool) -> tuple[jax.Array, ...]:
        assert m.c_ref is not None  # set by Medium
        return tuple(
            jnp.asarray(
                along(pml_profile(n, s, a, m.c_ref, d, g.dt, stag), ax, g.ndim), problem.dtype
            )
            for ax, (n, s, a, d) in enumerate(zip(g.shape, pml.size, pml.alpha, g.spacing))
        )

    return {"pml": profiles(False), "pml_sg": profiles(True)}


def medium_constants(
    problem: Problem,
    c0: jax.typing.ArrayLike,
    rho0: jax.typing.ArrayLike,
    bona: jax.typing.ArrayLike | None = None,
    alpha_coeff: jax.typing.ArrayLike | None = None,
    derive_axes: tuple = (),
) -> dict:
    """The step's medium constants from (possibly traced) medium values on the problem's grid.

    Args:
        problem: the static structure (grid, dt, PML, absorption mode, alpha_power, dtype).
        c0 [m/s], rho0 [kg/m^3], bona [-], alpha_coeff [dB/(MHz^y cm)]: scalars or grid-shaped
            arrays; ``bona`` / ``alpha_coeff`` are used only when the problem is nonlinear /
            absorbing.
        derive_axes: axes along which the step derives ``dt/rho0_sg`` from ``rho0`` itself
            (axes each shard holds whole; only for a density field).

    Returns:
        The dict :func:`sonotile.solver.step.step` reads (see ``plan.medium_constants``).
    """
    m, dt = problem.medium, float(problem.grid.dt)
    dtype = jnp.dtype(problem.dtype)
    c0, rho0 = jnp.asarray(c0, dtype), jnp.asarray(rho0, dtype)
    c = {"dt": dt, "c2": c0 * c0, "rho0": rho0, **pml_constants(problem)}
    derive = rho0.ndim > 0
    c["dt_rho0_sg"] = tuple(
        None if derive and a in derive_axes else dt / staggered(rho0, a)
        for a in range(problem.grid.ndim)
    )
    if m.nonlinear:
        c["bona_2rho0"] = jnp.asarray(bona, dtype) / (2 * rho0)
    if m.absorption != "lossless":
        y = m.alpha_power
        assert y is not None  # absorbing: Medium checked it
        a0 = jnp.asarray(alpha_coeff, dtype) * (100.0 * (1e-6 / (2 * math.pi)) ** y / NEPER_DB)
        c["tau"] = -2.0 * a0 * c0 ** (y - 1)
        c["eta_per_c0_tau"] = -math.tan(math.pi * y / 2)
    return c


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
