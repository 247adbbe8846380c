"""k-Wave's first-order acoustic model behind the model interface (:class:`AcousticModel`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sonotile.model.problem import Problem
from sonotile.physics.acoustic import checks, constants, stacked_step, step
from sonotile.physics.base import GrowthProxy, Records, wave_records
from sonotile.spectral.operators import FourierOps, SpectralOps


@dataclass(frozen=True)
class AcousticModel:
    """Static switches of the acoustic step (hashable; they select code paths at trace time)."""

    ndim: int
    nonlinear: bool
    absorption: str  # lossless | power_law | stokes
    dispersion: bool
    p_mode: str | None  # pressure source mode, None when absent
    u_modes: tuple[str | None, ...]  # per axis: mode or None
    transducer: bool
    p0: bool
    #: additive sources whose points share one signal (pressure; velocity per axis)
    p_shared: bool = False
    u_shared: tuple[bool, ...] = ()
    #: additive sources with signals of their own on one plane x = const (pressure; velocity)
    p_plane: bool = False
    u_plane: tuple[bool, ...] = ()

    @classmethod
    def of(cls, problem: Problem) -> AcousticModel:
        """The switches of a validated problem."""
        s, m = problem.sources, problem.medium
        return cls(
            ndim=problem.grid.ndim,
            nonlinear=m.nonlinear,
            absorption=m.absorption,
            dispersion=m.dispersion,
            p_mode=None if s.p is None else s.p.mode,
            u_modes=tuple(None if u is None else u.mode for u in s.u),
            transducer=s.transducer is not None,
            p0=s.p0 is not None,
            p_shared=constants.shared_signal(s.p) is not None,
            u_shared=tuple(constants.shared_signal(u) is not None for u in s.u),
            p_plane=constants.on_one_plane(s.p),
            u_plane=tuple(constants.on_one_plane(u) for u in s.u),
        )

    @property
    def ivp(self) -> bool:
        """An initial pressure ``p0`` starts the run."""
        return self.p0

    @property
    def warm(self) -> bool:
        """A run without ``p0`` starts from rest."""
        return False

    @property
    def splits(self) -> frozenset[str]:
        """Fourier operators: a distributed FFT (pencil) or local Fourier bases (lfb)."""
        return frozenset({"pencil", "lfb"})

    @property
    def auto_splits(self) -> frozenset[str]:
        """All of them."""
        return self.splits

    @property
    def describe(self) -> str:
        return "acoustic model"

    def instability_hint(self, problem: Problem) -> str:
        """The CFL number and stability limit (:func:`.checks.instability_hint`)."""
        return checks.instability_hint(problem)

    def growth_proxy(self, problem: Problem) -> GrowthProxy | None:
        """The acoustic energy ``p^2 / (rho c^2) + rho |u|^2`` (twice the energy density) with
        the reference speed and the largest density, the density splits left out; the sources
        end with the longest signal (``p0`` is the start). None for a medium read shard by
        shard (no process knows its extremes)."""
        m = problem.medium
        extremes = constants.medium_extremes(problem)
        if extremes is None:  # fields read shard by shard: no whole-field extremes to weigh by
            return None
        rho_max, rho_min, c_max, c_min = extremes
        spread = max((c_max / c_min) ** 2 * rho_max / rho_min, rho_max / rho_min)
        n = self.ndim
        c_ref = c_max if m.c_ref is None else m.c_ref  # k-Wave's default: the largest speed
        weights = (1.0 / (rho_max * c_ref**2),) + (0.0,) * n + (rho_max,) * n  # p, rho, u
        lens = constants.source_lengths(problem)
        end = max(lens["p"], lens["tr"], *lens["u"])
        return GrowthProxy(weights, spread, int(min(end, problem.grid.nt)))

    def observed(self, state: Any, c: dict) -> Any:
        return state

    def records(self) -> Records:
        return wave_records(self.ndim)

    def zero_state(self, shape: tuple[int, ...], dtype: Any, eager: bool = False) -> step.State:
        return step.zero_state(shape, dtype, eager)

    def initial_state(self, c: dict, ops: SpectralOps) -> step.State:
        return step.initial_pressure_state(c, ops, self)

    def prepare(self, c: dict, ops: SpectralOps, state: step.State) -> dict:
        return step.with_source_patterns(c, ops, self, state.p)

    def step(self, state: step.State, x: dict, c: dict, ops: SpectralOps) -> step.State:
        return step.step(state, x, c, ops, self)

    def constants(self, problem: Problem, derive_axes: tuple[int, ...] = ()) -> dict:
        return {
            **constants.medium_constants(problem, derive_axes=derive_axes),
            **constants.source_constants(problem),
        }

    def operators(self, problem: Problem, unstagger: bool) -> FourierOps:
        return constants.spectral_ops(problem, unstagger)

    def inputs(self, problem: Problem, n0: int, n1: int) -> dict[str, Any]:
        return step_inputs(problem, n0, n1)

    def joined(self, others: Sequence[Any]) -> AcousticModel | None:
        """Filtered source masks (:meth:`prepare`) only where every run's source points share
        one signal, plane kernels only where every run's source lies on one plane (the runs
        may differ in that); None when anything else differs."""

        def folded(m: AcousticModel) -> AcousticModel:
            return replace(
                m,
                p_shared=all(o.p_shared for o in others),
                u_shared=tuple(all(s) for s in zip(*(o.u_shared for o in others))),
                p_plane=all(o.p_plane for o in others),
                u_plane=tuple(all(s) for s in zip(*(o.u_plane for o in others))),
            )

        out = folded(self)
        return out if all(folded(o) == out for o in others) else None

    def memory_estimate(self, problem: Problem) -> int:
        return checks.memory_estimate(problem)

    def stacked(self, ops: Any) -> stacked_step.StackedLoop | str:
        """The step on stacked fields (:func:`.stacked_step.loop_for`), or why not."""
        return stacked_step.loop_for(self, ops)


def step_inputs(problem: Problem, n0: int, n1: int) -> dict[str, Any]:
    """Scan inputs for steps ``n0 <= n < n1``: step index, source values and source lengths."""
    rows = constants.signal_rows(problem, n0, n1)
    return scan_inputs(n0, n1, rows, constants.source_lengths(problem), problem.dtype)


def scan_inputs(
    n0: int, n1: int, rows: dict[str, Any], lens: dict[str, Any], dtype: Any, xp: Any = np
) -> dict[str, Any]:
    """The scan's inputs for steps ``n0 <= n < n1`` from the source rows ``{"p": (n1-n0, N)
    or None, "u": per axis (n1-n0, N) or None}`` and the signals' lengths ``{"p", "u" (per
    axis), "tr"}`` [steps]; ``xp``: numpy or jax.numpy (traced rows)."""
    k = n1 - n0
    xs: dict[str, Any] = {"n": xp.arange(n0, n1, dtype=np.int32)}
    if rows["p"] is not None:
        xs["p"] = rows["p"]
        xs["p_len"] = xp.full(k, lens["p"], np.int32)
    xs["u"] = tuple(r if r is not None else xp.zeros((k, 0), dtype) for r in rows["u"])
    xs["u_len"] = tuple(xp.full(k, n, np.int32) for n in lens["u"])
    xs["tr_len"] = xp.full(k, lens["tr"], np.int32)
    return xs
