"""One time step of Pennes' bioheat equation with k-Wave's k-space corrected scheme, per shard.

``step(state, x, c, ops, statics) -> state`` advances

    T <- T + dt (p1 div(p2 grad T) - P smooth(T - Ta)) + on q_step

(``smooth``: the k-space correction kappa, :mod:`.ops`), as k-Wave's ``kWaveDiffusion`` does;
for a homogeneous medium the diffusion and perfusion terms are one transform pair,
``F^-1((exp(-dt (D k^2 + P)) - 1) F (T - Ta))``, exact in time. ``q_step = dt q smooth(Q)``
[K] is made once (:func:`constants`); ``x["on"]`` switches (scales) it per step (sonication
duty cycles). Each step then adds its dose (:mod:`.dose`) at the new temperature and keeps the
running maximum.

State: ``T`` [degC], ``cem43`` [min], ``T_max`` [degC]; sensors read them by name
(``State.fields``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.physics.heat.dose import cem43_increment
from sonotile.physics.heat.medium import Coefficients
from sonotile.physics.heat.ops import HeatOps, boundary_k2
from sonotile.spectral.device import to_device


class State(NamedTuple):
    T: jax.Array
    cem43: jax.Array
    T_max: jax.Array

    def fields(self) -> dict[str, jax.Array]:
        """What sensors read: ``T``, ``T_max`` [degC] and ``cem43`` [min]."""
        return {"T": self.T, "T_max": self.T_max, "cem43": self.cem43}


@dataclass(frozen=True)
class Statics:
    """Static switches of the step (hashable: they select code paths at trace time).

    Attributes:
        homogeneous: p1, p2, P and Ta single values: the exact propagator.
        conduction: "field" (heterogeneous p2: grad and div) or "scalar" (the Laplacian).
        perfusion: a perfusion term.
        source: a heat source term.
        boundary: "periodic", "insulating" or "conducting" (the transform of the operators).
    """

    homogeneous: bool
    conduction: str
    perfusion: bool
    source: bool
    boundary: str = "periodic"


def statics_of(co: Coefficients, has_source: bool) -> Statics:
    return Statics(
        homogeneous=co.homogeneous,
        conduction="field" if isinstance(co.p2, np.ndarray) else "scalar",
        perfusion=co.has_perfusion,
        source=has_source,
        boundary=co.boundary,
    )


def build_ops(co: Coefficients, shape: tuple[int, ...], spacing: tuple[float, ...], dt: float,
              dtype: str, statics: Statics, fft: str = "auto") -> HeatOps:  # fmt: skip
    """The operators ``statics`` needs for a time step ``dt`` [s]."""
    hom = statics.homogeneous
    return HeatOps.build(
        shape, spacing, dt, co.d_ref, co.p_ref, dtype,
        gradient=not hom and statics.conduction == "field",
        laplacian=not hom and statics.conduction == "scalar",
        homogeneous=(float(co.diffusivity), float(co.perfusion)) if hom else None,
        fft=fft, boundary=statics.boundary,
    )  # fmt: skip


def _const(v: Any, dtype: str) -> Any:
    """A coefficient on the device: a Python float stays one, a field becomes an array."""
    if isinstance(v, np.ndarray):
        return to_device(v, dtype)
    return v


def constants(co: Coefficients, Q: Any, shape: tuple[int, ...], dt: float, dtype: str,
              ops: HeatOps, statics: Statics,
              spacing: tuple[float, ...] | None = None) -> dict:  # fmt: skip
    """Device constants of a run with time step ``dt`` [s]: ``p1``, ``p2``, ``perf`` [1/s],
    ``ambient`` (Ta; with a conducting boundary the steady temperature, :func:`_steady`) and
    ``ambient_s`` (``smooth(Ta)``) [degC], and ``q`` (``dt q smooth(Q)`` per step at full
    power [K]) when there is a source. ``Q`` [W/m^3]: a number, a numpy or a JAX array
    (traced values are fine: gradients with respect to the source). ``spacing`` [m]: needed
    with a conducting boundary and perfusion."""
    c: dict = {"dt": float(dt)}
    c["p1"], c["p2"] = _const(co.p1, dtype), _const(co.p2, dtype)
    c["perf"], c["ambient"] = _const(co.perfusion, dtype), _const(co.ambient, dtype)
    if statics.perfusion and statics.boundary == "conducting":
        assert spacing is not None, "a conducting boundary's constants need the grid spacing"
        c["ambient"] = _steady(co, shape, spacing, dtype, ops)
    if statics.perfusion and not statics.homogeneous:
        if isinstance(co.ambient, np.ndarray):
            c["ambient_s"] = ops.smooth(c["ambient"])
        else:
            c["ambient_s"] = float(co.ambient) * _kappa0(co, dt)
    if statics.source:
        assert co.q_scale is not None  # checked with the source
        q = jnp.broadcast_to(jnp.asarray(Q, dtype), shape)
        c["q"] = (dt * _const(co.q_scale, dtype)) * ops.smooth(q)
    return c


def _steady(co: Coefficients, shape: tuple[int, ...], spacing: tuple[float, ...], dtype: str,
            ops: HeatOps) -> jax.Array:  # fmt: skip
    """The steady temperature [degC] of a homogeneous perfused medium with a conducting
    boundary (0 one point outside the grid): ``F^-1(P / (D k^2 + P) F Ta)`` (DST-I). The step
    relaxes ``T`` towards it, ``T += F^-1(decay F(T - T_s))``: k-Wave's
    ``dt kappa (-D k^2 F T - P F(T - Ta))``, whose ``F Ta`` is not one mode on a DST."""
    k2 = boundary_k2(shape, spacing, co.boundary)
    ratio = float(co.perfusion) / (float(co.diffusivity) * k2 + float(co.perfusion))
    ta = jnp.full(shape, float(co.ambient), dtype)
    return ops.apply(ta, to_device(ratio, dtype))


def _kappa0(co: Coefficients, dt: float) -> float:
    """kappa at k = 0: ``(1 - exp(-dt P_ref)) / (dt P_ref)`` (1 without perfusion)."""
    x = dt * co.p_ref
    return 1.0 if x == 0 else float(-np.expm1(-x) / x)


def initial_state(T0: Any, shape: tuple[int, ...], dtype: str) -> State:
    """The state before the first step: ``T = T0`` [degC], no dose, ``T_max = T0``."""
    T = jnp.broadcast_to(jnp.asarray(T0, dtype), shape) + jnp.zeros(shape, dtype)
    return State(T, jnp.zeros(shape, dtype), T)


def rate_terms(T: jax.Array, c: dict, ops: HeatOps, statics: Statics) -> jax.Array:
    """``p1 div(p2 grad T) - P smooth(T - Ta)`` [K/s] of a heterogeneous medium (with
    perfusion, ``smooth(T)`` from the conduction term's forward transform of ``T``)."""
    field, sm = statics.conduction == "field", None
    if field:
        grads, sm = ops.grad_smooth(T) if statics.perfusion else (ops.grad(T), None)
        out = c["p1"] * ops.div_sum(tuple(c["p2"] * g for g in grads))
    else:
        lap, sm = ops.laplacian_smooth(T) if statics.perfusion else (ops.laplacian(T), None)
        out = (c["p1"] * c["p2"]) * lap
    if sm is not None:
        out = out - c["perf"] * (sm - c["ambient_s"])
    return out


def step(state: State, x: dict, c: dict, ops: HeatOps, statics: Statics) -> State:
    """Advance ``state`` by one step; ``x["on"]``: the source's power factor this step."""
    T = state.T
    if statics.homogeneous:
        new = T + ops.propagate(T - c["ambient"] if statics.perfusion else T)
    else:
        new = T + c["dt"] * rate_terms(T, c, ops, statics)
    if statics.source:
        new = new + jnp.asarray(x["on"], T.dtype) * c["q"]
    cem = state.cem43 + cem43_increment(new, c["dt"], jnp).astype(T.dtype)
    return State(new, cem, jnp.maximum(state.T_max, new))
