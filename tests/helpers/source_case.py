"""Tiny 3-D problems with one kind of source each, for the decomposition tests.

Heterogeneous c0 and rho0 (smooth variation), PML 3, a 1.5 MHz tone burst (10 points per
wavelength); every source sits next to a block boundary of the meshes the tests use; point
sensors in several blocks record ``p`` and ``u``; ``p_final`` and ``u_final`` are whole fields.
"""

from __future__ import annotations

import numpy as np

from sonotile.model.grid import Grid
from sonotile.model.problem import (
    MaskSource,
    Medium,
    Pml,
    Problem,
    Sensor,
    Sources,
    TransducerSource,
)

#: one entry per source kind: ``(p0, p mode, u modes per axis, transducer)``
KINDS = {
    "p0": (True, None, (None, None, None), False),
    "p_dirichlet": (False, "dirichlet", (None, None, None), False),
    "p_additive": (False, "additive", (None, None, None), False),
    "p_additive_no_correction": (False, "additive_no_correction", (None, None, None), False),
    "u_dirichlet": (False, None, ("dirichlet",) * 3, False),
    "u_additive": (False, None, ("additive",) * 3, False),
    "u_additive_no_correction": (False, None, ("additive_no_correction",) * 3, False),
    "transducer": (False, None, (None, None, None), True),
    # a Dirichlet pressure source and an additive-no-correction ux source together
    "p_dirichlet_ux_additive_no_correction": (
        False,
        "dirichlet",
        ("additive_no_correction", None, None),
        False,
    ),  # fmt: skip
}
RECORD = ("p", "u", "p_final", "u_final")


def source_case(kind: str, shape: tuple[int, int, int] = (25, 21, 19), nt: int = 30) -> Problem:
    """The problem with the source ``kind`` (a key of :data:`KINDS`) on a grid of ``shape``."""
    p0_on, p_mode, u_modes, transducer = KINDS[kind]
    dx = 1e-4
    x = np.meshgrid(*[np.arange(n) / n for n in shape], indexing="ij")
    smooth = np.sin(2 * np.pi * x[0]) * np.cos(2 * np.pi * x[1]) * np.sin(2 * np.pi * x[2] + 0.3)
    c0 = 1500 + 40 * smooth
    dt = 0.3 * dx / c0.max()
    g = Grid(shape, (dx,) * 3, dt, nt)
    t = np.arange(nt) * dt
    f0 = 1.5e6
    burst = np.sin(2 * np.pi * f0 * t) * np.exp(-(((t - 1.5 / f0) * f0) ** 2))
    mid = tuple(n // 2 for n in shape)
    # points on both sides of the middle of every axis (block boundaries of 2-way splits)
    pts = np.array([(mid[0] - 1, mid[1], mid[2] - 2), (mid[0], mid[1] - 1, mid[2] + 1),
                    (mid[0] + 2, mid[1] + 1, mid[2])])  # fmt: skip
    p0 = None
    if p0_on:
        r2 = sum((xi * n - m) ** 2 for xi, n, m in zip(x, shape, pts[0]))
        p0 = 1e5 * np.exp(-r2 / 4)
    p = None if p_mode is None else MaskSource(pts, 1e5 * burst / (3 * 1500.0**2), p_mode, "p")
    u = tuple(
        None if m is None else MaskSource(pts, 0.05 * burst * (1 + a), m, f"u{'xyz'[a]}")
        for a, m in enumerate(u_modes)
    )
    tr = None
    if transducer:
        tr = TransducerSource(pts, 0.05 * np.sin(2 * np.pi * f0 * np.arange(nt + 4) * dt),
                              np.array([0, 2, 4]))  # fmt: skip
    sensor = Sensor(index=np.array([(4, 4, 4), mid, (shape[0] - 5, shape[1] - 5, mid[2] + 3)]),
                    record=RECORD)  # fmt: skip
    return Problem(g, Medium(c0, 1000 + 30 * smooth, g), Sources(p0, p, u, tr), sensor,
                   Pml((3,) * 3, (2.0,) * 3))  # fmt: skip
