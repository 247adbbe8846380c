"""``sonotile-kwave`` and ``simulate`` under a user's hand: Ctrl-C / SIGTERM stop a long run on a
large grid within about a second (no output, exit 130 / 143; ``simulate`` raises
KeyboardInterrupt), ``-r`` prints real progress with an ETA during the run, a run that cannot fit
in memory stops before any work, and an output path that is the input file is refused."""

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

from sonotile.base import config, runtime
from sonotile.kwave.cli import main as kwave_main

KWAVE = [sys.executable, "-m", "sonotile.kwave.cli"]
ENV = dict(os.environ, PYTHONUNBUFFERED="1")


def _thp_mode() -> str:
    try:
        with open(runtime.THP_MODE) as f:
            return f.read()
    except OSError:
        return "[never]"


def _first_line_with(proc, text: str, timeout: float = 120.0) -> str:
    t0 = time.time()
    for line in proc.stdout:
        if text in line:
            return line
        assert time.time() - t0 < timeout, "no progress line"
    raise AssertionError("ended before printing progress: " + proc.stderr.read())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_a_large_run_within_a_second(tmp_path, sig):
    """64^3, 100000 steps: the old 1000-step chunks took ~30 s here; now the run ends within
    about a second of the signal, exits 128 + the signal (130 for Ctrl-C) and leaves nothing at
    the output path."""
    inp = write_input(tmp_path / "in.h5", shape=(64, 64, 64), nt=100000)
    out = tmp_path / "out.h5"
    proc = subprocess.Popen([*KWAVE, "-i", inp, "-o", str(out), "-r", "1"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)  # fmt: skip
    _first_line_with(proc, "step ")
    time.sleep(0.3)  # well inside a chunk
    t = time.perf_counter()
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    elapsed = time.perf_counter() - t
    assert proc.returncode == 128 + sig, stderr
    assert f"stopped by signal {int(sig)}" in stderr and "no output written" in stderr
    assert stderr.count("\n") == 1, stderr  # one line, no traceback
    assert elapsed < 2.0, f"took {elapsed:.2f} s to stop"
    assert sorted(os.listdir(tmp_path)) == ["in.h5"]


SIMULATE = """
import numpy as np, sonotile as st, sys
grid = st.KWaveGrid((64, 64, 64), spacing=1e-4, dt=2e-8, nt=100000)
src = st.KSource(p0=np.pad(np.ones((4, 4, 4)) * 1e5, 30))
mask = np.zeros(grid.shape, bool); mask[32, 32, 50] = True
try:
    st.simulate(grid, st.KWaveMedium(1500.0, 1000.0), src, st.KSensor(mask=mask), progress=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(3)
"""


def test_simulate_raises_keyboard_interrupt_promptly(tmp_path):
    """``simulate(progress=True)`` in a log prints progress lines during the run, and Ctrl-C
    raises KeyboardInterrupt in the caller within about a second."""
    proc = subprocess.Popen([sys.executable, "-c", SIMULATE], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=tmp_path)  # fmt: skip
    t0 = time.time()
    while time.time() - t0 < 120:  # progress lines go to stderr (10 % apart: too far); wait
        time.sleep(0.5)  # for the run to be stepping: the estimate line, then compile
        if proc.poll() is not None or time.time() - t0 > 12:
            break
    assert proc.poll() is None, proc.communicate()
    t = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    elapsed = time.perf_counter() - t
    assert proc.returncode == 3 and "KeyboardInterrupt" in stdout, stderr[-2000:]
    assert "about" in stderr and "MB" in stderr  # the pre-run line
    assert elapsed < 2.0, f"took {elapsed:.2f} s to stop"


@pytest.mark.skipif(
    runtime.hugepages_env({}, os.confstr("CS_GNU_LIBC_VERSION") or "", _thp_mode()) is None,
    reason="no glibc >= 2.35 with the kernel's transparent huge pages on",
)
def test_program_runs_with_huge_pages_unless_told_not_to(tmp_path):
    """``sonotile-kwave`` starts itself again with ``glibc.malloc.hugetlb=1`` (XLA's per-call
    temporaries in 2 MiB pages) and says so at ``--verbose 1``; a ``GLIBC_TUNABLES`` that names
    the tunable (``glibc.malloc.hugetlb=0``: the user's way to keep 4 KiB pages) leaves the
    allocator as it is. A small grid runs without starting again (it would not gain)."""
    inp = write_input(tmp_path / "in.h5", shape=(64, 64, 64), nt=4)
    small = write_input(tmp_path / "small.h5", shape=(16, 16, 16), nt=4)
    env = {k: v for k, v in ENV.items() if k != "GLIBC_TUNABLES"}
    cases = [({}, "transparent huge pages", inp),
             ({"GLIBC_TUNABLES": "glibc.malloc.hugetlb=0"}, "4 KiB pages", inp),
             ({}, "4 KiB pages", small)]  # fmt: skip
    for extra, says, path in cases:
        cmd = [*KWAVE, "-i", path, "-o", str(tmp_path / "o.h5"), "--verbose", "1"]
        r = subprocess.run(cmd, capture_output=True, text=True, env={**env, **extra}, timeout=300)
        assert r.returncode == 0, r.stderr
        assert f"host allocator: {says}" in r.stderr, (extra, r.stderr)


def test_huge_pages_only_for_runs_that_gain(tmp_path):
    """The start again with huge pages is for grids of 64^3 points or more, read from the
    input's header (a file of 1 MiB or more counts as large unread); not for small grids, help,
    version, usage errors or a missing input."""
    from sonotile.kwave.cli import HUGEPAGES_MIN_FILE, wants_hugepages

    def wants(path: str, *flags: str) -> bool:
        return wants_hugepages(["-i", path, "-o", str(tmp_path / "o.h5"), *flags])

    scalars = {k: np.float32(v) for k, v in (("c0", 1500), ("rho0", 1000), ("rho0_sgx", 1000),
                                              ("rho0_sgy", 1000), ("rho0_sgz", 1000))}  # fmt: skip
    big = write_input(tmp_path / "big.h5", shape=(64, 64, 64), nt=4, p0=False, p_source=True,
                      **scalars)  # fmt: skip
    assert os.path.getsize(big) < HUGEPAGES_MIN_FILE and wants(big)  # from Nx Ny Nz
    small = write_input(tmp_path / "small.h5", shape=(128, 128), nt=4)
    assert not wants(small) and not wants(small, "--bogus")
    assert not wants(str(tmp_path / "missing.h5"))
    assert not wants_hugepages(["--version"]) and not wants_hugepages(["-h"])
    padded = tmp_path / "padded.h5"
    padded.write_bytes(b"\0" * HUGEPAGES_MIN_FILE)
    assert wants(str(padded))


def test_small_grids_run_on_one_thread(tmp_path, monkeypatch):
    """Without ``-t``, a grid of at most ``ONE_THREAD_MAX_POINTS`` points run alone on the CPU
    takes one thread (its steps are too short to share); larger grids, ``-g``, virtual CPU
    devices, decompositions, a job of several processes or an installed GPU plugin keep all
    threads. The choice does not pin the process to a CPU (nor does ``-t 1`` on such a grid),
    and the settings are restored."""
    from sonotile.kwave import cli

    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))  # restored afterwards
    small = write_input(tmp_path / "small.h5", shape=(128, 128), nt=4)
    big = write_input(tmp_path / "big.h5", shape=(40, 40, 40), nt=4)
    assert cli.input_points(small) == 128 * 128 <= cli.ONE_THREAD_MAX_POINTS < 40**3
    assert cli.input_points(str(tmp_path / "missing.h5")) is None
    os.mkfifo(tmp_path / "fifo")
    assert cli.input_points(str(tmp_path / "fifo")) is None  # not opened: it would block
    assert not cli.wants_hugepages(["-i", str(tmp_path / "fifo"), "-o", str(tmp_path / "o.h5")])

    def one(path: str, *flags: str) -> bool:
        return cli.one_thread(cli.parse(["-i", path, "-o", str(tmp_path / "o.h5"), *flags]))

    monkeypatch.setattr(cli, "accelerator_installed", lambda: False)
    assert one(small) and not one(big) and not one(str(tmp_path / "missing.h5"))
    for flags in (["-g", "0"], ["--cpu_devices", "2"], ["--decomposition", "pencil"]):
        assert not one(small, *flags), flags
    monkeypatch.setenv("SONOTILE_NUM_PROCESSES", "2")
    monkeypatch.setenv("SONOTILE_COORDINATOR", "localhost:1234")
    saved = config.current()
    config.configure(config.Settings.from_env())
    try:
        assert not one(small)
    finally:
        config.configure(saved)
    monkeypatch.setattr(cli, "accelerator_installed", lambda: True)
    assert not one(small)
    monkeypatch.setattr(cli, "accelerator_installed", lambda: False)
    cpus = os.sched_getaffinity(0)
    seen = []
    monkeypatch.setattr(cli, "_run", lambda args: seen.append(config.current().threads) or 0)
    assert cli.main(["-i", small, "-o", str(tmp_path / "o.h5")]) == 0
    assert cli.main(["-i", big, "-o", str(tmp_path / "o.h5")]) == 0
    assert seen == [1, saved.threads] and os.sched_getaffinity(0) == cpus
    pinned = []  # -t 1 on a small grid is not pinned either; on a large one it is
    monkeypatch.setattr(cli, "_run", lambda args: pinned.append(os.sched_getaffinity(0)) or 0)
    assert cli.main(["-i", small, "-o", str(tmp_path / "o.h5"), "-t", "1"]) == 0
    assert cli.main(["-i", big, "-o", str(tmp_path / "o.h5"), "-t", "1"]) == 0
    assert pinned[0] == cpus and len(pinned[1]) == 1
    assert config.current() == saved


def test_help_and_version_do_not_start_jax():
    """``--version`` and ``--help`` answer without importing JAX (~0.7 s here)."""
    for flag in ("--version", "--help"):
        r = subprocess.run([sys.executable, "-X", "importtime", "-m", "sonotile.kwave.cli", flag],
                           capture_output=True, text=True, env=ENV, timeout=120)  # fmt: skip
        assert r.returncode == 0 and "sonotile" in r.stdout, r.stderr
        imported = {ln.rsplit("|", 1)[-1].strip() for ln in r.stderr.splitlines() if "|" in ln}
        assert "sonotile.base.runtime" in imported and "jax" not in imported, flag


def test_progress_interval_r(tmp_path):
    """``-r 10``: ten lines during the run, each with percent, step, rate and ETA."""
    inp = write_input(tmp_path / "in.h5", shape=(24, 20, 16), nt=200)
    r = subprocess.run([*KWAVE, "-i", inp, "-o", str(tmp_path / "o.h5"), "-r", "10"],
                       capture_output=True, text=True, env=ENV, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "% " in ln]
    # at least every 10 % a line (lines close in time come together, after a chunk)
    assert 5 <= len(lines) <= 11, r.stdout
    assert lines[-1].startswith("  100.0%  step 200/200") and all("ETA" in ln for ln in lines)


def test_run_that_cannot_fit_stops_before_any_work(tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5", shape=(32, 32, 32), nt=20)
    out = tmp_path / "out.h5"
    saved = config.current()
    config.configure(memory_limit=100_000)  # what SONOTILE_MEMORY_LIMIT=1e5 sets
    try:
        assert kwave_main(["-i", inp, "-o", str(out)]) == 1
    finally:
        config.configure(saved)
    err = capsys.readouterr().err.strip()
    assert err.startswith("sonotile-kwave: error: grid (32, 32, 32) needs about")
    assert "SONOTILE_MEMORY_LIMIT" in err and "\n" not in err
    assert sorted(os.listdir(tmp_path)) == ["in.h5"]


def test_output_that_is_the_input_is_refused(tmp_path, capsys):
    """-o equal to -i, a symlink to it, a hard link to it, or another spelling: refused; the
    input is untouched. The checkpoint file may not be the input or output either."""
    inp = write_input(tmp_path / "in.h5", nt=10)
    before = (tmp_path / "in.h5").read_bytes()
    os.symlink(inp, tmp_path / "sym.h5")
    os.link(inp, tmp_path / "hard.h5")
    spelled = str(tmp_path / "." / "in.h5")
    for out in (inp, str(tmp_path / "sym.h5"), str(tmp_path / "hard.h5"), spelled):
        assert kwave_main(["-i", inp, "-o", out]) == 1
        assert "is the same file as -i" in capsys.readouterr().err
    assert kwave_main(["-i", inp, "-o", str(tmp_path / "o.h5"), "--checkpoint_file", inp]) == 1
    assert "--checkpoint_file" in capsys.readouterr().err
    assert (tmp_path / "in.h5").read_bytes() == before
    with h5py.File(inp) as f:
        assert f.attrs["file_type"] in (b"input", "input")
