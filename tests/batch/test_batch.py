"""``sonotile batch``: outputs identical to ``sonotile-kwave``'s, failures isolated, resume,
specification checks, and the runs of one batch spread over several processes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from kwave_inputs import DROP, write_input

BATCH = [sys.executable, "-m", "sonotile.batch.cli"]
KWAVE = [sys.executable, "-m", "sonotile.kwave.cli"]


def datasets(path: Path) -> dict:
    """Every dataset of an output file (attributes such as run times differ by design)."""
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda k, v: out.__setitem__(k, v[()]) if isinstance(v, h5py.Dataset) else 0)
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """Three good 2-D inputs of two shapes, one with a missing dataset, one not HDF5."""
    d = tmp_path_factory.mktemp("batch")
    write_input(d / "a.h5", shape=(32, 28), nt=40)
    write_input(d / "b.h5", shape=(32, 28), nt=40, p0=False, p_source=True)
    write_input(d / "c.h5", shape=(36, 30), nt=30)
    write_input(d / "missing_c0.h5", c0=DROP)
    (d / "not_hdf5.h5").write_text("not an HDF5 file")
    return d


@pytest.fixture(scope="module")
def first_run(folder):
    r = subprocess.run(
        BATCH + [str(folder), "--devices_per_run", "1", "--", "--p_max", "-s", "5"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return r


def test_outputs_equal_sonotile_kwave(folder, first_run, tmp_path):
    assert first_run.returncode == 1, first_run.stdout + first_run.stderr  # two runs fail
    for name in ("a", "b", "c"):
        single = tmp_path / f"{name}.h5"
        subprocess.run(
            KWAVE + ["-i", str(folder / f"{name}.h5"), "-o", str(single), "--p_max", "-s", "5"],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        got, want = datasets(folder / "out" / f"{name}.h5"), datasets(single)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{name}: {k}")


def test_failures_are_isolated_and_named(folder, first_run):
    summary = json.loads((folder / "out" / "batch-summary.json").read_text())
    status = {r["name"]: r for r in summary["runs"]}
    assert {k: v["status"] for k, v in status.items()} == {
        "a": "ok", "b": "ok", "c": "ok", "missing_c0": "failed", "not_hdf5": "failed",
    }  # fmt: skip
    assert "c0" in status["missing_c0"]["error"]
    assert "HDF5" in status["not_hdf5"]["error"]
    assert "missing_c0" in first_run.stdout and "2 failed" in first_run.stdout
    assert not (folder / "out" / "missing_c0.h5").exists()
    assert (folder / "out" / "logs" / "missing_c0.log").read_text().strip()


def test_resume_skips_finished_runs(folder, first_run):
    before = {n: (folder / "out" / f"{n}.h5").stat().st_mtime_ns for n in "abc"}
    shutil.copy(folder / "a.h5", folder / "missing_c0.h5")  # repaired input
    try:
        r = subprocess.run(
            BATCH + [str(folder), "--", "--p_max", "-s", "5"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        write_input(folder / "missing_c0.h5", c0=DROP)
    assert "3 done earlier" in r.stdout, r.stdout
    assert {n: (folder / "out" / f"{n}.h5").stat().st_mtime_ns for n in "abc"} == before
    assert (folder / "out" / "missing_c0.h5").exists()  # the repaired run ran
    assert r.returncode == 1  # not_hdf5 still fails


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"runs": [{"input": "nowhere.h5"}]}, "does not exist"),
        ({"runs": [{"input": "a.h5", "output": "a.h5"}]}, "is an input file"),
        ({"runs": [{"input": "a.h5", "name": "x"}, {"input": "b.h5", "name": "x"}]}, "twice"),
        ({"runs": [{"input": "a.h5", "output": "o.h5"}, {"input": "b.h5", "output": "o.h5"}]},
         "both write"),
        ({"runs": [{"input": "a.h5", "flags": ["-t", "2"]}]}, "set by the batch"),
        ({"runs": [{"input": "a.h5", "flags": ["--no_such_flag"]}]}, "no_such_flag"),
        ({"runs": [{"input": "a.h5", "colour": "red"}]}, "unknown key"),
        ([], "non-empty list"),
    ],
)  # fmt: skip
def test_bad_specification_fails_before_any_run(folder, tmp_path, spec, message):
    for n in ("a", "b"):
        shutil.copy(folder / f"{n}.h5", tmp_path / f"{n}.h5")
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    r = subprocess.run(BATCH + [str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert message in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_toml_spec_with_defaults_and_per_run_flags(folder, tmp_path):
    shutil.copy(folder / "a.h5", tmp_path / "a.h5")
    (tmp_path / "runs.toml").write_text(
        'out = "ignored"\n[defaults]\nflags = ["--p_max"]\nout = "results"\n'
        '[[runs]]\ninput = "a.h5"\nname = "plain"\n'
        '[[runs]]\ninput = "a.h5"\nname = "final"\nflags = ["--p_final"]\n'
    )
    if sys.version_info < (3, 11):
        pytest.importorskip("tomli")
    r = subprocess.run(BATCH + [str(tmp_path / "runs.toml")], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    plain, final = (datasets(tmp_path / "results" / f"{n}.h5") for n in ("plain", "final"))
    assert "p_max" in plain and "p_final" not in plain
    assert "p_max" in final and "p_final" in final
    np.testing.assert_array_equal(plain["p_max"], final["p_max"])


def test_runs_spread_over_launched_processes(folder, tmp_path):
    for n in ("a", "b", "c"):
        shutil.copy(folder / f"{n}.h5", tmp_path / f"{n}.h5")
    r = subprocess.run(
        [sys.executable, "-m", "sonotile.parallel.launch", "-n", "2", "--"]
        + BATCH + [str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[0] sonotile batch: 2 runs" in r.stdout and "[1] sonotile batch: 1 runs" in r.stdout
    summary = json.loads((tmp_path / "out" / "batch-summary.json").read_text())
    assert [x["status"] for x in summary["runs"]] == ["ok"] * 3
    for n in ("a", "b", "c"):
        assert "p" in datasets(tmp_path / "out" / f"{n}.h5")


def test_interrupt_stops_workers_and_keeps_finished_runs(folder, tmp_path):
    import signal
    import time

    shutil.copy(folder / "a.h5", tmp_path / "a.h5")
    for n in ("long1", "long2"):  # each far longer than the test waits
        write_input(tmp_path / f"{n}.h5", shape=(96, 96), nt=200000)
    proc = subprocess.Popen(
        BATCH + [str(tmp_path), "--max_parallel", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen = []
    for line in proc.stdout:  # interrupt once the first long run has started (a.h5 finished)
        seen.append(line)
        if "start  long1" in line:
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    out = "".join(seen) + out
    assert proc.returncode == 130, out + err
    assert "start the batch again" in err
    assert (tmp_path / "out" / "a.h5").exists()  # finished before the interrupt: kept
    assert sorted(p.name for p in (tmp_path / "out").glob("*.h5*")) == ["a.h5"]


def test_an_unstable_run_fails_the_batch_with_the_nan_message(tmp_path):
    """A run that blows up (dt far beyond the stability limit) fails with the NaN message and
    writes no output; the batch exits 1."""
    write_input(tmp_path / "unstable.h5", shape=(32, 28), nt=400, dt=np.float32(4e-7))
    r = subprocess.run(BATCH + [str(tmp_path), "--devices_per_run", "1"], capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "unstable" in ln and "failed" in ln)
    assert "NaN or Inf" in line and "CFL number" in line, line
    assert (tmp_path / "out" / "logs" / "unstable.log").exists()
    assert not list((tmp_path / "out").rglob("*.h5"))  # no output, not even a partial one
