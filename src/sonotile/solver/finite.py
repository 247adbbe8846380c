"""NaN and Inf in a run: the error a run raises when its state stops being finite.

The time loop (:func:`sonotile.solver.runner.advance`) reduces the model's state to one flag
after each chunk of steps (:func:`state_finite`); at the first chunk whose state holds NaN or
Inf it stops and raises :class:`SimulationDiverged`, naming the model, the fields, the time
steps and what the model says such a blow-up most likely means
(:meth:`sonotile.physics.Model.instability_hint`, e.g. the acoustic model's CFL number).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.base.processes import agree_any
from sonotile.physics.base import NONFINITE_HINT
from sonotile.spectral.device import in_host_memory


class NonFiniteError(FloatingPointError):
    """A result holds NaN or Inf."""


class SimulationDiverged(NonFiniteError):
    """The state of a run became NaN or Inf; the run stopped after the chunk of steps where it
    did (no result is returned).

    Attributes:
        model: the model in a user's words (``Model.describe``).
        fields: the state's fields (or a run's results) holding NaN or Inf.
        first, last: the time steps of the chunk within which the state stopped being finite
            (k-Wave's numbering, from 1: the first recorded step is time step 1, which is
            ``p0`` in an initial-value problem).
        nt: time steps of the run.
        hint: what the blow-up most likely means.
        sampled: the first time step whose sensor samples hold NaN or Inf (None: none seen).
    """

    def __init__(self, model: str, fields: Sequence[str], first: int, last: int, nt: int,
                 hint: str, sampled: int | None = None) -> None:  # fmt: skip
        self.model, self.fields, self.first, self.last = model, tuple(fields), first, last
        self.nt, self.hint, self.sampled = nt, hint, sampled
        steps = f"time step {first}" if first == last else f"time steps {first}-{last}"
        names = ", ".join(self.fields) or "the state"
        notes = [f"finite up to time step {first - 1}"] if first > 1 else []
        if sampled is not None:
            notes.append(f"first in the sensor samples at time step {sampled}")
        seen = f" ({', '.join(notes)})" if notes else ""
        super().__init__(f"{model}: NaN or Inf in {names} within {steps} of {nt}{seen}; {hint}")

    def __reduce__(self) -> tuple[Any, tuple]:
        """Pickled with its fields (e.g. from a worker process)."""
        return SimulationDiverged, (self.model, self.fields, self.first, self.last, self.nt,
                                    self.hint, self.sampled)  # fmt: skip

    def of_run(self, where: str) -> SimulationDiverged:
        """The same error for one run of several (``where``: e.g. ``"run 3"``)."""
        return SimulationDiverged(f"{where}: {self.model}", self.fields, self.first, self.last,
                                  self.nt, self.hint, self.sampled)  # fmt: skip


@jax.jit
def state_finite(state: Any) -> jax.Array:
    """Whether every value of every array of ``state`` is finite (one boolean on the device;
    a sharded state is reduced where it lives)."""
    leaves = [x for x in jax.tree_util.tree_leaves(state) if jnp.issubdtype(x.dtype, jnp.inexact)]
    if not leaves:
        return jnp.bool_(True)
    return jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]).all()


def _held_here(x: Any) -> list[Any]:
    """The parts of the array ``x`` that this process holds (its shards, or ``x`` itself)."""
    if getattr(x, "is_fully_addressable", True):
        return [x]
    return [s.data for s in x.addressable_shards]


def finite_everywhere(tree: Any) -> bool:
    """Whether every value of every array of ``tree`` is finite, on every process: an array
    spread over several processes is checked shard by shard where each lives, and the processes
    agree through the host (:func:`sonotile.base.processes.agree_any`), so that no collective
    of XLA's takes part (on a GPU shared by two processes NCCL has none). Every process of a
    job must call it with the same arrays."""
    leaves = jax.tree_util.tree_leaves(tree)
    if all(getattr(x, "is_fully_addressable", True) for x in leaves):
        return bool(state_finite(tree))
    mine = all(bool(state_finite(part)) for x in leaves for part in _held_here(x))
    return not agree_any(not mine)


def bad_fields(state: Any) -> list[str]:
    """The names of ``state.fields()`` holding NaN or Inf (empty: the state has no names)."""
    fields: Mapping[str, Any] = state.fields() if hasattr(state, "fields") else {}
    return [k for k, v in fields.items() if not finite_everywhere(v)]


def first_bad_sample(raw: Mapping[str, Any], rows: int) -> int | None:
    """The first of the first ``rows`` rows (time steps) of the sensor samples ``raw``
    (``{name: (steps, ...)}``) holding NaN or Inf, or None."""
    bad = [np.flatnonzero(~np.isfinite(np.asarray(v)[:rows]).reshape(rows, -1).all(axis=1))
           for v in raw.values()]  # fmt: skip
    found = [int(b[0]) for b in bad if b.size]
    return min(found) if found else None


def _hint(model: Any, problem: Any) -> str:
    """The model's :meth:`~sonotile.physics.Model.instability_hint`, or the general one."""
    try:
        return str(model.instability_hint(problem))
    except Exception:  # noqa: BLE001  # the figures are a help: the error is raised without them
        return NONFINITE_HINT


def check_state(state: Any, model: Any, problem: Any, first: int, last: int,
                raw: Mapping[str, Any] | None = None) -> None:  # fmt: skip
    """Raise :class:`SimulationDiverged` when ``state`` (after time steps ``first..last``,
    k-Wave's numbering) holds NaN or Inf; the model (:class:`sonotile.physics.Model`) names
    itself and the likely cause for ``problem``; ``raw``: the chunk's sensor samples, one row
    per time step from ``first`` (to name the first step they show it)."""
    if finite_everywhere(state):
        return
    hint = _hint(model, problem)
    hint += "; check_finite=False lets a run go on through NaN/Inf (to study an instability)"
    row = first_bad_sample(raw, last - first + 1) if raw else None
    raise SimulationDiverged(
        model.describe, bad_fields(state), first, last, problem.grid.nt, hint,
        None if row is None else first + row,
    )  # fmt: skip


def check_results(results: Mapping[str, Any], model: Any, problem: Any) -> None:
    """Raise :class:`SimulationDiverged` when any array of ``results`` (a whole run's outputs,
    by name) holds NaN or Inf; nothing is checked inside a trace (``jax.jit``, ``jax.grad``),
    where the values are not known."""
    leaves = jax.tree_util.tree_leaves(dict(results))
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        return
    bad = [k for k, v in results.items()
           if not all(all_finite(x) for x in jax.tree_util.tree_leaves(v))]  # fmt: skip
    if bad:
        nt = problem.grid.nt
        raise SimulationDiverged(model.describe, bad, 1, nt, nt, _hint(model, problem))


def all_finite(v: Any) -> bool:
    """Whether every value of ``v`` (a host or device array) is finite (an array outside host
    memory is reduced where it lives)."""
    if not in_host_memory(v):
        return finite_everywhere(v)
    # in host memory: numpy's minimum and maximum (NaN propagates through both, an infinity is
    # one of them): no program to load, no temporary the size of the grid
    a = np.asarray(v)
    if a.size == 0 or not np.issubdtype(a.dtype, np.inexact):
        return True
    if np.iscomplexobj(a):
        return bool(np.isfinite(a).all())
    return bool(np.isfinite(a.min()) and np.isfinite(a.max()))
