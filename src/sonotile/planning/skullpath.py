"""The beam's path through the skull: for each element (a bowl: points spread over its cap, and
the beam axis), the straight ray from the element's centre to the target on the plan's grid,
the bone it crosses [mm] and the angle at which it meets the outer skull surface [deg].

Along a ray the bone mask (labels trabecular and cortical) is sampled every quarter grid
spacing or finer, linearly interpolated between grid points and taken as bone at 0.5 and
above: the thickness is the samples in bone times the step. The incidence angle is between the
ray and the outer surface's normal, the gradient of the bone mask smoothed by a Gaussian of
:data:`SMOOTH_VOXELS` grid spacings at the first sample in bone: 0 is normal incidence.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from scipy import ndimage

from sonotile.planning.geometry import Pose, SimulationGrid
from sonotile.planning.tissue import TRABECULAR
from sonotile.planning.transducers import Transducer

#: the bone mask's smoothing for the surface normal [grid spacings, Gaussian sigma]
SMOOTH_VOXELS = 1.5
#: samples per grid spacing along a ray
SAMPLES_PER_VOXEL = 4
#: a bowl's rays start from this many points spread over its cap (a Fibonacci spiral)
BOWL_RAYS = 64


class BoneMask:
    """The bone of a grid's labels, ready for rays: the mask (float, 1 in bone) and the
    gradient of its smoothed copy per grid axis."""

    def __init__(self, labels: np.ndarray, grid: SimulationGrid) -> None:
        self.grid = grid
        self.mask = (np.asarray(labels) >= TRABECULAR).astype(np.float32)
        smooth = ndimage.gaussian_filter(self.mask, SMOOTH_VOXELS)
        self.gradient = np.gradient(smooth)

    def ray(self, start_mm: np.ndarray, end_mm: np.ndarray) -> dict[str, Any]:
        """The bone crossed [mm] from ``start_mm`` to ``end_mm`` [mm, RAS], the incidence angle
        [deg] at the first bone sample and where it is [mm] (None for both without bone)."""
        a, b = np.asarray(start_mm, np.float64), np.asarray(end_mm, np.float64)
        length = float(np.linalg.norm(b - a))
        step = self.grid.spacing_mm / SAMPLES_PER_VOXEL
        n = max(int(np.ceil(length / step)), 1)
        t = (np.arange(n) + 0.5) / n  # sample midpoints: each stands for length / n
        ijk = self.grid.index(a + t[:, None] * (b - a)).T
        bone = ndimage.map_coordinates(self.mask, ijk, order=1, cval=0.0) >= 0.5
        out: dict[str, Any] = {"thickness_mm": float(np.count_nonzero(bone)) * length / n,
                               "angle_deg": None, "entry_mm": None}  # fmt: skip
        if not bone.any():
            return out
        first = ijk[:, int(np.argmax(bone))]
        g = np.array([ndimage.map_coordinates(d, first[:, None], order=1)[0]
                      for d in self.gradient])  # fmt: skip
        normal = np.linalg.inv(self.grid.affine[:3, :3]).T @ g  # index -> world gradient
        if np.linalg.norm(normal) > 0:
            cos = abs(normal @ (b - a)) / (np.linalg.norm(normal) * length)
            out["angle_deg"] = float(np.degrees(np.arccos(min(cos, 1.0))))
        out["entry_mm"] = self.grid.world(first).tolist()
        return out


def ray_starts(transducer: Transducer) -> tuple[np.ndarray, str]:
    """Where the rays start in the transducer's frame [mm] ``(n, 3)`` and what they are: an
    array's element centres, or :data:`BOWL_RAYS` points spread over a bowl's cap."""
    if transducer.kind == "array":
        return transducer.element_centres(), "element centres"
    spread = replace(transducer, kind="array", n_elements=BOWL_RAYS, element_mm=1e-6)
    return spread.element_centres(), f"{BOWL_RAYS} points on the cap"


def _range(values: list[float | None]) -> dict[str, float | None]:
    v = np.array([x for x in values if x is not None], dtype=np.float64)
    if v.size == 0:
        return {"min": None, "median": None, "max": None}
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}


def skull_path(labels: np.ndarray, grid: SimulationGrid, transducer: Transducer, pose: Pose,
               target: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The path through the skull of a plan (labels on ``grid``): along the beam axis (from
    the transducer's reference point to ``target`` [mm]) and from each ray start
    (:func:`ray_starts`): bone thickness [mm] and incidence angle [deg] per ray (None where a
    ray meets no bone) with their min / median / max."""
    mask = BoneMask(labels, grid)
    t = np.asarray(target, dtype=np.float64)
    starts, what = ray_starts(transducer)
    rays = [mask.ray(s, t) for s in pose.to_world(starts)]
    thickness = [r["thickness_mm"] for r in rays]
    angle = [r["angle_deg"] for r in rays]
    return {
        "axis": mask.ray(pose.position, t), "rays_from": what,
        "thickness_mm": thickness, "angle_deg": angle,
        "thickness_range_mm": _range(thickness), "angle_range_deg": _range(angle),
    }  # fmt: skip
