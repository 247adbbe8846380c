"""The CT volume type of :mod:`sonotile.planning` and the frame conversion it is read into.

Voxel ``(i, j, k)`` maps to scanner millimetres (NIfTI's RAS world frame) by the image's
affine; DICOM's LPS positions are converted with :data:`LPS_TO_RAS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from sonotile.model.problem import ProblemError

#: DICOM's patient frame (LPS) to NIfTI's (RAS): negate x and y.
LPS_TO_RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


def optional(name: str) -> ModuleType:
    """Import an optional dependency of the planning tools, or say how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(
            f"{name} is needed to read and write medical images: "
            f"pip install 'sonotile[planning]' (or pip install {name})"
        ) from e


@dataclass(frozen=True)
class CTImage:
    """A CT volume in Hounsfield units on its scanner grid.

    Attributes:
        hu: ``(nx, ny, nz)`` Hounsfield units (float32).
        affine: 4x4 voxel index ``(i, j, k, 1)`` -> RAS millimetres.
        source: where it came from (a path, or how it was made).
        meta: anything else worth keeping (DICOM series UID, phantom parameters).
    """

    hu: np.ndarray
    affine: np.ndarray
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        hu = np.asarray(self.hu, dtype=np.float32)
        a = np.asarray(self.affine, dtype=np.float64)
        if hu.ndim != 3 or min(hu.shape) < 1:
            raise ProblemError(f"CTImage.hu must be 3-D and not empty, got shape {hu.shape}")
        if a.shape != (4, 4) or not np.isfinite(a).all():
            raise ProblemError(f"CTImage.affine must be a finite 4x4 matrix, got {a.shape}")
        if abs(np.linalg.det(a[:3, :3])) < 1e-12 or not np.allclose(a[3], [0, 0, 0, 1]):
            raise ProblemError("CTImage.affine must be invertible with last row (0, 0, 0, 1)")
        object.__setattr__(self, "hu", hu)
        object.__setattr__(self, "affine", a)

    @property
    def shape(self) -> tuple[int, int, int]:
        """Voxels per axis."""
        return tuple(int(n) for n in self.hu.shape)  # type: ignore[return-value]

    @property
    def spacing_mm(self) -> np.ndarray:
        """Voxel size along each voxel axis [mm]."""
        return np.linalg.norm(self.affine[:3, :3], axis=0)

    def bounds_mm(self) -> tuple[np.ndarray, np.ndarray]:
        """The lowest and highest RAS coordinates [mm] of the image's 8 corners (its outer
        voxel faces): the box that holds an oblique image."""
        ends = [(-0.5, n - 0.5) for n in self.shape]
        corners = self.world(np.array(np.meshgrid(*ends, indexing="ij")).reshape(3, -1).T)
        return corners.min(axis=0), corners.max(axis=0)

    def contains(self, xyz: Sequence[float] | np.ndarray) -> bool:
        """Whether a point [mm, RAS] lies inside the image (within its outer voxel faces)."""
        ijk = self.voxel(xyz)
        return bool(np.all(ijk >= -0.5) and np.all(ijk <= np.asarray(self.shape) - 0.5))

    def world(self, ijk: Sequence[float] | np.ndarray) -> np.ndarray:
        """Voxel indices ``(..., 3)`` -> RAS millimetres ``(..., 3)``."""
        v = np.asarray(ijk, dtype=np.float64)
        return v @ self.affine[:3, :3].T + self.affine[:3, 3]

    def voxel(self, xyz: Sequence[float] | np.ndarray) -> np.ndarray:
        """RAS millimetres ``(..., 3)`` -> fractional voxel indices ``(..., 3)``."""
        inv = np.linalg.inv(self.affine)
        return np.asarray(xyz, dtype=np.float64) @ inv[:3, :3].T + inv[:3, 3]
