"""A traced (differentiable) run on one device or on a device mesh: the counterpart of
:func:`sonotile.parallel.engine.engine_for` for the whole time loop as one traced function.

:func:`traced_runner` takes the model, its problem, the sensor layout, a parsed
:class:`~sonotile.parallel.decomposition.Decomposition`, the mesh, LFB's overlap, the chunking
and the tape, and returns ``run(consts, xs, fixed) -> (raw, aggregates, state)``: on one device
the per-device loop (:func:`sonotile.solver.runner.traced_run`) with the model's operators, on a
mesh the same loop per shard inside :func:`sonotile.parallel.differentiable.mesh_runner`.
Every model's differentiable run (``make_simulator``, ``bioheat``, the elastic ``execute``)
goes through it; none of them chooses between one device and a mesh itself.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from sonotile.fft import backend as fft_backend
from sonotile.model.problem import Problem, ProblemError
from sonotile.parallel.decomposition import SINGLE, Decomposition
from sonotile.parallel.mesh import AXIS_NAMES
from sonotile.physics import Model
from sonotile.solver import runner
from sonotile.solver import sensors as sens
from sonotile.solver.tape import Tape
from sonotile.spectral.linear import AdjointOps
from sonotile.spectral.operators import FourierOps

#: ``local(consts, index, ops, xs, shape) -> (raw, aggregates, state)``: the time loop on one
#: device or one shard (``shape``: the shard's grid shape).
LocalRun = Callable[..., tuple[dict[str, jax.Array], dict[str, jax.Array], Any]]
#: ``run(consts, xs, fixed) -> (raw, aggregates, state)``: the whole traced run.
Run = Callable[[dict[str, Any], dict[str, Any], tuple], tuple[dict, dict, Any]]


@dataclass(frozen=True)
class TracedRun:
    """A traced run and where it runs.

    Attributes:
        run: ``run(consts, xs, fixed) -> (raw, aggregates, state)`` (global arrays).
        fixed: the operators and sensor indices (an argument of a jitted caller, not closed
            over: no constants in the program).
        mesh: devices per split axis (empty on one device).
        axes: the mesh axis names the state is split over (a tape's shard keys).
        describe: where it runs, in words.
    """

    run: Run
    fixed: tuple
    mesh: tuple[int, ...]
    axes: tuple[str, ...]
    describe: str


def mesh_of(decomposition: Decomposition, mesh: Sequence[int] | None) -> tuple[int, ...]:
    """Devices per split axis of a traced run: none on one device, else ``mesh`` (default:
    all devices on x)."""
    if decomposition == SINGLE:
        return ()
    return tuple(int(n) for n in mesh) if mesh is not None else (len(jax.devices()),)


def axes_of(mesh: tuple[int, ...]) -> tuple[str, ...]:
    """The mesh axis names of a mesh of ``mesh`` devices per split axis."""
    return AXIS_NAMES[: len(mesh)]


def traced_operators(model: Model, problem: Any, unstagger: bool) -> Any:
    """The model's operators on one device in a traced run: the acoustic model's FFTs with
    their own adjoint rules (:class:`AdjointOps`), a Fourier operator's FFTW calls without the
    fused updates (those are not traced), the others as the model builds them."""
    ops = model.operators(problem, unstagger)
    if isinstance(problem, Problem):
        return AdjointOps(ops)
    if isinstance(ops, FourierOps) and ops.fft:
        return dataclasses.replace(ops, fft=fft_backend.unfused(ops.fft))
    return ops


def traced_runner(
    model: Model,
    problem: Any,
    layout: sens.SensorLayout,
    decomposition: Decomposition,
    mesh: Sequence[int] | None = None,
    overlap: int = 16,
    bell_width: float = 0.5,
    chunk: int | None = None,
    tape: Tape | None = None,
    state: Any = None,
    local: LocalRun | None = None,
) -> TracedRun:
    """The traced run of ``problem`` by ``model`` where ``decomposition`` puts it (``mesh``:
    devices per split axis, default all on x; LFB's ``overlap`` [points] and ``bell_width``).

    ``local``: the per-device loop (default :func:`sonotile.solver.runner.traced_run` from
    ``state``, default the model's start, with ``chunk`` steps rematerialised per chunk and the
    backward pass's states on ``tape``). A start ``state`` runs on one device only."""
    shape = mesh_of(decomposition, mesh)
    axes = axes_of(shape)
    if local is None:

        def local(c: dict, index: Any, ops: Any, xs: dict, grid: tuple[int, ...]) -> tuple:
            return runner.traced_run(model, layout, c, ops, index, xs, grid, problem.dtype,
                                     state, chunk, tape, axes)  # fmt: skip

    if decomposition != SINGLE:
        if state is not None:
            raise ProblemError(f"a start state runs on one device only, not on decomposition "
                               f"{str(decomposition)!r}")  # fmt: skip
        from sonotile.parallel.differentiable import mesh_runner

        run, fixed = mesh_runner(problem, layout, local, decomposition, shape, overlap, bell_width)
        return TracedRun(run, fixed, shape, axes,
                         f"{decomposition} on a {'x'.join(map(str, shape))} mesh")  # fmt: skip
    ops = traced_operators(model, problem, layout.needs_unstagger)
    pts, grid = layout.points, tuple(problem.grid.shape)
    index = () if pts is None else tuple(jnp.asarray(pts[:, a], jnp.int32)
                                         for a in range(pts.shape[1]))  # fmt: skip
    one: LocalRun = local

    def run_one(c: dict[str, Any], xs: dict[str, Any], fixed: tuple) -> tuple[dict, dict, Any]:
        return one(c, fixed[1], fixed[0], xs, grid)

    dev = jax.devices()[0]
    return TracedRun(run_one, (ops, index), (), (), f"single device ({dev.platform}:{dev.id})")


__all__ = ["LocalRun", "TracedRun", "axes_of", "mesh_of", "traced_operators", "traced_runner"]
