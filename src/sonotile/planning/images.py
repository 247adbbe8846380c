"""CT volumes in, result volumes out, each with its affine (voxel index -> scanner millimetres).

The scanner frame throughout :mod:`sonotile.planning` is NIfTI's world frame, RAS
millimetres: +x toward the patient's Right, +y Anterior, +z Superior, as NIfTI, 3D Slicer and
FSLeyes show them (``world = affine @ (i, j, k, 1)``). DICOM's patient frame is LPS (+x Left,
+y Posterior); its positions are converted by negating x and y.

NIfTI is read with nibabel (its best affine: sform, else qform; the header's scaling applied).
A DICOM series is read with pydicom: slices ordered along the slice normal, voxel ``(i, j, k)``
= (column, row, slice) as NIfTI converters lay it out, the slice step taken from the positions
(so gantry tilt is kept), stored values turned into Hounsfield units with each slice's
``RescaleSlope`` and ``RescaleIntercept``. Both packages are the optional extra
``sonotile[planning]``.
"""

from __future__ import annotations

import importlib
import json
import os
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
        if hu.ndim != 3:
            raise ProblemError(f"CTImage.hu must be 3-D, got shape {hu.shape}")
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

    def world(self, ijk: Sequence[float] | np.ndarray) -> np.ndarray:
        """Voxel indices ``(..., 3)`` -> RAS millimetres ``(..., 3)``."""
        v = np.asarray(ijk, dtype=np.float64)
        return v @ self.affine[:3, :3].T + self.affine[:3, 3]

    def voxel(self, xyz: Sequence[float] | np.ndarray) -> np.ndarray:
        """RAS millimetres ``(..., 3)`` -> fractional voxel indices ``(..., 3)``."""
        inv = np.linalg.inv(self.affine)
        return np.asarray(xyz, dtype=np.float64) @ inv[:3, :3].T + inv[:3, 3]


def read_nifti(path: str | os.PathLike) -> CTImage:
    """A CT volume from a NIfTI file (``.nii`` or ``.nii.gz``); a 4-D file must have one volume."""
    nib = optional("nibabel")
    img = nib.load(os.fspath(path))
    data = np.asarray(img.get_fdata(dtype=np.float32))
    if data.ndim == 4 and data.shape[3] == 1:
        data = data[..., 0]
    if data.ndim != 3:
        raise ProblemError(f"{path}: expected a 3-D volume, got shape {data.shape}")
    return CTImage(data, np.asarray(img.affine), source=os.fspath(path))


def _dicom_files(where: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """The files of a DICOM series: a folder's files, or the given paths."""
    if isinstance(where, str | os.PathLike):
        p = os.fspath(where)
        if not os.path.isdir(p):
            raise ProblemError(f"DICOM series {p!r}: not a folder")
        files = sorted(os.path.join(p, f) for f in os.listdir(p) if not f.startswith("."))
        return [f for f in files if os.path.isfile(f)]
    return [os.fspath(f) for f in where]


def _read_slices(files: list[str], series_uid: str | None) -> list[Any]:
    """The image slices of one series (pydicom datasets)."""
    pydicom = optional("pydicom")
    slices = []
    for f in files:
        try:
            ds = pydicom.dcmread(f, stop_before_pixels=False)
        except Exception:  # noqa: BLE001 - not a DICOM file: skipped
            continue
        if "PixelData" in ds and "ImagePositionPatient" in ds:
            slices.append(ds)
    uids = sorted({str(getattr(s, "SeriesInstanceUID", "")) for s in slices})
    if series_uid is not None:
        slices = [s for s in slices if str(getattr(s, "SeriesInstanceUID", "")) == series_uid]
    elif len(uids) > 1:
        raise ProblemError(f"several DICOM series found ({', '.join(uids)}): pass series_uid")
    if len(slices) < 2:
        raise ProblemError(f"a DICOM series needs at least 2 image slices, found {len(slices)}")
    return slices


def _dicom_affine(slices: list[Any]) -> tuple[np.ndarray, list[Any]]:
    """The LPS affine of sorted slices and the slices in order along the normal."""
    iop = np.asarray(slices[0].ImageOrientationPatient, dtype=np.float64)
    row, col = iop[:3], iop[3:]  # along a row (column index grows), along a column
    normal = np.cross(row, col)
    pos = [np.asarray(s.ImagePositionPatient, dtype=np.float64) for s in slices]
    order = np.argsort([p @ normal for p in pos])
    slices = [slices[i] for i in order]
    pos = [pos[i] for i in order]
    steps = np.diff(np.asarray(pos), axis=0)
    step = (pos[-1] - pos[0]) / (len(pos) - 1)
    if np.abs(steps - step).max() > 1e-3 * max(float(np.linalg.norm(step)), 1.0) + 1e-3:
        raise ProblemError("DICOM series: slices are not evenly spaced (missing slices?)")
    if np.linalg.norm(step) < 1e-6:
        raise ProblemError("DICOM series: slices share one position")
    spacing = slices[0].PixelSpacing
    dr, dc = float(spacing[0]), float(spacing[1])  # between rows, between columns
    a = np.eye(4)
    a[:3, 0], a[:3, 1], a[:3, 2], a[:3, 3] = row * dc, col * dr, step, pos[0]
    return a, slices


def read_dicom_series(
    where: str | os.PathLike | Sequence[str | os.PathLike], series_uid: str | None = None
) -> CTImage:
    """A CT volume in Hounsfield units from a DICOM series (a folder or a list of files).

    Args:
        where: the folder holding the series' files, or the files.
        series_uid: which series, where the folder holds several.
    """
    files = _dicom_files(where)
    slices = _read_slices(files, series_uid)
    lps, slices = _dicom_affine(slices)
    shape = (int(slices[0].Rows), int(slices[0].Columns))
    hu = np.empty((shape[1], shape[0], len(slices)), dtype=np.float32)
    for k, s in enumerate(slices):
        px = np.asarray(s.pixel_array)
        if px.shape != shape:
            raise ProblemError(f"DICOM series: slice {k} is {px.shape}, the first {shape}")
        slope = float(getattr(s, "RescaleSlope", 1.0))
        intercept = float(getattr(s, "RescaleIntercept", 0.0))
        hu[:, :, k] = (px.astype(np.float64) * slope + intercept).T
    uid = str(getattr(slices[0], "SeriesInstanceUID", ""))
    src = os.fspath(where) if isinstance(where, str | os.PathLike) else f"{len(files)} files"
    return CTImage(hu, LPS_TO_RAS @ lps, source=src, meta={"SeriesInstanceUID": uid})


def read_ct(path: str | os.PathLike) -> CTImage:
    """A CT volume from a NIfTI file or a folder holding a DICOM series."""
    p = os.fspath(path)
    if os.path.isdir(p):
        return read_dicom_series(p)
    if p.endswith((".nii", ".nii.gz")):
        return read_nifti(p)
    raise ProblemError(f"{p!r}: expected a .nii/.nii.gz file or a folder of DICOM files")


def write_nifti(
    path: str | os.PathLike,
    values: np.ndarray,
    like: CTImage,
    *,
    provenance: dict[str, Any] | None = None,
    description: str = "",
) -> None:
    """Write a volume on ``like``'s grid and affine as NIfTI (it opens over the CT in 3D Slicer
    or FSLeyes). ``provenance`` (JSON-able) goes into a NIfTI comment extension, read back by
    :func:`read_provenance`; ``description`` (<= 80 characters) into the header's descrip."""
    nib = optional("nibabel")
    v = np.asarray(values)
    if v.shape != like.shape:
        raise ProblemError(f"values have shape {v.shape}; the image's grid is {like.shape}")
    if v.dtype == bool:
        v = v.astype(np.uint8)
    elif not np.issubdtype(v.dtype, np.integer):
        v = v.astype(np.float32)
    img = nib.Nifti1Image(v, like.affine)
    img.set_sform(like.affine, code=1)  # scanner
    img.set_qform(like.affine, code=1)
    img.header["descrip"] = description[:79].encode()
    if provenance is not None:
        text = json.dumps(provenance, default=_jsonable).encode()
        img.header.extensions.append(nib.nifti1.Nifti1Extension("comment", text))
    nib.save(img, os.fspath(path))


def _jsonable(x: Any) -> Any:
    """numpy scalars and arrays as plain JSON values."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"{type(x).__name__} is not JSON serialisable")


def read_provenance(path: str | os.PathLike) -> dict[str, Any] | None:
    """The provenance :func:`write_nifti` stored in a NIfTI file, or None."""
    nib = optional("nibabel")
    img = nib.load(os.fspath(path))
    for ext in img.header.extensions:
        if ext.get_code() == 6:  # comment
            try:
                return json.loads(ext.get_content())
            except ValueError:
                continue
    return None
