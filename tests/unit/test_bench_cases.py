"""The cases of ``sonotile bench --whole_run``: each one's k-Wave input file reads back through
``sonotile-kwave``'s reader as the problem it was built from and runs; the array case drives
each element with a signal of its own; the harness runs the cases end to end and names the
lowest cell as its headline."""

from __future__ import annotations

import json
import sys

import h5py
import numpy as np
import pytest

from sonotile.bench.cases import WHOLE_RUN_CASES, bench_case_problem, split_case
from sonotile.bench.inprocess import write_input
from sonotile.commands.cli import main


@pytest.mark.parametrize("case", sorted(WHOLE_RUN_CASES))
def test_case_input_reads_back_and_runs(case, tmp_path):
    from sonotile.kwave.reader import read_input
    from sonotile.solver import runner

    n, steps = 12, 3
    path = str(tmp_path / "in.h5")
    write_input(path, case, n, steps)
    built = bench_case_problem(case, n, steps)
    problem, _ = read_input(path)
    assert problem.grid.shape == (n, n, n) and problem.grid.nt == steps
    kind, medium = split_case(case)
    assert (problem.medium.absorption == "power_law") == (medium == "absorbing_nonlinear")
    if kind == "ivp":
        assert problem.sources.p is None and np.allclose(problem.sources.p0, built.sources.p0)
        assert len(problem.sensor.index) == 3
    else:
        got, want = problem.sources.p, built.sources.p
        assert got.mode == want.mode == kind.removeprefix("point_").replace("array", "additive")
        np.testing.assert_array_equal(got.index, want.index)
        np.testing.assert_allclose(got.signal, want.signal, rtol=1e-6)
    with h5py.File(path) as f:  # the IVP's file has no pressure source, the others no p0
        assert int(f["p0_source_flag"][()].ravel()[0]) == (kind == "ivp")
        assert int(f["p_source_flag"][()].ravel()[0]) == (0 if kind == "ivp" else steps)
    raw, _ = runner.run_engine(runner.single_engine(problem))
    p = np.asarray(raw["p"])
    assert p.shape[-1] == steps or p.shape[0] == steps
    assert np.all(np.isfinite(p)) and np.abs(p).max() > 0


def test_array_elements_carry_signals_of_their_own(tmp_path):
    """Every element has its own (delayed, apodised) signal, shared by the points of that
    element only: the file has one signal per point (``p_source_many``), not one pattern."""
    n = 40  # 40 - 2 * 5 - 2 = 28 elements of 2 points each (n / 16 cells high)
    path = str(tmp_path / "array.h5")
    write_input(path, "array_lossless", n, 300)  # 6 us: every burst whole
    with h5py.File(path) as f:
        assert int(f["p_source_many"][()].ravel()[0]) == 1
        sig = f["p_source_input"][()].reshape(300, -1)  # (Nt, points) in the file
    from sonotile.kwave.reader import read_input

    problem, _ = read_input(path)
    index = np.asarray(problem.sources.p.index)
    elements = np.unique(index[:, 1])
    assert len(elements) == 28 and len(index) == 2 * 28 and sig.shape[1] == len(index)
    per_element = {}
    for y in elements:
        cols = sig[:, index[:, 1] == y]
        np.testing.assert_array_equal(cols[:, 0], cols[:, 1])  # one element, one signal
        per_element[int(y)] = cols[:, 0]
    distinct = {tuple(np.round(s / np.abs(s).max(), 6)) for s in per_element.values()}
    assert len(distinct) >= 14  # mirror pairs about the focus may share a shape
    peak = [int(np.argmax(np.abs(s))) for s in per_element.values()]
    assert peak[0] < peak[len(peak) // 2]  # the outer elements fire before the centre's


def test_whole_run_new_cases_and_headline(tmp_path, monkeypatch, capsys):
    """The harness on a named case end to end, both tools replaced by a stand-in that writes
    an output file with a loop timer; the lowest cell is the headline. An unknown case is
    refused before any run, naming it."""
    from sonotile.bench import whole

    stand_in = (
        "import sys, h5py, numpy\n"
        "a = sys.argv\n"
        "with h5py.File(a[a.index('-o') + 1], 'w') as f:\n"
        "    f.attrs['simulation_phase_execution_time'] = numpy.bytes_(b'    0.50s')\n"
    )

    def commands(kwave, path, out, threads):
        cmd = [sys.executable, "-c", stand_in, "-i", path, "-o", out]
        return {"kwave": cmd, "sonotile": cmd}

    monkeypatch.setattr(whole, "commands", commands)
    out = tmp_path / "whole.json"
    args = ["bench", "--whole-run", "--kwave-binary", "/bin/true", "--size", "16", "--steps",
            "2", "--repeats", "1", "--case", "array_absorbing_nonlinear",
            "--json", str(out), "--workdir", str(tmp_path)]  # fmt: skip
    assert main(args) == 0
    report = json.loads(out.read_text())
    (cell,) = report["cases"]
    assert cell["case"] == "array_absorbing_nonlinear" and cell["source_mode"] is None
    head = report["headline"]
    assert head["case"] == "array_absorbing_nonlinear" and head["steps"] == 6
    ratio = cell["whole_6_wall_ratio_kwave_over_sonotile"]
    assert head["whole_wall_ratio_kwave_over_sonotile"] == ratio and ratio["median"] > 0
    assert "headline (lowest cell)" in capsys.readouterr().out
    assert main(["bench", "--whole-run", "--kwave-binary", "/bin/true", "--case", "ivp"]) == 2
    assert "'ivp'" in capsys.readouterr().err


def test_headline_is_the_lowest_cell():
    from sonotile.bench.whole import headline

    def cell(case, threads, ratios):
        r = {"median": float(np.median(ratios)), "min": min(ratios), "max": max(ratios),
             "values": ratios}  # fmt: skip
        return {"case": case, "threads": threads, "grid": [8] * 3, "steps": [5, 15],
                "whole_15_wall_ratio_kwave_over_sonotile": r}  # fmt: skip

    cells = [cell("a", 1, [1.8, 1.9]), cell("b", 16, [0.9, 1.3]), cell("a", 16, [1.2, 1.2])]
    h = headline(cells)
    assert (h["case"], h["threads"], h["steps"]) == ("b", 16, 15)
    assert h["whole_wall_ratio_kwave_over_sonotile"]["median"] == pytest.approx(1.1)
    assert headline([]) is None
