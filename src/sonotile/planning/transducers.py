"""Therapy transducers for a plan: a single-element focused bowl or a multi-element spherical-cap
array of flat discs, each placed in the patient's frame by a :class:`~sonotile.planning.Pose`
and put on a simulation grid as a :class:`~sonotile.model.array.KWaveArray`.

A transducer is named by a short spec (``sonotile plan --transducer``):

- ``bowl:R:D`` -- a spherical bowl, radius of curvature ``R`` and aperture ``D`` [mm];
- ``array:N:R:D:d`` -- ``N`` discs of diameter ``d`` [mm] on a spherical cap of radius ``R`` and
  aperture ``D`` [mm], laid out on a Fibonacci spiral (even areas), each facing the cap's centre.

In the transducer's frame the apex is the origin and the beam runs along +z: the geometric
focus is at ``(0, 0, R)``, so a pose made with ``focal_length_mm=R`` focuses it on the target.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from sonotile.model.array import KWaveArray
from sonotile.model.problem import ProblemError
from sonotile.planning.geometry import Pose, SimulationGrid

SPECS = "'bowl:R:D' or 'array:N:R:D:d' (N elements; R, D, d in mm), e.g. 'array:128:64:64:4'"
GOLDEN_ANGLE = np.pi * (3.0 - np.sqrt(5.0))


@dataclass(frozen=True)
class Transducer:
    """A focused transducer.

    Attributes:
        kind: ``"bowl"`` (one element) or ``"array"`` (discs on a spherical cap).
        radius_mm: radius of curvature = geometric focal length [mm].
        aperture_mm: the bowl's or cap's aperture diameter [mm].
        n_elements: number of elements (1 for a bowl).
        element_mm: an array element's diameter [mm] (0 for a bowl).
    """

    kind: str
    radius_mm: float
    aperture_mm: float
    n_elements: int = 1
    element_mm: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("bowl", "array"):
            raise ProblemError(f"transducer kind {self.kind!r}: expected {SPECS}")
        finite = np.isfinite(self.radius_mm) and np.isfinite(self.aperture_mm)
        if not (finite and self.radius_mm > 0 and 0 < self.aperture_mm <= 2 * self.radius_mm):
            raise ProblemError(
                f"transducer: radius {self.radius_mm} mm, aperture {self.aperture_mm} mm "
                "(need finite numbers with 0 < aperture <= 2 radius)"
            )
        if self.kind == "array":
            self._check_array()

    def _check_array(self) -> None:
        if self.n_elements < 2 or not self.element_mm > 0:
            raise ProblemError(
                f"array: {self.n_elements} elements of {self.element_mm} mm (need >= 2 elements "
                "of positive diameter)"
            )
        pitch = np.sqrt(self.cap_area_mm2 / self.n_elements)  # mean spacing on the cap
        if self.element_mm > pitch:
            raise ProblemError(
                f"array: {self.element_mm} mm elements overlap; {self.n_elements} elements on "
                f"this cap are {pitch:.2f} mm apart on average"
            )

    @property
    def cap_area_mm2(self) -> float:
        """Area of the spherical cap [mm^2]."""
        r, a = self.radius_mm, self.aperture_mm / 2
        return float(2 * np.pi * r * (r - np.sqrt(r**2 - a**2)))

    @property
    def spec(self) -> str:
        """The transducer's spec string."""
        if self.kind == "bowl":
            return f"bowl:{self.radius_mm:g}:{self.aperture_mm:g}"
        return (
            f"array:{self.n_elements}:{self.radius_mm:g}:{self.aperture_mm:g}:{self.element_mm:g}"
        )

    def as_dict(self) -> dict[str, Any]:
        """The transducer as plain values (for provenance)."""
        return {**asdict(self), "spec": self.spec}

    def element_centres(self) -> np.ndarray:
        """Element centres ``(N, 3)`` in the transducer's frame [mm]: the apex for a bowl; for
        an array a Fibonacci spiral over the cap (equal areas in ``cos(theta)``)."""
        if self.kind == "bowl":
            return np.zeros((1, 3))
        r, n = self.radius_mm, self.n_elements
        cos_max = np.sqrt(1 - (self.aperture_mm / (2 * r)) ** 2)
        cos_t = 1 - (np.arange(n) + 0.5) / n * (1 - cos_max)
        sin_t, phi = np.sqrt(1 - cos_t**2), np.arange(n) * GOLDEN_ANGLE
        return np.stack([r * sin_t * np.cos(phi), r * sin_t * np.sin(phi), r * (1 - cos_t)], 1)

    def karray(self, pose: Pose, grid: SimulationGrid, upsampling_rate: float = 4) -> KWaveArray:
        """The transducer on ``grid`` at ``pose`` (k-Wave's Cartesian metres)."""
        ka = KWaveArray(bli_tolerance=0.05, upsampling_rate=upsampling_rate)
        focus = grid.kwave_points(pose.to_world([0.0, 0.0, self.radius_mm]))[:, 0]
        centres = grid.kwave_points(pose.to_world(self.element_centres()))
        if self.kind == "bowl":
            ka.add_bowl_element(centres[:, 0], self.radius_mm * 1e-3, self.aperture_mm * 1e-3,
                                focus)  # fmt: skip
            return ka
        for c in centres.T:
            ka.add_disc_element(c, self.element_mm * 1e-3, focus)
        return ka


def parse_transducer(spec: str) -> Transducer:
    """A :class:`Transducer` from its spec (``bowl:R:D`` or ``array:N:R:D:d``, mm)."""
    parts = str(spec).strip().lower().split(":")
    try:
        nums = [float(v) for v in parts[1:]]
    except ValueError:
        nums = []
    if parts[0] == "bowl" and len(nums) == 2:
        return Transducer("bowl", nums[0], nums[1])
    if parts[0] == "array" and len(nums) == 4 and nums[0] == int(nums[0]):
        return Transducer("array", nums[1], nums[2], int(nums[0]), nums[3])
    raise ProblemError(f"unknown transducer {spec!r}: expected {SPECS}")
