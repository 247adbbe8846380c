"""Nothing lost: a ``kill -9`` at a random moment of a checkpointed run, then the same command
again until it finishes, gives output bit-identical to an uninterrupted run; failed writes leave
no partial file; a resumed leg never moves the only copy of the output aside."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from kwave_inputs import write_input
from test_kwave_checkpoint import assert_identical, t_index

from sonotile.base.files import PARTIAL
from sonotile.kwave import output as outmod
from sonotile.kwave.cli import main as kwave_main

KWAVE = [sys.executable, "-m", "sonotile.kwave.cli"]
# legs of 100 steps (--checkpoint_timesteps), 10 in all however fast the machine steps or starts:
# with a checkpoint interval (0.5 s) a leg ran until that time had passed, and once a warm start
# loaded its whole program from the program cache, two legs ran all 1000 steps and none was
# killed (so did -r 25, 4 legs of 250 steps, on a slow machine)
FLAGS = ["--p_raw", "--p_max", "--p_rms", "--p_final", "--u_max_all", "-s", "5", "-r", "10"]


def test_kill_9_then_resume_is_bit_identical(tmp_path):
    """Legs end after 100 steps (``--checkpoint_timesteps``: a leg checkpoints and exits, 10
    legs); after two legs, up to three legs are killed
    with SIGKILL at seeded random moments of a leg's length (start-up, stepping, or writing the
    output or the checkpoint); rerunning the command finishes the run with the uninterrupted
    output. A leg's length is the shortest leg that finished: the first leg compiles the step
    into the cache the later ones load it from, so it is the longest."""
    inp = write_input(tmp_path / "in.h5", shape=(192, 192), nt=1000, p_source=True)
    full = tmp_path / "full.h5"
    assert kwave_main(["-i", inp, "-o", str(full), *FLAGS]) == 0
    work = tmp_path / "run"
    work.mkdir()
    out, ck = work / "out.h5", work / "ck.h5"
    cmd = [*KWAVE, "-i", inp, "-o", str(out), *FLAGS, "--checkpoint_file", str(ck),
           "--checkpoint_timesteps", "100"]  # fmt: skip
    rng = np.random.default_rng(11)
    killed, pending, legs = [], 3, []  # legs: seconds of the legs that finished
    killed_pids: list[int] = []
    for _ in range(40):
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if len(legs) >= 2 and pending:  # kill at a random moment of a leg's typical length
            try:
                proc.wait(timeout=rng.uniform(0.2, 0.95) * min(legs))
            except subprocess.TimeoutExpired:
                proc.kill()  # SIGKILL: no handler, no clean-up
                killed.append(t_index(out))
                killed_pids.append(proc.pid)
                pending -= 1
        _, err = proc.communicate(timeout=300)
        assert proc.returncode in (0, -9), err
        if proc.returncode == 0:
            legs.append(time.perf_counter() - t)
        if proc.returncode == 0 and not ck.exists():
            break
    else:
        raise AssertionError("the run did not finish in 40 legs")
    assert len(killed) >= 2 and min(killed) > 0, killed  # killed while resuming an output
    assert t_index(out) == 1000
    assert_identical(full, out)
    # no checkpoint left; a partial file only where a SIGKILL stopped its writer (its name holds
    # that process's id: a run that ends, or is stopped otherwise, removes its own)
    left = sorted(os.listdir(work))
    assert "out.h5" in left and "ck.h5" not in left, left
    for name in (n for n in left if n != "out.h5"):
        pid = int(name.split(".")[3].split("-")[0]) if name.endswith(PARTIAL) else None
        assert name.startswith((".out.h5.", ".ck.h5.")) and pid in killed_pids, (name, killed_pids)


def test_failed_output_creation_leaves_nothing(tmp_path, monkeypatch, capsys):
    inp = write_input(tmp_path / "in.h5", nt=10)

    def broken(self):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(outmod.OutputFile, "_create", broken)
    assert kwave_main(["-i", inp, "-o", str(tmp_path / "out.h5")]) == 1
    assert "disk full" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["in.h5"]


def test_failed_input_write_leaves_nothing(tmp_path, monkeypatch):
    """``write_input`` that fails half-way: no partial file, an earlier file survives."""
    from sonotile.kwave import reader, writer

    problem, _ = reader.read_input(write_input(tmp_path / "src.h5", nt=10))
    target = tmp_path / "in.h5"
    target.write_bytes(b"earlier")
    calls = {"n": 0}
    real = writer.put_dataset

    def flaky(*a, **k):
        calls["n"] += 1
        if calls["n"] > 5:
            raise OSError("disk full (simulated)")
        return real(*a, **k)

    monkeypatch.setattr(writer, "put_dataset", flaky)
    with pytest.raises(OSError, match="disk full"):
        writer.write_input(str(target), problem)
    assert target.read_bytes() == b"earlier"
    assert sorted(os.listdir(tmp_path)) == ["in.h5", "src.h5"]


def test_resume_keeps_the_output_in_place(tmp_path, monkeypatch, capsys):
    """A resumed leg that cannot reopen its output, or that fails, leaves the earlier legs'
    output exactly where and as it was (and no partial file)."""
    inp = write_input(tmp_path / "in.h5", nt=60)
    out, ck = tmp_path / "out.h5", tmp_path / "ck.h5"
    cmd = ["-i", inp, "-o", str(out), "--checkpoint_file", str(ck), "--checkpoint_timesteps", "20"]
    assert kwave_main(cmd) == 0 and t_index(out) == 20
    before = out.read_bytes()
    real = h5py.File

    def no_reopen(name, mode="r", *a, **k):
        if mode == "r+":
            raise OSError("cannot lock (simulated)")
        return real(name, mode, *a, **k)

    monkeypatch.setattr(outmod.h5py, "File", no_reopen)
    assert kwave_main(cmd) == 1
    assert "cannot be reopened" in capsys.readouterr().err
    monkeypatch.undo()
    assert out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["ck.h5", "in.h5", "out.h5"]
    t = time.time()
    while kwave_main(cmd) == 0 and ck.exists():  # and it still resumes to the end
        assert time.time() - t < 120
    assert t_index(out) == 60
