"""``sonotile plan`` given what a careless or hostile user might: damaged and implausible
images, targets where no plan should go, numbers out of range. Each is refused before any
simulation with one line naming the file or option and what is wrong (exit 2, no output
folder), or planned with a warning where the image is only suspicious; the checks run on a
small phantom and take well under a second each."""

from __future__ import annotations

import os

import numpy as np
import pytest
from dicom_series import write_series

from sonotile.commands.cli import main as cli
from sonotile.commands.plan import NUMBERS
from sonotile.model.problem import ProblemError
from sonotile.planning.chain import PlanSettings, setup
from sonotile.planning.images import CTImage, write_nifti
from sonotile.planning.phantom import head_phantom
from sonotile.planning.tissue import TRABECULAR, BoneParameters, tissue_properties

nib = pytest.importorskip("nibabel")
pytest.importorskip("pydicom")

TARGET = [0.0, 10.0, 45.0]  # in the phantom's brain
ENTRY = [0.0, 10.0, 100.0]  # above the head


@pytest.fixture(scope="module")
def phantom():
    return head_phantom((40, 48, 42), 4.0, seed=0)


@pytest.fixture(scope="module")
def ct_path(phantom, tmp_path_factory):
    path = tmp_path_factory.mktemp("ct") / "head.nii.gz"
    write_nifti(path, phantom.hu, phantom)
    return path


def refused(capsys, tmp_path, ct, *words, target=TARGET, entry=ENTRY, extra=()):
    """``sonotile plan`` on ``ct`` exits 2 with an error line holding ``words``, writing
    nothing; all it wrote to stderr."""
    out = tmp_path / "plan-out"
    argv = ["plan", str(ct), "--target", *map(str, target), "--entry", *map(str, entry),
            "--transducer", "bowl:50:50", "-o", str(out), *extra]  # fmt: skip
    try:
        status = cli(argv)
    except SystemExit as e:  # argparse's own refusal of a value
        status = e.code
    assert status == 2
    err = capsys.readouterr().err.strip().splitlines()
    line = err[-1]
    assert line.startswith("sonotile plan: error: ") and "Traceback" not in "".join(err), err
    for w in words:
        assert w in line, line
    assert not out.exists()
    return "\n".join(err)


def _save(path, hu, affine):
    nib.save(nib.Nifti1Image(np.asarray(hu, np.float32), affine), path)
    return path


def _with(phantom, change):
    hu = phantom.hu.copy()
    change(hu)
    return hu


# each: (file name, change to the phantom's HU, words in the message)
BAD_VALUES = [
    ("all_nan.nii.gz", lambda h: h.fill(np.nan), ["80640 of 80640 voxels are not finite"]),
    ("nan_slab.nii.gz", lambda h: h.__setitem__((slice(None), slice(None), 20), np.nan),
     ["1920 of 80640 voxels are not finite", "within voxels [0, 0, 20] to [39, 47, 20]"]),
    ("two_nan.nii.gz", lambda h: h.__setitem__(([3, 30], [4, 40], [5, 6]), np.nan),
     ["2 of 80640 voxels are not finite", "first at voxel [3, 4, 5]"]),
    ("huge.nii.gz", lambda h: h.__setitem__((3, 4, 5), 1e30),
     ["1 voxel outside -1100 .. 4000 HU", "at voxel [3, 4, 5]", "not Hounsfield units",
      "--clip_hu"]),
    ("inf.nii.gz", lambda h: h.__setitem__((3, 4, 5), np.inf),
     ["1 of 80640 voxels are not finite", "at voxel [3, 4, 5] ([-66.0, -78.0, -62.0] mm)"]),
    ("neg.nii.gz", lambda h: h.__setitem__((3, 4, slice(5, 8)), -3000.0),
     ["3 voxels outside -1100 .. 4000 HU", "padding outside the scanner's field of view"]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "change", "words"), BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_values_that_are_not_hounsfield_units_are_refused(phantom, tmp_path, capsys, name,
                                                           change, words):  # fmt: skip
    path = _save(tmp_path / name, _with(phantom, change), phantom.affine)
    assert "Infinity" not in refused(capsys, tmp_path, path, str(path), *words)


def test_damaged_files_are_refused_in_one_line(ct_path, tmp_path, capsys):
    raw = ct_path.read_bytes()
    cases = {
        "empty.nii": (b"", "not a readable NIfTI file"),
        "noise.nii.gz": (np.random.default_rng(0).bytes(4000), "not a readable NIfTI file"),
        "cut.nii.gz": (raw[: len(raw) // 2], ""),
        "crc.nii.gz": (raw[:-8] + bytes(b ^ 0xFF for b in raw[-8:-4]) + raw[-4:], "damaged gzip"),
    }
    for name, (data, words) in cases.items():
        (tmp_path / name).write_bytes(data)
        refused(capsys, tmp_path, tmp_path / name, str(tmp_path / name), words)
    hdr = nib.Nifti1Header()
    hdr.set_data_shape((4, 5, 6))
    hdr["dim"][1:4] = (2000, 2000, 2000)
    (tmp_path / "huge.nii").write_bytes(hdr.binaryblock + b"\0" * 4 + bytes(240))
    refused(capsys, tmp_path, tmp_path / "huge.nii", "(2000, 2000, 2000)", "GiB of memory")
    hdr["dim"][1:4] = (-4, 5, 6)
    (tmp_path / "neg.nii").write_bytes(hdr.binaryblock + b"\0" * 4 + bytes(240))
    refused(capsys, tmp_path, tmp_path / "neg.nii", "[-4, 5, 6]", "not sizes")
    refused(capsys, tmp_path, tmp_path / "none.nii.gz", "no such file")


def _series(folder, edit=None):
    folder.mkdir()
    stored = np.full((8, 8, 6), 1024, dtype=np.int16)
    stored[2:6, 2:6, :] = 1064  # soft tissue within air
    return write_series(folder, stored, iop=(1, 0, 0, 0, 1, 0), origin_lps=(0, 0, 0),
                        spacing=(2.0, 2.0), step_lps=np.array([0.0, 0.0, 2.0]), slope=1,
                        intercept=-1024, edit=edit)  # fmt: skip


DICOM_CASES = {
    "no_spacing": (lambda k, ds: k == 2 and delattr(ds, "PixelSpacing"), ["no PixelSpacing"]),
    "half_spacing": (lambda k, ds: k % 2 and setattr(ds, "PixelSpacing", ["1.5", "1.5"]),
                     ["PixelSpacing", "differs"]),
    "one_oriented": (lambda k, ds: k == 3 and setattr(ds, "ImageOrientationPatient",
                                                      [0, 1, 0, 1, 0, 0]),
                     ["ImageOrientationPatient", "differs"]),
    "slope_nan": (lambda k, ds: k == 4 and setattr(ds, "RescaleSlope", "NaN"),
                  ["RescaleSlope", "expected a finite number"]),
    "mixed_series": (lambda k, ds: k == 1 and setattr(ds, "SeriesInstanceUID", "1.2.3.4"),
                     ["2 DICOM series", "1.2.3.4: 1 images", "one series"]),
    "mr": (lambda k, ds: setattr(ds, "Modality", "MR"), ["Modality MR, not CT"]),
    "duplicate": (lambda k, ds: k == 2 and setattr(ds, "ImagePositionPatient", ["0", "0", "6"]),
                  ["two slices at one position"]),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydicom on a NaN decimal string
@pytest.mark.parametrize("case", DICOM_CASES)
def test_inconsistent_dicom_series_are_refused(tmp_path, capsys, case):
    edit, words = DICOM_CASES[case]
    _series(tmp_path / "dcm", edit)
    refused(capsys, tmp_path, tmp_path / "dcm", str(tmp_path / "dcm"), *words,
            target=[-8.0, -8.0, 4.0], entry=[-8.0, -8.0, 60.0])  # fmt: skip


def test_damaged_dicom_slices_are_named(tmp_path, capsys):
    paths = _series(tmp_path / "cut")
    paths[3].write_bytes(paths[3].read_bytes()[:400])
    refused(capsys, tmp_path, tmp_path / "cut", str(paths[3]), target=[-8.0, -8.0, 4.0],
            entry=[-8.0, -8.0, 60.0])  # fmt: skip
    paths = _series(tmp_path / "missing")
    os.remove(paths[2])
    refused(capsys, tmp_path, tmp_path / "missing", "not evenly spaced", target=[-8.0, -8.0, 4.0],
            entry=[-8.0, -8.0, 60.0])  # fmt: skip


@pytest.mark.parametrize(
    ("target", "words"),
    [
        ([0.0, 10.0, 83.0], ["lies in air or water around the head", "--allow_target_in water"]),
        ([0.0, 10.0, 72.0], ["bone", "--allow_target_in bone"]),
        ([0.0, 10.0, 500.0], ["outside the image", "z -84.0 .. 84.0"]),
        ([0.0, 0.01, 0.045], ["0.0", "millimetres"]),
    ],
    ids=["in_air", "in_skull", "outside", "metres"],
)
def test_targets_where_no_plan_should_go(ct_path, tmp_path, capsys, target, words):
    entry = [0.0, 0.01, 0.1] if target[2] < 1 else ENTRY
    refused(capsys, tmp_path, ct_path, *words, target=target, entry=entry)


def test_target_in_air_is_planned_only_when_allowed(phantom):
    s = PlanSettings(frequency=200e3, points_per_wavelength=2.5, allow_target_in=("water",))
    ready = setup(phantom, [0.0, 10.0, 83.0], ENTRY, "bowl:50:50", s)
    assert ready.grid.shape[2] > 0 and ready.warnings == []
    with pytest.raises(ProblemError, match="allow_target_in"):
        PlanSettings(allow_target_in=("vacuum",)).check()


def test_outside_the_image_uses_all_eight_corners_of_an_oblique_image():
    """A 45-degree image: its two "corner" voxels (0,0,0) and (n-1,...) bound x between them,
    yet a point beyond that box can be inside the image, and a point within it outside."""
    t = np.deg2rad(45.0)
    a = np.eye(4)
    a[:3, :3] = [[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]]
    ct = CTImage(np.zeros((10, 10, 4)), a)
    lo, hi = ct.bounds_mm()
    two = np.stack([ct.world([0, 0, 0]), ct.world([9, 9, 3])])
    assert lo[0] < two[:, 0].min() - 5 and hi[0] > two[:, 0].max() - 1e-9
    assert ct.contains(ct.world([0, 9, 1]))  # x -6.4: beyond the two corners' x, inside
    assert not ct.contains(ct.world([-2, 5, 1]))
    inside = ct.world(np.array([[-0.49, 9.49, 3.49], [9.49, -0.49, -0.49]]))
    assert all(ct.contains(p) for p in inside)
    assert np.all((inside >= lo - 1e-9) & (inside <= hi + 1e-9))


def test_identity_affine_and_suspect_images_are_warned_about(phantom, tmp_path, capsys):
    path = _save(tmp_path / "eye.nii.gz", phantom.hu, np.eye(4))
    # a target in the corner's air, refused after the warning: no simulation in this test
    err = refused(capsys, tmp_path, path, "air", target=[2, 2, 2], entry=[2, 2, 60])
    assert "warning:" in err and "the affine is the identity" in err and str(path) in err
    soft = CTImage(np.full((6, 6, 6), 40.0), np.diag([2.0, 2, 2, 1]), source="soft")
    from sonotile.planning.imagecheck import image_warnings

    said = " ".join(image_warnings(soft))
    assert "no voxel below -500 HU" in said and "no bone" in said
    assert image_warnings(phantom) == []


def test_clip_hu_clips_and_says_so(phantom):
    hu = phantom.hu.copy()
    hu[1, 1, 1] = 1e30
    ct = CTImage(hu, phantom.affine, source="hot")
    s = PlanSettings(frequency=200e3, points_per_wavelength=2.5)
    with pytest.raises(ProblemError, match="1 voxel outside"):
        setup(ct, TARGET, ENTRY, "bowl:50:50", s)
    ready = setup(ct, TARGET, ENTRY, "bowl:50:50", PlanSettings(**{**s.__dict__, "clip_hu": True}))
    assert ready.image.hu.max() == 4000.0 and "clipped 1 voxel outside" in ready.warnings[0]


def test_one_saturated_voxel_far_from_the_beam_leaves_the_skull_as_it_was(phantom):
    """HU_max from a high percentile of the skull: one 3071 HU voxel (the far side of the
    head from the beam) moves the skull's mean sound speed by < 1 %; taking the scan's
    maximum, as a naive mapping does, moves it by more than 5 %."""
    hu = phantom.hu.copy()
    before = tissue_properties(hu, "aubry2003", frequency=500e3)
    bone = before.labels >= TRABECULAR
    far = tuple(np.argwhere(bone)[0])
    hu[far] = 3071.0
    after = tissue_properties(hu, "aubry2003", frequency=500e3)
    rest = bone.copy()
    rest[far] = False
    c0, c1 = before.sound_speed[bone].mean(), after.sound_speed[bone].mean()
    assert abs(c1 / c0 - 1) < 0.01
    assert after.provenance["bone"]["hu_max"] < 2100.0
    naive = tissue_properties(hu, "aubry2003", frequency=500e3, bone=BoneParameters(3071.0))
    assert naive.sound_speed[rest].mean() / before.sound_speed[rest].mean() < 0.95


BAD_NUMBERS = {
    "--frequency": ["0", "-5e5", "nan", "inf", "500"],
    "--ppw": ["0", "1", "nan", "1e6"],
    "--pressure": ["0", "-1", "nan", "inf"],
    "--focal_pressure": ["0", "nan", "inf"],
    "--target_dose": ["0", "-1", "nan", "inf", "1e7"],
    "--duration": ["0", "-1", "nan", "1e9"],
    "--cooling": ["-1", "nan", "inf"],
    "--duty": ["0", "1.5", "nan"],
    "--period": ["0", "nan", "inf"],
    "--dt": ["0", "-0.1", "nan"],
    "--perfusion": ["-1", "nan", "inf"],
    "--specific_heat": ["0", "nan", "inf"],
    "--conductivity": ["0", "-1", "nan"],
    "--margin": ["-1", "nan", "1e9"],
    "--beyond": ["-1", "nan", "1e9"],
    "--refocus": ["-1", "1.5", "nan", "11"],
    "--hu_max": ["0", "100", "nan", "1e5"],
}


def test_every_numeric_option_has_a_tested_range():
    assert set(BAD_NUMBERS) == set(NUMBERS)


@pytest.mark.parametrize(
    ("flag", "value"), [(f, v) for f, vs in BAD_NUMBERS.items() for v in vs]
)  # fmt: skip
def test_numeric_options_out_of_range_are_named(ct_path, tmp_path, capsys, flag, value):
    refused(capsys, tmp_path, ct_path, flag[2:], extra=[f"{flag}={value}"])


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--checkpoint_interval", "-1"], ["--checkpoint_interval"]),
        (["--checkpoint_interval", "nan"], ["--checkpoint_interval"]),
        (["--checkpoint_steps", "0"], ["--checkpoint_steps"]),
        (["--mesh", "2xa"], ["--mesh"]),
        (["--target", "0", "nan", "45"], ["argument --target: 'nan': expected a finite number"]),
        (["--transducer", "bowl:inf:50"], ["radius inf mm", "finite numbers"]),
        (["--dt", "5", "--duration", "1"], ["--dt 5 s is longer than --duration 1 s"]),
        (
            ["--period", "0.1", "--duty", "0.5", "--dt", "0.1"],
            ["--period 0.1 s at --duty 0.5 is on 0.05 s", "at least --dt 0.1 s"],
        ),
        (["--transducer", "array:1e9:64:64:4"], ["elements overlap"]),
    ],
)
def test_other_options_out_of_range_are_named(ct_path, tmp_path, capsys, extra, words):
    refused(capsys, tmp_path, ct_path, *words, extra=extra)
