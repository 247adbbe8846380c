"""Ctrl-C and SIGTERM in the ``sonotile`` commands: one line, status 128 + the signal, no
traceback, whether the command unwinds (batch, launch, heat, plan) or ends at once (the
others); a signal the process was started ignoring stays ignored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from signals import handlers_installed

import sonotile
from sonotile.base import interrupt

SRC = str(Path(sonotile.__file__).resolve().parents[1])
PROGRAM = Path(sys.executable).with_name("sonotile")
SONOTILE = [str(PROGRAM)] if PROGRAM.exists() else [sys.executable, "-m", "sonotile.commands.cli"]
ENV = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=SRC)


def test_report_says_which_signal_and_returns_its_status(capsys):
    assert interrupt.report("sonotile", interrupt.Interrupted(signal.SIGTERM), "x kept") == 143
    assert capsys.readouterr().err == "sonotile: error: stopped by signal 15 (SIGTERM): x kept\n"
    assert interrupt.report("sonotile", KeyboardInterrupt()) == 130
    assert capsys.readouterr().err == "sonotile: error: stopped by signal 2 (SIGINT)\n"
    where = interrupt.Interrupted(signal.SIGINT, "after step 3/9")
    assert interrupt.report("p", where, "ignored: the step says it") == 130
    assert capsys.readouterr().err.endswith("(SIGINT): after step 3/9\n")


def test_only_the_programs_install_handlers():
    assert interrupt.is_program("/venv/bin/sonotile-kwave") and interrupt.is_program("sonotile")
    assert not interrupt.is_program("/usr/bin/python3") and not interrupt.is_program("pytest")


@pytest.mark.parametrize(
    "command, delay",
    [(["demo", "--size", "32"], 0.0), (["demo", "--size", "32"], 1.5),
     (["batch", "no-such-folder"], 0.0)],
)  # fmt: skip
def test_sonotile_command_stopped_by_a_signal(command, delay, tmp_path):
    proc = subprocess.Popen([*SONOTILE, *command, "--out", str(tmp_path / "o")]
                            if command[0] == "demo" else [*SONOTILE, *command],
                            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip
    time.sleep(max(0.0, handlers_installed(proc.pid) + delay - time.perf_counter()))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode in (1, 2) and "no-such-folder" in err:
        pytest.skip("the command ended before the signal")
    assert proc.returncode in (130, -signal.SIGINT), (proc.returncode, err)
    assert "Traceback" not in err, err
    if proc.returncode == 130:
        assert "stopped by signal 2 (SIGINT)" in err.splitlines()[-1], err
    leftover = [p.name for p in tmp_path.rglob("*") if "partial" in p.name]
    assert leftover == [], leftover


def test_a_signal_that_ends_the_process_removes_its_temporary_files(tmp_path):
    """Outside an unwinding command a signal ends the process at once (no ``finally`` runs):
    the temporary file being written is removed first, the output path is left as it was."""
    out = tmp_path / "figure.png"
    code = (
        "import os, signal, sys, time; sys.argv[0] = 'sonotile'; import sonotile; "
        "from sonotile.base import files; "
        f"block = files.partial_file({str(out)!r}, 'figure'); tmp = block.__enter__(); "
        "open(tmp, 'wb').write(b'half'); print(tmp, flush=True); "
        "os.kill(os.getpid(), signal.SIGINT); time.sleep(30)"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode == 130, proc.stderr
    assert "stopped by signal 2 (SIGINT)" in proc.stderr
    assert "sonotile-partial" in proc.stdout  # it was there while the block ran
    assert list(tmp_path.iterdir()) == []


def test_a_signal_ignored_at_start_stays_ignored():
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "sys.argv[0] = 'sonotile'; import sonotile; "
        "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN, "
        "signal.getsignal(signal.SIGTERM).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "_raise"], out.stderr
