"""One time step of k-Wave's first-order k-space scheme, written once, per shard.

``step(state, x, c, ops, phys) -> state`` follows kspaceFirstOrder-OMP 1.3 (see
``docs/method.md`` and Treeby et al., JASA 131, 2012): pressure gradient on the
staggered grids, velocity update with split PML, velocity sources, velocity divergence, split
mass conservation with PML, pressure sources, equation of state with power-law or Stokes
absorption and B/A nonlinearity. All derivatives come from ``ops`` (see
:mod:`sonotile.spectral.operators`), so the same function runs on one device or on a shard of a
decomposed grid.

State fields: ``p`` [Pa], ``rho`` (split density per axis) [kg/m^3], ``u`` (staggered velocity
per axis) [m/s]. ``x`` carries the step index ``n`` and the source values of that step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_derivatives import SymbolicZero

from sonotile.model.grid import AXES
from sonotile.model.staggering import staggered_mean
from sonotile.spectral import device
from sonotile.spectral.operators import (
    SpectralOps,
    SplitUpdate,
    div_update,
    divergence_density,
    filter_source_on,
    fractional_pair,
    fuses_updates,
    fuses_updates_apart,
    grad_update,
)

if TYPE_CHECKING:
    from sonotile.physics.acoustic.model import AcousticModel as Physics

#: Per-axis integer index arrays of a set of grid points (``field[index]`` gathers them).
PointIndex = tuple[jax.Array, ...]


class State(NamedTuple):
    p: jax.Array
    rho: tuple
    u: tuple

    def fields(self) -> dict[str, jax.Array]:
        """What sensors read: ``p`` [Pa], ``ux``... on their staggered grids [m/s]."""
        return {"p": self.p, **{f"u{AXES[a]}": ua for a, ua in enumerate(self.u)}}


def zero_state(shape: tuple[int, ...], dtype: jax.typing.DTypeLike, eager: bool = False) -> State:
    """The state before the first step; ``eager``: outside a trace (:func:`device.full`)."""
    nd = len(shape)

    def z() -> jax.Array:
        return device.full(shape, 0.0, dtype) if eager else jnp.zeros(shape, dtype)

    return State(z(), tuple(z() for _ in range(nd)), tuple(z() for _ in range(nd)))


def _inject(
    fields: tuple[jax.Array, ...],
    index: PointIndex,
    values: jax.Array,
    mode: str,
    active: jax.Array,
    ops: SpectralOps,
    pattern: jax.Array | None = None,
    axis: int | None = None,
    plane: jax.Array | None = None,
) -> tuple[jax.Array, ...]:
    """Apply one mask source to one or more fields (values per point or one shared value;
    ``axis``: the velocity component a velocity source drives, None for a pressure source).

    A pressure source enters every split density component with the same value; in additive
    mode the k-space filtered source grid is computed once and added to each (one FFT pair),
    or, given the filtered mask ``pattern`` of a source whose points share one signal
    (:func:`with_source_patterns`), is that signal's value times the pattern, or, given the
    ``plane`` kernel of a source on one plane ``x = const``, is made from that plane's values
    (:meth:`~sonotile.spectral.operators.FourierOps.filter_plane_source`).
    """
    if mode == "dirichlet":

        def put(f: jax.Array) -> jax.Array:
            current = f[index]
            new = jnp.where(active, jnp.broadcast_to(values, current.shape), current)
            return f.at[index].set(new, mode="drop")

        return tuple(put(f) for f in fields)
    if mode == "additive_no_correction":
        return tuple(
            f.at[index].add(jnp.where(active, values, 0).astype(f.dtype), mode="drop")
            for f in fields
        )

    add = _additive_grid(fields[0], index, values, active, ops, pattern, axis, plane)
    return tuple(f + add for f in fields)


def _additive_grid(
    like: jax.Array,
    index: PointIndex,
    values: jax.Array,
    active: jax.Array,
    ops: SpectralOps,
    pattern: jax.Array | None = None,
    axis: int | None = None,
    plane: jax.Array | None = None,
) -> jax.Array:
    """The grid an additive mask source adds to each field like ``like`` this step (see
    :func:`_inject`): the k-space filtered source, zeros while it is inactive."""
    if pattern is not None:
        amp = jnp.where(active, jnp.ravel(values)[0], 0).astype(pattern.dtype)
        # materialised, as the filtered grid was: fused into the updates, the product is
        # rounded differently in programs of different chunk lengths (results would depend on
        # the chunking and on where a run was checkpointed)
        return _keep(ops, amp * pattern)

    def filtered(f: jax.Array) -> jax.Array:
        v = jnp.broadcast_to(values, index[0].shape)
        if plane is not None:  # the source's plane x = const only
            s = jnp.zeros_like(f[0]).at[index[1:]].set(v, mode="drop")
            return ops.filter_plane_source(plane, s)  # type: ignore[attr-defined]
        s = jnp.zeros_like(f).at[index].set(v, mode="drop")
        return filter_source_on(ops, s, axis)

    # only the filtered source comes out of the branch (zeros when inactive): the additions
    # fuse into the updates that made the fields; a branch returning the fields copied every
    # one of them (the untaken branch) or added in passes of their own. A step whose values
    # are all zero (a pulse's silent steps) filters nothing: its filtered grid is exactly zero
    return lax.cond(active & jnp.any(values != 0), filtered, jnp.zeros_like, like)


def with_source_patterns(c: dict, ops: SpectralOps, phys: Physics, like: jax.Array) -> dict:
    """``c`` plus the k-space filtered masks of the additive sources whose points share one
    signal (``"p_pattern"``, ``"u_pattern"`` per axis), and the plane kernels of those whose
    points lie on one plane ``x = const`` (``"p_plane"``, ``"u_plane"``), made once per chunk
    of steps.

    Filtering is linear: a source's filtered grid at step ``n`` is ``s(n)`` times its filtered
    mask where its points share one signal, so :func:`step` adds that instead of transforming
    the source grid forwards and back in every step (one FFT pair per source and step fewer;
    one grid-sized field more while the chunk runs). On one plane its 3-D transform is the
    plane's times a phase along x, so the step transforms that plane and goes back plane by
    plane (where the operators can: :meth:`~sonotile.spectral.operators.FourierOps.
    plane_sources`; half a field more). ``like``: a state field (shape and dtype).
    """
    c = with_plane_kernels(c, ops, phys, like)
    if not (phys.p_shared or any(phys.u_shared)):
        return c

    def pattern(index: PointIndex, axis: int | None = None) -> jax.Array:
        mask = jnp.zeros_like(like).at[index].set(1.0, mode="drop")
        return filter_source_on(ops, mask, axis)

    out = dict(c)
    if phys.p_shared:
        out["p_pattern"] = pattern(c["p_index"])
    if any(phys.u_shared):
        out["u_pattern"] = tuple(
            pattern(c["u_index"][a], a) if shared else None
            for a, shared in enumerate(phys.u_shared)
        )
    return out


def with_plane_kernels(c: dict, ops: SpectralOps, phys: Physics, like: jax.Array) -> dict:
    """``c`` plus ``"p_plane"`` / ``"u_plane"`` (per axis, None where not): the kernels of
    :meth:`~sonotile.spectral.operators.FourierOps.filter_plane_source` for the additive sources
    on one plane ``x = const``, where the operators have it (see :func:`with_source_patterns`)."""
    plane_sources = getattr(ops, "plane_sources", None)
    if not (phys.p_plane or any(phys.u_plane)) or plane_sources is None or not plane_sources(like):
        return c

    def kernel(index: PointIndex) -> jax.Array:
        return ops.plane_source_kernel(index[0][0])  # type: ignore[attr-defined]

    out = dict(c)
    if phys.p_plane:
        out["p_plane"] = kernel(c["p_index"])
    if any(phys.u_plane):
        out["u_plane"] = tuple(
            kernel(c["u_index"][a]) if on else None for a, on in enumerate(phys.u_plane)
        )
    return out


def _keep(ops: SpectralOps, f: jax.Array) -> jax.Array:
    """``ops.keep(f)`` where the operators provide a fusion boundary, else ``f``."""
    keep = getattr(ops, "keep", None)
    return f if keep is None else keep(f)


def _same(f: jax.Array) -> jax.Array:
    return f


def _barrier(ops: SpectralOps) -> Callable[[jax.Array], jax.Array]:
    """``ops.barrier`` (a fusion boundary holding no traced values, for derivative rules) where
    the operators provide one, else the identity."""
    return getattr(ops, "barrier", _same)


@partial(jax.custom_jvp, nondiff_argnums=(2, 3))
def dt_over_staggered(
    r: jax.Array, dt: jax.typing.ArrayLike, axis: int, keep: Callable[[jax.Array], jax.Array]
) -> jax.Array:
    """``dt / staggered_mean(r, axis)``; ``keep``: a linear fusion boundary (``ops.keep``) that
    only the derivative uses (see :func:`_dt_over_staggered_jvp`)."""
    return jnp.divide(dt, staggered_mean(r, axis))


@partial(dt_over_staggered.defjvp, symbolic_zeros=True)
def _dt_over_staggered_jvp(
    axis: int,
    keep: Callable[[jax.Array], jax.Array],
    primals: tuple[jax.Array, Any],
    tangents: tuple[Any, Any],
) -> tuple[jax.Array, jax.Array]:
    """JAX's derivative of the quotient ``dt / s`` (``s`` the staggered mean), term by term,
    with ``keep`` on the tangent of ``s``. Its transpose makes the backward pass materialise
    ``-dt s^-2`` times the cotangent once before the mean's transpose reads it at two
    neighbouring points; without it XLA recomputes that whole cotangent expression (every
    contribution to it) at both points inside one scalar fusion, per axis, every step."""
    (r, dt), (tr, tdt) = primals, tangents
    s = staggered_mean(r, axis)
    y = jnp.divide(dt, s)
    out = []
    if not isinstance(tdt, SymbolicZero):
        out.append(tdt / s)
    if not isinstance(tr, SymbolicZero):
        out.append(-keep(staggered_mean(tr, axis)) * dt * s**-2)
    if not out:
        return y, jnp.zeros_like(y)
    return y, sum(out[1:], out[0])


@partial(jax.custom_jvp, nondiff_argnums=(1,))
def shared_cotangent(f: jax.Array, keep: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """``f`` itself; its tangent goes through ``keep`` (a linear fusion boundary, ``ops.barrier``),
    so the backward pass materialises ``f``'s cotangent once before its consumers read it.
    Without it XLA sums every contribution to that cotangent again inside each consumer's
    fusion (the density sum's cotangent: in 7 fusions of the backward step)."""
    return f


@shared_cotangent.defjvp
def _shared_cotangent_jvp(
    keep: Callable[[jax.Array], jax.Array], primals: tuple[jax.Array], tangents: tuple[jax.Array]
) -> tuple[jax.Array, jax.Array]:
    return primals[0], keep(tangents[0])


def dt_over_rho0_sg(
    c: dict,
    axis: int,
    rho0: jax.Array | None = None,
    keep: Callable[[jax.Array], jax.Array] = _same,
) -> jax.Array | float:
    """``dt / rho0_sg`` on the staggered grid of ``axis`` [s m^3/kg]: the stored constant, or
    (when the plan left it out, None) from ``rho0`` (default ``c["rho0"]``) as k-Wave
    interpolates it (:func:`staggered_mean`; the shard must hold the whole axis). ``keep``:
    see :func:`dt_over_staggered`."""
    if c["dt_rho0_sg"][axis] is not None:
        return c["dt_rho0_sg"][axis]
    return dt_over_staggered(c["rho0"] if rho0 is None else rho0, c["dt"], axis, keep)


def in_step(c: dict, key: str, anchor: jax.Array) -> tuple[Any, jax.Array]:
    """``c[key]`` tied to ``anchor`` (a value of this step) by an optimisation barrier, so that
    what the step derives from it per element stays inside the time loop: otherwise XLA hoists
    such loop-invariant fields out of the loop and keeps them in memory, which is what deriving
    them in the step is meant to avoid. Returns ``(c[key], anchor)`` (``c[key]`` a float or an
    array, as the constants are)."""
    v = c[key]
    if not isinstance(v, jax.Array) or v.ndim == 0:
        return v, anchor
    return lax.optimization_barrier((v, anchor))


def velocity_update(
    u: Sequence[jax.Array],
    dp: Sequence[jax.Array],
    c: dict,
    keep: Callable[[jax.Array], jax.Array] = _same,
) -> tuple[jax.Array, ...]:
    """``u = pml_sg (pml_sg u - dt/rho0_sg dp/dx)`` per axis (split-field PML); ``keep``: see
    :func:`dt_over_staggered`."""
    out = []
    for a, (ua, g, m) in enumerate(zip(u, dp, c["pml_sg"])):
        rho0 = None
        if c["dt_rho0_sg"][a] is None:
            rho0, g = in_step(c, "rho0", g)
        out.append(m * (m * ua - dt_over_rho0_sg(c, a, rho0, keep) * g))
    return tuple(out)


def _coef(v: Any, like: jax.Array) -> tuple[Any, jax.Array | None] | None:
    """A coefficient ``v`` (a number or a field) as ``(scale, field)`` for a
    :class:`~sonotile.spectral.operators.SplitUpdate` of fields like ``like``; None when it is
    neither a single value nor a whole grid (then the update is not fused)."""
    if jnp.size(v) == 1:
        return (jnp.reshape(v, ()) if isinstance(v, jax.Array) else v), None
    if jnp.shape(v) == like.shape:
        return 1.0, v
    return None


def velocity_updates(u: Sequence[jax.Array], c: dict) -> tuple[SplitUpdate, ...] | None:
    """:func:`velocity_update` as split-field updates for the fused FFTW calls
    (:func:`sonotile.spectral.operators.grad_update`), or None when a coefficient has another
    shape. ``dt / rho0_sg`` derived in the step becomes the calls' staggered mean of rho0."""
    out = []
    for a, (ua, m) in enumerate(zip(u, c["pml_sg"])):
        v = c["dt_rho0_sg"][a]
        if v is None:
            if jnp.shape(c["rho0"]) != ua.shape:
                return None
            out.append(SplitUpdate(ua, m, a, c["dt"], c["rho0"], staggered=True))
            continue
        coef = _coef(v, ua)
        if coef is None:
            return None
        out.append(SplitUpdate(ua, m, a, *coef))
    return tuple(out)


def density_updates(
    rho: Sequence[jax.Array], c: dict, factor: Any
) -> tuple[SplitUpdate, ...] | None:
    """``rho_a = pml_a (pml_a rho_a - dt factor du_a/dx_a)`` as split-field updates for
    :func:`sonotile.spectral.operators.div_update`, or None (``factor``: rho0, or the nonlinear
    ``2 rho + rho0``; a number or a whole grid)."""
    coef = _coef(factor, rho[0])
    if coef is None:
        return None
    scale, field = coef
    # dt * factor as the separate update computes it: a number's product first, else f32(dt)
    scale = c["dt"] * scale if field is None else c["dt"]
    return tuple(SplitUpdate(r, m, a, scale, field) for a, (r, m) in enumerate(zip(rho, c["pml"])))


def pressure_from_density(
    rho: Sequence[jax.Array],
    du: Sequence[jax.Array],
    c: dict,
    ops: SpectralOps,
    phys: Physics,
    sums: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """Equation of state with optional B/A nonlinearity and power-law or Stokes absorption.
    ``sums``: ``(rho0 div u, sum of rho)`` already made (then ``du`` is not read)."""
    if sums is not None:
        rho_sum = sums[1]
    else:
        rho_sum = shared_cotangent(sum(rho[1:], rho[0]), _barrier(ops))
    term = rho_sum
    if phys.nonlinear:
        term = term + c["bona_2rho0"] * rho_sum * rho_sum
    if phys.absorption == "lossless":
        return c["c2"] * term
    rho0_div_u = sums[0] if sums is not None else c["rho0"] * sum(du[1:], du[0])
    if phys.absorption == "stokes":
        return c["c2"] * (term + c["tau"] * rho0_div_u)
    if not phys.dispersion:
        return c["c2"] * (term + c["tau"] * ops.fractional(rho0_div_u, 1))
    # eta = 2 a0 c0^y tan(pi y/2) = -tan(pi y/2) c0 tau: one constant field fewer
    c2, rho_sum = in_step(c, "c2", rho_sum)
    tau, rho_sum = in_step(c, "tau", rho_sum)
    eta = c["eta_per_c0_tau"] * jnp.sqrt(c2) * tau
    nabla1, nabla2 = fractional_pair(ops, rho0_div_u, rho_sum)
    return c["c2"] * (term + (c["tau"] * nabla1 - eta * nabla2))


def _density_update(
    state: State, u: tuple[jax.Array, ...], x: dict, c: dict, ops: SpectralOps, phys: Physics,
    fuse: bool,
) -> tuple[tuple, tuple[jax.Array, ...], tuple[jax.Array, jax.Array] | None, bool]:  # fmt: skip
    """Steps 4-5 of :func:`step`: the densities updated from the divergence of ``u``. Returns
    ``(rho, du, sums, p_in_call)``: ``du`` the derivatives where the equation of state needs
    them, ``sums`` ``(rho0 div u, rho_sum)`` where one call made them, ``p_in_call`` whether an
    additive pressure source was added there."""
    n = x["n"]
    du: tuple[jax.Array, ...] = ()
    sums: tuple[jax.Array, jax.Array] | None = None  # (rho0 div u, rho_sum) made with the update
    d_ups = None
    # with absorption, one FFTW call where it can: the updates, rho0 div u and the densities'
    # sum, no derivative in memory, and the nonlinear factor made from the old densities there
    rho0 = c["rho0"]
    if fuse and phys.absorption != "lossless" and fuses_updates_apart(ops, state.p):
        if jnp.size(rho0) == 1 or jnp.shape(rho0) == state.p.shape:
            d_ups = density_updates(state.rho, c, 1.0 if phys.nonlinear else rho0)
    p_in_call = False  # an additive pressure source's grid added inside that call
    if d_ups is not None:
        src = None
        if phys.p_mode == "additive":
            active = n < x["p_len"]
            src = _additive_grid(state.p, c["p_index"], x["p"], active, ops, c.get("p_pattern"),
                                 plane=c.get("p_plane"))  # fmt: skip
            p_in_call = True
        rho0_div_u, rho_sum, rho = divergence_density(ops, u, d_ups, rho0, phys.nonlinear, src)
        sums = (rho0_div_u, rho_sum)
    else:
        if phys.nonlinear:
            # one field, made before any component changes: otherwise each update recomputes
            # it and XLA keeps a copy of every old component for the later ones (3 grids a step)
            factor = _keep(ops, 2.0 * sum(state.rho[1:], state.rho[0]) + rho0)
        else:
            factor = rho0
        # inside the divergence's FFTW calls where they can
        d_ups = density_updates(state.rho, c, factor) if fuse else None
        if d_ups is not None and phys.absorption == "lossless":
            rho = div_update(ops, u, d_ups)
        else:
            du = ops.div(u)
            dt = c["dt"]
            rho = tuple(m * (m * r - dt * factor * d) for r, d, m in zip(state.rho, du, c["pml"]))
    return rho, du, sums, p_in_call


def step(state: State, x: dict, c: dict, ops: SpectralOps, phys: Physics) -> State:
    """Advance ``state`` from step ``n-1`` to step ``n = x["n"]``."""
    n = x["n"]
    # 1-2. pressure gradient on the staggered grids, velocity update with PML (inside the
    # gradient's FFTW calls where they can: no gradient component goes to memory)
    fuse = fuses_updates(ops, state.p)
    v_ups = velocity_updates(state.u, c) if fuse else None
    if v_ups is not None:
        u = grad_update(ops, state.p, v_ups)
    else:
        u = velocity_update(state.u, ops.grad(state.p), c, _barrier(ops))
    # 3. velocity sources and transducer
    u_list = list(u)
    for ax, mode in enumerate(phys.u_modes):
        if mode is not None:
            active = n < x["u_len"][ax]
            pattern = c["u_pattern"][ax] if "u_pattern" in c else None
            plane = c["u_plane"][ax] if "u_plane" in c else None
            (u_list[ax],) = _inject(
                (u_list[ax],), c["u_index"][ax], x["u"][ax], mode, active, ops, pattern, ax, plane
            )
    if phys.transducer:
        active = n < x["tr_len"]
        vals = c["tr_signal"][jnp.clip(c["tr_delay"] + n, 0, c["tr_signal"].shape[0] - 1)]
        (u_list[0],) = _inject(
            (u_list[0],), c["tr_index"], vals, "additive_no_correction", active, ops
        )
    # each component materialised here: otherwise XLA fused the velocity update into the
    # sensors' gathers (computing it again at the sensor points from the old velocity, which it
    # then copied to keep it alive): 2-5 ms of a 128^3 step recording u (docs/scaling.md)
    u = tuple(_keep(ops, x) for x in u_list)
    # 4-5. velocity divergence (per-axis parts), split mass conservation with PML
    rho, du, sums, p_in_call = _density_update(state, u, x, c, ops, phys, fuse)
    # 6. pressure (mass) source, into every split component
    if phys.p_mode is not None and not p_in_call:
        active = n < x["p_len"]
        rho = _inject(rho, c["p_index"], x["p"], phys.p_mode, active, ops, c.get("p_pattern"),
                      plane=c.get("p_plane"))  # fmt: skip
        if sums is not None:  # the sum of the densities before the source: made again
            sums = (sums[0], sum(rho[1:], rho[0]))
    # 7. equation of state
    p = pressure_from_density(rho, du, c, ops, phys, sums)
    return State(p, rho, u)


def initial_pressure_state(c: dict, ops: SpectralOps, phys: Physics) -> State:
    """State after step 0 of an initial-value problem (k-Wave's p0 start).

    ``p = p0``, ``rho_i = p0 / (D c0^2)``, and the velocity at ``t = -dt/2``:
    ``u_i = (dt / (2 rho0_sg)) dp0/dx_i`` (gradient with kappa on the staggered grid).
    """
    p0 = c["p0"]
    rho = p0 / (phys.ndim * c["c2"])
    dp = ops.grad(p0)
    u = tuple(0.5 * dt_over_rho0_sg(c, a) * g for a, g in enumerate(dp))
    return State(p0 + 0, tuple(rho + 0 for _ in range(phys.ndim)), u)
