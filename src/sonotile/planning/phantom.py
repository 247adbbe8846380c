"""A synthetic CT of a head to plan on: scalp, a skull of cortical tables around trabecular
diploe with irregular thickness, and brain, in Hounsfield units on a RAS grid.

The head is an ellipsoid centred at the world origin (semi-axes of the skull's outer surface
along x = left-right, y = anterior-posterior, z = inferior-superior). Along each ray from the
centre the layers are measured inward from that surface: scalp outside it, then the outer
cortical table, the diploe and the inner table, whose total (the skull thickness) follows a
smooth random function of direction, :func:`skull_thickness` (seeded, so the same seed gives
the same skull). Bone HU carry a smooth random texture within their ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy import ndimage

from sonotile.model.problem import ProblemError
from sonotile.planning.images import CTImage


@dataclass(frozen=True)
class HeadShape:
    """The phantom's anatomy (millimetres, Hounsfield units).

    Attributes:
        semi_axes_mm: the skull's outer surface (x, y, z) [mm].
        scalp_mm: scalp thickness [mm].
        thickness_mm: mean skull thickness [mm]; ``thickness_variation``: relative
            half-range of its variation (thickness in ``mean (1 +- variation)``).
        outer_table, inner_table: fractions of the thickness that are cortical bone.
        cortical_hu, trabecular_hu: (low, high) HU of the bone textures.
        brain_hu, scalp_hu, air_hu: HU of brain, scalp and air.
        texture_mm: correlation length of the bone texture [mm].
    """

    semi_axes_mm: tuple[float, float, float] = (70.0, 88.0, 76.0)
    scalp_mm: float = 5.0
    thickness_mm: float = 6.5
    thickness_variation: float = 0.35
    outer_table: float = 0.3
    inner_table: float = 0.25
    cortical_hu: tuple[float, float] = (1500.0, 2000.0)
    trabecular_hu: tuple[float, float] = (300.0, 800.0)
    brain_hu: float = 30.0
    scalp_hu: float = 40.0
    air_hu: float = -1000.0
    texture_mm: float = 1.5


def _waves(seed: int, n: int = 12) -> tuple[np.ndarray, ...]:
    """Random low-order plane waves on the unit sphere: wave vectors, phases, amplitudes."""
    rng = np.random.default_rng(seed)
    k = rng.normal(size=(n, 3))
    k *= (rng.uniform(0.4, 1.6, n) / np.linalg.norm(k, axis=1))[:, None]
    return k, rng.uniform(0, 2 * np.pi, n), rng.uniform(0.5, 1.0, n)


def skull_thickness(directions: np.ndarray, shape: HeadShape, seed: int = 0) -> np.ndarray:
    """The phantom's skull thickness [mm] along unit ``directions`` ``(..., 3)`` from the
    centre: ``mean (1 + variation tanh(g))``, ``g`` a sum of smooth random waves of unit
    standard deviation."""
    k, phase, amp = _waves(seed)
    u = np.asarray(directions, dtype=np.float64)
    g = (amp * np.cos(2 * np.pi * (u @ k.T) + phase)).sum(-1) / np.sqrt((amp**2).sum() / 2)
    return shape.thickness_mm * (1.0 + shape.thickness_variation * np.tanh(g))


def _texture(rng: np.random.Generator, n: tuple[int, ...], sigma: np.ndarray) -> np.ndarray:
    """Smooth random field of zero mean and unit standard deviation."""
    t = ndimage.gaussian_filter(rng.normal(size=n).astype(np.float32), sigma, mode="wrap")
    return (t - t.mean()) / max(float(t.std()), 1e-12)


def _check(shape: Sequence[int], spacing: np.ndarray, head: HeadShape) -> None:
    """Clear errors for a grid that cannot hold the head."""
    if len(shape) != 3 or min(shape) < 2:
        raise ProblemError(f"head_phantom: shape must be 3 sizes >= 2, got {tuple(shape)}")
    if spacing.shape != (3,) or (spacing <= 0).any():
        raise ProblemError(f"head_phantom: spacing_mm must be positive, got {spacing}")
    if not 0 <= head.thickness_variation < 1 or head.outer_table + head.inner_table >= 1:
        raise ProblemError("head_phantom: need 0 <= thickness_variation < 1, tables < 1")
    need = 2 * (np.asarray(head.semi_axes_mm) + head.scalp_mm)
    fov = (np.asarray(shape) - 1) * spacing
    if (need > fov).any():
        raise ProblemError(
            f"head_phantom: the head ({need.round(1).tolist()} mm) does not fit in the field of "
            f"view ({fov.round(1).tolist()} mm); use more points or a larger spacing_mm"
        )


def _layers(
    h: HeadShape, x: np.ndarray, y: np.ndarray, z: np.ndarray, tex: np.ndarray, seed: int
) -> np.ndarray:
    """HU of the voxels at world coordinates ``x, y, z`` [mm] (axes of a slab)."""
    x, y, z = np.meshgrid(x, y, z, indexing="ij", sparse=True)
    r = np.sqrt(x * x + y * y + z * z)
    a, b, c = h.semi_axes_mm
    re = np.sqrt((x / a) ** 2 + (y / b) ** 2 + (z / c) ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        depth = np.where(re > 0, r / re - r, np.inf)  # inward from the outer skull surface
    hu = np.full(depth.shape, h.air_hu, dtype=np.float32)
    hu[depth >= -h.scalp_mm] = h.scalp_hu
    t_max = h.thickness_mm * (1 + h.thickness_variation)
    hu[depth >= t_max] = h.brain_hu
    band = (depth >= 0) & (depth < t_max)
    p = np.stack([np.broadcast_to(v, depth.shape)[band] for v in (x, y, z)], axis=-1)
    t = skull_thickness(p / np.linalg.norm(p, axis=-1, keepdims=True), h, seed)
    d, tx = depth[band], tex[band]
    skull = d < t
    cortical = skull & ((d < h.outer_table * t) | (d >= (1 - h.inner_table) * t))
    vals = np.full(d.shape, h.brain_hu, dtype=np.float32)
    for mask, (lo, hi) in ((skull, h.trabecular_hu), (cortical, h.cortical_hu)):
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        vals[mask] = np.clip(mid + 0.5 * half * tx[mask], lo, hi)
    hu[band] = vals
    return hu


def head_phantom(
    shape: Sequence[int],
    spacing_mm: float | Sequence[float],
    *,
    seed: int = 0,
    head: HeadShape | None = None,
) -> CTImage:
    """A synthetic head CT: HU volume and its affine (RAS mm, head centred at the origin).

    Args:
        shape: voxels per axis ``(nx, ny, nz)``.
        spacing_mm: voxel size [mm], one for all axes or one per axis.
        seed: the skull's thickness pattern and the bone texture.
        head: the anatomy (:class:`HeadShape`).
    """
    h = head or HeadShape()
    spacing = np.broadcast_to(np.asarray(spacing_mm, dtype=np.float64), (3,)).copy()
    _check(shape, spacing, h)
    n = tuple(int(s) for s in shape)
    axes = [(np.arange(m) - (m - 1) / 2) * d for m, d in zip(n, spacing)]
    tex = _texture(np.random.default_rng(seed + 1), n, h.texture_mm / spacing)
    hu = np.empty(n, dtype=np.float32)
    for i in range(0, n[0], 16):  # slabs of x-planes: bounded memory at fine spacing
        hu[i : i + 16] = _layers(h, axes[0][i : i + 16], axes[1], axes[2], tex[i : i + 16], seed)
    affine = np.diag([*spacing, 1.0])
    affine[:3, 3] = -(np.asarray(n) - 1) / 2 * spacing
    meta = {"seed": seed, **asdict(h)}
    return CTImage(hu, affine, source="sonotile.planning.head_phantom", meta=meta)


def thickness_along_ray(
    image: CTImage,
    start_mm: Sequence[float],
    direction: Sequence[float],
    length_mm: float,
    *,
    skull_hu: float = 250.0,
    step_mm: float | None = None,
    order: int = 1,
) -> float:
    """Length [mm] of bone (HU >= ``skull_hu``) along a ray through the volume, sampled every
    ``step_mm`` (default: a tenth of the smallest voxel) by trilinear interpolation (``order``
    1; partial volume then widens the bone by up to a voxel) or the nearest voxel (0)."""
    d = np.asarray(direction, dtype=np.float64)
    if np.linalg.norm(d) == 0:
        raise ProblemError("thickness_along_ray: direction must be nonzero")
    d /= np.linalg.norm(d)
    step = step_mm or float(image.spacing_mm.min()) / 10
    s = np.arange(0.0, length_mm, step) + step / 2
    pts = np.asarray(start_mm, dtype=np.float64) + s[:, None] * d
    v = ndimage.map_coordinates(image.hu, image.voxel(pts).T, order=order, cval=-1000.0)
    return float((v >= skull_hu).sum() * step)
