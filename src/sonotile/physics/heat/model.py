"""The heat model behind the model interface (:class:`sonotile.physics.base.Model`), on a
validated :class:`HeatProblem` (the thermal counterpart of the acoustic ``Problem``).

:class:`HeatModel` is static and hashable (the switches of the step); :func:`heat_problem`
checks the user's input in k-Wave's names before anything runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

from sonotile.model.grid import Grid
from sonotile.model.problem import ProblemError, Sensor
from sonotile.physics.base import Records
from sonotile.physics.heat import step as heat_step
from sonotile.physics.heat.medium import (
    Coefficients,
    ThermalMedium,
    ThermalSource,
    check_source,
    coefficients,
    stability_limit,
)
from sonotile.physics.heat.ops import HeatOps, boundary_k2

#: What a heat sensor records: the temperature at the points every step, and the whole fields
#: after the last step (temperature, its maximum over the run, the thermal dose).
HEAT_RECORDS: Records = {
    "T": ("raw", ("T",)),
    "T_final": ("final", ("T",)),
    "T_max": ("final", ("T_max",)),
    "cem43": ("final", ("cem43",)),
}


@dataclass(frozen=True, eq=False)
class HeatProblem:
    """A validated heat run: grid ``shape``/``spacing`` [m], ``dt`` [s], ``nt`` steps, the
    scheme's coefficients, ``T0`` [degC] and ``Q`` [W/m^3] (numbers, arrays, or traced JAX
    values for ``Q``), ``on`` ``(nt,)`` source power factor per step, sensor points (per-axis
    indices in k-Wave's mask order, or None), ``dtype`` and ``fft`` backend; ``cem43_0`` [min]
    and ``T_max0`` [degC]: the dose and maximum so far when a run goes on from an earlier one
    (None: none, ``T0``).

    The time loop (:mod:`sonotile.solver.runner`) reads it as it reads an acoustic problem:
    ``grid``, ``sensor`` (:data:`HEAT_RECORDS`) and ``dtype``."""

    shape: tuple[int, ...]
    spacing: tuple[float, ...]
    dt: float
    nt: int
    co: Coefficients
    T0: Any
    Q: Any
    on: np.ndarray
    points: tuple[np.ndarray, ...] | None
    dtype: str = "float64"
    fft: str = "xla"
    cem43_0: Any = None
    T_max0: Any = None

    @property
    def grid(self) -> Grid:
        """The grid and time axis (at least one step)."""
        return Grid(self.shape, self.spacing, self.dt, max(self.nt, 1))

    @property
    def sensor(self) -> Sensor:
        """The sensor: temperature at the points (when there are any) and the whole fields."""
        finals = ("T_final", "T_max", "cem43")
        if self.points is None or self.points[0].size == 0:
            return Sensor(record=finals)
        index = np.stack([np.asarray(i) for i in self.points], axis=1).astype(np.int64)
        return Sensor(index=index, record=("T", *finals))


def dt_limit(co: Coefficients, shape: tuple[int, ...], spacing: tuple[float, ...]) -> float:
    """The stability limit [s] of the medium on this grid and boundary (``inf``: none)."""
    k = np.sqrt(boundary_k2(shape, spacing, co.boundary))
    return stability_limit(co, float(np.max(k)), float(np.min(k)))


def check_dt(dt: float, limit: float) -> None:
    """Raise :class:`ProblemError` for a time step that is not positive or beyond ``limit``."""
    if not (np.isfinite(dt) and dt > 0):
        raise ProblemError(f"dt = {dt} s: must be finite and > 0")
    if dt > limit:
        raise ProblemError(
            f"dt = {dt:g} s is beyond the stability limit dt_limit = {limit:g} s of this medium "
            "(raise medium.diffusion_coeff_ref / perfusion_coeff_ref towards the largest "
            "values, or take smaller steps)"
        )


def heat_problem(shape: tuple[int, ...], spacing: tuple[float, ...], medium: Any, source: Any,
                 nt: int, dt: float, *, on: Any = None,
                 sensor: tuple[np.ndarray, ...] | None = None, dtype: str = "float64",
                 fft: str = "xla", cem43_0: Any = None,
                 T_max0: Any = None) -> HeatProblem:  # noqa: N803  # fmt: skip
    """Validate a run of ``nt`` steps of ``dt`` [s]; raises :class:`ProblemError` naming the
    bad input (medium and source in k-Wave's names, ``dt`` against ``dt_limit``, ``on``).
    ``cem43_0`` [min], ``T_max0`` [degC]: see :class:`HeatProblem`."""
    if dtype not in ("float32", "float64"):
        raise ProblemError(f"dtype: {dtype!r}, expected 'float32' or 'float64'")
    co = coefficients(ThermalMedium.of(medium), shape)
    src = ThermalSource.of(source)
    check_source(src, co, shape)
    check_dt(float(dt), dt_limit(co, shape, spacing))
    if int(nt) != nt or nt < 0:
        raise ProblemError(f"Nt = {nt}: must be a whole number of steps >= 0")
    switch = np.ones(int(nt)) if on is None else np.asarray(on, dtype=np.float64)
    if switch.shape != (int(nt),):
        raise ProblemError(f"on: shape {switch.shape}, expected ({int(nt)},) (one per step)")
    return HeatProblem(tuple(shape), tuple(spacing), float(dt), int(nt), co, src.T0, src.Q,
                       switch, sensor, dtype, fft, cem43_0, T_max0)  # fmt: skip


def check_decomposition(co: Coefficients, decomposition: Any) -> None:
    """Raise :class:`ProblemError` for a decomposed run with an insulating or conducting
    boundary (their DCT-I / DST-I have no distributed transform here: one device only)."""
    bc = co.boundary
    if bc != "periodic" and str(decomposition) not in ("single", "auto"):
        raise ProblemError(
            f"decomposition {str(decomposition)!r} with medium.boundary_condition = {bc!r}: "
            "insulating and conducting boundaries run on one device only (decomposition "
            "'single'); a pencil mesh needs the periodic boundary"
        )


@dataclass(frozen=True)
class HeatModel:
    """Pennes bioheat with dose behind the model interface: ``statics`` are the step's switches.

    State: :class:`~sonotile.physics.heat.step.State` (``T`` [degC], ``cem43`` [min], ``T_max``
    [degC]); it starts from ``T0`` (``warm``: the first step is step 0). Constants: ``p1``,
    ``p2``, ``perf``, ``ambient``, ``ambient_s``, ``q``
    (:func:`~sonotile.physics.heat.step.constants`), ``T0``, ``cem43_0`` and ``T_max0``.
    Inputs per step: ``n`` and ``on`` (the source's power factor). Sensors: :data:`HEAT_RECORDS`.
    """

    ndim: int
    statics: heat_step.Statics

    @classmethod
    def of(cls, problem: HeatProblem) -> HeatModel:
        has_q = problem.Q is not None and (not _concrete(problem.Q) or bool(np.any(problem.Q)))
        return cls(len(problem.shape), heat_step.statics_of(problem.co, has_q))

    @property
    def ivp(self) -> bool:
        """The initial temperature is not a recorded step (k-Wave records after each step)."""
        return False

    @property
    def warm(self) -> bool:
        """A run starts from the initial temperature (and dose, maximum)."""
        return True

    @property
    def splits(self) -> frozenset[str]:
        """A distributed FFT (pencil); LFB's operators are the acoustic model's. Insulating
        and conducting boundaries (DCT-I / DST-I) run on one device."""
        return frozenset({"pencil"}) if self.statics.boundary == "periodic" else frozenset()

    @property
    def auto_splits(self) -> frozenset[str]:
        """All of them."""
        return self.splits

    @property
    def describe(self) -> str:
        return "heat model"

    def growth_proxy(self, problem: HeatProblem) -> None:
        """Not watched: temperature and dose rise with heating, and a ``dt`` beyond the
        stability limit is refused before the run."""
        return None

    def instability_hint(self, problem: HeatProblem) -> str:
        """dt against the stability limit (a dt beyond it is refused before the run)."""
        limit = dt_limit(problem.co, problem.shape, problem.spacing)
        within = "no limit" if math.isinf(limit) else f"dt_limit = {limit:.3g} s"
        return (
            f"the run overflowed or became unstable (dt = {problem.dt:.3g} s, stability limit: "
            f"{within}): check the source power Q (float32 overflows above 3.4e38) and the "
            "medium, or take smaller steps"
        )

    def observed(self, state: Any, c: dict) -> Any:
        return state

    def records(self) -> Records:
        return HEAT_RECORDS

    def zero_state(self, shape: tuple[int, ...], dtype: Any, eager: bool = False) -> Any:
        z = jnp.zeros(shape, dtype)
        return heat_step.State(z, z, z)

    def initial_state(self, c: dict, ops: Any) -> heat_step.State:
        T0 = c["T0"]  # cem43_0 may be a number (0: no dose yet), T0 and T_max0 are fields
        return heat_step.State(T0, c["cem43_0"] + jnp.zeros_like(T0), c["T_max0"])

    def prepare(self, c: dict, ops: HeatOps, state: Any) -> dict:
        return c

    def step(self, state: heat_step.State, x: dict, c: dict, ops: HeatOps) -> heat_step.State:
        return heat_step.step(state, x, c, ops, self.statics)

    def operators(self, problem: HeatProblem, unstagger: bool = False) -> HeatOps:
        return heat_step.build_ops(problem.co, problem.shape, problem.spacing, problem.dt,
                                   problem.dtype, self.statics, problem.fft)  # fmt: skip

    def constants(self, problem: HeatProblem, derive_axes: tuple[int, ...] = (),
                  ops: HeatOps | None = None) -> dict:  # fmt: skip
        """Device constants (``ops``: the operators, built when not given; the source term is
        filtered with them once)."""
        ops = ops if ops is not None else self.operators(problem)
        c = heat_step.constants(problem.co, problem.Q, problem.shape, problem.dt, problem.dtype,
                                ops, self.statics, problem.spacing)  # fmt: skip
        c["T0"] = _field(problem.T0, problem)
        c["cem43_0"] = 0.0 if problem.cem43_0 is None else _field(problem.cem43_0, problem)
        c["T_max0"] = c["T0"] if problem.T_max0 is None else _field(problem.T_max0, problem)
        return c

    def inputs(self, problem: HeatProblem, n0: int, n1: int) -> dict[str, Any]:
        return {"n": np.arange(n0, n1, dtype=np.int32), "on": problem.on[n0:n1]}

    def joined(self, others: Sequence[Any]) -> HeatModel | None:
        return self if all(o == self for o in others) else None

    def stacked(self, ops: Any) -> str:
        """Why there is no step on stacked fields: the acoustic model's alone has one."""
        return f"the {self.describe} has no stacked step"

    def memory_estimate(self, problem: HeatProblem) -> int:
        """State (3 fields), step temporaries (~4 fields; 2 more for a DCT-I / DST-I, whose
        field is extended to twice its length along an axis), constant fields, operators."""
        point = 8 if problem.dtype == "float64" else 4
        n = int(np.prod(problem.shape))
        fields = sum(isinstance(v, np.ndarray) for v in (problem.co.p1, problem.co.p2,
                     problem.co.perfusion, problem.co.ambient))  # fmt: skip
        st = self.statics
        dtt = 0 if st.boundary == "periodic" else 2 + int(st.perfusion)  # + the steady field
        return point * n * (3 + 4 + fields + 2 * int(st.source) + 4 + dtt)


def _field(v: Any, problem: HeatProblem) -> Any:
    """``v`` (a number or a field) as a grid-shaped array in the run's dtype."""
    return jnp.broadcast_to(jnp.asarray(v, problem.dtype), problem.shape) + 0


def _concrete(v: Any) -> bool:
    return isinstance(v, np.ndarray | float | int)
