"""The safe-file layer under ``sonotile plot``, ``batch``, ``demo`` and the Python API's
save/load helpers: links, devices, FIFOs, folders and the input itself refused as outputs
before any work, with the file named; damaged inputs named in words; NaN never written; an
earlier file byte-identical after a failed write; others' temporary names left alone."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
from hostile import device_node, no_hang, no_partial, one_error, result_file, snapshot
from kwave_inputs import write_input

from sonotile.api.heating.sonication import HeatRun
from sonotile.api.results import Results, load_input, load_results, save_results
from sonotile.base import files
from sonotile.batch.cli import main as batch_main
from sonotile.commands.demo import main as demo_main
from sonotile.commands.plot import main as plot_main

OLD = b"the user's earlier file\n"
OLD_PNG = b"\x89PNG\r\n\x1a\n an earlier figure"


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> str:
    return result_file(tmp_path_factory.mktemp("files") / "r.h5")


def _status(main, capsys, args) -> tuple[int, str]:
    try:
        with no_hang():
            status = main([str(a) for a in args])
    except SystemExit as e:
        status = int(e.code or 0)
    return status, capsys.readouterr().err


# ---- sonotile plot


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p, r: os.symlink(r, p), "same file as the input file"),
        (lambda p, r: os.symlink(p.parent / "elsewhere", p), "symbolic link"),
        (lambda p, r: os.mkfifo(p), "FIFO"),
        (lambda p, r: os.mkdir(p), "is a directory"),
        (lambda p, r: p.write_bytes(OLD), "exists and is not in PNG format"),
    ],
    ids=["link-to-input", "symlink", "fifo", "folder", "not-png"],
)
def test_plot_refuses_outputs_of_another_kind(result, tmp_path, capsys, make, message):
    make(tmp_path / "fig.png", result)
    before = snapshot(tmp_path)
    status, err = _status(plot_main, capsys, [result, "--out", tmp_path / "fig.png"])
    assert status == 1
    one_error(err, "sonotile plot", "fig.png", message)
    assert snapshot(tmp_path) == before


def test_plot_refuses_its_input_as_output_and_bad_inputs(result, tmp_path, capsys):
    inp = tmp_path / "r.h5"
    inp.write_bytes(Path(result).read_bytes())
    os.mkfifo(tmp_path / "pipe.h5")
    data = inp.read_bytes()
    (tmp_path / "cut.h5").write_bytes(data[: len(data) // 3])
    before = snapshot(tmp_path)
    for args, message in [
        ([inp, "--out", inp], "same file as the input file"),
        ([tmp_path / "pipe.h5", "--out", tmp_path / "a.png"], "FIFO"),
        ([tmp_path / "cut.h5", "--out", tmp_path / "a.png"], "truncated"),
        ([tmp_path, "--out", tmp_path / "a.png"], "is a directory"),
    ]:
        status, err = _status(plot_main, capsys, args)
        assert status == 1
        one_error(err, "sonotile plot", message)
    assert snapshot(tmp_path) == before


def test_plot_full_disk_keeps_the_earlier_figure(result, tmp_path, capsys, monkeypatch):
    (tmp_path / "fig.png").write_bytes(OLD_PNG)
    (tmp_path / "fig.png.sonotile-partial").write_bytes(OLD)  # someone else's
    monkeypatch.setattr(files, "_fallocate", lambda fd, n: errno.ENOSPC)
    before = snapshot(tmp_path)
    status, err = _status(plot_main, capsys, [result, "--out", tmp_path / "fig.png"])
    assert status == 1
    one_error(err, "sonotile plot", "fig.png", "No space left on device")
    assert snapshot(tmp_path) == before
    monkeypatch.undo()
    assert _status(plot_main, capsys, [result, "--out", tmp_path / "fig.png"])[0] == 0
    assert (tmp_path / "fig.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "fig.png.sonotile-partial").read_bytes() == OLD
    no_partial(tmp_path, keep=("fig.png.sonotile-partial",))


# ---- sonotile batch


@pytest.fixture
def batch_inputs(tmp_path) -> Path:
    write_input(tmp_path / "a.h5", shape=(16, 16), nt=5)
    write_input(tmp_path / "b.h5", shape=(16, 16), nt=5)
    return tmp_path


def _batch_refused(capsys, folder: Path, runs, *parts: str, args=()) -> None:
    spec = folder / "spec.json"
    spec.write_text(json.dumps({"runs": runs}))
    before = snapshot(folder)
    status, err = _status(batch_main, capsys, [spec, *args])
    assert status in (1, 2), err
    one_error(err, "sonotile batch", *parts)
    assert snapshot(folder) == before


def test_batch_output_that_is_another_runs_input(batch_inputs, capsys):
    d = batch_inputs
    os.link(d / "b.h5", d / "hard.h5")
    runs = [{"input": "a.h5", "output": "hard.h5"}, {"input": "b.h5", "output": "o/b.h5"}]
    _batch_refused(capsys, d, runs, "hard.h5", "same file as")


def test_batch_outputs_logs_and_folder_of_another_kind(batch_inputs, capsys):
    d = batch_inputs
    os.mkfifo(d / "pipe.h5")
    _batch_refused(capsys, d, [{"input": "pipe.h5"}], "pipe.h5", "FIFO")
    (d / "out" / "logs").mkdir(parents=True)
    os.symlink(d / "a.h5", d / "out" / "logs" / "a.log")
    _batch_refused(capsys, d, [{"input": "a.h5"}], "a.log", "same file as")
    os.symlink(d / "out", d / "linked")
    _batch_refused(capsys, d, [{"input": "b.h5"}], "linked", "symbolic link",
                   args=["--out", d / "linked"])  # fmt: skip
    dev = str(device_node(d))
    _batch_refused(capsys, d, [{"input": "b.h5", "output": dev}], dev, "character device")


# ---- sonotile demo


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d.write_bytes(OLD), "is a file, expected a folder"),
        (lambda d: os.symlink(d.parent, d), "symbolic link"),
        (lambda d: (d.mkdir(), os.symlink(d.parent / "x", d / "results.h5")), "results.h5"),
        (lambda d: (d.mkdir(), os.mkfifo(d / "demo.png")), "FIFO"),
    ],
    ids=["file", "link", "linked-result", "fifo-figure"],
)
def test_demo_refuses_output_folders_of_another_kind(tmp_path, capsys, make, message):
    make(tmp_path / "demo")
    before = snapshot(tmp_path)
    status, err = _status(demo_main, capsys, ["--out", tmp_path / "demo", "--size", "32"])
    assert status == 2
    one_error(err, "sonotile demo", message)
    assert snapshot(tmp_path) == before


# ---- the Python API


def test_api_save_refuses_nan_links_and_keeps_the_earlier_file(tmp_path, monkeypatch):
    p = np.ones((4, 4))
    (tmp_path / "old.h5").write_bytes(OLD)
    bad = Results({"p_max_all": np.where(p > 0, np.nan, p)}, None, np.zeros(1), None)
    with pytest.raises(ValueError, match="'p_max_all' holds 16 NaN"):
        save_results(str(tmp_path / "old.h5"), bad)
    good = Results({"p_max_all": p}, None, np.zeros(1), None)
    os.symlink(tmp_path / "old.h5", tmp_path / "link.h5")
    with pytest.raises(OSError, match="symbolic link"):
        save_results(str(tmp_path / "link.h5"), good)
    monkeypatch.setattr(files, "_fallocate", lambda fd, n: errno.ENOSPC)
    with pytest.raises(files.OutputWriteError, match="old.h5.*No space left"):
        save_results(str(tmp_path / "old.h5"), good)
    run = HeatRun({"T": np.full((2, 2), np.inf)}, (1e-3, 1e-3), 0.1)
    with pytest.raises(ValueError, match="'T' holds 4 NaN or Inf"):
        run.save(str(tmp_path / "old.h5"))
    assert (tmp_path / "old.h5").read_bytes() == OLD
    no_partial(tmp_path)


def test_api_load_names_the_file_and_never_blocks(result, tmp_path):
    os.mkfifo(tmp_path / "pipe.h5")
    data = Path(result).read_bytes()
    (tmp_path / "cut.h5").write_bytes(data[:1000])
    with h5py.File(tmp_path / "kwave.h5", "w") as f:
        f["p"] = np.zeros(3)
    with no_hang():
        for path, message in [
            ("pipe.h5", "is a FIFO"),
            ("cut.h5", "truncated"),
            ("kwave.h5", "not a sonotile result file"),
            ("none.h5", "no such file"),
        ]:
            for load in (load_results, load_input):
                with pytest.raises((OSError, ValueError), match=message) as e:
                    load(str(tmp_path / path))
                assert path in str(e.value)


def test_api_load_refuses_data_in_other_files(result, tmp_path):
    """A result whose dataset is an external link (here to a FIFO, which would block) is
    refused naming the dataset, before anything is read through the link."""
    os.mkfifo(tmp_path / "pipe.h5")
    path = tmp_path / "linked.h5"
    path.write_bytes(Path(result).read_bytes())
    with h5py.File(path, "r+") as f:
        del f["results/p_max_all"]
        f["results/p_max_all"] = h5py.ExternalLink(str(tmp_path / "pipe.h5"), "/p")
    with no_hang(), pytest.raises(OSError, match="'results/p_max_all': an external link") as e:
        load_results(str(path))
    assert str(e.value).startswith(f"result file '{path}': dataset 'results/p_max_all'")


def test_temporary_name_of_a_long_file_name_fits(tmp_path):
    """A name that fits the filesystem keeps fitting once the temporary suffix is added;
    one that does not is refused before anything is written."""
    long = tmp_path / ("x" * 250)
    files.write_bytes(str(long), OLD)
    assert long.read_bytes() == OLD
    with pytest.raises(OSError, match="the name is 256 bytes"):
        files.write_bytes(str(tmp_path / ("y" * 256)), OLD)
    assert sorted(os.listdir(tmp_path)) == [long.name]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_own_temporary_hdf5_file_reopens_while_a_child_process_holds_it(tmp_path):
    """A child process started while a run's temporary HDF5 file is open (``git`` for the
    provenance, in another run's thread) holds the open file until it ends: the run closing
    and reopening its file (as every HDF5 writer here does) must not find it locked."""
    import subprocess

    tmp = str(tmp_path / "own.h5")
    f = files.open_own_hdf5(tmp, "w")
    fds = [int(n) for n in os.listdir("/proc/self/fd")
           if os.path.realpath(f"/proc/self/fd/{n}") == tmp]  # fmt: skip
    assert fds
    child = subprocess.Popen(["sleep", "5"], pass_fds=fds)
    try:
        f.close()
        with files.open_own_hdf5(tmp, "r+") as g:
            g["x"] = np.arange(3.0)
        with h5py.File(tmp, "r") as g:
            assert g["x"][2] == 2.0
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["heat", "BAD", "--duration", "1"], "result"),
        (["heat", "GOOD", "--duration", "1", "-o", "BAD"], "-o/--output"),
        (["heat", "GOOD", "--duration", "1", "--checkpoint", "BAD"], "--checkpoint"),
        (
            [
                "plan",
                "GOOD",
                "--target",
                "0",
                "0",
                "0",
                "--entry",
                "0",
                "0",
                "9",
                "--transducer",
                "bowl:64:64",
                "-o",
                "BAD",
            ],
            "-o/--output",
        ),  # fmt: skip
        (["batch", "BAD"], "spec"),
        (["plot", "BAD"], "file"),
        (["demo", "--out", "BAD"], "--out"),
    ],
)
def test_path_that_is_not_utf8_is_refused_naming_the_argument(argv, flag, tmp_path, capsys):
    """HDF5 cannot open a name that is not UTF-8: every command refuses one by its argument's
    name, before any work, with the name's bytes shown."""
    from sonotile.commands.cli import main as sonotile_main

    good = tmp_path / "good.h5"
    good.write_bytes(OLD)
    bad = os.fsdecode(bytes(tmp_path) + b"/x\xffy.h5")
    argv = [bad if a == "BAD" else str(good) if a == "GOOD" else a for a in argv]
    with pytest.raises(SystemExit) as stop:
        sonotile_main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]
    assert f"argument {flag}" in line and "x\\xffy.h5" in line and "not valid UTF-8" in line
    assert "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["good.h5"] and good.read_bytes() == OLD
