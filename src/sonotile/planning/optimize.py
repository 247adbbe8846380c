"""Drives optimised beyond phase conjugation: the least skull heating for the focal pressure.

(The algorithm follows; this module holds the result a plan carries.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sonotile.api.heating.sonication import HeatRun
from sonotile.planning.acoustics import Focus


@dataclass
class OptimizedPlan:
    """A plan's optimised drive and what it does, next to the phase-conjugated plan.

    Attributes:
        amplitude, phase: the drive per element as driven [Pa, rad].
        p_amp: its pressure amplitude on the grid [Pa] (a forward run of the drive).
        focus: its focus (absolute pressures). heat: its heating.
        summary: every number (JSON-able): ``focus`` and ``heat`` with the plan's keys,
            ``drive``, ``goal``, ``limits``, ``predicted`` (the optimiser's own figures),
            ``trade_off``, ``groups``, ``timings_s``.
    """

    amplitude: np.ndarray = field(repr=False)
    phase: np.ndarray = field(repr=False)
    p_amp: np.ndarray = field(repr=False)
    focus: Focus
    heat: HeatRun = field(repr=False)
    summary: dict[str, Any] = field(default_factory=dict)
