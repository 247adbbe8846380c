"""The acoustic step on stacked fields: the GPU variant that moves only the bytes it must.

The same scheme as :func:`sonotile.physics.acoustic.step.step` (k-Wave's first-order k-space
step), with the split density and the staggered velocity each stored as ONE buffer of shape
``(ndim, *grid)`` (:class:`StackedState`) and every transform a call of a
:class:`sonotile.fft.batched.BatchedFFT` on such a buffer:

* the gradient: one forward transform of ``p``; the three spectra ``P kappa/N e_a`` made by one
  broadcast multiply into one ``(3, ...)`` spectrum (``e_a``: the staggered derivative's vector
  along axis ``a``, ones along the others; no concatenation), one batched inverse;
* the divergence: one batched forward transform of ``u``, one multiply, one batched inverse;
* the power-law terms: ``rho0 div u`` and ``sum rho`` written into one ``(2, ...)`` buffer, one
  batched forward, the two operators ``nabla1/N``, ``nabla2/N`` in one multiply, one inverse.

The inverse is unnormalised: ``1/N`` is folded into ``kappa`` and the power-law operators
(:meth:`StackedOps.of`), so no scaling pass follows a transform. Takes every source of the
acoustic model: initial pressure, pressure (mass) and velocity sources in each mode, and
transducers.

The time loop runs it through :class:`StackedLoop` (the model's :meth:`~sonotile.physics.
acoustic.model.AcousticModel.stacked`), which stacks the state on entering each chunk of steps
and splits it on leaving (``Settings.step``, ``SONOTILE_STEP``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from sonotile.fft import batched
from sonotile.fft.backend import real_scale
from sonotile.model.grid import AXES
from sonotile.physics.acoustic.step import (
    State,
    dt_over_rho0_sg,
    in_step,
    pressure_from_density,
)
from sonotile.spectral.operators import FourierOps

if TYPE_CHECKING:
    from sonotile.physics.acoustic.model import AcousticModel as Physics


class StackedState(NamedTuple):
    """``p`` [Pa] on the grid; ``rho`` [kg/m^3] and ``u`` [m/s] of shape ``(ndim, *grid)``."""

    p: jax.Array
    rho: jax.Array
    u: jax.Array

    def fields(self) -> dict[str, jax.Array]:
        """What sensors read (as :meth:`State.fields`): ``p`` [Pa], ``ux``... [m/s]."""
        return {"p": self.p, **{f"u{AXES[a]}": self.u[a] for a in range(self.u.shape[0])}}


def stack_state(s: State) -> StackedState:
    """``s`` with its split density and velocity each stacked ``(ndim, *grid)``."""
    return StackedState(s.p, jnp.stack(s.rho), jnp.stack(s.u))


def unstack_state(s: StackedState) -> State:
    """``s`` with its split density and velocity as tuples of grids again."""
    nd = s.rho.shape[0]
    return State(s.p, tuple(s.rho[a] for a in range(nd)), tuple(s.u[a] for a in range(nd)))


def per_component(vecs: Sequence[jax.Array], one: Any = 1.0) -> tuple[jax.Array, ...]:
    """Per grid axis ``b``, ``vecs[b]`` (broadcastable along ``b``) as a ``(ndim, ...)`` factor
    whose row ``a`` is ``vecs[b]`` for ``a == b`` and ``one`` otherwise: the product of the
    factors is, for component ``a``, the vector of its own axis."""
    nd = len(vecs)
    return tuple(
        jnp.stack([v if a == b else jnp.full_like(v, one) for a in range(nd)])
        for b, v in enumerate(vecs)
    )


def _product(factors: Sequence[jax.Array]) -> jax.Array:
    out = factors[0]
    for f in factors[1:]:
        out = out * f
    return out


@jax.tree_util.register_pytree_node_class
@dataclass
class StackedOps:
    """The k-space operators for stacked fields, ``1/N`` folded in (see the module docstring).

    Attributes: ``grad_k`` / ``div_k``: :func:`per_component` factors of the staggered
    derivatives' vectors ``i k exp(+-i k d/2)``; ``kappa_n``: ``kappa / N``; ``nabla_n``: the
    power-law operators ``(nabla1, nabla2) / N`` stacked ``(2, ...)`` or None;
    ``source_kappa_n``: ``cos(c_ref |k| dt/2) / N`` or None; ``fft``: the
    :class:`~sonotile.fft.batched.BatchedFFT`'s name (static)."""

    grad_k: tuple[jax.Array, ...]
    div_k: tuple[jax.Array, ...]
    kappa_n: jax.Array
    nabla_n: jax.Array | None
    source_kappa_n: jax.Array | None
    fft: str = "xla"

    def tree_flatten(self) -> tuple[tuple, str]:
        return (self.grad_k, self.div_k, self.kappa_n, self.nabla_n, self.source_kappa_n), self.fft

    @classmethod
    def tree_unflatten(cls, fft: str, children: tuple) -> StackedOps:
        grad_k, div_k, kappa_n, nabla_n, source_kappa_n = children
        return cls(grad_k, div_k, kappa_n, nabla_n, source_kappa_n, fft)

    @classmethod
    def of(cls, ops: FourierOps, shape: tuple[int, ...], fft: str = "xla") -> StackedOps:
        """From the single-device operators of a grid ``shape`` (their ``kappa``, shifts and
        power-law operators), for the batched FFT ``fft`` (``xla`` or ``cufft``)."""
        inv_n = 1.0 / math.prod(shape)
        nabla = None
        if ops.nabla1 is not None and ops.nabla2 is not None:
            nabla = jnp.stack([ops.nabla1 * inv_n, ops.nabla2 * inv_n])
        skappa = None if ops.source_kappa is None else ops.source_kappa * inv_n
        one = jnp.ones((), ops.shift_pos[0].dtype)
        if ops.kappa is None:
            raise ValueError("the stacked step needs the k-space correction kappa")
        return cls(per_component(ops.shift_pos, one), per_component(ops.shift_neg, one),
                   ops.kappa * inv_n, nabla, skappa, fft=fft)  # fmt: skip

    @property
    def transforms(self) -> batched.BatchedFFT:
        return batched.get(self.fft)

    def _apply(self, F: jax.Array, op: jax.Array, shape: tuple[int, ...]) -> jax.Array:
        return self.transforms.inverse(real_scale(F, op), shape)

    def grad(self, p: jax.Array) -> jax.Array:
        """``dp/dx_a`` on the staggered grids, ``(ndim, *grid)``: one forward, one inverse."""
        P = real_scale(self.transforms.forward(p, p.ndim), self.kappa_n)
        return self.transforms.inverse(P[None] * _product(self.grad_k), p.shape)

    def div_parts(self, u: jax.Array) -> jax.Array:
        """``du_a/dx_a`` back on the collocated grid, ``(ndim, *grid)``: one batched forward,
        one batched inverse."""
        shape = u.shape[1:]
        U = real_scale(self.transforms.forward(u, len(shape)), self.kappa_n[None])
        return self.transforms.inverse(U * _product(self.div_k), shape)

    def fractional(self, f: jax.Array, which: int) -> jax.Array:
        assert self.nabla_n is not None  # built for an absorbing medium
        return self._apply(self.transforms.forward(f, f.ndim), self.nabla_n[which - 1], f.shape)

    def fractionals(self, f1: jax.Array, f2: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(fractional(f1, 1), fractional(f2, 2))`` in one batched forward and inverse."""
        assert self.nabla_n is not None
        X = self.transforms.forward(jnp.stack([f1, f2]), f1.ndim)
        out = self._apply(X, self.nabla_n, f1.shape)
        return out[0], out[1]

    def filter_source(self, s: jax.Array) -> jax.Array:
        assert self.source_kappa_n is not None  # built with the source filter
        return self._apply(self.transforms.forward(s, s.ndim), self.source_kappa_n, s.shape)


def stacked_constants(c: dict, nd: int) -> dict:
    """``c`` with the PML profiles as :func:`per_component` factors (``"pml_k"``,
    ``"pml_sg_k"``) and stored ``dt / rho0_sg`` grids stacked ``(ndim, ...)`` once, outside the
    loop (``"dt_rho0_sg_k"``; None where the step derives it from ``rho0``)."""
    out = dict(c)
    out["pml_k"] = per_component(c["pml"])
    out["pml_sg_k"] = per_component(c["pml_sg"])
    stored = c["dt_rho0_sg"]
    out["dt_rho0_sg_k"] = None
    if all(v is not None for v in stored):
        like = c["pml"][0]
        out["dt_rho0_sg_k"] = jnp.stack(
            [jnp.broadcast_to(jnp.asarray(v, like.dtype), jnp.broadcast_shapes(
                *(jnp.shape(w) for w in stored), (1,) * nd)) for v in stored]
        )  # fmt: skip
    return out


def _dt_rho0_sg(c: dict, anchor: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``dt / rho0_sg`` per component, ``(ndim, ...)``, and ``anchor`` (derived in the step
    from ``rho0`` where the plan left it out, kept in the loop by :func:`in_step`)."""
    if c["dt_rho0_sg_k"] is not None:
        return c["dt_rho0_sg_k"], anchor
    rho0, anchor = in_step(c, "rho0", anchor)
    nd = anchor.shape[0]
    return jnp.stack([dt_over_rho0_sg(c, a, rho0) for a in range(nd)]), anchor


def _inject(
    buf: jax.Array, comp: int | slice, index: Any, values: jax.Array, mode: str,
    active: jax.Array, ops: StackedOps, pattern: jax.Array | None = None,
) -> jax.Array:  # fmt: skip
    """One mask source (``values`` per point or one shared value, at the grid points ``index``)
    into component ``comp`` of the stacked buffer ``buf``: a velocity source into its own
    component, a pressure source into every split density component (``slice(None)``). In
    additive mode the source grid is k-space filtered (one transform pair), or, given the
    filtered mask ``pattern`` of a source whose points share one signal, is that signal's value
    times the pattern (as :func:`sonotile.physics.acoustic.step.step` adds them)."""
    at = (comp, *index)
    if mode == "dirichlet":
        current = buf[at]
        new = jnp.where(active, jnp.broadcast_to(values, current.shape), current)
        return buf.at[at].set(new, mode="drop")
    if mode == "additive_no_correction":
        return buf.at[at].add(jnp.where(active, values, 0).astype(buf.dtype), mode="drop")
    if pattern is not None:
        add = jnp.where(active, jnp.ravel(values)[0], 0).astype(buf.dtype) * pattern
    else:

        def filtered(f: jax.Array) -> jax.Array:
            s = jnp.zeros_like(f).at[index].set(
                jnp.broadcast_to(values, index[0].shape), mode="drop")  # fmt: skip
            return ops.filter_source(s)

        # a step whose values are all zero filters nothing (as the unstacked step)
        add = lax.cond(active & jnp.any(values != 0), filtered, jnp.zeros_like, buf[0])
    return buf + add[None] if comp == slice(None) else buf.at[comp].add(add)


def _velocity_sources(u: jax.Array, x: dict, c: dict, ops: StackedOps, phys: Physics) -> jax.Array:
    """The velocity sources and the transducer of step ``x["n"]`` into their components."""
    n = x["n"]
    patterns = c.get("u_pattern", (None,) * len(phys.u_modes))
    for ax, mode in enumerate(phys.u_modes):
        if mode is not None:
            active = n < x["u_len"][ax]
            u = _inject(u, ax, c["u_index"][ax], x["u"][ax], mode, active, ops, patterns[ax])
    if phys.transducer:
        last = c["tr_signal"].shape[0] - 1
        values = c["tr_signal"][jnp.clip(c["tr_delay"] + n, 0, last)]
        u = _inject(u, 0, c["tr_index"], values, "additive_no_correction", n < x["tr_len"], ops)
    return u


def step(state: StackedState, x: dict, c: dict, ops: StackedOps, phys: Physics) -> StackedState:
    """Advance ``state`` from step ``n-1`` to ``n = x["n"]`` (``c``: :func:`stacked_constants`)."""
    nd = state.u.shape[0]
    # 1-2. pressure gradient on the staggered grids, velocity update with split PML
    dp = ops.grad(state.p)
    coef, dp = _dt_rho0_sg(c, dp)
    m = _product(c["pml_sg_k"])
    u = m * (m * state.u - coef * dp)
    # 3. velocity sources and transducer
    if phys.transducer or any(mode is not None for mode in phys.u_modes):
        u = _velocity_sources(u, x, c, ops, phys)
    # 4-5. divergence, split mass conservation with PML (the nonlinear factor from the old rho)
    rho_old = [state.rho[a] for a in range(nd)]
    factor = c["rho0"]
    if phys.nonlinear:
        factor = 2.0 * sum(rho_old[1:], rho_old[0]) + c["rho0"]
    du = ops.div_parts(u)
    mc = _product(c["pml_k"])
    rho = mc * (mc * state.rho - c["dt"] * jnp.asarray(factor)[None] * du)
    # 6. pressure (mass) source
    if phys.p_mode is not None:
        active = x["n"] < x["p_len"]
        rho = _inject(rho, slice(None), c["p_index"], x["p"], phys.p_mode, active, ops,
                      c.get("p_pattern"))  # fmt: skip
    # 7. equation of state (the same function as the unstacked step; ops: the stacked ones)
    parts = tuple(rho[a] for a in range(nd))
    dus = tuple(du[a] for a in range(nd))
    p = pressure_from_density(parts, dus, c, ops, phys)  # type: ignore[arg-type]
    return StackedState(p, rho, u)


@dataclass(frozen=True)
class StackedLoop:
    """The stacked step as the time loop runs it (:class:`sonotile.physics.base.LoopStep`).

    Attributes: ``phys``: the model's switches; ``fft``: the batched FFT (``cufft`` where the
    operators' backend is cuFFT, else ``xla``)."""

    phys: Physics
    fft: str = "xla"

    def enter(
        self, state: State, c: dict, ops: FourierOps
    ) -> tuple[StackedState, dict, StackedOps]:
        """The stacked state, :func:`stacked_constants` and :class:`StackedOps` (once per chunk
        of steps, inside its program)."""
        shape = tuple(state.p.shape)
        return (stack_state(state), stacked_constants(c, len(shape)),
                StackedOps.of(fourier(ops), shape, self.fft))  # fmt: skip

    def step(self, state: StackedState, x: dict, c: dict, ops: StackedOps) -> StackedState:
        return step(state, x, c, ops, self.phys)

    def leave(self, state: StackedState) -> State:
        return unstack_state(state)


def fourier(ops: Any) -> Any:
    """The Fourier operators of ``ops``: themselves, or those a differentiable run's
    :class:`~sonotile.spectral.linear.AdjointOps` wrap (the stacked step takes its operators'
    arrays, its derivatives come from JAX through its transforms)."""
    inner = getattr(ops, "inner", None)  # not imported: a plain run does not load it
    return inner if isinstance(inner, FourierOps) else ops


def loop_for(phys: Physics, ops: Any) -> StackedLoop | str:
    """The :class:`StackedLoop` of ``phys`` on the single-device operators ``ops``, or why
    there is none (operators without the k-space correction)."""
    ops = fourier(ops)
    if type(ops) is not FourierOps or ops.kappa is None:
        return "the stacked step needs one device's Fourier operators with the k-space correction"
    return StackedLoop(phys, "cufft" if ops.fft == "cufft" else "xla")
