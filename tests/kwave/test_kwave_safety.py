"""``sonotile-kwave`` under hostile inputs, hostile output paths, full disks and concurrent runs.

Every case either runs correctly or fails with exit status 1 and one error line, before any
time step where it can be known before; it never hangs, crashes, allocates what the header
asks before checking it fits, writes through a device or FIFO, deletes a file it did not
create, or leaves a half-written file; a file already at the output path survives a failure.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from kwave_inputs import DROP, write_input

import sonotile
from sonotile.base.files import PARTIAL
from sonotile.kwave.cli import main as kwave_main
from sonotile.kwave.reader import MAX_STEPS, KwaveFileError, read_input

OLD = b"a result of an earlier run that must survive"
SRC = str(Path(sonotile.__file__).resolve().parents[1])  # this checkout's sources
KWAVE = [sys.executable, "-m", "sonotile.kwave.cli"]
ENV = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=SRC)


def _run(capsys, args) -> tuple[int, str, str]:
    status = kwave_main([str(a) for a in args])
    cap = capsys.readouterr()
    return status, cap.out, cap.err


def _one_error(status: int, out: str, err: str, *parts: str) -> str:
    """Exit 1, one error line holding ``parts``, no time step run."""
    assert status == 1, (out, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("sonotile-kwave: error:")]
    assert len(lines) == 1, err
    for p in parts:
        assert p in lines[0], f"{p!r} not in {lines[0]!r}"
    assert "Traceback" not in err and "Exception ignored" not in err, err
    return lines[0]


def _no_partial(folder) -> None:
    assert not [n for n in os.listdir(folder) if PARTIAL in n], os.listdir(folder)


def _scalar_medium(path, **kw) -> str:
    """A 2-D input with a scalar medium and no grid-sized dataset: its header sets the size."""
    scal = {"c0": np.float32(1500), "rho0": np.float32(1000), "rho0_sgx": np.float32(1000),
            "rho0_sgy": np.float32(1000), "p0_source_input": DROP}  # fmt: skip
    scal.update(kw)
    return write_input(path, shape=(24, 20), nt=6, p0=False, **scal)


# ------------------------------------------------------------------------ header sizes


@pytest.mark.parametrize(
    "sizes,parts",
    [
        ({"Nx": np.uint64(2**40)}, ["needs about", "MB or more", "more than the"]),
        ({"Nx": np.uint64(2**31)}, ["grid (2147483648, 20) needs about"]),
        ({"Nx": np.uint64(2**21), "Ny": np.uint64(2**21), "Nz": np.uint64(2**21)},
         ["'Nx', 'Ny', 'Nz'", "9223372036854775808 grid points"]),
        ({"Nx": np.uint64(2**64 - 1)}, ["grid points"]),
        ({"Nt": np.uint64(2**31 + 7)}, ["dataset 'Nt'", "2147483655", f"{MAX_STEPS}"]),
        ({"Nt": np.uint64(2**62)}, ["dataset 'Nt'", "4611686018427387904 time steps"]),
    ],
    ids=["nx_2^40", "nx_2^31", "cube_2^21", "nx_2^64-1", "nt_2^31+7", "nt_2^62"],
)  # fmt: skip
def test_hostile_header_refused_before_allocating(sizes, parts, tmp_path, capsys):
    """A 20 KB header naming a huge grid or step count: refused at once, in a clear line,
    without growing the process (the memory check comes before anything grid-sized)."""
    inp = _scalar_medium(tmp_path / "in.h5", **sizes)
    assert os.path.getsize(inp) < 40_000
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    status, out, err = _run(capsys, ["-i", inp, "-o", tmp_path / "out.h5"])
    assert time.perf_counter() - t0 < 20
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024
    _one_error(status, out, err, *parts)
    assert grown_mb < 500, f"peak memory grew by {grown_mb:.0f} MB"
    assert sorted(os.listdir(tmp_path)) == ["in.h5"]


def test_benchmark_beyond_step_counter(tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5", nt=6)
    status, out, err = _run(capsys, ["-i", inp, "-o", tmp_path / "o.h5", "--benchmark", 2**31])
    _one_error(status, out, err, "argument --benchmark", "'2147483648'", f"1..{MAX_STEPS}")


def test_index_check_uses_exact_sizes(tmp_path):
    """Index bounds in Python integers: a grid of 2**54 points (no wrap in the product) gets
    the true range in the message, and a uint64 index above 2**63 is not wrapped negative."""
    big = {"Nx": np.uint64(2**18), "Ny": np.uint64(2**18), "Nz": np.uint64(2**18),
           "dz": np.float32(1e-4), "rho0_sgz": np.float32(1000)}  # fmt: skip
    for idx, shown in ((2**54 + 1, str(2**54 + 1)), (2**64 - 1, str(2**64 - 1))):
        inp = _scalar_medium(
            tmp_path / "in.h5", sensor_mask_index=np.array([[[1, idx]]], np.uint64), **big,
            pml_z_size=np.uint64(4), pml_z_alpha=np.float32(2), uz_source_flag=np.uint64(0),
        )  # fmt: skip
        with pytest.raises(KwaveFileError, match=f"index {shown} out of range 1..{2**54}$"):
            read_input(inp)


def test_disk_too_small_for_the_series_refused_first(tmp_path, capsys, monkeypatch):
    """``-c 0``: the sampled series' size is known; a run that cannot fit fails before step 1."""
    import shutil

    inp = write_input(tmp_path / "in.h5", nt=6)
    out = tmp_path / "out.h5"
    out.write_bytes(OLD)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=10))
    status, so, err = _run(capsys, ["-i", inp, "-o", out])
    _one_error(status, so, err, "the sampled series and fields need", "free in")
    assert "step" not in so and out.read_bytes() == OLD


# ------------------------------------------------------------------------- special files


def _special(tmp_path, kind: str) -> str:
    if kind == "fifo":
        p = tmp_path / "fifo"
        os.mkfifo(p)
        return str(p)
    if kind == "dir":
        (tmp_path / "folder").mkdir()
        return str(tmp_path / "folder")
    return {"null": "/dev/null", "full": "/dev/full"}[kind]


@pytest.mark.parametrize("kind", ["fifo", "dir", "null"])
def test_special_input_refused(kind, tmp_path, capsys):
    """A FIFO as input would block forever; a device or folder is no input either."""
    src = _special(tmp_path, kind)
    out = tmp_path / "out.h5"
    out.write_bytes(OLD)
    status, so, err = _run(capsys, ["-i", src, "-o", out])
    _one_error(status, so, err, "expected a regular file")
    assert out.read_bytes() == OLD


@pytest.mark.parametrize("kind", ["fifo", "dir", "null", "full"])
@pytest.mark.parametrize("flag", ["-o", "--checkpoint_file"])
def test_special_output_refused(kind, flag, tmp_path, capsys):
    """``-o /dev/full`` must never replace the device node (as root it could): refused."""
    inp = write_input(tmp_path / "in.h5", nt=6)
    target = _special(tmp_path, kind)
    if not os.path.exists(target):
        pytest.skip(f"{target} is missing here")
    before = os.stat(target)
    args = ["-i", inp, "-o", tmp_path / "out.h5", "--checkpoint_file", target]
    if flag == "-o":
        args = ["-i", inp, "-o", target]
    status, so, err = _run(capsys, args)
    _one_error(status, so, err, "sonotile writes regular files only")
    after = os.stat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (
        before.st_mode, before.st_ino, before.st_rdev,
    )  # fmt: skip
    assert "step" not in so
    _no_partial(tmp_path)


def test_output_ending_in_slash_fails_before_the_run(tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5", nt=6)
    status, so, err = _run(capsys, ["-i", inp, "-o", f"{tmp_path}/sub/"])
    _one_error(status, so, err, "ends with '/'")
    assert "step" not in so


# ------------------------------------------------------------------------ links in the input


def _linked_input(tmp_path, how: str) -> str:
    inp = write_input(tmp_path / "in.h5", nt=6)
    with h5py.File(inp, "r") as f:
        c0 = f["c0"][()]
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as g:
        g["c0"] = c0
    raw = tmp_path / "c0.raw"
    raw.write_bytes(c0.tobytes())
    with h5py.File(inp, "r+") as f:
        del f["c0"]
        if how == "external_link":
            f["c0"] = h5py.ExternalLink(str(other), "c0")
        elif how == "external_storage":
            f.create_dataset("c0", shape=c0.shape, dtype=c0.dtype,
                             external=[(str(raw), 0, c0.nbytes)])  # fmt: skip
        elif how == "virtual":
            layout = h5py.VirtualLayout(shape=c0.shape, dtype=c0.dtype)
            layout[...] = h5py.VirtualSource(str(other), "c0", shape=c0.shape)
            f.create_virtual_dataset("c0", layout)
        else:  # a link to a system file's bytes, in an unused extra dataset
            f.create_dataset("extra", shape=(1, 1, 8), dtype="u1",
                             external=[("/etc/hostname", 0, 8)])  # fmt: skip
    return inp


@pytest.mark.parametrize(
    "how,parts",
    [
        ("external_link", ["dataset 'c0'", "external link"]),
        ("external_storage", ["dataset 'c0'", "external raw file"]),
        ("virtual", ["dataset 'c0'", "virtual dataset"]),
        ("system_file", ["dataset 'extra'", "external raw file"]),
    ],
)
def test_links_and_external_storage_refused(how, parts, tmp_path, capsys):
    inp = _linked_input(tmp_path, how)
    status, so, err = _run(capsys, ["-i", inp, "-o", tmp_path / "out.h5"])
    _one_error(status, so, err, *parts, "not followed")
    assert not (tmp_path / "out.h5").exists()


# -------------------------------------------------------------- temporaries and concurrency


@pytest.mark.parametrize(
    "name", [".out.h5.sonotile-partial", f".out.h5.{os.getpid()}-0011223344556677.{PARTIAL}"]
)
def test_input_named_like_a_temporary_file_survives(name, tmp_path, capsys):
    """Temporary names are created exclusively and only this run's are removed."""
    inp = tmp_path / name
    write_input(inp, nt=6)
    before = inp.read_bytes()
    ck = tmp_path / "ck.h5"
    args = ["-i", inp, "-o", tmp_path / "out.h5", "--checkpoint_file", ck,
            "--checkpoint_timesteps", "3"]  # fmt: skip
    assert _run(capsys, args)[0] == 0 and ck.exists()
    assert _run(capsys, args)[0] == 0 and not ck.exists()
    assert inp.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == sorted([name, "out.h5"])


def test_write_error_ends_the_run_cleanly(tmp_path, capsys, monkeypatch):
    """An HDF5 write error at the second chunk (a disk filling up): one line, exit 1, the
    earlier output untouched, no temporary left, no further steps."""
    from sonotile.kwave import output

    inp = write_input(tmp_path / "in.h5", nt=60)
    out = tmp_path / "out.h5"
    out.write_bytes(OLD)
    calls = {"n": 0}
    real = output.OutputFile._write_rows

    def failing(self, name, first_row, values):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(28, "No space left on device")
        real(self, name, first_row, values)

    monkeypatch.setattr(output.OutputFile, "_write_rows", failing)
    status, so, err = _run(capsys, ["-i", inp, "-o", out, "-r", "10"])
    _one_error(status, so, err, "writing the output file failed", "No space left", "disk full")
    assert calls["n"] == 2
    assert out.read_bytes() == OLD
    _no_partial(tmp_path)


@contextlib.contextmanager
def _small_tmpfs(path: Path, size: str):
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_full_disk_real(tmp_path):
    """A real full filesystem (a 256 KiB tmpfs) under a compressed output whose size is not
    known in advance: one line, exit 1, no segfault, no 'Exception ignored', the earlier
    output untouched and no temporary left."""
    sensors = [(x, y, 0) for x in range(2, 46, 2) for y in range(2, 40, 2)]
    inp = write_input(tmp_path / "in.h5", shape=(48, 44), nt=400, sensor_points=sensors)
    with _small_tmpfs(tmp_path / "disk", "256k") as disk:
        out = disk / "out.h5"
        out.write_bytes(OLD)
        r = subprocess.run([*KWAVE, "-i", inp, "-o", str(out), "-c", "1", "-u"],
                           capture_output=True, text=True, env=ENV, timeout=300)  # fmt: skip
        _one_error(r.returncode, r.stdout, r.stderr, "writing the output file failed")
        assert out.read_bytes() == OLD
        assert sorted(os.listdir(disk)) == ["out.h5"]


def test_concurrent_runs_same_output(tmp_path):
    """Two runs with the same ``-o`` at once: both succeed, and the file at ``-o`` is one
    complete result (their temporary files are distinct; none deletes the other's)."""
    inp = write_input(tmp_path / "in.h5", nt=40)
    out = tmp_path / "out.h5"
    ref = tmp_path / "ref.h5"
    cmd = [*KWAVE, "-i", inp, "-o", str(out), "-p", "--p_final", "-t", "1"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                              text=True) for _ in range(2)]  # fmt: skip
    results = [p.communicate(timeout=300) for p in procs]
    for p, (_so, se) in zip(procs, results):
        assert p.returncode == 0, se
    assert kwave_main(["-i", inp, "-o", str(ref), "-p", "--p_final", "-t", "1"]) == 0
    with h5py.File(out, "r") as a, h5py.File(ref, "r") as b:
        assert np.array_equal(a["p"][()], b["p"][()])
        assert np.array_equal(a["p_final"][()], b["p_final"][()])
    assert sorted(os.listdir(tmp_path)) == ["in.h5", "out.h5", "ref.h5"]


def test_concurrent_in_process_writers_keep_their_own_temporaries(tmp_path):
    """Two output files for one path open at once: distinct temporaries; aborting one leaves
    the other's, which then commits."""
    from types import SimpleNamespace

    from sonotile.kwave.output import OutputFile

    inp = write_input(tmp_path / "in.h5", nt=6)
    _, meta = read_input(inp)
    layout = SimpleNamespace(raw=("p",), n_points=5, start=0, cuboid_shapes=())
    out = str(tmp_path / "out.h5")
    a, b = OutputFile(out, meta, layout, 6), OutputFile(out, meta, layout, 6)
    assert a.tmp != b.tmp and os.path.exists(a.tmp) and os.path.exists(b.tmp)
    a.abort()
    assert not os.path.exists(a.tmp) and os.path.exists(b.tmp)
    b("p", 0, np.ones((6, 5), np.float32))
    b.finish_leg(6, {})
    with h5py.File(out, "r") as f:
        assert f["p"].shape == (1, 6, 5) and np.all(f["p"][()] == 1)
    _no_partial(tmp_path)


# ------------------------------------------------------------------------ non-finite results


@pytest.mark.parametrize(
    "case,kw,parts",
    [
        ("p0_3e38", {"p0_source_input": "3e38"}, ["p: NaN or Inf from time step"]),
        ("c0_1e30", {"c0": np.float32(1e30)}, ["p: NaN or Inf from time step", "CFL number"]),
    ],
)
def test_non_finite_results_fail(case, kw, parts, tmp_path, capsys):
    """A run that overflows (finite but huge p0) or blows up (c0 = 1e30, far beyond the
    stability limit) fails naming the quantity and the first step, with the likely cause; the
    earlier output survives, nothing is written."""
    if kw.get("p0_source_input") == "3e38":
        from kwave_inputs import datasets

        p0 = datasets(nt=20)["p0_source_input"] * np.float32(3e38)
        kw = {"p0_source_input": p0}
    inp = write_input(tmp_path / "in.h5", nt=20, **kw)
    out = tmp_path / "out.h5"
    out.write_bytes(OLD)
    status, so, err = _run(capsys, ["-i", inp, "-o", out, "--p_raw", "--p_final", "--p_max"])
    line = _one_error(status, so, err, *parts, "no output written")
    assert "stability" in line or "unstable" in line
    assert "source amplitude" in line
    step = int(line.split("from time step ")[1].split()[0])
    assert 1 <= step <= 20
    assert out.read_bytes() == OLD
    _no_partial(tmp_path)


def test_non_finite_first_step_reported(tmp_path, capsys, monkeypatch):
    """The step named is the first one holding NaN/Inf (here injected at step 7 of 12)."""
    from sonotile.kwave import output

    real = output.OutputFile.__call__

    def poisoned(self, name, first_row, values):
        values = np.array(values)
        rows = np.arange(first_row, first_row + values.shape[0])
        values[rows == 6] = np.inf  # row 6 is time step 7 (sampling from step 1)
        real(self, name, first_row, values)

    monkeypatch.setattr(output.OutputFile, "__call__", poisoned)
    inp = write_input(tmp_path / "in.h5", nt=12)
    status, so, err = _run(capsys, ["-i", inp, "-o", tmp_path / "out.h5"])
    _one_error(status, so, err, "p: NaN or Inf from time step 7 of 12 on")
    assert not (tmp_path / "out.h5").exists()


# ------------------------------------------------------------------------------ provenance


def test_provenance_in_every_output(tmp_path, capsys):
    """The output records what ran: version, commit, command line, input hash, FFT, precision,
    decomposition, library versions, and one resume-history entry per leg."""
    import json

    from sonotile.base.files import file_digest

    inp = write_input(tmp_path / "in.h5", nt=12)
    out, ck = tmp_path / "out.h5", tmp_path / "ck.h5"
    args = ["-i", inp, "-o", out, "--checkpoint_file", ck, "--checkpoint_timesteps", "5"]
    legs = 0
    while legs == 0 or ck.exists():
        assert _run(capsys, args)[0] == 0
        legs += 1
    assert legs == 3
    with h5py.File(inp, "r") as f:
        digest = file_digest(f)
    with h5py.File(out, "r") as f:
        a = {k[len("sonotile_"):]: v.decode() for k, v in f.attrs.items()
             if k.startswith("sonotile_")}  # fmt: skip
    assert a["version"] == sonotile.__version__
    assert a["input_sha256"] == digest
    assert "-i" in a["command_line"] and str(out) in a["command_line"]
    assert a["precision"] == "float32" and a["decomposition"].startswith("single")
    assert a["fft"].split()[0] in ("fftw", "xla")
    for lib in ("jax", "jaxlib", "numpy", "h5py", "hdf5"):
        assert f"{lib} " in a["versions"], a["versions"]
    if a["fft"].startswith("fftw"):
        assert "plan effort" in a["fft"] and "fftw-3" in a["versions"]
    history = json.loads(a["resume_history"])
    assert [h["steps"] for h in history] == [[0, 5], [5, 10], [10, 12]]
    if (Path(SRC).parent / ".git").exists():
        assert len(a["git_commit"].split("+")[0]) == 40


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_full_disk_under_the_checkpoint(tmp_path):
    """A checkpoint that does not fit (a 256 KiB tmpfs): one line, exit 1, no traceback; the
    earlier output at ``-o`` and an unrelated file on that disk are untouched (the output of
    the leg is renamed into place only once its checkpoint is complete)."""
    inp = write_input(tmp_path / "in.h5", shape=(128, 128), nt=40)
    out = tmp_path / "out.h5"
    out.write_bytes(OLD)
    with _small_tmpfs(tmp_path / "disk", "256k") as disk:
        (disk / "keep").write_bytes(OLD)
        r = subprocess.run([*KWAVE, "-i", inp, "-o", str(out), "--checkpoint_file",
                            str(disk / "ck.h5"), "--checkpoint_timesteps", "10"],
                           capture_output=True, text=True, env=ENV, timeout=300)  # fmt: skip
        line = _one_error(r.returncode, r.stdout, r.stderr, "writing the checkpoint file failed")
        assert "No space left on device" in line
        assert sorted(os.listdir(disk)) == ["keep"] and (disk / "keep").read_bytes() == OLD
    assert out.read_bytes() == OLD
    _no_partial(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_reserved_files_on_a_small_disk(tmp_path, capsys):
    """Output and checkpoint reserved on a small tmpfs they fit on: the legs succeed, the
    files end at their real size, and the result equals a run elsewhere."""
    inp = write_input(tmp_path / "in.h5", nt=30)
    ref = tmp_path / "ref.h5"
    assert kwave_main(["-i", inp, "-o", str(ref), "-p", "--p_final"]) == 0
    with _small_tmpfs(tmp_path / "disk", "4m") as disk:
        args = ["-i", inp, "-o", disk / "out.h5", "-p", "--p_final", "--checkpoint_file",
                disk / "ck.h5", "--checkpoint_timesteps", "12"]  # fmt: skip
        legs = 0
        while legs == 0 or (disk / "ck.h5").exists():
            assert _run(capsys, args)[0] == 0
            legs += 1
        assert legs == 3 and sorted(os.listdir(disk)) == ["out.h5"]
        assert os.path.getsize(disk / "out.h5") < 2 * os.path.getsize(ref)
        with h5py.File(disk / "out.h5", "r") as a, h5py.File(ref, "r") as b:
            assert np.array_equal(a["p"][()], b["p"][()])
            assert np.array_equal(a["p_final"][()], b["p_final"][()])


def test_without_block_reservation_the_room_is_checked(tmp_path, capsys, monkeypatch):
    """A filesystem that cannot reserve blocks: runs as usual, and a compressed output on a
    disk without room fails before its first write, leaving the earlier output."""
    import errno
    import shutil

    from sonotile.base import files

    monkeypatch.setattr(files, "_fallocate", lambda fd, n: errno.EOPNOTSUPP)
    inp = write_input(tmp_path / "in.h5", nt=12)
    out, ref = tmp_path / "out.h5", tmp_path / "ref.h5"
    assert _run(capsys, ["-i", inp, "-o", out, "--checkpoint_file", tmp_path / "ck.h5",
                         "--checkpoint_timesteps", "5"])[0] == 0  # fmt: skip
    assert _run(capsys, ["-i", inp, "-o", out, "--checkpoint_file", tmp_path / "ck.h5"])[0] == 0
    monkeypatch.undo()
    assert _run(capsys, ["-i", inp, "-o", ref])[0] == 0
    with h5py.File(out, "r") as a, h5py.File(ref, "r") as b:
        assert np.array_equal(a["p"][()], b["p"][()])
    monkeypatch.setattr(files, "_fallocate", lambda fd, n: errno.EOPNOTSUPP)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1000))
    out.write_bytes(OLD)
    status, so, err = _run(capsys, ["-i", inp, "-o", out, "-c", "4"])
    _one_error(status, so, err, "writing the output file failed", "No space left on device")
    assert out.read_bytes() == OLD
    _no_partial(tmp_path)
