"""sonotile.kwave.writer.write_input: a Problem written as a k-Wave input file reads back to the
same problem and runs to the same output (and every reference input survives a round trip)."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
from paths import REFERENCE

from sonotile.kwave.reader import read_input
from sonotile.kwave.writer import write_input
from sonotile.solver.runner import run

REF = REFERENCE
CASES = sorted(p.name for p in REF.glob("*/")) if REF.is_dir() else []


@pytest.mark.parametrize("case", CASES)
def test_reference_input_round_trip(case, tmp_path):
    """read -> write -> read gives identical datasets for everything the solver reads."""
    src = REF / case / "input.h5"
    problem, _ = read_input(str(src))
    out = tmp_path / "rt.h5"
    write_input(str(out), problem)
    with h5py.File(src) as a, h5py.File(out) as b:
        for name in b:
            assert name in a, name
            x, y = a[name][()], b[name][()]
            assert x.size == y.size, name
            np.testing.assert_allclose(y.reshape(-1), x.reshape(-1).astype(y.dtype), rtol=1e-6,
                                       err_msg=name)  # fmt: skip
        for name in ("file_type", "major_version", "minor_version"):
            assert a.attrs[name] == b.attrs[name]


def test_written_problem_runs_identically(tmp_path):
    from sonotile.bench.cases import heterogeneous_absorbing

    problem = heterogeneous_absorbing(24, 20)
    path = tmp_path / "in.h5"
    write_input(str(path), problem)
    again, _ = read_input(str(path), record=problem.sensor.record)
    raw1, fin1 = run(problem, progress=False)
    raw2, fin2 = run(again, progress=False)
    for k in raw1:
        np.testing.assert_allclose(raw2[k], raw1[k], rtol=0, atol=1e-6 * np.abs(raw1[k]).max())
