"""The interface every set of equations implements (the acoustic, elastic and heat models).

A model is a small, static, hashable object: the time loop (``sonotile.solver.runner``), the
engines on a device mesh (``sonotile.parallel.engine``), checkpoints, batches and gradients hold
one and call these methods; they never import a model's step or constants themselves. Being
hashable, the model is also the static argument that keys every compiled program: two problems
whose models compare equal share their programs.

What a model exchanges with the loop:

* ``constants``: a dict of device constants (Python floats, grid-shaped or broadcastable arrays,
  lazily read fields). Entries whose key ends in ``_index`` are point indices: a tuple of one
  int32 array per axis, or a tuple over axes of such tuples (or None); a decomposed engine
  localises them to each shard. Everything else is sliced like the grid where it has the grid's
  shape (or one axis of it) and replicated otherwise.
* the state: a pytree of grid-shaped fields (its structure from ``zero_state``). For sensors a
  wave model's state has ``p`` (pressure [Pa]) and ``u`` (particle velocity per axis on its
  staggered grid [m/s]).
* per-step inputs (``inputs``): a dict of host arrays with the step index ``"n"`` (int32) and
  whatever the step reads (source signals), one row per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sonotile.model.problem import Problem
    from sonotile.spectral.operators import FourierOps, SpectralOps
    from sonotile.spectral.radial import RadialOps


class Model(Protocol):
    """One set of equations on one grid, as the loop and the engines see it (hashable)."""

    @property
    def ndim(self) -> int:
        """Dimensions of the grid (1, 2 or 3)."""
        ...

    @property
    def ivp(self) -> bool:
        """Whether a run starts from :meth:`initial_state` made (and sampled) at step 0."""
        ...

    def zero_state(self, shape: tuple[int, ...], dtype: Any, eager: bool = False) -> Any:
        """The state of zeros on a grid (or shard) of ``shape``; ``eager``: outside a trace."""
        ...

    def initial_state(self, c: dict, ops: SpectralOps) -> Any:
        """The state of step 0 of an initial-value problem."""
        ...

    def prepare(self, c: dict, ops: SpectralOps, state: Any) -> dict:
        """``c`` plus what is made once per chunk of steps from the constants (inside the chunk
        program, before its scan); ``state``: the carry's state (shapes and dtype)."""
        ...

    def step(self, state: Any, x: dict, c: dict, ops: SpectralOps) -> Any:
        """Advance ``state`` by one time step (``x``: this step's row of :meth:`inputs`)."""
        ...

    def constants(self, problem: Problem, derive_axes: tuple[int, ...] = ()) -> dict:
        """Device constants of the problem (global; see the module's docstring).
        ``derive_axes``: axes each shard holds whole (a model may derive constants along them
        inside the step instead of storing them)."""
        ...

    def operators(self, problem: Problem, unstagger: bool) -> FourierOps | RadialOps:
        """Single-device spectral operators for the problem (a decomposition builds its own
        from these parameters)."""
        ...

    def inputs(self, problem: Problem, n0: int, n1: int) -> dict[str, Any]:
        """Per-step inputs for steps ``n0 <= n < n1`` (host arrays, one row per step)."""
        ...

    def joined(self, others: Sequence[Any]) -> Model | None:
        """One model whose step serves this and ``others`` in one vectorised program (their
        constants and inputs stacked), or None when their steps differ."""
        ...

    def memory_estimate(self, problem: Problem) -> int:
        """Device memory of a single-device run of ``problem`` [bytes] (state, step
        temporaries, constants, operators, whole-field sensor aggregates)."""
        ...


def point_index_keys(c: dict) -> list[str]:
    """The keys of ``c`` that hold point indices (see the module's docstring)."""
    return [k for k in c if k.endswith("_index")]
