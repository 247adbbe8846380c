"""The subprocess helper repeats a run only when XLA's rendezvous race aborted it."""

from __future__ import annotations

import os

import pytest
from devices import RUNS, run_python

RACE = "import sys; sys.stderr.write('F rendezvous.h:314] Check failed: id < n\\n'); sys.exit(6)"


def test_other_failures_are_returned_at_once(tmp_path):
    count = tmp_path / "count"
    script = f"open({str(count)!r}, 'a').write('x'); raise SystemExit(3)"
    r = run_python(["-c", script], dict(os.environ), timeout=60)
    assert r.returncode == 3 and count.read_text() == "x"


def test_rendezvous_race_is_run_again_up_to_runs(tmp_path):
    count = tmp_path / "count"
    script = f"open({str(count)!r}, 'a').write('x'); " + RACE
    with pytest.warns(UserWarning, match="rendezvous race"):
        r = run_python(["-c", script], dict(os.environ), timeout=60)
    assert r.returncode != 0 and count.read_text() == "x" * RUNS
