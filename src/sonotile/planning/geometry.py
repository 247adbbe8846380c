"""The transducer and the simulation grid in the patient's frame (RAS millimetres).

A :class:`Pose` places a transducer: its reference point (a bowl's apex, an array's centre) and
its beam axis, from a target and an entry point or from a position and a direction. A
:class:`SimulationGrid` is a box aligned with the beam: its last axis runs along the beam from
behind the transducer to beyond the target, the other two across it, the spacing set by the
points per wavelength at the slowest sound speed, the target on a grid point, and sizes chosen
so that each axis with its PML outside (k-Wave's ``PMLInside = false``) has only the factors
2, 3, 5 and 7. Its affine maps grid indices to RAS millimetres, so CT values are resampled onto it
(:func:`resample`) and results mapped back onto the CT's grid (:func:`to_image`), both by
trilinear interpolation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import ndimage

from sonotile.api.types import KWaveMedium
from sonotile.fft.sizes import is_fast
from sonotile.model.problem import ProblemError
from sonotile.planning.images import CTImage
from sonotile.planning.tissue import SOFT_PROPERTIES, WATER, TissueMaps


def _vector(v: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    """A finite 3-vector, or a clear error naming it."""
    a = np.asarray(v, dtype=np.float64)
    if a.shape != (3,) or not np.isfinite(a).all():
        raise ProblemError(f"{name} must be 3 finite numbers [mm], got {v!r}")
    return a


def _frame(axis: np.ndarray, roll_deg: float) -> np.ndarray:
    """Rotation whose columns are two lateral unit vectors and ``axis`` (right-handed)."""
    ref = np.eye(3)[int(np.argmin(np.abs(axis)))]  # the world axis least along the beam
    u = ref - (ref @ axis) * axis
    u /= np.linalg.norm(u)
    v = np.cross(axis, u)
    t = np.deg2rad(roll_deg)
    u, v = np.cos(t) * u + np.sin(t) * v, -np.sin(t) * u + np.cos(t) * v
    return np.stack([u, v, axis], axis=1)


@dataclass(frozen=True)
class Pose:
    """Where a transducer is and where it points, in RAS millimetres.

    Attributes:
        position: the transducer's reference point (bowl apex, array centre) [mm].
        rotation: 3x3, columns the transducer's x, y (lateral) and z (beam axis) in world
            coordinates.
    """

    position: np.ndarray
    rotation: np.ndarray

    @property
    def axis(self) -> np.ndarray:
        """Unit beam direction."""
        return self.rotation[:, 2]

    @classmethod
    def from_position_direction(
        cls, position: Sequence[float], direction: Sequence[float], roll_deg: float = 0.0
    ) -> Pose:
        """A transducer at ``position`` [mm] firing along ``direction``, rolled about its axis
        by ``roll_deg`` [degrees]."""
        p, d = _vector(position, "position"), _vector(direction, "direction")
        if np.linalg.norm(d) == 0:
            raise ProblemError("direction must be nonzero")
        return cls(p, _frame(d / np.linalg.norm(d), roll_deg))

    @classmethod
    def from_target_entry(
        cls,
        target: Sequence[float],
        entry: Sequence[float],
        *,
        focal_length_mm: float | None = None,
        roll_deg: float = 0.0,
    ) -> Pose:
        """A transducer aimed from ``entry`` at ``target`` [mm]. With ``focal_length_mm`` its
        reference point sits that far before the target on the line (a bowl focused on the
        target); without it, at the entry point."""
        t, e = _vector(target, "target"), _vector(entry, "entry")
        d = t - e
        if np.linalg.norm(d) < 1e-9:
            raise ProblemError("target and entry must be different points")
        axis = d / np.linalg.norm(d)
        if focal_length_mm is not None:
            if focal_length_mm <= 0:
                raise ProblemError(f"focal_length_mm must be positive, got {focal_length_mm}")
            return cls(t - focal_length_mm * axis, _frame(axis, roll_deg))
        return cls(e, _frame(axis, roll_deg))

    def to_world(self, local_mm: Sequence[float] | np.ndarray) -> np.ndarray:
        """Transducer coordinates ``(..., 3)`` [mm] -> RAS millimetres."""
        return np.asarray(local_mm, dtype=np.float64) @ self.rotation.T + self.position


def is_fft_friendly(n: int) -> bool:
    """Whether ``n >= 1`` has no prime factor above 7 (the FFT kernel's fast radices,
    :data:`sonotile.fft.sizes.RADICES`)."""
    return n >= 1 and is_fast(n)


def fft_size(n_min: int, pml_range: tuple[int, int] = (8, 24)) -> tuple[int, int]:
    """Interior points >= ``n_min`` and a PML thickness in ``pml_range`` whose total
    ``n + 2 pml`` has only the factors 2, 3, 5, 7: the smallest total, then the thickest
    PML."""
    lo, hi = pml_range
    if not 1 <= lo <= hi:
        raise ProblemError(f"pml_range must be (lo, hi) with 1 <= lo <= hi, got {pml_range}")
    total = n_min + 2 * lo
    while not is_fft_friendly(total):
        total += 1
    pml = min(hi, (total - n_min) // 2)
    return total - 2 * pml, pml


@dataclass(frozen=True)
class SimulationGrid:
    """A beam-aligned grid in the patient's frame.

    Attributes:
        shape: interior points per axis (the medium; the PML lies outside).
        spacing_mm: grid spacing [mm] (all axes).
        affine: 4x4 grid index ``(i, j, k, 1)`` -> RAS millimetres.
        pml_size: PML points per axis, outside ``shape``.
        target_index: grid index of the target. source_index: (fractional) grid index of
            the transducer's reference point.
        frequency, points_per_wavelength, c_min: what set the spacing [Hz, -, m/s].
    """

    shape: tuple[int, int, int]
    spacing_mm: float
    affine: np.ndarray
    pml_size: tuple[int, int, int]
    target_index: tuple[int, int, int]
    source_index: np.ndarray
    frequency: float
    points_per_wavelength: float
    c_min: float

    @property
    def total_shape(self) -> tuple[int, ...]:
        """Points per axis with the PML."""
        return tuple(n + 2 * p for n, p in zip(self.shape, self.pml_size))

    def world(self, ijk: Sequence[float] | np.ndarray) -> np.ndarray:
        """Grid indices ``(..., 3)`` -> RAS millimetres."""
        return np.asarray(ijk, dtype=np.float64) @ self.affine[:3, :3].T + self.affine[:3, 3]

    def index(self, xyz: Sequence[float] | np.ndarray) -> np.ndarray:
        """RAS millimetres ``(..., 3)`` -> fractional grid indices."""
        inv = np.linalg.inv(self.affine)
        return np.asarray(xyz, dtype=np.float64) @ inv[:3, :3].T + inv[:3, 3]

    def kwave_points(self, xyz: Sequence[float] | np.ndarray) -> np.ndarray:
        """RAS millimetres ``(N, 3)`` (or one point) -> k-Wave's Cartesian positions ``(3, N)``
        [m] on this grid (origin at index ``n // 2`` of the interior), as ``KWaveArray`` and
        ``KSensor`` take them."""
        ijk = np.atleast_2d(self.index(xyz)) - np.array([n // 2 for n in self.shape])
        return (ijk * self.spacing_mm * 1e-3).T

    def as_dict(self) -> dict[str, Any]:
        """Everything that defines the grid, as plain values (for provenance)."""
        return {
            "shape": list(self.shape), "spacing_mm": self.spacing_mm,
            "affine": self.affine.tolist(), "pml_size": list(self.pml_size),
            "target_index": list(self.target_index), "source_index": self.source_index.tolist(),
            "frequency_hz": self.frequency, "points_per_wavelength": self.points_per_wavelength,
            "c_min": self.c_min,
        }  # fmt: skip

    def options(self) -> dict[str, Any]:
        """The simulation options this grid assumes (``simulate(..., **grid.options())``)."""
        return {"pml_size": self.pml_size, "pml_inside": False}


def beam_grid(
    pose: Pose,
    target: Sequence[float],
    frequency: float,
    *,
    points_per_wavelength: float = 6.0,
    c_min: float = 1500.0,
    aperture_mm: float = 64.0,
    margin_mm: float = 5.0,
    behind_mm: float = 4.0,
    beyond_mm: float = 20.0,
    pml_range: tuple[int, int] = (8, 24),
) -> SimulationGrid:
    """The simulation grid around a beam path.

    Args:
        pose: the transducer. target: the target [mm, RAS].
        frequency: [Hz]; with ``points_per_wavelength`` at ``c_min`` [m/s] it sets the spacing.
        aperture_mm: the transducer's width; the grid spans it plus ``margin_mm`` each side
            (and the target's distance from the axis: the grid is centred on the target).
        behind_mm: water kept behind the reference point; beyond_mm: grid past the target.
        pml_range: allowed PML thickness [points].
    """
    t = _vector(target, "target")
    for name, v in (("frequency", frequency), ("points_per_wavelength", points_per_wavelength),
                    ("c_min", c_min), ("aperture_mm", aperture_mm)):  # fmt: skip
        if not np.isfinite(v) or v <= 0:
            raise ProblemError(f"{name} must be positive, got {v}")
    depth = float((t - pose.position) @ pose.axis)  # target along the beam from the transducer
    if depth <= 0:
        raise ProblemError(f"the target lies {-depth:.1f} mm behind the transducer")
    dx = c_min / (frequency * points_per_wavelength) * 1e3
    off_axis = float(np.linalg.norm(t - pose.position - depth * pose.axis))
    off_axis = off_axis if off_axis > 1e-6 else 0.0  # on the axis, up to round-off
    lateral = aperture_mm / 2 + margin_mm + off_axis  # centred on the target
    n_lat, pml_lat = fft_size(2 * int(np.ceil(lateral / dx)) + 1, pml_range)
    k_t = int(np.ceil((depth + behind_mm) / dx))
    n_ax, pml_ax = fft_size(k_t + int(np.ceil(beyond_mm / dx)) + 1, pml_range)
    idx_t = np.array([n_lat // 2, n_lat // 2, k_t])
    r = pose.rotation * dx
    affine = np.eye(4)
    affine[:3, :3], affine[:3, 3] = r, t - r @ idx_t
    src = np.linalg.solve(r, pose.position - affine[:3, 3])
    return SimulationGrid(
        (n_lat, n_lat, n_ax), dx, affine, (pml_lat, pml_lat, pml_ax),
        (int(idx_t[0]), int(idx_t[1]), int(idx_t[2])), src, float(frequency),
        float(points_per_wavelength), float(c_min),
    )  # fmt: skip


def resample(
    volume: np.ndarray, image: CTImage, grid: SimulationGrid, *, fill: float = 0.0, order: int = 1
) -> np.ndarray:
    """A volume on the CT's grid (``image.shape``; HU, labels with ``order=0``, properties)
    resampled onto the simulation grid; points outside the CT get ``fill`` (0 HU: water)."""
    v = np.asarray(volume)
    if v.shape != image.shape:
        raise ProblemError(f"volume has shape {v.shape}; the image's grid is {image.shape}")
    m = np.linalg.inv(image.affine) @ grid.affine  # grid index -> CT voxel
    out = ndimage.affine_transform(
        v.astype(np.float32) if order else v, m[:3, :3], m[:3, 3], output_shape=grid.shape,
        order=order, mode="constant", cval=fill,
    )  # fmt: skip
    return out


def to_image(
    values: np.ndarray, grid: SimulationGrid, like: CTImage, *, fill: float = 0.0, order: int = 1
) -> np.ndarray:
    """Values on the simulation grid (``grid.shape``, without the PML) mapped onto the CT's
    grid (``like.shape``) for :func:`~sonotile.planning.images.write_nifti`; CT voxels
    outside the simulation grid get ``fill``."""
    v = np.asarray(values)
    if v.shape != grid.shape:
        raise ProblemError(
            f"values have shape {v.shape}; the simulation grid's interior is {grid.shape} "
            "(crop the PML first)"
        )
    m = np.linalg.inv(grid.affine) @ like.affine  # CT voxel -> grid index
    return ndimage.affine_transform(
        v.astype(np.float32) if order else v, m[:3, :3], m[:3, 3], output_shape=like.shape,
        order=order, mode="constant", cval=fill,
    )  # fmt: skip


def resample_maps(maps: TissueMaps, image: CTImage, grid: SimulationGrid) -> TissueMaps:
    """Tissue properties made on the CT's grid (where the whole skull is seen, so brain and
    scalp are told apart) resampled onto the simulation grid: classes from the nearest voxel,
    properties trilinear, water outside the CT; the grid joins the provenance."""
    c_w, rho_w, _ = SOFT_PROPERTIES[WATER]

    def on(v: np.ndarray, fill: float) -> np.ndarray:
        return resample(v, image, grid, fill=fill)

    return replace(
        maps,
        labels=resample(maps.labels, image, grid, fill=WATER, order=0),
        sound_speed=on(maps.sound_speed, c_w), density=on(maps.density, rho_w),
        alpha_coeff=on(maps.alpha_coeff, 0.0), alpha_np_per_m=on(maps.alpha_np_per_m, 0.0),
        shear_speed=on(maps.shear_speed, 0.0),
        shear_alpha_np_per_m=on(maps.shear_alpha_np_per_m, 0.0),
        porosity=on(maps.porosity, 0.0), provenance={**maps.provenance, "grid": grid.as_dict()},
    )  # fmt: skip


def kwave_medium(maps: TissueMaps, alpha_power: float = 2.0) -> KWaveMedium:
    """A fluid k-Wave medium from tissue maps (on the simulation grid): sound speed, density,
    and a power law ``alpha_coeff f^y`` [dB/(MHz^y cm)] equal to the maps' attenuation at the
    planning frequency (with ``y = 2`` k-Wave's dispersion term vanishes, so the sound speeds
    are the mapped ones at every frequency; the transcranial benchmark's choice)."""
    if not 0 < alpha_power <= 3 or alpha_power == 1:
        raise ProblemError(f"alpha_power must be in (0, 3] and not 1, got {alpha_power}")
    f_mhz = float(maps.provenance["frequency_hz"]) / 1e6
    alpha_at_f = maps.alpha_coeff * f_mhz  # dB/cm at the planning frequency (linear law)
    return KWaveMedium(
        sound_speed=maps.sound_speed.astype(np.float32),
        density=maps.density.astype(np.float32),
        alpha_coeff=(alpha_at_f / f_mhz**alpha_power).astype(np.float32),
        alpha_power=alpha_power,
    )
