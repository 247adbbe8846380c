"""Checkpoint-restart of ``sonotile-kwave`` (docs/kwave-format.md), signals and streamed output.

* ``--checkpoint_timesteps`` / ``--checkpoint_interval``: a leg writes a k-Wave checkpoint,
  exits 0 with ``t_index < Nt`` in the output, and the same command resumes; the resumed output
  is **bit-identical** to an uninterrupted run (every dataset, raw, aggregated, ``*_all``,
  ``*_final``, index and cuboid masks, p0 and time-varying sources).
* SIGTERM with ``--checkpoint_file`` checkpoints and exits 0; without, exits 1 and leaves
  no output (an earlier file at the output path survives).
* Raw sensor series are streamed chunk by chunk: the recorder never gets more rows than the
  chunk, and the output does not depend on the chunk size.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from kwave_inputs import write_input
from paths import REFERENCE

from sonotile.kwave.cli import main as kwave_main
from sonotile.kwave.reader import read_input
from sonotile.solver import runner as rn

FLAGS_2D = ["--p_raw", "--p_max", "--p_rms", "--p_min", "--p_max_all", "--u_final", "-u",
            "--u_non_staggered_raw", "--p_final", "-s", "3"]  # fmt: skip
CHECKPOINT_DATASETS = {"t_index", "Nx", "Ny", "Nz", "p", "rhox", "rhoy", "ux_sgx", "uy_sgy",
                       "duxdx", "duydy"}  # fmt: skip
SONOTILE_KWAVE = [sys.executable, "-m", "sonotile.kwave.cli"]


def datasets(path) -> dict:
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else 0)
    return out


def assert_identical(a_path, b_path):
    a, b = datasets(a_path), datasets(b_path)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert np.array_equal(a[k], b[k]), f"{k}: max |diff| {np.abs(a[k] - b[k]).max()}"


def t_index(path) -> int:
    with h5py.File(path, "r") as f:
        return int(f["t_index"][()].reshape(-1)[0])


@pytest.mark.parametrize(
    "kind,kw,flags",
    [
        ("2d_index_p0", {}, FLAGS_2D),
        ("2d_cuboid_psrc", {"cuboid": True, "p_source": True}, FLAGS_2D),
        ("3d_index_psrc", {"shape": (20, 18, 16), "p0": False, "p_source": True, "nt": 40},
         ["--p_raw", "--p_rms", "--u_max", "--u_min_all", "-s", "5"]),
        ("2d_axisym_psrc", {"p0": False, "p_source": True, "axisymmetric_flag": np.uint64(1)},
         FLAGS_2D),
    ],
)  # fmt: skip
def test_resume_bit_identical(kind, kw, flags, tmp_path):
    inp = write_input(tmp_path / "in.h5", **kw)
    nt = kw.get("nt", 60)
    full, out, ck = tmp_path / "full.h5", tmp_path / "out.h5", tmp_path / "ck.h5"
    assert kwave_main(["-i", inp, "-o", str(full), *flags]) == 0
    cmd = ["-i", inp, "-o", str(out), *flags, "--checkpoint_file", str(ck),
           "--checkpoint_timesteps", "17"]  # fmt: skip
    legs = []
    while True:
        assert kwave_main(cmd) == 0
        legs.append(t_index(out))
        if not ck.exists():
            break
        # a leg ends with a k-Wave checkpoint and a partial output (t_index < Nt)
        with h5py.File(ck, "r") as f:
            assert f.attrs["file_type"] == b"checkpoint"
            assert CHECKPOINT_DATASETS - ({"rhoz", "uz_sgz", "duzdz"}) <= set(f)
            assert int(f["t_index"][()].reshape(-1)[0]) == legs[-1]
        assert len(legs) < 10
    # k-Wave counts --checkpoint_timesteps per leg, the p0 step included
    assert legs == [*range(17, nt, 17), nt]
    assert_identical(full, out)
    assert not ck.exists()


def test_checkpoint_interval(tmp_path):
    """A tiny --checkpoint_interval checkpoints after the first chunk of each leg (chunks are
    sized by time, at most half of this short run: at least two legs)."""
    inp = write_input(tmp_path / "in.h5", cuboid=True)
    full, out, ck = tmp_path / "full.h5", tmp_path / "out.h5", tmp_path / "ck.h5"
    flags = ["--p_raw", "--p_max", "--p_min_all"]
    assert kwave_main(["-i", inp, "-o", str(full), *flags]) == 0
    cmd = ["-i", inp, "-o", str(out), *flags, "--checkpoint_file", str(ck),
           "--checkpoint_interval", "1e-6"]  # fmt: skip
    legs = 0
    while True:
        assert kwave_main(cmd) == 0
        legs += 1
        if not ck.exists():
            break
        assert t_index(out) < 60
    assert legs >= 2
    assert_identical(full, out)


def _start(args, cwd):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [*SONOTILE_KWAVE, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip


def _wait_for_progress(proc, timeout=120.0) -> str:
    t0 = time.time()
    for line in proc.stdout:
        if "step" in line:
            return line
        assert time.time() - t0 < timeout
    raise AssertionError("the run ended before printing progress: " + proc.stderr.read())


LONG = ["--benchmark", "200000", "-r", "1", "-t", "1"]  # stops early only through the signal


def test_sigterm_writes_checkpoint(tmp_path):
    inp = write_input(tmp_path / "in.h5")
    out, ck = tmp_path / "out.h5", tmp_path / "ck.h5"
    proc = _start(["-i", inp, "-o", str(out), "--checkpoint_file", str(ck), *LONG], tmp_path)
    _wait_for_progress(proc)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert "checkpoint written" in stdout
    n = t_index(out)
    assert 0 < n < 200000
    with h5py.File(ck, "r") as f:
        assert int(f["t_index"][()].reshape(-1)[0]) == n
    # what was recorded up to the checkpoint equals an uninterrupted run of n steps
    ref = tmp_path / "ref.h5"
    assert kwave_main(["-i", inp, "-o", str(ref), "--benchmark", str(n)]) == 0
    with h5py.File(out, "r") as a, h5py.File(ref, "r") as b:
        assert a["p"].shape == (1, 200000, 5)
        assert np.array_equal(a["p"][:, :n], b["p"][()])
    # the same command with a step limit resumes from the checkpoint
    assert kwave_main(["-i", inp, "-o", str(out), "--checkpoint_file", str(ck), *LONG,
                       "--checkpoint_timesteps", "10"]) == 0  # fmt: skip
    assert t_index(out) == n + 10


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_without_checkpoint_fails_cleanly(sig, tmp_path):
    inp = write_input(tmp_path / "in.h5")
    out = tmp_path / "out.h5"
    out.write_bytes(b"earlier result")
    proc = _start(["-i", inp, "-o", str(out), *LONG], tmp_path)
    _wait_for_progress(proc)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig  # the shells' convention: 130 for Ctrl-C
    assert f"stopped by signal {int(sig)}" in stderr and "no output written" in stderr
    assert out.read_bytes() == b"earlier result"
    assert sorted(os.listdir(tmp_path)) == ["in.h5", "out.h5"]


def test_streaming_chunks(tmp_path):
    """Raw samples reach the recorder in chunks of at most ``chunk`` rows (host and device
    memory do not grow with Nt), and the chunk size does not change the result."""
    inp = write_input(tmp_path / "in.h5", cuboid=True, p_source=True, nt=50)
    problem, _ = read_input(inp, record=("p", "u", "p_max"), start=2)
    results = {}
    for chunk in (1, 7, None):

        class Rec(rn.ListRecorder):
            rows: list = []

            def __call__(self, name, first_row, values):
                self.rows.append(values.shape[0])
                super().__call__(name, first_row, values)

        rec = Rec()
        rec.rows = []
        raw, final = rn.run(problem, recorder=rec, chunk=chunk, progress=False)
        raw = rec.result()
        assert max(rec.rows) <= (chunk or 50)
        results[chunk] = (raw, final)
    for chunk in (1, 7):
        for k in results[None][0]:
            assert np.array_equal(results[chunk][0][k], results[None][0][k]), (chunk, k)
        for k in results[None][1]:
            assert np.array_equal(results[chunk][1][k], results[None][1][k]), (chunk, k)
    assert results[None][0]["p"].shape[0] == 49


def test_default_chunk_bounded():
    """The default chunk keeps one chunk of raw samples under 64 MB whatever Nt is."""
    problem, _ = read_input(
        str(REFERENCE / "2d_homog_lossless_p0_index" / "input.h5"),
        nt_override=10**7, record=("p", "u"),
    )  # fmt: skip
    cp = rn.compile_problem(problem)
    chunk = rn.default_chunk(problem, cp.layout)
    assert 1 <= chunk <= 1000
    assert chunk * len(cp.layout.raw) * cp.layout.n_points * 4 <= 64e6


# ------------------------------------------------------------------ corrupted checkpoints

CK_FLAGS = ["--p_raw", "--p_max", "--p_final"]


@pytest.fixture(scope="module")
def first_leg(tmp_path_factory):
    """An input, its uninterrupted output, and the checkpoint and partial output of a first
    leg of 17 steps (kept read-only: each test works on copies)."""
    d = tmp_path_factory.mktemp("first_leg")
    inp = write_input(d / "in.h5", nt=40)
    assert kwave_main(["-i", inp, "-o", str(d / "full.h5"), *CK_FLAGS]) == 0
    cmd = ["-i", inp, "-o", str(d / "out.h5"), *CK_FLAGS, "--checkpoint_file", str(d / "ck.h5"),
           "--checkpoint_timesteps", "17"]  # fmt: skip
    assert kwave_main(cmd) == 0 and t_index(d / "out.h5") == 17
    return d


def _flip_byte(path, name):
    with h5py.File(path, "r") as f:
        d = f[name]
        start, size = d.id.get_offset(), d.size
        if start is None:  # chunked: inside its first chunk
            info = d.id.get_chunk_info(0)
            start, size = info.byte_offset, info.size // d.dtype.itemsize
        offset = start + 4 * min(37, size - 1) + 2  # inside a value
    with open(path, "r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0x10]))


def _corrupt(kind, ck, d):
    if kind == "flipped_byte":
        return _flip_byte(ck, "p")
    if kind == "flipped_statistic":
        return _flip_byte(ck, "sonotile_aggregates/p_max")
    with h5py.File(ck, "r+") as f:
        if kind == "t_index":
            f["t_index"][...] = 16
        elif kind == "nan_in_field":
            f["p"][0, 3, 4] = np.nan
        elif kind == "int32_field":
            v = f["p"][()]
            del f["p"]
            f.create_dataset("p", data=v.astype(np.int32))
        elif kind == "manifest_removed":
            del f.attrs["sonotile_manifest"]
        elif kind == "dataset_removed":
            del f["duxdx"]


CORRUPTIONS = {
    "t_index": "does not match its checksum",
    "nan_in_field": "does not match its checksum",
    "flipped_byte": "dataset 'p' does not match its checksum",
    "flipped_statistic": "dataset 'sonotile_aggregates/p_max' does not match its checksum",
    "int32_field": "does not match its checksum",
    "manifest_removed": "has no sonotile_manifest",
    "dataset_removed": "dataset 'duxdx' added or missing",
}


def _resume_refused(tmp_path, first_leg, capsys, inp=None, extra=(), expect=""):
    import shutil

    for n in ("ck.h5", "out.h5"):
        shutil.copy(first_leg / n, tmp_path / n)
    return tmp_path, lambda: _resume(tmp_path, inp or str(first_leg / "in.h5"), extra, expect,
                                     capsys)  # fmt: skip


def _resume(d, inp, extra, expect, capsys):
    ck_before, out_before = (d / "ck.h5").read_bytes(), (d / "out.h5").read_bytes()
    status = kwave_main(["-i", inp, "-o", str(d / "out.h5"), *CK_FLAGS, *extra,
                         "--checkpoint_file", str(d / "ck.h5")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1, err
    errors = [ln for ln in err.splitlines() if ln.startswith("sonotile-kwave: error:")]
    assert len(errors) == 1 and "ck.h5" in errors[0] and expect in errors[0], err
    # nothing resumed, the evidence kept: checkpoint and partial output as they were
    assert (d / "ck.h5").read_bytes() == ck_before
    assert (d / "out.h5").read_bytes() == out_before
    assert sorted(os.listdir(d)) == ["ck.h5", "out.h5"]


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupted_checkpoint_refused(kind, tmp_path, first_leg, capsys):
    d, resume = _resume_refused(tmp_path, first_leg, capsys, expect=CORRUPTIONS[kind])
    _corrupt(kind, d / "ck.h5", d)
    resume()


def test_checkpoint_of_another_input_refused(tmp_path, first_leg, capsys):
    """Same grid, another medium: the checkpoint does not belong to this input."""
    other = write_input(tmp_path / "other.h5", nt=40, c0=np.float32(1600.0))
    run = tmp_path / "run"
    run.mkdir()
    assert kwave_main(["-i", other, "-o", str(run / "out.h5"), *CK_FLAGS, "--checkpoint_file",
                       str(run / "ck.h5"), "--checkpoint_timesteps", "17"]) == 0  # fmt: skip
    _resume(run, str(first_leg / "in.h5"), (), "checkpoint of another input", capsys)


@pytest.mark.parametrize(
    "extra,expect", [(["-s", "2"], "other settings (start"), (["--benchmark", "30"], "(Nt")]
)
def test_checkpoint_with_other_settings_refused(extra, expect, tmp_path, first_leg, capsys):
    d, resume = _resume_refused(tmp_path, first_leg, capsys, extra=extra, expect=expect)
    resume()


def test_checkpoint_kept_until_the_output_is_written(tmp_path, first_leg, capsys, monkeypatch):
    """A last leg whose output cannot be written (a full disk) keeps the checkpoint and the
    earlier output; the same command then finishes, equal to an uninterrupted run."""
    import shutil

    from sonotile.base import files

    for n in ("ck.h5", "out.h5"):
        shutil.copy(first_leg / n, tmp_path / n)
    cmd = ["-i", str(first_leg / "in.h5"), "-o", str(tmp_path / "out.h5"), *CK_FLAGS,
           "--checkpoint_file", str(tmp_path / "ck.h5")]  # fmt: skip
    real = files.fsync_path

    def full(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "fsync_path", full)
    assert kwave_main(cmd) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert t_index(tmp_path / "out.h5") == 17 and (tmp_path / "ck.h5").exists()
    monkeypatch.setattr(files, "fsync_path", real)
    assert kwave_main(cmd) == 0 and not (tmp_path / "ck.h5").exists()
    assert_identical(first_leg / "full.h5", tmp_path / "out.h5")


def test_changed_partial_output_refused(tmp_path, first_leg, capsys):
    """The partial output's datasets are fingerprinted in the checkpoint too: a changed sample
    of the earlier legs is refused instead of carried into the result."""
    d, resume = _resume_refused(
        tmp_path, first_leg, capsys, expect="dataset 'p' changed since the checkpoint"
    )
    with h5py.File(d / "out.h5", "r+") as f:
        f["p"][0, 3, 2] += 1e-6
    resume()


def test_output_ahead_of_its_checkpoint_resumes(tmp_path, first_leg):
    """A kill between a leg's output rename and its checkpoint's leaves the output one leg
    ahead of the older checkpoint: the resume accepts it (the rows up to the checkpoint are
    unchanged), rewrites those steps identically and ends equal to an uninterrupted run."""
    import shutil

    for n in ("ck.h5", "out.h5"):
        shutil.copy(first_leg / n, tmp_path / n)
    old_ck = (tmp_path / "ck.h5").read_bytes()
    cmd = ["-i", str(first_leg / "in.h5"), "-o", str(tmp_path / "out.h5"), *CK_FLAGS,
           "--checkpoint_file", str(tmp_path / "ck.h5")]  # fmt: skip
    assert kwave_main([*cmd, "--checkpoint_timesteps", "10"]) == 0
    assert t_index(tmp_path / "out.h5") == 27
    (tmp_path / "ck.h5").write_bytes(old_ck)  # the second checkpoint never reached its name
    assert kwave_main(cmd) == 0 and not (tmp_path / "ck.h5").exists()
    assert_identical(first_leg / "full.h5", tmp_path / "out.h5")


@pytest.mark.parametrize(
    "kind,expect", [("int32_field", "dataset 'p' is int32, expected float32/64"),
                    ("nan_in_field", "dataset 'p' holds NaN or Inf")],
)  # fmt: skip
def test_kwave_checkpoint_without_manifest_checked(kind, expect, tmp_path, first_leg, capsys):
    """A checkpoint as k-Wave writes it (no manifest): its fields must still be float and
    finite."""
    d, resume = _resume_refused(tmp_path, first_leg, capsys, expect=expect)
    _corrupt(kind, d / "ck.h5", d)
    with h5py.File(d / "ck.h5", "r+") as f:
        del f.attrs["sonotile_manifest"], f["sonotile_aggregates"]
        f.attrs["created_by"] = np.bytes_(b"kspaceFirstOrder-OMP v1.3")
    resume()


@pytest.mark.parametrize("created_by", [b"sonotile v0.1", b"kspaceFirstOrder-OMP v1.3"])
def test_sonotile_checkpoint_stripped_of_its_manifest_is_refused(created_by, tmp_path,
                                                                 first_leg, capsys):  # fmt: skip
    """A sonotile checkpoint whose manifest was deleted and whose pressure was edited is refused,
    also when it claims to come from k-Wave (its running statistics show where it is from)."""
    d, resume = _resume_refused(tmp_path, first_leg, capsys, expect="has no sonotile_manifest")
    with h5py.File(d / "ck.h5", "r+") as f:
        del f.attrs["sonotile_manifest"]
        f["p"][0, 3, 4] += 1.0
        f.attrs["created_by"] = np.bytes_(created_by)
    resume()
