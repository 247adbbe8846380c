"""A CT from a DICOM series, its headers checked slice by slice before any pixel is decoded.

The files of a folder that are not DICOM are skipped; a file that starts as DICOM and cannot
be read is an error. The series must be one (one ``SeriesInstanceUID``, ``Modality`` CT where
given), with one orientation, one pixel spacing and one size in every slice, finite rescale
values with a nonzero slope, and slice positions evenly spaced without gaps or duplicates;
each problem is a :class:`ProblemError` naming the file and what it holds. Slices are ordered
along the slice normal, voxel ``(i, j, k)`` = (column, row, slice) as NIfTI converters lay it
out, the slice step taken from the positions (so gantry tilt is kept), and the stored values
turned into Hounsfield units with each slice's ``RescaleSlope`` and ``RescaleIntercept``;
pixels equal to a slice's ``PixelPaddingValue`` (outside the reconstructed field of view) are
air, -1000 HU.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from sonotile.model.problem import ProblemError
from sonotile.planning.ctimage import LPS_TO_RAS, CTImage, optional
from sonotile.planning.memory import PLAN_BYTES_PER_VOXEL, check_memory

#: Hounsfield units of air, given to the voxels a slice marks with its ``PixelPaddingValue``
#: (outside the reconstructed field of view).
AIR_HU = -1000.0
#: What every slice must hold, and what it is.
REQUIRED = {
    "ImagePositionPatient": "the slice's position",
    "ImageOrientationPatient": "the slice's orientation",
    "PixelSpacing": "the in-plane voxel size",
    "Rows": "the slice's size",
    "Columns": "the slice's size",
}


def _dicom_files(where: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """The files of a DICOM series: a folder's files, or the given paths."""
    if isinstance(where, str | os.PathLike):
        p = os.fspath(where)
        if not os.path.isdir(p):
            raise ProblemError(f"DICOM series {p!r}: not a folder")
        files = sorted(os.path.join(p, f) for f in os.listdir(p) if not f.startswith("."))
        return [f for f in files if os.path.isfile(f)]
    return [os.fspath(f) for f in where]


def _is_dicom(path: str) -> bool:
    """Whether a file carries DICOM's preamble marker ``DICM`` at byte 128."""
    try:
        with open(path, "rb") as f:
            return f.read(132)[128:] == b"DICM"
    except OSError:
        return False


def _reason(e: BaseException) -> str:
    return (" ".join(str(e).split()) or type(e).__name__)[:200]


def _sop_class(ds: Any) -> str:
    """The name of a dataset's storage class (e.g. "CT Image Storage"), or ""."""
    uid = getattr(getattr(ds, "file_meta", None), "MediaStorageSOPClassUID", None)
    return str(getattr(uid, "name", "") or "")


def _read_images(files: list[str]) -> list[tuple[str, Any]]:
    """``(path, dataset)`` of each file holding pixel data; other files are skipped, and a
    damaged DICOM file is a :class:`ProblemError`."""
    pydicom = optional("pydicom")
    out = []
    for f in files:
        try:
            ds = pydicom.dcmread(f)
        except Exception as e:  # noqa: BLE001 - any parse failure: not DICOM, or damaged
            if _is_dicom(f):
                raise ProblemError(f"{f}: a damaged DICOM file ({_reason(e)})") from None
            continue
        if "PixelData" in ds:
            out.append((f, ds))
        elif "Rows" in ds or "Image Storage" in _sop_class(ds):
            raise ProblemError(f"{f}: a {_sop_class(ds) or 'DICOM image'} file without pixel "
                               "data (a truncated file?)")  # fmt: skip
    return out


def _one_series(images: list[tuple[str, Any]], series_uid: str | None,
                where: str) -> list[tuple[str, Any]]:  # fmt: skip
    """The images of one series: ``series_uid``'s, or the only one there is."""
    uid = {f: str(getattr(ds, "SeriesInstanceUID", "")) for f, ds in images}
    counts = Counter(uid.values())
    if series_uid is not None:
        images = [(f, ds) for f, ds in images if uid[f] == series_uid]
    elif len(counts) > 1:
        found = ", ".join(f"{u or '(none)'}: {n} images" for u, n in counts.items())
        raise ProblemError(f"{where}: {len(counts)} DICOM series ({found}); give a folder "
                           "holding one series")  # fmt: skip
    if len(images) < 2:
        raise ProblemError(f"{where}: a DICOM series needs at least 2 image slices, found "
                           f"{len(images)}")  # fmt: skip
    return images


def _numbers(ds: Any, name: str, n: int, f: str) -> np.ndarray:
    """The ``n`` finite numbers of attribute ``name``, or a :class:`ProblemError`."""
    try:
        v = np.asarray([float(x) for x in np.atleast_1d(ds[name].value)], dtype=np.float64)
    except (TypeError, ValueError):
        v = np.array([np.nan])
    if v.shape != (n,) or not np.isfinite(v).all():
        what = "a finite number" if n == 1 else f"{n} finite numbers"
        raise ProblemError(f"{f}: {name} is {ds[name].value!r}; expected {what}")
    return v


def _header(f: str, ds: Any) -> dict[str, Any]:
    """What the series needs of one slice, checked: position, orientation, spacing, size,
    rescale, modality."""
    for name, what in REQUIRED.items():
        if name not in ds or ds[name].value in (None, ""):
            raise ProblemError(f"{f}: no {name} ({what})")
    iop = _numbers(ds, "ImageOrientationPatient", 6, f)
    row, col = iop[:3], iop[3:]
    if (abs(np.linalg.norm(row) - 1) > 1e-3 or abs(np.linalg.norm(col) - 1) > 1e-3
            or abs(row @ col) > 1e-3):  # fmt: skip
        raise ProblemError(f"{f}: ImageOrientationPatient {iop.tolist()} is not two "
                           "perpendicular unit vectors")  # fmt: skip
    if int(ds.Rows) < 1 or int(ds.Columns) < 1:
        raise ProblemError(f"{f}: Rows x Columns {ds.Rows} x {ds.Columns}: an empty slice")
    spacing = _numbers(ds, "PixelSpacing", 2, f)
    if (spacing <= 0).any():
        raise ProblemError(f"{f}: PixelSpacing {spacing.tolist()} mm must be positive")
    rescale = []
    for name, default in (("RescaleSlope", 1.0), ("RescaleIntercept", 0.0)):
        rescale.append(float(_numbers(ds, name, 1, f)[0]) if name in ds else default)
    if rescale[0] == 0:
        raise ProblemError(f"{f}: RescaleSlope is 0: every voxel would be one value")
    modality = str(getattr(ds, "Modality", "CT") or "CT")
    if modality != "CT":
        raise ProblemError(f"{f}: Modality {modality}, not CT: planning needs Hounsfield units")
    if int(getattr(ds, "SamplesPerPixel", 1)) != 1:
        raise ProblemError(f"{f}: {ds.SamplesPerPixel} samples per pixel; a CT has one")
    return {"file": f, "ds": ds, "pos": _numbers(ds, "ImagePositionPatient", 3, f),
            "iop": iop, "spacing": spacing, "size": (int(ds.Rows), int(ds.Columns)),
            "rescale": rescale}  # fmt: skip


#: What every slice of a series shares: key, attribute, relative tolerance.
SHARED = (
    ("iop", "ImageOrientationPatient", 1e-4),
    ("spacing", "PixelSpacing", 1e-4),
    ("size", "Rows, Columns", 0.0),
)


def _same(slices: list[dict[str, Any]]) -> None:
    """One orientation, one pixel spacing and one size in every slice."""
    first = slices[0]
    for s in slices[1:]:
        for key, name, tol in SHARED:
            a, b = np.asarray(s[key], float), np.asarray(first[key], float)
            if np.abs(a - b).max() > tol * max(1.0, float(np.abs(b).max())):
                raise ProblemError(
                    f"{s['file']}: {name} {a.tolist()} differs from {b.tolist()} in "
                    f"{first['file']}: a series has one"
                )


def _stack(slices: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The slices ordered along their normal and the step between them [mm, LPS], checked:
    no two at one position, and evenly spaced (no missing or shifted slice)."""
    row, col = slices[0]["iop"][:3], slices[0]["iop"][3:]
    normal = np.cross(row, col)
    slices = sorted(slices, key=lambda s: float(s["pos"] @ normal))
    pos = np.asarray([s["pos"] for s in slices])
    steps = np.diff(pos, axis=0)
    length = np.linalg.norm(steps, axis=1)
    k = int(np.argmin(length))
    if length[k] < 1e-3:
        raise ProblemError(f"{slices[k]['file']} and {slices[k + 1]['file']}: two slices at "
                           f"one position {pos[k].tolist()} mm (duplicates?)")  # fmt: skip
    step = (pos[-1] - pos[0]) / (len(pos) - 1)
    dev = np.linalg.norm(steps - step, axis=1)
    k = int(np.argmax(dev))
    if dev[k] > 1e-3 * max(float(np.linalg.norm(step)), 1.0) + 1e-3:
        raise ProblemError(
            f"DICOM series: slices are not evenly spaced: {length[k]:.4g} mm from "
            f"{slices[k]['file']} to {slices[k + 1]['file']}, {np.linalg.norm(step):.4g} mm on "
            "average (a missing, duplicated or shifted slice?)"
        )
    return slices, step


def _pixels(s: dict[str, Any]) -> np.ndarray:
    """A slice's stored values, decoded, or a :class:`ProblemError` naming the file."""
    ds, f = s["ds"], s["file"]
    ts = getattr(getattr(ds, "file_meta", None), "TransferSyntaxUID", None)
    compressed = bool(ts is not None and ts.is_compressed)
    if not compressed:
        rows, cols = s["size"]
        need = rows * cols * int(getattr(ds, "BitsAllocated", 16)) // 8
        if len(ds.PixelData) < need:
            raise ProblemError(f"{f}: truncated pixel data: {len(ds.PixelData)} bytes, "
                               f"{rows} x {cols} pixels need {need}")  # fmt: skip
    try:
        px = np.asarray(ds.pixel_array)
    except Exception as e:  # noqa: BLE001 - any decoder failure names the file
        name = getattr(ts, "name", str(ts))
        hint = "; a decoder (e.g. pip install pylibjpeg) may read it" if compressed else ""
        raise ProblemError(f"{f}: pixel data ({name}) cannot be decoded ({_reason(e)}){hint}"
                           ) from None  # fmt: skip
    if px.shape != s["size"]:
        raise ProblemError(f"{f}: pixel data of shape {px.shape}, Rows x Columns {s['size']}")
    return px


def _padding(ds: Any) -> int | None:
    """A slice's ``PixelPaddingValue`` as a stored value, or None."""
    pad = getattr(ds, "PixelPaddingValue", None)
    if isinstance(pad, bytes):  # value representation US or SS left unresolved
        signed = int(getattr(ds, "PixelRepresentation", 0)) == 1
        return int.from_bytes(pad, "little", signed=signed) if pad else None
    return None if pad is None else int(pad)


def read_dicom_series(
    where: str | os.PathLike | Sequence[str | os.PathLike], series_uid: str | None = None
) -> CTImage:
    """A CT volume in Hounsfield units from a DICOM series (a folder or a list of files).

    Args:
        where: the folder holding the series' files, or the files.
        series_uid: which series, where the folder holds several.
    """
    files = _dicom_files(where)
    src = os.fspath(where) if isinstance(where, str | os.PathLike) else f"{len(files)} files"
    images = _one_series(_read_images(files), series_uid, src)
    slices = [_header(f, ds) for f, ds in images]
    _same(slices)
    slices, step = _stack(slices)
    rows, cols = slices[0]["size"]
    check_memory(rows * cols * len(slices) * PLAN_BYTES_PER_VOXEL,
                 f"{src}: planning on a {cols} x {rows} x {len(slices)} image")  # fmt: skip
    hu = np.empty((cols, rows, len(slices)), dtype=np.float32)
    padded = 0
    for k, s in enumerate(slices):
        slope, intercept = s["rescale"]
        px = _pixels(s)
        v = px.astype(np.float64) * slope + intercept
        pad = _padding(s["ds"])
        if pad is not None:  # outside the reconstructed field of view: air
            mask = px == pad
            v[mask], padded = AIR_HU, padded + int(mask.sum())
        hu[:, :, k] = v.T
    first = slices[0]
    row, col = first["iop"][:3], first["iop"][3:]  # along a row (column index grows), a column
    dr, dc = first["spacing"]  # between rows, between columns
    lps = np.eye(4)
    lps[:3, 0], lps[:3, 1], lps[:3, 2], lps[:3, 3] = row * dc, col * dr, step, first["pos"]
    uid = str(getattr(first["ds"], "SeriesInstanceUID", ""))
    meta = {"SeriesInstanceUID": uid, "padding_voxels_as_air": padded}
    return CTImage(hu, LPS_TO_RAS @ lps, source=src, meta=meta)
