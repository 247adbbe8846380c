"""The heat model's user API in k-Wave's names: :class:`KWaveDiffusion` (``take_time_step``,
``T``, ``cem43``, ``lesion_map``) and the functional :func:`bioheat` (for sweeps, ``vmap`` and
``jax.grad``).

Both run the heat model (:mod:`sonotile.physics.heat`) through the common time loop:
``KWaveDiffusion`` through an engine (:func:`sonotile.parallel.engine.engine_for`: one device or
a decomposition, chunks, progress), :func:`bioheat` as one traced function
(:func:`sonotile.solver.runner.traced_run`)."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike

from sonotile.api.options import RunOptions, renamed
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import SINGLE, Decomposition
from sonotile.parallel.engine import engine_for
from sonotile.parallel.traced import traced_runner
from sonotile.physics.heat.dose import LESION_CEM43
from sonotile.physics.heat.medium import ThermalMedium, ThermalSource, check_source, coefficients
from sonotile.physics.heat.model import (
    HeatModel,
    HeatProblem,
    check_decomposition,
    dt_limit,
    heat_problem,
)
from sonotile.physics.heat.step import State
from sonotile.solver import finite, runner
from sonotile.solver import sensors as sens


class HeatResult(NamedTuple):
    """A heat run's result (JAX arrays; a pytree).

    Attributes:
        T: final temperature [degC], grid-shaped.
        cem43: accumulated thermal dose [min], grid-shaped.
        T_max: highest temperature during the run [degC], grid-shaped.
        sensor_data: temperature at the sensor points ``(n_sensors, Nt)`` [degC] (points in
            k-Wave's mask order), or ``(0, Nt)`` without sensor.
    """

    T: jax.Array
    cem43: jax.Array
    T_max: jax.Array
    sensor_data: jax.Array


def grid_of(kgrid: Any) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """``(shape, spacing [m])`` of a :class:`sonotile.KWaveGrid` or anything with ``shape``
    and ``spacing`` (a number for all axes, or one per axis)."""
    shape = tuple(int(n) for n in kgrid.shape)
    d = np.atleast_1d(np.asarray(kgrid.spacing, dtype=np.float64))
    spacing = tuple(float(v) for v in (np.repeat(d, len(shape)) if d.size == 1 else d))
    if not 1 <= len(shape) <= 3 or len(spacing) != len(shape):
        raise ProblemError(f"kgrid: shape {shape} and spacing {spacing}: 1 to 3 axes, one each")
    return shape, spacing


def sensor_index(sensor: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, ...] | None:
    """Per-axis indices of ``sensor.mask`` (or a mask array) in k-Wave's (column-major)
    order; None without a sensor."""
    mask = getattr(sensor, "mask", sensor)
    if mask is None:
        return None
    m = np.asarray(mask)
    if m.shape != shape:
        raise ProblemError(f"sensor.mask: shape {m.shape}, expected the grid shape {shape}")
    if not np.all((m == 0) | (m == 1)):
        raise ProblemError("sensor.mask: must be binary (values 0 or 1)")
    lin = np.flatnonzero(m.ravel(order="F"))
    return tuple(i.astype(np.int32) for i in np.unravel_index(lin, shape, order="F"))


def x64_for(dtype: str) -> contextlib.AbstractContextManager[Any]:
    """JAX's 64-bit mode for a float64 run (a no-op when it is on or the run is float32)."""
    if dtype == "float64" and not jax.enable_x64.value:
        return jax.enable_x64(True)
    return contextlib.nullcontext()


def bioheat(kgrid: Any, medium: Any, source: Any, Nt: int, dt: float, *,  # noqa: N803
            on: ArrayLike | None = None, sensor: Any = None, dtype: str = "float64",
            fft: str = "xla", decomposition: Decomposition | str = SINGLE,
            mesh: tuple[int, ...] | None = None,
            mesh_shape: tuple[int, ...] | None = None) -> HeatResult:  # fmt: skip
    """Run ``Nt`` steps of ``dt`` [s] of Pennes' bioheat equation from ``source.T0``.

    ``medium``: :class:`ThermalMedium` or a dict of its k-Wave names; ``source``:
    :class:`ThermalSource` (``T0`` [degC], ``Q`` [W/m^3], which may be a JAX array: gradients
    with respect to it); ``on``: ``(Nt,)`` power factor of ``Q`` per step (default 1 throughout,
    :func:`~sonotile.physics.heat.sources.sonication`); ``sensor``: a mask (or an object with
    ``mask``). ``fft="xla"`` keeps the run differentiable; ``"auto"`` may use FFTW (CPU,
    float32). ``decomposition="pencil"``: on a pencil mesh of ``mesh`` devices per split axis
    (default all on one axis; even blocks), differentiable too (``mesh_shape``: the former
    spelling of ``mesh``). Raises :class:`ProblemError` for bad
    input, before any step, and :class:`~sonotile.solver.finite.SimulationDiverged` when a
    call outside a trace ends with NaN or Inf.
    """
    shape, spacing = grid_of(kgrid)
    problem = heat_problem(shape, spacing, medium, source, Nt, dt, on=on,
                           sensor=sensor_index(sensor, shape), dtype=dtype, fft=fft)  # fmt: skip
    if mesh is None:
        mesh = renamed({"mesh_shape": mesh_shape}, "mesh_shape", "mesh", "bioheat")
    how = RunOptions.of(None, decomposition=decomposition, mesh=mesh)
    check_decomposition(problem.co, how.decomposition)
    with x64_for(dtype):
        raw, state = traced_problem(problem, how.decomposition, how.mesh)
        if not isinstance(state.T, jax.core.Tracer):  # a plain call: checked at the end
            finite.check_state(state, HeatModel.of(problem), problem, 1, problem.nt)
        n_sens = 0 if problem.points is None else int(problem.points[0].size)
        data = raw["T"].T if "T" in raw else jnp.zeros((n_sens, int(Nt)), dtype)
        return HeatResult(state.T, state.cem43, state.T_max, data)


def bioheat_batch(kgrid: Any, medium: Any, source: Any, Nt: int, dt: float, *,  # noqa: N803
                  Q: ArrayLike | None = None, on: ArrayLike | None = None,  # noqa: N803
                  sensor: Any = None, dtype: str = "float64",
                  fft: str = "xla") -> HeatResult:  # fmt: skip
    """Several heat runs in one vectorised call (``jax.vmap`` of :func:`bioheat`): the same
    grid, medium and ``source.T0``, with a batch of heat sources ``Q`` ``(B, *grid)``
    [W/m^3] (None: ``source.Q`` in every run) and/or of schedules ``on`` ``(B, Nt)`` (power
    factor per step; ``(Nt,)`` or None: one for all). Returns a :class:`HeatResult` whose
    arrays have a leading batch axis ``B``. Raises :class:`ProblemError` for bad input, before
    any step; a batch costs about ``B`` runs' memory on one device."""
    shape, spacing = grid_of(kgrid)
    src = ThermalSource.of(source)
    qb, onb = _batch(src.Q if Q is None else Q, on, shape, int(Nt), Q is not None)
    q0 = qb[0] if Q is not None else qb
    problem = heat_problem(shape, spacing, medium, {"T0": src.T0, "Q": q0}, Nt, dt,
                           on=onb[0] if onb.ndim == 2 else onb,
                           sensor=sensor_index(sensor, shape), dtype=dtype, fft=fft)  # fmt: skip
    n_sens = 0 if problem.points is None else int(problem.points[0].size)

    def one(q: jax.Array, switch: jax.Array) -> HeatResult:
        raw, state = traced_problem(replace(problem, Q=q), on=switch)
        data = raw["T"].T if "T" in raw else jnp.zeros((n_sens, int(Nt)), dtype)
        return HeatResult(state.T, state.cem43, state.T_max, data)

    with x64_for(dtype):
        axes = (0 if Q is not None else None, 0 if onb.ndim == 2 else None)
        return jax.vmap(one, in_axes=axes)(jnp.asarray(qb, dtype), jnp.asarray(onb, dtype))


def _batch(q: Any, on: Any, shape: tuple[int, ...], nt: int,
           q_batched: bool) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``Q`` and ``on`` of a batch, checked: the batch sizes agree, every value finite."""
    if q is None:
        raise ProblemError("Q: a batch of heat runs needs a heat source (Q or source.Q)")
    qa = np.asarray(q, dtype=np.float64)
    if q_batched and (qa.ndim != len(shape) + 1 or qa.shape[1:] != shape):
        raise ProblemError(f"Q: shape {qa.shape}, expected (B, {', '.join(map(str, shape))})")
    sw = np.ones(nt) if on is None else np.asarray(on, dtype=np.float64)
    if sw.shape not in ((nt,), (sw.shape[0], nt)) or sw.ndim > 2:
        raise ProblemError(f"on: shape {sw.shape}, expected ({nt},) or (B, {nt})")
    sizes = {n for n, b in ((qa.shape[0], q_batched), (sw.shape[0], sw.ndim == 2)) if b}
    if len(sizes) > 1:
        raise ProblemError(f"Q and on: batch sizes {sorted(sizes)} differ")
    if not sizes:
        raise ProblemError("a batch needs Q of shape (B, *grid) or on of shape (B, Nt)")
    for name, a in (("Q", qa), ("on", sw)):
        if not np.all(np.isfinite(a)):
            raise ProblemError(f"{name}: contains NaN or Inf")
    return qa, sw


def traced_problem(problem: HeatProblem, decomposition: Decomposition = SINGLE,
                   mesh: tuple[int, ...] | None = None, on: Any = None,
                   ) -> tuple[dict[str, jax.Array], State]:  # fmt: skip
    """A validated problem as one traced run (:func:`sonotile.solver.runner.traced_run`; on a
    pencil mesh inside :func:`sonotile.parallel.differentiable.mesh_runner`): the raw sensor
    samples (``{"T": (nt, n_sensors)}`` or ``{}``) and the final state. ``on``: ``(nt,)``
    power factors in place of ``problem.on`` (may be traced: a batch of schedules)."""
    model = HeatModel.of(problem)
    c = model.constants(problem)
    layout = sens.layout_of(problem.sensor, problem.shape, problem.nt, problem.dt,
                            model.records())  # fmt: skip
    xs = {k: jnp.asarray(v) for k, v in model.inputs(problem, 0, problem.nt).items()}
    if on is not None:
        xs["on"] = jnp.asarray(on, xs["on"].dtype)
    tr = traced_runner(model, problem, layout, decomposition, mesh)
    run = tr.run
    if decomposition == SINGLE:
        run = _compiled(_SINGLE_RUNS, (model, layout, problem.shape, problem.dtype), tr.run)
    raw, _, state = run(c, xs, tr.fixed)
    return raw, State(*state)


#: The jitted one-device runs by their static parts ``(model, layout, shape, dtype)``: a later
#: call with the same parts (other source, schedule or medium values, which are arguments)
#: reuses the compiled program instead of tracing it again. The least recently used go first.
_SINGLE_RUNS: OrderedDict[tuple, Callable] = OrderedDict()
_SINGLE_RUNS_KEPT = 16


def _compiled(cache: OrderedDict[tuple, Callable], key: tuple, run: Callable) -> Callable:
    """``jax.jit(run)``, kept in ``cache`` under ``key`` (``run`` is used on a miss only)."""
    if key not in cache:
        cache[key] = jax.jit(run)
        while len(cache) > _SINGLE_RUNS_KEPT:
            cache.popitem(last=False)
    cache.move_to_end(key)
    return cache[key]


def engine_run(problem: HeatProblem, decomposition: Decomposition = SINGLE,
               progress: bool | None = False, check_finite: bool = True,
               **engine_args: Any) -> tuple[dict, dict]:  # fmt: skip
    """A validated problem through an engine (one device or a decomposition,
    :func:`sonotile.parallel.engine.engine_for`): ``(raw, final)`` as
    :func:`sonotile.solver.runner.run_engine` returns them (``final``: ``T_final``,
    ``T_max_final``, ``cem43_final``)."""
    engine, _ = engine_for(problem, decomposition, **engine_args)  # type: ignore[arg-type]
    return runner.run_engine(engine, progress=progress, check_finite=check_finite)


class KWaveDiffusion:
    """k-Wave's ``kWaveDiffusion`` object: Pennes bioheat, k-space corrected, with dose.

    ``KWaveDiffusion(kgrid, medium, source, sensor)`` then ``take_time_step(Nt, dt)`` as often
    as needed (change ``Q`` between calls to switch the source, as k-Wave's examples do).
    ``kgrid``: :class:`sonotile.KWaveGrid` (or ``shape``/``spacing``); ``medium``, ``source``:
    as :func:`bioheat`; ``sensor``: a mask or an object with ``mask`` (None: no sensor).
    ``dtype``: "float64" (k-Wave's default) or "float32"; ``fft``: "auto", "xla" or "fftw";
    ``decomposition``, ``mesh`` (devices per split axis; ``mesh_shape``: its former spelling)
    and ``engine_args`` (``overlap``, ``devices``...: :func:`sonotile.parallel.engine.
    engine_for`): where the steps run, ``progress``: report progress (None: on a terminal);
    ``check_finite``: stop a call at the first chunk of steps whose temperature, dose or maximum
    holds NaN or Inf (:class:`~sonotile.solver.finite.SimulationDiverged`; False: run on).

    Attributes (numpy): ``T`` [degC], ``Q`` [W/m^3], ``cem43`` [min] (settable), ``T_max``
    [degC], ``lesion_map`` (``cem43 >= 240``), ``lesion_size`` [m^n], ``sensor_data``
    ``(n_sensors, steps taken)`` [degC], ``time_steps_taken``, ``dt_limit`` [s].
    """

    def __init__(self, kgrid: Any, medium: Any, source: Any, sensor: Any = None, *,
                 dtype: str = "float64", fft: str = "auto",
                 decomposition: Decomposition | str = SINGLE, mesh: tuple[int, ...] | None = None,
                 progress: bool | None = False, check_finite: bool = True,
                 **engine_args: Any) -> None:  # fmt: skip
        if dtype not in ("float32", "float64"):
            raise ProblemError(f"dtype: {dtype!r}, expected 'float32' or 'float64'")
        self.shape, self.spacing = grid_of(kgrid)
        self.dtype, self.fft = dtype, fft
        if mesh is None:
            mesh = renamed(engine_args, "mesh_shape", "mesh", "KWaveDiffusion")
        how = RunOptions.of(None, decomposition=decomposition, mesh=mesh)
        self.decomposition = how.decomposition
        self._engine_args = engine_args | {"mesh_shape": how.mesh}
        self.progress = progress
        self.check_finite = check_finite
        self._medium = ThermalMedium.of(medium)
        self._co = coefficients(self._medium, self.shape)
        check_decomposition(self._co, self.decomposition)
        src = ThermalSource.of(source)
        check_source(src, self._co, self.shape)
        self._Q = src.Q
        self._index = sensor_index(sensor, self.shape)
        with x64_for(dtype):
            T = jnp.broadcast_to(jnp.asarray(src.T0, dtype), self.shape) + 0
            self._state = State(T, jnp.zeros_like(T), T)
        self._samples: list[np.ndarray] = []
        self.time_steps_taken = 0

    @property
    def dt_limit(self) -> float:
        """The largest stable time step [s] (``inf``: any)."""
        return dt_limit(self._co, self.shape, self.spacing)

    def take_time_step(self, Nt: int, dt: float, on: ArrayLike | None = None) -> None:  # noqa: N803
        """Advance ``Nt`` steps of ``dt`` [s] with the current ``Q`` (k-Wave's takeTimeStep);
        ``on``: ``(Nt,)`` power factor of ``Q`` per step (default 1: on throughout)."""
        st = self._state
        problem = heat_problem(self.shape, self.spacing, self._medium,
                               {"T0": np.asarray(st.T), "Q": self._Q}, Nt, dt, on=on,
                               sensor=self._index, dtype=self.dtype, fft=self.fft,
                               cem43_0=np.asarray(st.cem43),
                               T_max0=np.asarray(st.T_max))  # fmt: skip
        if problem.nt == 0:
            return
        with x64_for(self.dtype):
            raw, final = engine_run(problem, self.decomposition, self.progress,
                                    self.check_finite, **self._engine_args)  # fmt: skip
            self._state = State(*(jnp.asarray(final[f"{k}_final"], self.dtype)
                                  for k in ("T", "cem43", "T_max")))  # fmt: skip
        if "T" in raw:
            self._samples.append(np.asarray(raw["T"]).T)
        self.time_steps_taken += int(Nt)

    def _set(self, name: str, value: ArrayLike) -> None:
        with x64_for(self.dtype):
            v = jnp.broadcast_to(jnp.asarray(value, self.dtype), self.shape) + 0
            self._state = self._state._replace(**{name: v})

    @property
    def T(self) -> np.ndarray:  # noqa: N802
        return np.asarray(self._state.T)

    @T.setter
    def T(self, value: ArrayLike) -> None:  # noqa: N802
        self._set("T", value)

    @property
    def cem43(self) -> np.ndarray:
        return np.asarray(self._state.cem43)

    @cem43.setter
    def cem43(self, value: ArrayLike) -> None:
        self._set("cem43", value)

    @property
    def T_max(self) -> np.ndarray:  # noqa: N802
        return np.asarray(self._state.T_max)

    @property
    def Q(self) -> Any:  # noqa: N802
        return self._Q

    @Q.setter
    def Q(self, value: Any) -> None:  # noqa: N802
        check_source(ThermalSource(37.0, value), self._co, self.shape)
        self._Q = value

    @property
    def lesion_map(self) -> np.ndarray:
        return self.cem43 >= LESION_CEM43

    @property
    def lesion_size(self) -> float:
        """Lesion length [m] (1-D), area [m^2] (2-D) or volume [m^3] (3-D)."""
        return float(np.sum(self.lesion_map) * np.prod(self.spacing))

    @property
    def sensor_data(self) -> np.ndarray:
        n = 0 if self._index is None else int(self._index[0].size)
        if not self._samples:
            return np.zeros((n, 0))
        return np.concatenate(self._samples, axis=1)

    @property
    def state(self) -> State:
        """The model's state (JAX arrays: ``T``, ``cem43``, ``T_max``)."""
        return self._state
