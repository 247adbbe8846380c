"""Loops of time steps on stacked fields (:mod:`.stacked_step`) and of the unstacked step, on the
same problem and input: what the GPU check times and what tests compare.

No sensors are sampled: each loop advances the state ``steps`` times under one ``lax.scan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import jax

from sonotile.model.problem import Problem
from sonotile.physics.acoustic import stacked_step as ss
from sonotile.physics.acoustic.step import State


@dataclass
class Setup:
    """One problem's constants, operators, scan inputs and start state, for both steps."""

    phys: Any
    c: dict  # the unstacked step's constants (source patterns made)
    ops: Any  # the unstacked step's operators
    xs: dict  # scan inputs of steps 0..steps-1
    start: State

    def stacked(self, fft: str = "xla") -> tuple[dict, ss.StackedOps, ss.StackedState]:
        """Constants, operators and start state of the stacked step on the batched FFT ``fft``."""
        shape = tuple(self.start.p.shape)
        c = ss.stacked_constants(self.c, len(shape))
        return c, ss.StackedOps.of(self.ops, shape, fft), ss.stack_state(self.start)


def setup(problem: Problem, steps: int) -> Setup:
    """Build everything from ``problem`` (ValueError where the stacked step cannot run it)."""
    from sonotile.solver import runner as rn

    cp = rn.compile_problem(problem)
    why = cp.phys.stacked(cp.ops)
    if isinstance(why, str):
        raise ValueError(why)
    g = problem.grid
    start = (cp.phys.initial_state(cp.consts, cp.ops) if cp.phys.ivp else
             cp.phys.zero_state(g.shape, jax.numpy.dtype(problem.dtype)))  # fmt: skip
    c = cp.phys.prepare(cp.consts, cp.ops, start)
    return Setup(cp.phys, c, cp.ops, rn.step_inputs(problem, 0, steps), start)


@partial(jax.jit, static_argnames=("phys",), donate_argnums=(0,))
def run_stacked(
    state: ss.StackedState, xs: dict, c: dict, ops: ss.StackedOps, phys: Any
) -> ss.StackedState:
    """The stacked step over every step of ``xs``."""

    def body(s: ss.StackedState, x: dict) -> tuple[ss.StackedState, None]:
        return ss.step(s, x, c, ops, phys), None

    return jax.lax.scan(body, state, xs)[0]


@partial(jax.jit, static_argnames=("phys",), donate_argnums=(0,))
def run_unstacked(state: State, xs: dict, c: dict, ops: Any, phys: Any) -> State:
    """The unstacked step (:func:`sonotile.physics.acoustic.step.step`) over ``xs``."""

    def body(s: State, x: dict) -> tuple[State, None]:
        return phys.step(s, x, c, ops), None

    return jax.lax.scan(body, state, xs)[0]
