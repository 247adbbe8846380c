"""The small problem on which the decompositions' spectral operators are compared, and the
operator calls compared (imported by the scripts that run on several virtual devices)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sonotile.model.grid import Grid
from sonotile.model.problem import MaskSource, Medium, Pml, Problem, Sensor, Sources


def problem(shape: tuple[int, ...]) -> Problem:
    """Power-law absorbing medium, an additive pressure source (the source filter is built),
    unequal spacings per axis, a PML of 2 points."""
    d = len(shape)
    g = Grid(shape, tuple(1e-4 * (1 + 0.1 * a) for a in range(d)), 2e-8, 10)
    med = Medium(1500.0, 1000.0, g, alpha_coeff=0.75, alpha_power=1.5, absorption="power_law")
    at = np.zeros((1, d), np.int64)
    return Problem(g, med, Sources(p=MaskSource(at, np.ones(10), "additive")), Sensor(index=at),
                   Pml((2,) * d, (2.0,) * d))  # fmt: skip


def apply(ops: Any, xs: tuple) -> tuple:
    """Every operator of a step: grad, div, both fractional Laplacians, the source filter."""
    return (ops.grad(xs[0]), ops.div(xs), ops.fractional(xs[0], 1), ops.fractional(xs[1], 2),
            ops.filter_source(xs[-1]))  # fmt: skip
