"""CT images in and out: NIfTI and DICOM series read with their affine (RAS millimetres), DICOM
rescaled to Hounsfield units, results written back on the input's grid with provenance."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from sonotile.model.problem import ProblemError
from sonotile.planning.images import CTImage, optional, read_ct, read_provenance, write_nifti

try:
    import nibabel as nib
    import pydicom
except ImportError:  # the optional extra sonotile[planning] is not installed
    nib = pydicom = None
needs_readers = pytest.mark.skipif(pydicom is None, reason="needs nibabel and pydicom")


def test_missing_reader_names_the_extra():
    with pytest.raises(ImportError, match=r"sonotile\[planning\]"):
        optional("sonotile_no_such_reader")


def oblique_affine() -> np.ndarray:
    """A rotated, anisotropic, translated voxel -> RAS affine."""
    t = np.deg2rad(20.0)
    rot = np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
    a = np.eye(4)
    a[:3, :3] = rot @ np.diag([0.8, 0.9, 1.25])
    a[:3, 3] = (-40.0, 12.5, -30.0)
    return a


@needs_readers
def test_nifti_round_trip_keeps_values_affine_and_provenance(tmp_path):
    rng = np.random.default_rng(0)
    hu = rng.uniform(-1000, 2000, (7, 6, 5)).astype(np.float32)
    ct = CTImage(hu, oblique_affine())
    path = tmp_path / "ct.nii.gz"
    write_nifti(path, hu, ct, provenance={"mapping": "aubry2003", "hu_max": np.float64(2e3)})
    back = read_ct(path)
    np.testing.assert_allclose(back.hu, hu, rtol=1e-6)
    np.testing.assert_allclose(back.affine, ct.affine, atol=1e-5)
    np.testing.assert_allclose(back.spacing_mm, [0.8, 0.9, 1.25], rtol=1e-6)
    assert read_provenance(path) == {"mapping": "aubry2003", "hu_max": 2000.0}
    img = nib.load(path)
    assert int(img.header["sform_code"]) == 1 and int(img.header["qform_code"]) == 1
    # voxel <-> world are inverse maps
    ijk = np.array([[1.0, 2.0, 3.0], [6.0, 0.0, 4.5]])
    np.testing.assert_allclose(back.voxel(back.world(ijk)), ijk, atol=1e-9)


@needs_readers
def test_nifti_scaling_is_applied(tmp_path):
    """A file storing int16 with scl_slope/scl_inter reads back in physical units."""
    raw = np.arange(24, dtype=np.int16).reshape(2, 3, 4)
    img = nib.Nifti1Image(raw, np.eye(4))
    img.header.set_slope_inter(2.0, -1024.0)
    nib.save(img, tmp_path / "s.nii")
    np.testing.assert_allclose(read_ct(tmp_path / "s.nii").hu, raw * 2.0 - 1024.0)


def write_series(folder, stored, *, iop, origin_lps, spacing, step_lps, slope, intercept):
    """Write stored values ``(rows, cols, slices)`` as a CT DICOM series, files shuffled."""
    from pydicom.dataset import FileMetaDataset
    from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

    series = generate_uid()
    order = np.random.default_rng(1).permutation(stored.shape[2])
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
        ds.save_as(folder / f"im{n:03d}.dcm", enforce_file_format=True)
    (folder / "notes.txt").write_text("not a DICOM file")


@needs_readers
def test_dicom_series_gives_hu_and_ras_affine(tmp_path):
    rows, cols, nslices = 5, 4, 6
    stored = np.arange(rows * cols * nslices, dtype=np.int16).reshape(rows, cols, nslices) * 7
    origin = np.array([-100.0, -120.0, 50.0])  # LPS
    iop = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)  # rows along +L, columns along +P: axial
    write_series(tmp_path, stored, iop=iop, origin_lps=origin, spacing=(0.7, 0.6),
                 step_lps=np.array([0.0, 0.0, 1.5]), slope=1.0, intercept=-1024.0)  # fmt: skip
    ct = read_ct(tmp_path)
    assert ct.shape == (cols, rows, nslices)  # (column, row, slice)
    # pixel (row r, column c) of slice k: HU = stored - 1024 at hu[c, r, k]
    np.testing.assert_allclose(ct.hu, np.transpose(stored, (1, 0, 2)) - 1024.0)
    # at LPS = origin + c dc (+L) + r dr (+P) + k 1.5 (+S): RAS negates x and y
    c, r, k = 3, 2, 4
    lps = origin + np.array([c * 0.6, r * 0.7, k * 1.5])
    np.testing.assert_allclose(ct.world([c, r, k]), lps * [-1, -1, 1], atol=1e-4)


@needs_readers
def test_dicom_oblique_series_matches_nibabel_single_slice_affine(tmp_path):
    """The in-plane affine of a tilted series agrees with nibabel's DICOM wrapper (LPS)."""
    with warnings.catch_warnings():  # nibabel calls its DICOM readers experimental
        warnings.simplefilter("ignore", UserWarning)
        from nibabel.nicom import dicomwrappers

    t = np.deg2rad(30.0)
    row = np.array([np.cos(t), 0.0, np.sin(t)])
    col = np.array([0.0, 1.0, 0.0])
    normal = np.cross(row, col)
    stored = np.ones((4, 3, 3), dtype=np.int16) * 50
    write_series(tmp_path, stored, iop=(*row, *col), origin_lps=(10.0, -5.0, 2.0),
                 spacing=(0.5, 0.8), step_lps=2 * normal, slope=2, intercept=-1000)  # fmt: skip
    ct = read_ct(tmp_path)
    np.testing.assert_allclose(ct.hu, 2.0 * 50 - 1000.0)

    def along(path):
        return float(np.dot(np.asarray(pydicom.dcmread(path).ImagePositionPatient, float), normal))

    first = min(tmp_path.glob("*.dcm"), key=along)
    w = dicomwrappers.wrapper_from_file(str(first))
    lps = np.diag([-1.0, -1.0, 1.0, 1.0]) @ ct.affine
    # nibabel's wrapper indexes (row, column); ours (column, row), as NIfTI converters do
    np.testing.assert_allclose(lps[:3, [1, 0]], w.affine[:3, :2], atol=1e-5)
    np.testing.assert_allclose(lps[:3, 3], w.affine[:3, 3], atol=1e-4)
    np.testing.assert_allclose(lps[:3, 2], 2.0 * normal, atol=1e-4)


@needs_readers
def test_bad_inputs_have_clear_errors(tmp_path):
    with pytest.raises(ProblemError, match="3-D"):
        CTImage(np.zeros((3, 3)), np.eye(4))
    with pytest.raises(ProblemError, match="invertible"):
        CTImage(np.zeros((2, 2, 2)), np.zeros((4, 4)))
    ct = CTImage(np.zeros((2, 3, 4)), np.eye(4))
    with pytest.raises(ProblemError, match=r"shape \(3, 3, 4\)"):
        write_nifti(tmp_path / "x.nii", np.zeros((3, 3, 4)), ct)
    with pytest.raises(ProblemError, match="at least 2"):
        read_ct(tmp_path)  # an empty folder
    with pytest.raises(ProblemError, match=".nii"):
        read_ct(tmp_path / "scan.mha")


@needs_readers
def test_dicom_series_with_a_missing_slice_is_refused(tmp_path):
    stored = np.zeros((3, 3, 5), dtype=np.int16)
    write_series(tmp_path, stored, iop=(1, 0, 0, 0, 1, 0), origin_lps=(0, 0, 0), spacing=(1, 1),
                 step_lps=np.array([0.0, 0.0, 2.0]), slope=1, intercept=0)  # fmt: skip
    middle = next(
        p for p in tmp_path.glob("*.dcm") if pydicom.dcmread(p).ImagePositionPatient[2] == 4
    )
    middle.unlink()
    with pytest.raises(ProblemError, match="evenly spaced"):
        read_ct(tmp_path)
