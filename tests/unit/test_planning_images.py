"""CT images in and out: NIfTI and DICOM series read with their affine (RAS millimetres), DICOM
rescaled to Hounsfield units, results written back on the input's grid with provenance."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest
from dicom_series import write_series

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
    with pytest.raises(ProblemError, match="not empty"):
        CTImage(np.zeros((3, 0, 3)), np.eye(4))
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


def _nifti(path, data=None, affine=None, edit=None):
    """Save a small NIfTI image (int16 zeros unless ``data``), then change its header on disk
    with ``edit`` (as a hostile writer would, past nibabel's own consistency)."""
    data = np.zeros((4, 5, 6), np.int16) if data is None else data
    img = nib.Nifti1Image(data, np.diag([2.0, 2.0, 2.0, 1.0]) if affine is None else affine)
    nib.save(img, path)
    if edit is not None:
        raw = path.read_bytes()
        header = nib.Nifti1Header.from_fileobj(io.BytesIO(raw))
        edit(header)
        path.write_bytes(header.binaryblock + raw[348:])
    return path


def _dims(d):
    def edit(h):
        h["dim"] = [len(d), *d, *[1] * (7 - len(d))]

    return edit


def _refused(path, *words):
    """read_ct refuses ``path`` with a message naming it and holding ``words``."""
    with pytest.raises(ProblemError) as e:
        read_ct(path)
    text = str(e.value)
    assert str(path) in text and "\n" not in text, text
    for w in words:
        assert w in text, text
    return text


@needs_readers
def test_unreadable_nifti_files_are_named(tmp_path):
    (tmp_path / "empty.nii").write_bytes(b"")
    _refused(tmp_path / "empty.nii", "not a readable NIfTI file", "Empty")
    (tmp_path / "noise.nii.gz").write_bytes(np.random.default_rng(0).bytes(5000))
    _refused(tmp_path / "noise.nii.gz", "not a readable NIfTI file")
    whole = _nifti(tmp_path / "whole.nii")
    raw = whole.read_bytes()
    (tmp_path / "short.nii").write_bytes(raw[: len(raw) - 100])
    _refused(tmp_path / "short.nii", "truncated", f"needs {len(raw)}")


@needs_readers
def test_damaged_gzip_is_refused_even_where_nibabel_reads_past_it(tmp_path):
    """The data lies well before the end of the stream: only reading to the end checks the
    gzip CRC and length."""
    rng = np.random.default_rng(0)
    path = _nifti(tmp_path / "ct.nii.gz", rng.integers(-1000, 2000, (40, 40, 40)).astype(np.int16))
    raw = bytearray(path.read_bytes())
    assert read_ct(path).shape == (40, 40, 40)
    raw[-8] ^= 0xFF  # the CRC-32 of the uncompressed data
    (tmp_path / "crc.nii.gz").write_bytes(bytes(raw))
    _refused(tmp_path / "crc.nii.gz", "damaged gzip data")
    (tmp_path / "cut.nii.gz").write_bytes(bytes(raw[: len(raw) // 2]))
    _refused(tmp_path / "cut.nii.gz")


@needs_readers
def test_nifti_headers_that_are_not_a_ct(tmp_path):
    _refused(_nifti(tmp_path / "huge.nii", edit=_dims([2000, 2000, 2000])), "GiB of memory")
    _refused(_nifti(tmp_path / "neg.nii", edit=_dims([-4, 5, 6])), "[-4, 5, 6]")
    _refused(_nifti(tmp_path / "zero.nii", edit=_dims([4, 0, 6])), "[4, 0, 6]")
    _refused(_nifti(tmp_path / "flat.nii", np.zeros((4, 5), np.int16)), "2-D")
    four = _nifti(tmp_path / "four.nii", np.zeros((4, 5, 6, 3), np.int16))
    _refused(four, "4-D", "(4, 5, 6, 3)", "one 3-D volume")
    assert read_ct(_nifti(tmp_path / "one.nii", np.zeros((4, 5, 6, 1), np.int16))).shape == (
        4, 5, 6)  # fmt: skip
    _refused(_nifti(tmp_path / "c.nii", np.zeros((4, 5, 6), np.complex64)), "complex64")

    def datatype(code, bits):
        def edit(h):
            h["datatype"], h["bitpix"] = code, bits

        return edit

    _refused(_nifti(tmp_path / "rgb.nii", edit=datatype(128, 24)), "data type")  # RGB24
    _refused(_nifti(tmp_path / "bool.nii", edit=datatype(1, 1)))  # DT_BINARY
    mask = np.ones((4, 5, 6), np.uint8)  # what a boolean volume becomes in NIfTI
    _refused(_nifti(tmp_path / "mask.nii", mask), "uint8 data without scaling", "0 .. 255")
    scaled = nib.Nifti1Image(mask, np.eye(4))
    scaled.header.set_slope_inter(20.0, -1000.0)  # 8 bits scaled to HU: read
    nib.save(scaled, tmp_path / "u8.nii")
    np.testing.assert_allclose(read_ct(tmp_path / "u8.nii").hu, -980.0)


@needs_readers
def test_nifti_scaling_and_affine_must_make_sense(tmp_path):
    def scl(slope, inter):
        def edit(h):
            h["scl_slope"], h["scl_inter"] = slope, inter

        return edit

    # NIfTI: a slope of 0 or NaN means "not scaled"; an intercept beside it is then ignored
    assert read_ct(_nifti(tmp_path / "plain.nii", edit=scl(np.nan, np.nan))).hu.max() == 0
    _refused(_nifti(tmp_path / "s0.nii", edit=scl(0.0, -1024.0)), "scl_slope is 0", "-1024")
    _refused(_nifti(tmp_path / "snan.nii", edit=scl(np.nan, -1024.0)), "scl_slope is nan")
    _refused(_nifti(tmp_path / "sinf.nii", edit=scl(np.inf, 0.0)), "not finite")
    _refused(_nifti(tmp_path / "inan.nii", edit=scl(1.0, np.nan)), "intercept")

    def srow(axis, row):
        def edit(h):
            h[f"srow_{axis}"], h["sform_code"], h["qform_code"] = row, 1, 0

        return edit

    _refused(_nifti(tmp_path / "nan_affine.nii", edit=srow("x", [2, 0, 0, np.nan])), "not finite")
    _refused(_nifti(tmp_path / "flat_voxel.nii", edit=srow("y", [0, 0, 0, 0])),
             "voxel sizes [2.0, 0.0, 2.0]", "not invertible")  # fmt: skip


def _series(tmp_path, edit=None, n=5):
    stored = np.full((6, 5, n), 1024, dtype=np.int16)
    return write_series(tmp_path, stored, iop=(1, 0, 0, 0, 1, 0), origin_lps=(0, 0, 0),
                        spacing=(0.5, 0.5), step_lps=np.array([0.0, 0.0, 1.0]), slope=1,
                        intercept=-1024, edit=edit)  # fmt: skip


def _on(slices, change):
    """An ``edit`` applying ``change(ds)`` to the slices numbered in ``slices``."""

    def edit(k, ds):
        if k in slices:
            change(ds)

    return edit


def _dicom_refused(tmp_path, *words):
    with pytest.raises(ProblemError) as e:
        read_ct(tmp_path)
    text = str(e.value)
    assert "\n" not in text and str(tmp_path) in text, text
    for w in words:
        assert w in text, text
    return text


@needs_readers
@pytest.mark.parametrize(
    ("slices", "change", "words"),
    [
        ({2}, lambda ds: delattr(ds, "PixelSpacing"), ["no PixelSpacing"]),
        (
            {0, 1},
            lambda ds: setattr(ds, "PixelSpacing", ["0.7", "0.7"]),
            ["PixelSpacing", "differs"],
        ),
        (
            {3},
            lambda ds: setattr(ds, "ImageOrientationPatient", [0, 1, 0, 1, 0, 0]),
            ["ImageOrientationPatient", "differs"],
        ),
        (
            {1},
            lambda ds: setattr(ds, "ImageOrientationPatient", [1, 0, 0, 1, 0, 0]),
            ["perpendicular unit vectors"],
        ),
        ({4}, lambda ds: setattr(ds, "RescaleSlope", "NaN"), ["RescaleSlope", "finite"]),
        ({2}, lambda ds: setattr(ds, "RescaleSlope", "0"), ["RescaleSlope is 0"]),
        ({2}, lambda ds: setattr(ds, "RescaleIntercept", "inf"), ["RescaleIntercept"]),
        ({2}, lambda ds: setattr(ds, "ImagePositionPatient", ["0", "0", "3"]), ["one position"]),
        (
            {3},
            lambda ds: setattr(ds, "ImagePositionPatient", ["5", "0", "3"]),
            ["not evenly spaced"],
        ),
        ({1}, lambda ds: setattr(ds, "SeriesInstanceUID", "1.2.3"), ["2 DICOM series", "1.2.3"]),
        ({0}, lambda ds: setattr(ds, "Modality", "MR"), ["Modality MR, not CT"]),
        ({2}, lambda ds: setattr(ds, "PixelSpacing", ["nan", "0.5"]), ["PixelSpacing", "finite"]),
        ({2}, lambda ds: setattr(ds, "PixelSpacing", ["-0.5", "0.5"]), ["must be positive"]),
        ({2}, lambda ds: setattr(ds, "PixelData", ds.PixelData[:20]), ["truncated pixel data"]),
        ({1}, lambda ds: setattr(ds, "Rows", 0), ["an empty slice"]),
    ],
)
def test_dicom_series_checked_slice_by_slice(tmp_path, slices, change, words):
    paths = _series(tmp_path, _on(slices, change))
    text = _dicom_refused(tmp_path, *words)
    if "DICOM series" not in words[0]:  # the file at fault is named
        assert any(str(paths[k]) in text for k in slices), text


@needs_readers
def test_dicom_series_of_mixed_sizes_and_damaged_files(tmp_path):
    def smaller(ds):
        ds.Rows = 4
        ds.PixelData = ds.PixelData[: 4 * 5 * 2]

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    paths = _series(tmp_path / "a", _on({1}, smaller))
    assert str(paths[1]) in _dicom_refused(tmp_path / "a", "Rows, Columns", "differs")
    paths = _series(tmp_path / "b")
    raw = paths[2].read_bytes()
    paths[2].write_bytes(raw[: len(raw) // 3])
    text = _dicom_refused(tmp_path / "b")
    assert str(paths[2]) in text and ("damaged" in text or "truncated" in text), text


@needs_readers
def test_dicom_compressed_pixel_data_that_cannot_be_decoded_is_named(tmp_path):
    from pydicom.encaps import encapsulate
    from pydicom.uid import JPEG2000Lossless

    def jpeg(ds):
        ds.file_meta.TransferSyntaxUID = JPEG2000Lossless
        ds.PixelData = encapsulate([b"\xff\x4f\xff\x51" + bytes(40)])
        ds["PixelData"].VR = "OB"

    paths = _series(tmp_path, _on({0, 1, 2, 3, 4}, jpeg))
    text = _dicom_refused(tmp_path, "cannot be decoded", "JPEG 2000")
    assert any(str(p) in text for p in paths)


@needs_readers
def test_dicom_padding_outside_the_field_of_view_is_air(tmp_path):
    """Stored -2000 with intercept -1024 is -3024 HU, a scanner's padding: with
    PixelPaddingValue it reads as air; without it, as the values it says."""

    def pad(k, ds):
        ds["PixelData"].value = np.where(np.arange(30) < 4, -2000, 1064).astype(np.int16).tobytes()
        ds.add_new("PixelPaddingValue", "SS", -2000)

    (tmp_path / "a").mkdir()
    _series(tmp_path / "a", pad)
    ct = read_ct(tmp_path / "a")
    assert np.count_nonzero(ct.hu == -1000.0) == 4 * 5 and ct.hu.max() == 40.0
    assert ct.meta["padding_voxels_as_air"] == 4 * 5
