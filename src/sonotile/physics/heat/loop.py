"""The heat model's own time loop: chunks of the model's step under ``lax.scan``.

One function, :func:`run`, written against the model interface only (``model.step`` and the
per-step ``inputs``), so the model-agnostic runner can replace it: it takes the model, the
state, the per-step inputs, the constants and the operators, and returns the final state and
what the sensors sampled in every step.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from sonotile.physics.heat.ops import HeatOps
from sonotile.physics.heat.step import sample

#: Steps per compiled chunk (the last chunk of a run may be shorter: one more program).
CHUNK = 512


@partial(jax.jit, static_argnames=("model",))
def _chunk(model: Any, state: Any, xs: dict, c: dict, ops: HeatOps) -> tuple[Any, dict]:
    def body(s: Any, x: dict) -> tuple[Any, dict]:
        s = model.step(s, x, c, ops)
        return s, sample(s, c)

    return lax.scan(body, state, xs)


def run(model: Any, state: Any, xs: dict, c: dict, ops: HeatOps,
        chunk: int = CHUNK) -> tuple[Any, dict]:  # fmt: skip
    """The steps of ``xs`` (``model.inputs``: a dict of per-step arrays) from ``state``.
    Returns the final state and ``{"T": (steps, n_sensors)}`` [degC] when ``c`` has sensor
    points (``c["sensor_index"]``), else ``{}``. Differentiable (``jax.grad``)."""
    nt = len(xs["n"])
    parts: list[dict] = []
    for lo in range(0, nt, chunk):
        piece = {k: jnp.asarray(v[lo : lo + chunk]) for k, v in xs.items()}
        state, samples = _chunk(model, state, piece, c, ops)
        parts.append(samples)
    if not parts or not parts[0]:
        return state, {}
    return state, {k: jnp.concatenate([p[k] for p in parts]) for k in parts[0]}
