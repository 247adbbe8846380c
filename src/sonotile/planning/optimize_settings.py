"""What an optimised drive must do and within which limits (:class:`OptimizeSettings`; the
optimisation itself: :mod:`sonotile.planning.optimize`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sonotile.model.problem import ProblemError


@dataclass(frozen=True)
class OptimizeSettings:
    """What an optimised drive must do and within which limits.

    Attributes:
        groups: groups of neighbouring elements, one complex factor each (one forward run
            each, per aim point); the number of elements frees every element.
        max_amplitude: the largest drive amplitude of an element [Pa]; None:
            :data:`AMPLITUDE_HEADROOM` times the conjugated plan's largest.
        max_power: the largest acoustic power of the drive [W]; None: no limit.
        focus_mm: the focal peak within this distance of the target [mm] (one target; at
            least the grid spacing).
        volume_ratio: the -6 dB focal volume at most this multiple of the conjugated plan's.
        side_lobe: pressure in the brain outside the focal region at most this fraction of
            the focal pressure.
        targets: further targets [mm, RAS], each at the focal pressure.
        volume_mm: a sphere of this radius about the target [mm] at uniform pressure
            (within ``uniformity``) instead of a focus.
        hotspots: skull hotspots taken at first, and the most that join in a round.
        rounds: the most rounds of step 4.
        trade_off_points: focal pressures on the trade-off curve.
    """

    groups: int = 16
    max_amplitude: float | None = None
    max_power: float | None = None
    focus_mm: float = 1.0
    volume_ratio: float = 1.1
    side_lobe: float = 0.5
    targets: tuple[tuple[float, float, float], ...] = ()
    volume_mm: float | None = None
    uniformity: float = 0.1
    hotspots: int = 24
    rounds: int = 12
    trade_off_points: int = 9

    def check(self) -> None:
        """A :class:`ProblemError` naming the first setting out of range."""
        for name, lo, hi in (("groups", 1, 4096), ("hotspots", 1, 1000), ("rounds", 1, 50),
                             ("trade_off_points", 0, 100)):  # fmt: skip
            v = getattr(self, name)
            if not (isinstance(v, int | np.integer) and lo <= v <= hi):
                raise ProblemError(f"{name} must be a whole number from {lo} to {hi}, got {v}")
        ranges = (("max_amplitude", 0.0, 1e8), ("max_power", 0.0, 1e5), ("focus_mm", 0.0, 20.0),
                  ("volume_ratio", 1.0, 10.0), ("side_lobe", 0.0, 1.0), ("volume_mm", 0.0, 30.0),
                  ("uniformity", 0.0, 1.0))  # fmt: skip
        for name, low, high in ranges:
            v = getattr(self, name)
            if v is not None and not (np.isfinite(v) and low < v <= high):
                raise ProblemError(f"{name} must be above {low:g} and at most {high:g}, got {v}")
        for t in self.targets:
            if len(t) != 3 or not np.all(np.isfinite(t)):
                raise ProblemError(f"targets: each 3 finite coordinates [mm], got {t}")


#: the default amplitude cap over the conjugated plan's largest element amplitude
AMPLITUDE_HEADROOM = 2.0
