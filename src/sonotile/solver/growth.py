"""Energy growth in a run: the error a run raises when its energy rises with no source on.

A scheme that is unstable (a ``dt`` beyond the CFL limit, an unstable PML setting, an
interface treatment that feeds energy in) grows exponentially; its values stay finite for
thousands of steps, so the finiteness check (:mod:`sonotile.solver.finite`) sees nothing until
the numbers overflow. The time loop (:func:`sonotile.solver.runner.advance`) therefore also
reduces the state to an energy after each chunk of steps, in the same pass over the state as
its finiteness check (:func:`reduce`), where the model has one
(:meth:`sonotile.physics.base.Model.growth_proxy`):

    E = sum over the state's leaves of w_leaf * sum(leaf^2)

(``w``: ``1 / (rho c^2)`` for a pressure or stress, ``rho`` for a velocity, with the medium's
reference values). After the last step of every source (``sources_end``) the true energy of a
wave model no longer rises (the PML and absorption only take energy out), and ``E`` differs
from it by at most the medium's ``spread`` (its ``rho c^2`` from the stiffest to the softest
material). The rule: from the first chunk that ends at or after ``sources_end``, the run stops
with :class:`SimulationGrowing` when ``E`` exceeds :data:`GROWTH_FACTOR` x ``spread`` x the
smallest ``E`` seen since (at chunk ends, at least :data:`MIN_STEPS` steps earlier; taken as
at least ``(1000 eps)^2`` of the largest, round-off being no growth). A run with a source on
is not judged while it is on. Off: ``Settings.growth_check``
(``SONOTILE_GROWTH_CHECK=0``), or ``check_growth=False`` of the loop.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from sonotile.physics.base import GrowthProxy
from sonotile.solver.finite import NonFiniteError

#: The factor (times the medium's spread) by which the energy may rise after the sources end.
GROWTH_FACTOR = 10.0

#: Steps between the smallest energy and a judged one (fewer: not judged yet).
MIN_STEPS = 100

#: The smallest energy is taken as at least ``(ROUNDOFF eps)^2`` of the largest (``eps``: the
#: run's precision): a wave absorbed down to round-off leaves noise whose energy is not judged.
ROUNDOFF = 1e3


class SimulationGrowing(NonFiniteError):
    """The energy of a run rose with no source on (an instability); the run stopped after the
    chunk of steps where the rise passed the limit (no result is returned).

    Attributes:
        model: the model in a user's words (``Model.describe``).
        step: the time step (k-Wave's numbering, from 1) after which the energy was judged.
        factor: the energy then over the smallest energy since the sources ended.
        since: the time step of that smallest energy.
        limit: the factor allowed (:data:`GROWTH_FACTOR` x the medium's spread).
        nt: time steps of the run.
        hint: the likely causes.
    """

    def __init__(self, model: str, step: int, factor: float, since: int, limit: float,
                 nt: int, hint: str) -> None:  # fmt: skip
        self.model, self.step, self.factor, self.since = model, step, factor, since
        self.limit, self.nt, self.hint = limit, nt, hint
        super().__init__(
            f"{model}: the energy grew {factor:.3g}-fold from time step {since} to time step "
            f"{step} of {nt} with no source on (the limit is {limit:.3g}): the run is unstable "
            f"and was stopped before it overflows; {hint}"
        )

    def __reduce__(self) -> tuple[Any, tuple]:
        """Pickled with its fields (e.g. from a worker process)."""
        return SimulationGrowing, (self.model, self.step, self.factor, self.since, self.limit,
                                   self.nt, self.hint)  # fmt: skip

    def of_run(self, where: str) -> SimulationGrowing:
        """The same error for one run of several (``where``: e.g. ``"run 3"``)."""
        return SimulationGrowing(f"{where}: {self.model}", self.step, self.factor, self.since,
                                 self.limit, self.nt, self.hint)  # fmt: skip


#: The causes named with every growth, after the model's own figures.
CAUSES = (
    "likely causes: dt beyond the stability limit (CFL number), a PML whose alpha is too "
    "small or too large for its thickness (pml_alpha), or, in the elastic model, a solid "
    "against a PML'd edge (docs/elastic.md); SONOTILE_GROWTH_CHECK=0 lets the run go on"
)


@partial(jax.jit, static_argnums=1)
def reduce(state: Any, weights: tuple[float, ...]) -> tuple[jax.Array, jax.Array]:
    """``(finite, energy)`` of ``state`` in one program (one pass over each leaf): whether
    every value of every inexact leaf is finite (:func:`sonotile.solver.finite.state_finite`),
    and ``sum_leaf w_leaf sum(leaf^2)`` (``weights`` per leaf; empty: 0; a leaf of weight 0 is
    not squared). A sharded state is reduced where it lives."""
    leaves = jax.tree_util.tree_leaves(state)
    flags = [jnp.all(jnp.isfinite(x)) for x in leaves if jnp.issubdtype(x.dtype, jnp.inexact)]
    finite = jnp.stack(flags).all() if flags else jnp.bool_(True)
    if not weights:
        return finite, jnp.zeros(())
    terms = [w * jnp.sum(jnp.square(x)) for x, w in zip(leaves, weights, strict=True) if w != 0]
    return finite, sum(terms[1:], terms[0]) if terms else jnp.zeros(())


class GrowthMonitor:
    """Watches one run's energy at the ends of its chunks of steps (:func:`check` per chunk)."""

    def __init__(self, model: Any, problem: Any, proxy: GrowthProxy) -> None:
        self.model, self.problem, self.proxy = model, problem, proxy
        self.limit = GROWTH_FACTOR * proxy.spread
        self.low: tuple[float, int] | None = None  # the smallest energy and its step
        self.peak = 0.0  # the largest energy
        eps = float(jnp.finfo(problem.dtype).eps)
        self.floor = (ROUNDOFF * eps) ** 2  # of the peak: energies below it are round-off

    @classmethod
    def of(cls, model: Any, problem: Any) -> GrowthMonitor | None:
        """The monitor of a run, or None where its model has no energy to watch."""
        watch = getattr(model, "growth_proxy", None)
        proxy = None if watch is None else watch(problem)
        return None if proxy is None else cls(model, problem, proxy)

    def check(self, energy: Any, last: int) -> None:
        """Judge the energy (:func:`reduce`) of the state after time step ``last`` (k-Wave's
        numbering, from 1): raise :class:`SimulationGrowing` when it passed the limit."""
        if last < self.proxy.sources_end:
            return
        e = float(energy)
        self.peak = max(self.peak, e)
        if self.low is None or e < self.low[0]:
            self.low = (e, last)
            return
        e0, since = self.low
        base = max(e0, self.floor * self.peak)
        if base <= 0 or last - since < MIN_STEPS or not e > self.limit * base:
            return
        factor = e / base
        hint = f"{_hint(self.model, self.problem)}; {CAUSES}"
        raise SimulationGrowing(self.model.describe, last, factor, since, self.limit,
                                self.problem.grid.nt, hint)  # fmt: skip


def _hint(model: Any, problem: Any) -> str:
    """The model's figures (its CFL number) from :meth:`Model.instability_hint`."""
    try:
        return str(model.instability_hint(problem))
    except Exception:  # noqa: BLE001  # the figures are a help: the error is raised without them
        return "the run became unstable"
