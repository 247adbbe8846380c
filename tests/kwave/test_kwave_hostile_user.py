"""``sonotile-kwave`` as a hostile user drives it: Ctrl-C at any moment of the run, output names
as long as the filesystem allows, paths that are not UTF-8, dangling links in the input."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import pytest
from kwave_inputs import write_input
from signals import handlers_installed

import sonotile
from sonotile.base import files
from sonotile.kwave.cli import main as kwave_main

SRC = str(Path(sonotile.__file__).resolve().parents[1])  # this checkout's sources
#: the installed program (its first import installs the handlers), else the module
PROGRAM = Path(sys.executable).with_name("sonotile-kwave")
KWAVE = [str(PROGRAM)] if PROGRAM.exists() else [sys.executable, "-m", "sonotile.kwave.cli"]
ENV = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=SRC)
#: seconds after sonotile's first line (its handlers in place; before, the interpreter is still
#: starting and handles a signal itself): imports, parsing, JAX's start, reading, compiling, steps
DELAYS = (0.0, 0.05, 0.2, 0.5, 1.0, 1.7, 2.3, 3.0)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_at_any_moment_stops_cleanly(sig, tmp_path):
    """SIGINT (SIGTERM) at each of :data:`DELAYS` (all runs at once): status 130 (143) and one
    line, or, before the interpreter has a handler, killed by the signal with nothing said;
    never a traceback, a complete exit or a file left behind."""
    procs = []
    for i, delay in enumerate(DELAYS):
        d = tmp_path / str(i)
        d.mkdir()
        inp = write_input(d / "in.h5", shape=(64, 64), nt=1_000_000)
        argv = [*KWAVE, "-i", inp, "-o", str(d / "out.h5")]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                                text=True)  # fmt: skip
        procs.append((delay, d, proc, handlers_installed(proc.pid)))
    for delay, _, proc, t0 in sorted(procs, key=lambda p: p[3] + p[0]):
        time.sleep(max(0.0, t0 + delay - time.perf_counter()))
        proc.send_signal(sig)
    for delay, d, proc, _ in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (128 + sig, -sig), (delay, proc.returncode, err)
        assert "Traceback" not in err, (delay, err)
        if proc.returncode > 0:
            line = f"stopped by signal {int(sig)} ({sig.name})"
            assert err.count("\n") == 1 and line in err, (delay, err)
        assert sorted(os.listdir(d)) == ["in.h5"], (delay, os.listdir(d))


def test_output_name_at_the_filesystem_limit(tmp_path, capsys):
    """An output whose name takes all 255 bytes NAME_MAX allows is written (its temporary name is
    cut and hashed), and a checkpoint's too."""
    inp = write_input(tmp_path / "in.h5", nt=6)
    out = tmp_path / ("o" * 252 + ".h5")
    ck = tmp_path / ("c" * 252 + ".h5")
    args = ["-i", inp, "-o", str(out), "--checkpoint_file", str(ck), "--checkpoint_timesteps", "3"]
    assert kwave_main(args) == 0 and ck.exists(), capsys.readouterr().err
    assert kwave_main(args) == 0 and not ck.exists(), capsys.readouterr().err
    with h5py.File(out) as f:
        assert int(f["Nt"][()].reshape(-1)[0]) == 6
    assert sorted(os.listdir(tmp_path)) == sorted(["in.h5", out.name])


def test_temporary_names_fit_and_stay_distinct():
    tok = "12345-0011223344556677"
    for name in ("o" * 255, "é" * 127, "x" * 200 + "\udcff" * 50):
        tmp = os.path.basename(files.temp_name(f"/tmp/{name}", tok))
        assert len(os.fsencode(tmp)) <= 255 and tmp.endswith(f".{tok}.{files.PARTIAL}")
    a, b = (files.temp_name(f"/tmp/{'o' * 250}{c}", tok) for c in "ab")
    assert a != b  # names cut to the same prefix differ by their hash
    assert files.temp_name("/tmp/out.h5", tok) == f"/tmp/.out.h5.{tok}.{files.PARTIAL}"


@pytest.mark.parametrize("flag", ["-i", "-o", "--checkpoint_file"])
def test_path_that_is_not_utf8_is_refused_before_the_run(flag, tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5", nt=6)
    bad = os.fsdecode(bytes(tmp_path) + b"/x\xffy.h5")
    paths = {"-i": inp, "-o": str(tmp_path / "out.h5"), flag: bad}
    assert kwave_main([a for kv in paths.items() for a in kv]) == 1
    err = capsys.readouterr().err
    line = err.splitlines()[-1]
    assert f"argument {flag}" in line and "x\\xffy.h5" in line and "not valid UTF-8" in line
    assert "Traceback" not in err and sorted(os.listdir(tmp_path)) == ["in.h5"]


def test_dangling_link_in_the_input_is_named(tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5", nt=6)
    with h5py.File(inp, "r+") as f:
        del f["c0"]
        f["c0"] = h5py.SoftLink("/nowhere")
    assert kwave_main(["-i", inp, "-o", str(tmp_path / "out.h5")]) == 1
    err = capsys.readouterr().err
    assert "dataset 'c0': a soft link to '/nowhere', which is not in the file" in err
    assert err.count("\n") == 1 and sorted(os.listdir(tmp_path)) == ["in.h5"]


def test_a_second_ctrl_c_ends_the_run_at_once(tmp_path):
    """Two SIGINTs in a row while a run steps (a user pressing Ctrl-C twice): status 130, one
    line, no traceback; the output is never written (its hidden temporary may stay)."""
    inp = write_input(tmp_path / "in.h5", shape=(64, 64), nt=1_000_000)
    argv = [*KWAVE, "-i", inp, "-o", str(tmp_path / "out.h5")]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                            text=True)  # fmt: skip
    time.sleep(max(0.0, handlers_installed(proc.pid) + 3.0 - time.perf_counter()))
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, (proc.returncode, err)
    assert err.count("stopped by signal 2 (SIGINT)") == 1, err
    left = sorted(set(os.listdir(tmp_path)) - {"in.h5"})
    assert all(n.startswith(".out.h5.") and n.endswith(files.PARTIAL) for n in left), left
