"""``sonotile heat`` against hostile input: every path, option and stored dataset is checked
before any work, with one error line naming it and a non-zero exit status; the user's files
stay byte-identical; a full disk or a NaN result ends with exit 1 and nothing written."""

from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path

import h5py
import numpy as np
import pytest
from hostile import (
    device_node,
    no_hang,
    no_partial,
    one_error,
    readonly_folder,
    result_file,
    small_tmpfs,
    snapshot,
)

from sonotile.base import files
from sonotile.commands.heat import main as heat_main

OLD = b"the user's earlier file\n"
RUN = ["--duration", "0.4", "--dt", "0.1"]


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> str:
    return result_file(tmp_path_factory.mktemp("heat") / "r.h5")


def _heat(capsys, *args) -> tuple[int, str, str]:
    try:
        with no_hang():
            status = heat_main([str(a) for a in args])
    except SystemExit as e:  # argparse's usage errors
        status = int(e.code or 0)
    cap = capsys.readouterr()
    return status, cap.out, cap.err


def _refused(capsys, folder: Path, args, *parts: str, status: int = 2) -> None:
    """The command exits with ``status`` and one error line holding ``parts``; every file of
    ``folder`` is as it was and no temporary file is left."""
    before = snapshot(folder)
    code, _, err = _heat(capsys, *args)
    assert code == status, err
    one_error(err, "sonotile heat", *parts)
    assert snapshot(folder) == before
    no_partial(folder)


def test_output_that_names_the_result_is_refused(result, tmp_path, capsys):
    """-o the result itself, a symlink or hard link to it, another spelling of it."""
    inp = result_file(tmp_path / "r.h5")
    os.symlink(inp, tmp_path / "sym.h5")
    os.link(inp, tmp_path / "hard.h5")
    for out in (inp, tmp_path / "sym.h5", tmp_path / "hard.h5", tmp_path / "." / "r.h5"):
        _refused(capsys, tmp_path, [inp, *RUN, "-o", out], "same file as the result file")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: os.symlink(p.parent / "elsewhere", p), "symbolic link"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: os.mkfifo(p), "FIFO"),
        (lambda p: p.write_bytes(OLD), "exists and is not in HDF5 format"),
    ],
    ids=["symlink", "folder", "fifo", "not-hdf5"],
)
def test_output_of_another_kind_is_refused(result, tmp_path, capsys, make, message):
    make(tmp_path / "out.h5")
    _refused(capsys, tmp_path, [result, *RUN, "-o", tmp_path / "out.h5"], "out.h5", message)


def test_device_node_output_is_refused(result, tmp_path, capsys):
    dev = device_node(tmp_path)
    _refused(capsys, tmp_path, [result, *RUN, "-o", dev], str(dev), "character device")
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


def test_missing_and_read_only_output_folders(result, tmp_path, capsys):
    _refused(capsys, tmp_path, [result, *RUN, "-o", tmp_path / "nope" / "o.h5"], "does not exist")
    with readonly_folder(tmp_path / "ro") as ro:
        _refused(capsys, tmp_path, [result, *RUN, "-o", ro / "o.h5"], "not writable")


def test_name_too_long_for_the_filesystem_is_refused_first(result, tmp_path, capsys):
    _refused(capsys, tmp_path, [result, *RUN, "-o", tmp_path / ("a" * 300 + ".h5")],
             "the name is 303 bytes")  # fmt: skip


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--duration", "inf"], "--duration: 'inf': expected a finite number > 0"),
        (["--duration", "nan"], "--duration: 'nan': expected a finite number > 0"),
        (["--duration", "0"], "--duration: '0': expected a finite number > 0"),
        (["--dt", "-0.1"], "--dt"),
        (["--duty", "2"], "--duty: '2': expected a finite number > 0 and <= 1"),
        (["--duty", "0"], "--duty"),
        (["--perfusion", "-1"], "--perfusion: '-1': expected a finite number >= 0"),
        (["--coarsen", "0"], "--coarsen: '0': expected an integer in 1..2147483647"),
        (["--coarsen", "1.5"], "--coarsen"),
        (["--T0", "-300"], "--T0"),
        (["--specific-heat", "0"], "--specific_heat"),
        (["--conductivity", "-1"], "--conductivity"),
        (["--frequency", "0"], "--frequency"),
        (["--on", "-1"], "--on"),
        (["--period", "0"], "--period"),
        (["--checkpoint_steps", "0"], "--checkpoint_steps"),
        (["--mesh", "2xa"], "--mesh '2xa'"),
    ],
)
def test_numeric_options_out_of_range(result, tmp_path, capsys, args, message):
    _refused(capsys, tmp_path, [result, "--duration", "1", *args, "-o", tmp_path / "o.h5"],
             message)  # fmt: skip


def test_too_many_steps_refused(result, tmp_path, capsys):
    _refused(capsys, tmp_path, [result, "--duration", "1e9", "--dt", "1e-3"], "time steps")


def test_coarser_than_the_grid_refused(result, tmp_path, capsys):
    _refused(capsys, tmp_path, [result, *RUN, "--coarsen", "17", "-o", tmp_path / "o.h5"],
             "coarsen: got 17")  # fmt: skip


@pytest.mark.parametrize(
    ("medium", "message"),
    [
        ({"sound_speed": -1500.0}, "'input/medium/sound_speed' has a minimum of -1500 m/s"),
        ({"density": 0.0}, "'input/medium/density' has a minimum of 0"),
        ({"alpha_coeff": np.full((16, 16), -0.5)}, "'input/medium/alpha_coeff'"),
        ({"sound_speed": np.full((16, 16), np.nan)}, "'input/medium/sound_speed' holds NaN"),
    ],
    ids=["negative-c", "zero-rho", "negative-alpha-field", "nan-c"],
)
def test_bad_stored_medium_refused(tmp_path, capsys, medium, message):
    inp = result_file(tmp_path / "bad.h5", **medium)
    _refused(capsys, tmp_path, [inp, *RUN], "bad.h5", message)


def test_nan_pressure_and_zero_spacing_refused(tmp_path, capsys):
    inp = result_file(tmp_path / "nan.h5")  # save_results refuses NaN: put it in afterwards
    with h5py.File(inp, "r+") as f:
        f["results/p_cw_amp_all"][3, 4] = np.nan
    _refused(capsys, tmp_path, [inp, *RUN], "'results/p_cw_amp_all' holds 1 NaN")
    inp = result_file(tmp_path / "flat.h5")
    with h5py.File(inp, "r+") as f:
        f["input/grid"].attrs["spacing"] = np.array([0.0, 2.5e-4])
    _refused(capsys, tmp_path, [inp, *RUN], "'input/grid' spacing (0, 0.00025) m")


def test_unreadable_results_refused_naming_the_file(result, tmp_path, capsys):
    data = Path(result).read_bytes()
    (tmp_path / "cut.h5").write_bytes(data[: len(data) // 2])
    _refused(capsys, tmp_path, [tmp_path / "cut.h5", *RUN], "result file", "cut.h5", "truncated")
    (tmp_path / "text.h5").write_bytes(OLD)
    _refused(capsys, tmp_path, [tmp_path / "text.h5", *RUN], "text.h5", "not an HDF5 file")
    _refused(capsys, tmp_path, [tmp_path / "none.h5", *RUN], "none.h5", "no such file")
    (tmp_path / "dir.h5").mkdir()
    _refused(capsys, tmp_path, [tmp_path / "dir.h5", *RUN], "dir.h5", "is a directory")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = 1.0
    _refused(capsys, tmp_path, [tmp_path / "other.h5", *RUN], "not a sonotile result file")


def test_fifo_result_or_checkpoint_never_hangs(result, tmp_path, capsys):
    os.mkfifo(tmp_path / "pipe")
    _refused(capsys, tmp_path, [tmp_path / "pipe", *RUN], "pipe", "FIFO")
    _refused(capsys, tmp_path, [result, *RUN, "-o", tmp_path / "o.h5", "--checkpoint",
                                tmp_path / "pipe"], "checkpoint", "FIFO")  # fmt: skip


def test_checkpoint_that_is_no_run_state_or_another_runs(result, tmp_path, capsys):
    """A file at --checkpoint that is not a run state (text, a truncated state) is never
    written over; a state saved by another run (another medium) is refused naming it."""
    out = tmp_path / "o.h5"
    (tmp_path / "ck.npz").write_bytes(OLD)
    args = [result, *RUN, "-o", out, "--checkpoint", tmp_path / "ck.npz"]
    _refused(capsys, tmp_path, args, "not a sonotile run state")
    os.remove(tmp_path / "ck.npz")
    assert _heat(capsys, *args, "--checkpoint_steps", "2")[0] == 0  # stopped, state saved
    state = (tmp_path / "ck.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(state[: len(state) // 2])
    _refused(capsys, tmp_path, [*args[:-1], tmp_path / "cut.npz"], "not a sonotile run state")
    other = result_file(tmp_path / "other.h5", sound_speed=1400.0)
    _refused(capsys, tmp_path, [other, *args[1:]], "saved by a run with another Q")
    assert (tmp_path / "ck.npz").read_bytes() == state


def test_others_temporary_files_survive_a_run(result, tmp_path, capsys):
    """Files named like sonotile's temporaries, beside the output, are neither overwritten
    nor removed; a name that only fits without the temporary suffix still works."""
    out = tmp_path / ("b" * 240 + ".h5")
    theirs = [f"{out.name[:200]}.sonotile-partial", f".o.h5.{os.getpid()}-00.{files.PARTIAL}"]
    for n in theirs:
        (tmp_path / n).write_bytes(OLD)
    code, text, err = _heat(capsys, result, *RUN, "-o", out)
    assert code == 0, err
    assert str(out) in text and h5py.is_hdf5(out)
    assert all((tmp_path / n).read_bytes() == OLD for n in theirs)
    no_partial(tmp_path, keep=tuple(theirs))


def test_full_disk_simulated(result, tmp_path, capsys, monkeypatch):
    """The disk full when the output is reserved: exit 1, one line naming the file, the
    earlier output byte-identical, no temporary left."""
    out = tmp_path / "o.h5"
    with h5py.File(out, "w") as f:  # an earlier output
        f.attrs["mine"] = 1
    monkeypatch.setattr(files, "_fallocate", lambda fd, n: errno.ENOSPC)
    _refused(capsys, tmp_path, [result, *RUN, "-o", out], "o.h5", "No space left on device",
             status=1)  # fmt: skip


def test_full_disk_real(result, tmp_path, capsys):
    """A 16 KiB tmpfs: exit 1, no crash, the earlier output and a neighbour untouched."""
    with small_tmpfs(tmp_path / "disk", "16k") as disk:
        with h5py.File(disk / "o.h5", "w") as f:
            f.attrs["mine"] = 1
        (disk / "keep").write_bytes(OLD)
        _refused(capsys, disk, [result, *RUN, "-o", disk / "o.h5"], "No space left", status=1)


def test_nan_result_is_never_written(result, tmp_path, capsys, monkeypatch):
    """A run whose temperature comes back with NaN: exit 1, the field named, no file."""
    from sonotile.api import heat

    real = heat.run_sonication

    def poisoned(*args, **kw):
        final, heated, raw = real(*args, **kw)
        final = dict(final, T_final=np.full_like(np.asarray(final["T_final"]), np.nan))
        return final, heated, raw

    monkeypatch.setattr(heat, "run_sonication", poisoned)
    _refused(capsys, tmp_path, [result, *RUN, "-o", tmp_path / "o.h5"], "'T' holds", "NaN",
             status=1)  # fmt: skip
    assert not (tmp_path / "o.h5").exists()


def test_no_room_for_the_output_keeps_the_checkpoint(result, tmp_path, capsys, monkeypatch):
    """The room for the output is checked before the run: a resumed run on a full disk
    ends with exit 1 and its saved state, which a completed run removes, kept."""
    args = [result, *RUN, "-o", tmp_path / "o.h5", "--checkpoint", tmp_path / "ck.npz"]
    assert _heat(capsys, *args, "--checkpoint_steps", "2")[0] == 0
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda d: usage._replace(free=10))
    _refused(capsys, tmp_path, args, "o.h5", "No space left on device", status=1)
    assert (tmp_path / "ck.npz").exists()
