"""What runs between chunks of steps: chunk sizing by measured time, progress lines and bar,
and the memory check before a run (:mod:`sonotile.solver.runner`)."""

from __future__ import annotations

import io
import threading

import pytest

from sonotile.base import config
from sonotile.solver import runner as rn


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_chunk_sizer_follows_measured_time():
    """First chunk from the assumed rate; the second (compiled already) is timed and sets the
    length to about ``seconds`` of work (a power of two at most that, at least ``least``
    steps, within the memory limit); then it stays."""
    s = rn.ChunkSizer(cells=10**6, limit=1000, seconds=0.5, least=1)
    assert s.length == 4  # 0.5 s at 1e7 cell-steps/s: 5 steps, rounded down to a power of two
    s.observe(4, 30.0)  # compile included: ignored
    assert s.length == 4
    s.observe(4, 0.004)  # 1 ms per step: 500 steps make 0.5 s
    assert s.length == 256  # rounded down: a chunk stays within its seconds
    s.observe(256, 10.0)  # settled: later timings do not recompile
    assert s.length == 256
    inside = rn.ChunkSizer(cells=10**6, limit=1000, seconds=0.5, least=1)
    inside.observe(4, 1.0)
    inside.observe(4, 0.3)  # within [seconds/2, 2 seconds]: kept
    assert inside.length == 4
    slow = rn.ChunkSizer(cells=10**6, limit=1000, seconds=0.5, least=1)
    slow.observe(4, 1.0)
    slow.observe(4, 8.0)  # 2 s per step: one step per chunk
    assert slow.length == 1
    floor = rn.ChunkSizer(cells=10**6, limit=1000, seconds=0.5, least=8)
    floor.observe(4, 1.0)
    floor.observe(4, 8.0)  # the per-call cost: never fewer than `least` steps once timed
    assert floor.length == 8
    assert rn.ChunkSizer(cells=10**6, limit=6, seconds=0.5, least=8).length == 4
    fast = rn.ChunkSizer(cells=10, limit=300)
    assert fast.length == 256  # capped by the limit (a power of two below it)
    fast.observe(256, 1.0)
    fast.observe(256, 1e-3)
    assert fast.length == 300  # once timed: the limit itself (no power of two needed)
    assert rn.ChunkSizer(cells=10**9, limit=1000, fixed=7).length == 7
    assert rn.ChunkSizer(cells=10**9, limit=1000, fixed=7).rows == 7
    # the default: 1 s of work, at least 16 steps (a 256^3 chunk of 2 steps costs ~12 % per
    # step); with a progress interval of 10 steps as the limit, chunks of exactly 10
    for limit, length in ((1000, 16), (10, 10)):
        d = rn.ChunkSizer(cells=256**3, limit=limit)
        assert (d.seconds, d.least, d.length) == (1.0, 16, 1)
        assert d.rows == length  # the first chunk runs in the program of the timed ones
        d.observe(1, 4.0)
        d.observe(1, 0.65)  # 0.65 s per step: 1 step would make 1 s (and does, as timed)
        assert d.length == length
        far = rn.ChunkSizer(cells=256**3, limit=limit)
        far.observe(1, 4.0)
        far.observe(1, 0.3)  # 0.3 s per step: 3 steps would make 1 s
        assert far.length == length


class Job:
    """``agree`` of ``n`` processes run as threads: each gets the smallest value of the round."""

    def __init__(self, n: int) -> None:
        self.values: list[int] = []
        self.lock = threading.Lock()
        self.gathered = threading.Barrier(n, action=self._close_round)
        self.read = threading.Barrier(n)
        self.result = 0

    def _close_round(self) -> None:
        self.result, self.values = min(self.values), []

    def agree(self, value: int) -> int:
        with self.lock:
            self.values.append(value)
        self.gathered.wait(timeout=10)
        out = self.result
        self.read.wait(timeout=10)  # everyone has read it before the next round
        return out


@pytest.mark.parametrize(
    "fast, slow",
    [
        (0.004, 0.02),  # lengths from the time per step differ (128 and 16 steps)
        (0.02, 0.03),  # one process's steps reach the progress lines' pace, the other's not
    ],
)
def test_chunk_sizer_processes_agree(fast, slow):
    """Two processes that time their chunks differently choose the same lengths (the slower
    one's): their collectives pair up step by step, a different length deadlocks the job."""
    job = Job(2)
    sizers = [
        rn.ChunkSizer(cells=10**6, limit=1000, agree=job.agree, seconds=0.5, pace=10)
        for _ in range(2)
    ]

    def run(sizer, per_step):
        sizer.observe(sizer.length, 1.0)
        sizer.observe(sizer.length, per_step * sizer.length, remaining=10**4)

    threads = [threading.Thread(target=run, args=a) for a in zip(sizers, (fast, slow))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    alone = rn.ChunkSizer(cells=10**6, limit=1000, seconds=0.5, pace=10)
    run(alone, slow)
    lengths = {(s.length, s.rows) for s in sizers}
    assert lengths == {(alone.length, alone.rows)}, lengths


def test_chunks_end_on_progress_lines_only_while_they_are_far_apart():
    """``pace`` (k-Wave's ``-r`` steps) shortens the chunks, not the compiled rows: once timed,
    lines less than ``PACE_SECONDS`` apart no longer end chunks, a shorter length runs in the
    program compiled already, and a length past its rows is taken only when the rest of the run
    is longer than a chunk's seconds."""
    fast = rn.ChunkSizer(cells=128**2, limit=1000, pace=30)
    assert (fast.length, fast.rows) == (30, 512)  # 1 s at the assumed rate: 512 steps
    fast.observe(30, 2.0)  # compile included: ignored
    fast.observe(30, 0.006, remaining=540)  # 0.2 ms per step: 30 steps take 6 ms
    assert (fast.length, fast.rows) == (512, 512)  # the rest fits in 0.11 s: no new program
    long = rn.ChunkSizer(cells=128**2, limit=1000, pace=30)
    long.observe(30, 2.0)
    long.observe(30, 0.006, remaining=100000)  # 20 s left: the 1 s length (the memory bound)
    assert (long.length, long.rows) == (1000, 1000)
    slow = rn.ChunkSizer(cells=128**2, limit=1000, pace=30)
    slow.observe(30, 2.0)
    slow.observe(30, 0.6, remaining=540)  # 20 ms per step: the lines are 0.6 s apart
    assert (slow.length, slow.rows) == (30, 512)  # the paced length in the program it has
    slower = rn.ChunkSizer(cells=128**2, limit=1000, pace=30)
    slower.observe(30, 2.0)
    slower.observe(30, 3.0, remaining=540)  # 0.1 s per step: 1 s is 10 steps, 16 the floor
    assert (slower.length, slower.rows) == (16, 512)  # shorter: no new program either


def test_progress_lines_in_a_log():
    """In a log: one plain line per ``every_pct`` percent, with steps/s and ETA."""
    out = io.StringIO()
    p = rn.Progress(total=100, cells=1000, enabled=True, stream=out, every_pct=10)
    for n in range(5, 101, 5):
        p(n)
    lines = out.getvalue().splitlines()
    assert len(lines) == 10, lines
    assert lines[-1].startswith("  100.0%  step 100/100") and "ETA" in lines[0]
    assert all("steps/s" in ln and "\r" not in ln for ln in lines)
    # a chunk that passes several intervals: one line for each, at its step
    out = io.StringIO()
    p = rn.Progress(total=100, cells=1000, enabled=True, stream=out, every_pct=10)
    for n in (10, 20, 77, 100):
        p(n)
    steps = [int(ln.split("step ")[1].split("/")[0]) for ln in out.getvalue().splitlines()]
    assert steps == [20, 30, 40, 50, 60, 70, 77, 90, 100], steps


def test_progress_bar_on_a_terminal():
    """On a terminal: a bar redrawn in place (carriage returns), ending with a newline."""
    out = Tty()
    p = rn.Progress(total=40, cells=1000, stream=out)  # enabled: a terminal
    assert p.enabled
    for n in range(1, 41):
        p(n)
    text = out.getvalue()
    assert text.startswith("\r  [") and text.endswith("\n") and "ETA" in text
    assert "[" + "#" * 30 + "] 100.0%" in text
    assert not rn.Progress(total=40, cells=1, stream=io.StringIO()).enabled  # a log: off


def test_memory_check_refuses_what_does_not_fit(tmp_path):
    """The estimate is compared with the device's free memory before any work."""
    from kwave_inputs import write_input

    from sonotile.kwave.reader import read_input
    from sonotile.physics.acoustic.checks import memory_estimate

    problem, _ = read_input(write_input(tmp_path / "in.h5", shape=(32, 32, 32), nt=10))
    have, what = rn.available_memory()
    assert have is None or have > 0
    assert "MemAvailable" in what or "memory" in what
    rn.check_memory(problem)  # a 32^3 grid fits anywhere
    limit = str(memory_estimate(problem) // 2)
    assert config.Settings.from_env({"SONOTILE_MEMORY_LIMIT": limit}).memory_limit == int(limit)
    saved = config.current()
    config.configure(memory_limit=int(limit))
    try:
        with pytest.raises(MemoryError, match=r"grid \(32, 32, 32\) needs about .* MB"):
            rn.check_memory(problem)
        with pytest.raises(MemoryError, match="SONOTILE_MEMORY_LIMIT"):
            rn.run(problem, progress=False)
    finally:
        config.configure(saved)


def test_a_chunk_program_traces_the_step_once(monkeypatch):
    """The padded chunk needs its outputs' shapes before the loop: that trace is reused by the
    loop, not repeated (tracing is a warm start's largest cost after the imports)."""
    import jax
    import numpy as np
    from ivp_case import ivp

    from sonotile.physics.acoustic import step as stepmod

    calls = []
    original = stepmod.step

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(stepmod, "step", counted)  # the acoustic model's step, as the loop calls it
    problem = ivp((23, 19), nt=12)  # a shape no other test compiles: no cached trace
    engine = rn.single_engine(problem)
    rs, _ = engine.start()
    xs = rn.padded_inputs(problem, 1, 9, 8)
    jax.clear_caches()
    engine.lower(rs.carry, xs)
    assert len(calls) == 1
    carry, _ = engine.chunk(rs.carry, xs)  # and the program runs
    p = np.asarray(carry[0].p)
    assert np.isfinite(p).all() and np.abs(p).max() > 0
