"""How ``sonotile plan`` writes its outputs, against hostile folders: links, devices, FIFOs
and the CT itself among the plan's file names are refused before any work (exit 2, the file
named), the CT and every file there stay byte-identical; the plan's files are written under
temporary names renamed into place, and a disk without room fails before the first is
written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hostile import no_hang, no_partial, one_error, readonly_folder, snapshot

from sonotile.base import files
from sonotile.commands.cli import main as cli
from sonotile.planning import outputs
from sonotile.planning.images import CTImage, read_nifti, write_nifti

CT = b"the patient's CT, not to be lost\n"
ARGS = ["--target", "0", "10", "45", "--entry", "18", "16", "105", "--transducer", "bowl:50:50"]


def _plan(capsys, *args) -> tuple[int, str]:
    with no_hang():
        status = cli(["plan", *map(str, args)])
    return status, capsys.readouterr().err


def _refused(capsys, folders, args, *parts: str) -> None:
    """Exit 2, one error line holding ``parts``, every folder's files as they were."""
    before = [snapshot(f) for f in folders]
    status, err = _plan(capsys, *args)
    assert status == 2, err
    one_error(err, "sonotile plan", *parts)
    assert [snapshot(f) for f in folders] == before
    for f in folders:
        no_partial(f)


@pytest.fixture
def ct(tmp_path) -> Path:
    (tmp_path / "ct.nii.gz").write_bytes(CT)  # never read: every case fails before
    return tmp_path / "ct.nii.gz"


def test_forced_plan_json_linking_to_the_ct(ct, tmp_path, capsys):
    """--force into a folder whose plan.json is a symbolic (or hard) link to the CT."""
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(ct, out / "plan.json")
    _refused(capsys, [tmp_path, out], [ct, *ARGS, "-o", out, "--force"], "plan.json",
             "same file as the input")  # fmt: skip
    os.remove(out / "plan.json")
    os.link(ct, out / "report.html")
    _refused(capsys, [tmp_path, out], [ct, *ARGS, "-o", out, "--force"], "report.html",
             "same file as the input")  # fmt: skip
    assert ct.read_bytes() == CT


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        ("report.png", os.mkfifo, "FIFO"),
        ("lesion.nii.gz", os.mkdir, "is a directory"),
        ("cem43.nii.gz", lambda p: os.symlink(p.parent / "x", p), "symbolic link"),
    ],
)
def test_forced_folder_with_a_file_of_another_kind(ct, tmp_path, capsys, name, make, message):
    out = tmp_path / "out"
    out.mkdir()
    make(out / name)
    _refused(capsys, [tmp_path, out], [ct, *ARGS, "-o", out, "--force"], name, message)


def test_kwave_input_name_checked_too(ct, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(tmp_path / "elsewhere.h5", out / "kwave_input.h5")
    _refused(capsys, [tmp_path, out], [ct, *ARGS, "-o", out, "--force", "--kwave_input"],
             "kwave_input.h5", "symbolic link")  # fmt: skip


def test_output_folder_of_another_kind(ct, tmp_path, capsys):
    (tmp_path / "file").write_bytes(CT)
    _refused(capsys, [tmp_path], [ct, *ARGS, "-o", tmp_path / "file"], "is a file")
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    _refused(capsys, [tmp_path], [ct, *ARGS, "-o", tmp_path / "link", "--force"],
             "symbolic link")  # fmt: skip
    _refused(capsys, [tmp_path], [ct, *ARGS, "-o", tmp_path / "no" / "out"], "not a writable")
    with readonly_folder(tmp_path / "ro") as ro:
        _refused(capsys, [tmp_path], [ct, *ARGS, "-o", ro / "out"], "not a writable folder")


def _fake_plan(tmp_path: Path, monkeypatch) -> SimpleNamespace:
    """A plan's outputs without a run: a small CT, its volumes, no report figure."""
    hu = np.zeros((6, 5, 4), np.float32)
    ct = CTImage(hu, np.diag([2.0, 2.0, 2.0, 1.0]), source=str(tmp_path / "ct.nii.gz"))
    write_nifti(ct.source, hu, ct)
    vols = {n: np.full(hu.shape, 1.5, np.float32) for n in outputs.VOLUMES}
    monkeypatch.setattr(outputs, "volumes_on_ct", lambda p: vols)
    monkeypatch.setattr(outputs, "write_report", lambda p, d, v: [])
    keys = ("sonotile", "ct", "target_mm", "entry_mm", "transducer", "settings", "tissue")
    return SimpleNamespace(ct=ct, summary={k: 1 for k in keys})


def test_plan_files_written_through_temporaries(tmp_path, monkeypatch):
    """Others' files named like temporaries survive; the volumes come back as written."""
    p = _fake_plan(tmp_path, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    theirs = ["plan.json.sonotile-partial", f".plan.json.1-00.{files.PARTIAL}"]
    for n in theirs:
        (out / n).write_bytes(CT)
    paths = outputs.write_plan(p, str(out), force=True)
    assert sorted(os.path.basename(q) for q in paths) == sorted(outputs.FILES[:5])
    assert np.all(read_nifti(str(out / "cem43.nii.gz")).hu == 1.5)
    assert all((out / n).read_bytes() == CT for n in theirs)
    no_partial(out, keep=tuple(theirs))


def test_no_room_for_the_plan_fails_before_the_first_file(tmp_path, monkeypatch):
    p = _fake_plan(tmp_path, monkeypatch)
    out = tmp_path / "out"
    out.mkdir()
    (out / "plan.json").write_bytes(CT)  # an earlier plan's
    before = snapshot(out)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda d: usage._replace(free=4096))
    with pytest.raises(files.OutputWriteError, match="No space left on device"):
        outputs.write_plan(p, str(out), force=True)
    assert snapshot(out) == before
