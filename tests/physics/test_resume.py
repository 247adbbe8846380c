"""A heat run and an elastic run stopped half-way, saved, loaded into a fresh engine and taken
to the end equal the runs in one piece (the common loop's run state on disk,
:mod:`sonotile.solver.resume`); a file of another problem is refused."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.physics.elastic import ElasticMedium, build
from sonotile.physics.heat import sonication
from sonotile.physics.heat.model import heat_problem
from sonotile.solver import runner
from sonotile.solver import sensors as sens
from sonotile.solver.resume import load_state, save_state


def heat(nt: int = 24) -> object:
    shape = (20, 16)
    x = np.meshgrid(*[(np.arange(n) - n // 2) * 1e-3 for n in shape], indexing="ij")
    Q = 3e6 * np.exp(-(x[0] ** 2 + x[1] ** 2) / 3e-3**2)
    medium = {"density": 1050.0, "specific_heat": 3600.0,
              "thermal_conductivity": 0.5 * (1 + (x[0] > 0))}  # fmt: skip
    idx = (np.array([10, 2]), np.array([8, 3]))
    return heat_problem(shape, (1e-3, 1e-3), medium, {"T0": 37.0, "Q": Q}, nt, 0.25,
                        on=sonication(nt, 0.25, on=3.0), sensor=idx, dtype="float32")  # fmt: skip


def elastic() -> object:
    n = 24
    x = np.arange(n) - n // 2
    p0 = 1e3 * np.exp(-(x[:, None] ** 2 + x[None, :] ** 2) / 4.0)
    cs = np.full((n, n), 1000.0)
    cs[:, :5] = 0.0
    return build(ElasticMedium(2500.0, cs, 1800.0, (n, n)), (1e-4, 1e-4), 8e-9, 30, p0=p0,
                 sensor_points=np.array([[4, 4], [18, 12]]), record=("p", "u", "p_max", "s_final"),
                 pml_size=(4, 4))  # fmt: skip


@pytest.mark.parametrize("make", [heat, elastic], ids=["heat", "elastic"])
def test_stopped_saved_and_resumed_equals_one_piece(make, tmp_path) -> None:
    problem = make()
    nt = problem.grid.nt
    whole_raw, whole = runner.run(problem, chunk=5)
    first = runner.single_engine(problem)
    rs, _ = first.start()
    rec = runner.ListRecorder()
    rs = runner.advance(first, rs, nt // 2, rec, chunk=5)
    path = str(tmp_path / "state.npz")
    save_state(path, first, rs)
    again = runner.single_engine(problem)
    rs2 = load_state(path, again)
    assert rs2.next_step == rs.next_step > 0
    rs2 = runner.advance(again, rs2, nt, rec, chunk=5)
    final = sens.finish(rs2.carry[1], rs2.carry[0], again.layout, nt)
    raw = rec.result()
    assert set(final) == set(whole) and set(raw) == set(whole_raw)
    for k, v in whole.items():
        assert np.array_equal(final[k], v), k
    for k, v in whole_raw.items():
        assert np.array_equal(raw[k], v), k
    with pytest.raises(ValueError, match="not a saved state of this problem"):
        load_state(path, runner.single_engine(heat(nt + 1) if make is heat else heat()))
