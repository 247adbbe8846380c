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

import gzip
import json
import os
import zlib
from typing import Any

import numpy as np

from sonotile.model.problem import ProblemError
from sonotile.planning.ctimage import CTImage, optional
from sonotile.planning.memory import PLAN_BYTES_PER_VOXEL, check_memory


def _nifti_header(path: str) -> Any:
    """The NIfTI image at ``path`` with its data not yet read, or a :class:`ProblemError`
    saying why it is not one."""
    nib = optional("nibabel")
    try:
        img = nib.load(path)
    except Exception as e:  # noqa: BLE001 - any failure to parse is an unreadable file
        raise ProblemError(f"{path}: not a readable NIfTI file ({_reason(e)})") from None
    if not isinstance(img, nib.Nifti1Image | nib.Nifti2Image):
        raise ProblemError(f"{path}: a {type(img).__name__}, not a NIfTI image")
    return img


def _reason(e: BaseException) -> str:
    """An exception's message on one line."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text[:200]


def _check_nifti_header(img: Any, path: str, hounsfield: bool) -> tuple[int, ...]:
    """The 3-D shape of a NIfTI image from its header alone, or a :class:`ProblemError` for
    sizes, data types or scaling that are not an image's (with ``hounsfield``: a CT's)."""
    hdr = img.header
    dim = [int(v) for v in hdr["dim"]]
    nd = dim[0]
    if not 1 <= nd <= 7 or any(n < 1 for n in dim[1 : nd + 1]):
        raise ProblemError(f"{path}: the header's dimensions {dim[1 : max(nd, 0) + 1]} "
                           f"(dim[0] = {nd}) are not sizes of an image")  # fmt: skip
    shape = tuple(dim[1 : nd + 1])
    if len(shape) > 3 and any(n != 1 for n in shape[3:]):
        raise ProblemError(f"{path}: a {len(shape)}-D image of shape {shape}; a CT is one 3-D "
                           "volume")  # fmt: skip
    if len(shape) < 3:
        raise ProblemError(f"{path}: a {len(shape)}-D image of shape {shape}; a CT is 3-D")
    dtype = np.dtype(hdr.get_data_dtype())
    if dtype.kind not in "iuf" or dtype.fields is not None:
        raise ProblemError(f"{path}: data type {dtype} (NIfTI datatype {int(hdr['datatype'])}); "
                           "a CT holds real numbers (integers or floats)")  # fmt: skip
    slope, inter = _scaling(img, path)
    if np.isinf(slope) or (np.isfinite(slope) and slope != 0 and not np.isfinite(inter)):
        raise ProblemError(f"{path}: scaling scl_slope {slope:g}, scl_inter {inter:g} is not "
                           "finite")  # fmt: skip
    if (slope == 0 or np.isnan(slope)) and np.isfinite(inter) and inter != 0:
        raise ProblemError(f"{path}: scl_slope is {slope:g}, so NIfTI ignores scl_inter "
                           f"{inter:g}: the stored values may not be Hounsfield units")  # fmt: skip
    scaled = np.isfinite(slope) and slope != 0 and (slope != 1 or inter != 0)
    if hounsfield and dtype.itemsize == 1 and not scaled:
        info = np.iinfo(dtype)
        raise ProblemError(f"{path}: {dtype} data without scaling hold {info.min} .. {info.max}, "
                           "not Hounsfield units (air -1000 HU, bone above 1000 HU): a mask or "
                           "a label map?")  # fmt: skip
    return shape[:3]


def _scaling(img: Any, path: str) -> tuple[float, float]:
    """The file's own ``scl_slope`` and ``scl_inter`` (nibabel's loaded header drops them)."""
    nib = optional("nibabel")
    try:
        with nib.openers.ImageOpener(path) as f:
            raw = type(img.header).from_fileobj(f, check=False)
    except Exception as e:  # noqa: BLE001 - any failure to parse is an unreadable file
        raise ProblemError(f"{path}: the header cannot be read ({_reason(e)})") from None
    return float(raw["scl_slope"]), float(raw["scl_inter"])


def _check_nifti_data(img: Any, path: str, nbytes: int) -> None:
    """A :class:`ProblemError` if the file holds fewer than ``nbytes`` of data after its
    header, or if a gzip-compressed file fails its length or CRC check."""
    offset = int(getattr(img.dataobj, "offset", 0) or img.header.get_data_offset())
    if not path.endswith(".gz"):
        size = os.path.getsize(path)
        if size < offset + nbytes:
            raise ProblemError(f"{path}: truncated: {size} bytes, the header's image needs "
                               f"{offset + nbytes}")  # fmt: skip
        return
    total = 0
    try:
        with gzip.open(path, "rb") as f:  # read to the end: gzip checks its CRC and length
            while chunk := f.read(1 << 24):
                total += len(chunk)
    except (OSError, EOFError, zlib.error) as e:
        raise ProblemError(f"{path}: damaged gzip data ({_reason(e)})") from None
    if total < offset + nbytes:
        raise ProblemError(f"{path}: truncated: {total} bytes uncompressed, the header's image "
                           f"needs {offset + nbytes}")  # fmt: skip


def read_nifti(path: str | os.PathLike, *, hounsfield: bool = False) -> CTImage:
    """A volume from a NIfTI file (``.nii`` or ``.nii.gz``); a 4-D file must have one volume.

    The header is checked before any data is read (sizes, data type, scaling, and the memory
    a plan on it takes), the file's length and a compressed file's CRC before the data is
    used; each problem is a :class:`ProblemError` naming the file. With ``hounsfield`` (a CT,
    as :func:`read_ct` reads it) 8-bit data without scaling, a mask or a label map, is refused.
    """
    p = os.fspath(path)
    img = _nifti_header(p)
    shape = _check_nifti_header(img, p, hounsfield)
    n = int(np.prod(shape, dtype=np.float64))
    check_memory(n * PLAN_BYTES_PER_VOXEL, f"{p}: planning on a {shape} image")
    _check_nifti_data(img, p, n * np.dtype(img.header.get_data_dtype()).itemsize)
    try:
        data = np.asarray(img.get_fdata(dtype=np.float32)).reshape(shape)
    except Exception as e:  # noqa: BLE001 - any failure to decode is an unreadable file
        raise ProblemError(f"{p}: the image data cannot be read ({_reason(e)})") from None
    a = np.asarray(img.affine, dtype=np.float64)
    if a.shape != (4, 4) or not np.isfinite(a).all():
        raise ProblemError(f"{p}: the header's affine (voxel -> mm) is not finite: {a.tolist()}")
    sizes = np.linalg.norm(a[:3, :3], axis=0)
    if abs(np.linalg.det(a[:3, :3])) < 1e-9 * max(float(sizes.max()), 1e-30) ** 3:
        raise ProblemError(f"{p}: the header's affine has voxel sizes {sizes.round(6).tolist()} "
                           "mm and is not invertible (a voxel size of zero?)")  # fmt: skip
    codes = {k: int(img.header[k]) for k in ("sform_code", "qform_code")}
    return CTImage(data, a, source=p, meta=codes)


def read_ct(path: str | os.PathLike) -> CTImage:
    """A CT volume from a NIfTI file or a folder holding a DICOM series."""
    p = os.fspath(path)
    if os.path.isdir(p):
        from sonotile.planning.dicom import read_dicom_series

        return read_dicom_series(p)
    if p.endswith((".nii", ".nii.gz")):
        return read_nifti(p, hounsfield=True)
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
