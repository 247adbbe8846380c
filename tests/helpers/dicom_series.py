"""A CT DICOM series written slice by slice for the image readers' tests, each slice's
dataset open to a change (another spacing, orientation, rescale...) before it is saved."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def write_series(folder, stored: np.ndarray, *, iop, origin_lps, spacing, step_lps, slope,
                 intercept, edit: Callable[[int, Any], None] | None = None) -> list:  # fmt: skip
    """Write stored values ``(rows, cols, slices)`` as a CT DICOM series in ``folder``, files
    in shuffled order, with a non-DICOM note beside them; ``edit(k, ds)`` may change slice
    ``k``'s dataset before it is saved. The paths, by slice."""
    import pydicom
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    series = generate_uid()
    order = np.random.default_rng(1).permutation(stored.shape[2])
    paths = [None] * stored.shape[2]
    for n, k in enumerate(order):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = CTImageStorage
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = pydicom.Dataset()
        ds.file_meta = meta
        ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
        ds.Modality, ds.SeriesInstanceUID = "CT", series
        ds.Rows, ds.Columns = stored.shape[:2]
        ds.PixelSpacing = [f"{spacing[0]}", f"{spacing[1]}"]
        ds.ImageOrientationPatient = [f"{v:.6f}" for v in iop]
        ds.ImagePositionPatient = [f"{v:.4f}" for v in np.asarray(origin_lps) + k * step_lps]
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleSlope, ds.RescaleIntercept = f"{slope}", f"{intercept}"
        ds.PixelData = np.ascontiguousarray(stored[:, :, k].astype(np.int16)).tobytes()
        if edit is not None:
            edit(int(k), ds)
        paths[k] = folder / f"im{n:03d}.dcm"
        ds.save_as(paths[k], enforce_file_format=True)
    (folder / "notes.txt").write_text("not a DICOM file")
    return paths
