"""A small initial-value problem shared by the decomposition tests: p0, a transducer across a
block boundary, a cuboid sensor over many blocks, whole-field outputs."""

from __future__ import annotations

import numpy as np

from sonotile.model.grid import Grid
from sonotile.model.problem import Medium, Pml, Problem, Sensor, Sources, TransducerSource

RECORD = ("p", "u_max", "u_min_all", "p_final", "u_final")


def ivp(shape: tuple, nt: int = 30, record: tuple = RECORD) -> Problem:
    """Heterogeneous c0 (seeded), B/A 5, a Gaussian p0 [Pa] in the middle, PML 4."""
    d = len(shape)
    g = Grid(shape, (1e-4,) * d, 2e-8, nt)
    c0 = 1500 + 50 * np.random.default_rng(1).random(shape)
    x = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
    p0 = 1e5 * np.exp(-sum((xi - n // 2) ** 2 for xi, n in zip(x, shape)) / 8)
    tr = TransducerSource(np.array([(6,) + (16,) * (d - 1), (6,) + (17,) * (d - 1)]),
                          1e-3 * np.sin(np.arange(nt + 5) * 0.3), np.array([0, 3]))  # fmt: skip
    sen = Sensor(cuboids=np.array([[[4] * d, [n - 5 for n in shape]]]), record=record)
    return Problem(g, Medium(c0, 1000.0, g, bona=5.0), Sources(p0=p0, transducer=tr), sen,
                   Pml((4,) * d, (2.0,) * d))  # fmt: skip
