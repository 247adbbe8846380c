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
* the state: a pytree of grid-shaped fields (its structure from ``zero_state``) with a method
  ``fields()``: the whole-grid fields sensors can read, by name (a wave model's: ``p``
  (pressure [Pa]) and ``ux``, ``uy``, ``uz`` (particle velocity on its staggered grids [m/s]);
  the heat model's: ``T``, ``T_max`` [degC] and ``cem43`` [min]). A field ``u<axis>`` can
  also be read moved to the grid points (``u<axis>_non_staggered``).
* what a sensor can record (``records``): record name -> ``(kind, fields)``, kind one of
  ``raw`` (time series at the points), ``max`` / ``min`` / ``rms`` (running statistics at the
  points), ``max_all`` / ``min_all`` (running whole-grid extremes), ``final`` (the whole
  fields after the last step); the sensors sample the named fields of ``fields()``.
* per-step inputs (``inputs``): a dict of host arrays with the step index ``"n"`` (int32) and
  whatever the step reads (source signals), one row per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sonotile.model.grid import AXES

#: The problem a model runs (an acoustic :class:`~sonotile.model.problem.Problem`, a
#: :class:`~sonotile.physics.heat.model.HeatProblem`...); the loop reads its ``grid``
#: (:class:`~sonotile.model.grid.Grid`), ``sensor`` (:class:`~sonotile.model.problem.Sensor`)
#: and ``dtype``, the rest is the model's.
AnyProblem = Any

#: What NaN or Inf in a run most likely means, in general (a model's
#: :meth:`Model.instability_hint` says it with its own figures).
NONFINITE_HINT = (
    "the simulation became unstable or overflowed: check dt against the stability limit (CFL "
    "number) and the source amplitudes (float32 overflows above 3.4e38)"
)


@dataclass(frozen=True)
class GrowthProxy:
    """How the loop watches a wave model's energy once its sources are off
    (:mod:`sonotile.solver.growth`).

    Attributes:
        weights: per leaf of the state (in ``jax.tree_util.tree_leaves`` order) the factor of
            its sum of squares in the proxy: ``1 / (rho c^2)`` for a stress or pressure
            [1/Pa], ``rho`` for a velocity [kg/m^3], 0 for a leaf left out (so that the proxy
            is an energy [J/m^3 per grid point], with the medium's reference values).
        spread: how far the proxy may move from the true energy between two states of the same
            energy, >= 1: the largest over the smallest ``rho c^2`` (every speed of the medium)
            or ``rho``, whichever is larger.
        sources_end: time steps during which sources inject (0: none after the start).
    """

    weights: tuple[float, ...]
    spread: float
    sources_end: int


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

    @property
    def warm(self) -> bool:
        """Whether a run starts from :meth:`initial_state` as the state before step 0 (not
        sampled; the first step is step 0), instead of zeros. Not with :attr:`ivp`."""
        ...

    @property
    def splits(self) -> frozenset[str]:
        """The decompositions over devices its operators support (``"pencil"``, ``"lfb"``);
        empty: one device only."""
        ...

    @property
    def auto_splits(self) -> frozenset[str]:
        """The decompositions ``auto`` may pick for it: those of :attr:`splits` whose accuracy
        :func:`sonotile.parallel.auto.auto`'s overlap choice holds for this model."""
        ...

    @property
    def describe(self) -> str:
        """The model in a user's words (e.g. ``"elastic model"``), for messages."""
        ...

    def instability_hint(self, problem: AnyProblem) -> str:
        """What NaN or Inf in a run of ``problem`` most likely means, with the figures that
        say it (e.g. the CFL number), for the error that stops the run."""
        ...

    def growth_proxy(self, problem: AnyProblem) -> GrowthProxy | None:
        """How the loop watches the energy of a run of ``problem`` for growth once its sources
        are off (None: not watched, e.g. heat, whose temperature and dose rise with heating)."""
        ...

    def records(self) -> Records:
        """What a sensor can record (see the module's docstring), in output order."""
        ...

    def observed(self, state: Any, c: dict) -> Any:
        """What the sensors read of ``state`` during the run (an object with ``fields()``):
        the state itself, or with fields made from it and the constants ``c``."""
        ...

    def zero_state(self, shape: tuple[int, ...], dtype: Any, eager: bool = False) -> Any:
        """The state of zeros on a grid (or shard) of ``shape``; ``eager``: outside a trace."""
        ...

    def initial_state(self, c: dict, ops: Any) -> Any:
        """The state of step 0 of an initial-value problem."""
        ...

    def prepare(self, c: dict, ops: Any, state: Any) -> dict:
        """``c`` plus what is made once per chunk of steps from the constants (inside the chunk
        program, before its scan); ``state``: the carry's state (shapes and dtype)."""
        ...

    def step(self, state: Any, x: dict, c: dict, ops: Any) -> Any:
        """Advance ``state`` by one time step (``x``: this step's row of :meth:`inputs`)."""
        ...

    def constants(self, problem: AnyProblem, derive_axes: tuple[int, ...] = ()) -> dict:
        """Device constants of the problem (global; see the module's docstring).
        ``derive_axes``: axes each shard holds whole (a model may derive constants along them
        inside the step instead of storing them)."""
        ...

    def operators(self, problem: AnyProblem, unstagger: bool) -> Any:
        """Single-device spectral operators for the problem: a
        :class:`~sonotile.spectral.operators.FourierOps` (a decomposition builds its own from
        these parameters), :class:`~sonotile.spectral.radial.RadialOps` (axisymmetric grids,
        single device) or :class:`MeshOperators` (a decomposition shards their arrays);
        ``ops`` of the other methods."""
        ...

    def inputs(self, problem: AnyProblem, n0: int, n1: int) -> dict[str, Any]:
        """Per-step inputs for steps ``n0 <= n < n1`` (host arrays, one row per step)."""
        ...

    def joined(self, others: Sequence[Any]) -> Model | None:
        """One model whose step serves this and ``others`` in one vectorised program (their
        constants and inputs stacked), or None when their steps differ."""
        ...

    def memory_estimate(self, problem: AnyProblem) -> int:
        """Device memory of a single-device run of ``problem`` [bytes] (state, step
        temporaries, constants, operators, whole-field sensor aggregates)."""
        ...

    def stacked(self, ops: Any) -> LoopStep | str:
        """Its step on stacked fields for the single-device operators ``ops``
        (:class:`LoopStep`), or a sentence saying why this problem has none."""
        ...


class LoopStep(Protocol):
    """A model's step on another layout of its state, run inside a chunk's scan.

    The loop converts the state on entering and leaving each chunk, so that everything outside
    the scan (checkpoints, the checks between chunks, final fields) sees the model's own state;
    sensors read the loop's state through its ``fields()``. Hashable: a static argument of the
    chunk's program.
    """

    def enter(self, state: Any, c: dict, ops: Any) -> tuple[Any, dict, Any]:
        """The loop's state, constants and operators from the model's ``state``, constants
        ``c`` (after :meth:`Model.prepare`) and operators ``ops``, inside the chunk's program."""
        ...

    def step(self, state: Any, x: dict, c: dict, ops: Any) -> Any:
        """:meth:`Model.step` on the loop's state, constants and operators."""
        ...

    def leave(self, state: Any) -> Any:
        """The model's state from the loop's."""
        ...


#: record name -> ``(kind, field names)`` (see the module's docstring)
Records = dict[str, tuple[str, tuple[str, ...]]]


def wave_records(ndim: int) -> Records:
    """The records of a wave model whose state has ``p`` and ``u`` (k-Wave's names): time
    series, statistics at the points, whole-grid extremes and final fields."""
    u = tuple(f"u{AXES[a]}" for a in range(ndim))
    table: Records = {
        "p": ("raw", ("p",)),
        "u": ("raw", u),
        "u_non_staggered": ("raw", tuple(f"{f}_non_staggered" for f in u)),
    }
    for base, names in (("p", ("p",)), ("u", u)):
        for kind in ("max", "min", "rms", "max_all", "min_all"):
            table[f"{base}_{kind}"] = (kind, names)
        table[f"{base}_final"] = ("final", names)
    return table


class MeshOperators(Protocol):
    """Operators a decomposition can distribute (besides :class:`FourierOps`): a pytree whose
    children are arrays on the ``rfftn`` half spectrum (or broadcastable per-axis vectors of
    it); the engine shards them in its distributed FFT's layout and calls :meth:`on_mesh`."""

    def on_mesh(self, transform: Any) -> Any:
        """The same operators with their transforms replaced by ``transform.spec(f)`` (a
        shard's block -> its block of the spectrum) and ``transform.back(F, like)``."""
        ...


def point_index_keys(c: dict) -> list[str]:
    """The keys of ``c`` that hold point indices (see the module's docstring)."""
    return [k for k in c if k.endswith("_index")]
