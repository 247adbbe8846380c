"""The heat model's own time loop: chunks of :func:`~.step.step` under ``lax.scan``.

One function, :func:`run`, to be replaced by the model-agnostic runner: it takes the state,
the per-step inputs (the source's power factor per step), the constants, the operators and
the statics, and returns the final state and what the sensors sampled in every step.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from sonotile.physics.heat.ops import HeatOps
from sonotile.physics.heat.step import State, Statics, sample, step

#: Steps per compiled chunk (the last chunk of a run may be shorter: one more program).
CHUNK = 512


@partial(jax.jit, static_argnames=("statics",))
def _chunk(
    state: State, on: jax.Array, c: dict, ops: HeatOps, statics: Statics
) -> tuple[State, dict]:
    def body(s: State, o: jax.Array) -> tuple[State, dict]:
        s = step(s, {"on": o}, c, ops, statics)
        return s, sample(s, c)

    return lax.scan(body, state, on)


def run(state: State, on: Any, c: dict, ops: HeatOps, statics: Statics,
        chunk: int = CHUNK) -> tuple[State, dict]:  # fmt: skip
    """``len(on)`` steps from ``state``; ``on``: ``(Nt,)`` power factors of the source per step
    (1: on, 0: off). Returns the final state and ``{"T": (Nt, n_sensors)}`` [degC] when
    ``c`` has sensor points (``c["index"]``), else ``{}``. Differentiable (``jax.grad``)."""
    on = jnp.asarray(on, state.T.dtype)
    parts: list[dict] = []
    for lo in range(0, int(on.shape[0]), chunk):
        state, samples = _chunk(state, on[lo : lo + chunk], c, ops, statics)
        parts.append(samples)
    if not parts or not parts[0]:
        return state, {}
    return state, {k: jnp.concatenate([p[k] for p in parts]) for k in parts[0]}
