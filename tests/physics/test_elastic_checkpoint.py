"""``pstd_elastic_2d(..., checkpoint=Checkpoint(path, steps=...))``: a run stopped twice, saved
and resumed by the same call equals the run in one piece bit for bit (every record: series,
statistics, whole fields); the file is gone at the end; a file saved with another medium is
refused naming it, and a file that is not a run state is never written over."""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest

import sonotile as st
from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.model.problem import ProblemError

N, NT = 32, 60
RECORD = ("p", "u", "s", "p_max", "u_rms", "p_final", "u_final", "s_final")


def _run(path: str | None, cs: float = 1000.0, steps: int | None = 25) -> dict:
    x = np.arange(N) - N // 2
    p0 = 1e3 * np.exp(-(x[:, None] ** 2 + x[None, :] ** 2) / 4.0)
    shear = np.full((N, N), cs)
    shear[:, :8] = 0.0  # a fluid layer
    mask = np.zeros((N, N), bool)
    mask[6, 10:20] = True  # ten points from the source: the wave reaches it
    source = st.ElasticSource(p0=p0)
    sensor = st.KSensor(mask=mask, record=RECORD, record_start_index=10)
    cp = None if path is None else Checkpoint(path, steps=steps)
    grid = st.KWaveGrid((N, N), 1e-4, dt=8e-9, nt=NT)
    medium = st.KWaveElasticMedium(2500.0, shear, 1800.0)
    with jax.enable_x64(True):
        return st.pstd_elastic_2d(grid, medium, source, sensor, pml_size=4, dtype="float64",
                                  checkpoint=cp)  # fmt: skip


def test_stopped_twice_and_resumed_equals_one_piece(tmp_path) -> None:
    whole = _run(None)
    path = str(tmp_path / "elastic.npz")
    stops = []
    for _ in range(3):
        try:
            out = _run(path)
            break
        except RunStopped as e:
            stops.append(e.step)
            assert os.path.exists(path)
    assert stops == [25, 50]  # two stops, the third call ran to the end
    assert not os.path.exists(path)
    assert set(out) == set(whole)
    assert np.abs(whole["p"]).max() > 1.0 and whole["p"].shape[1] == NT - 9
    for k, v in whole.items():
        assert np.array_equal(out[k], v), k


def test_a_state_of_other_inputs_is_refused(tmp_path) -> None:
    path = str(tmp_path / "elastic.npz")
    with pytest.raises(RunStopped):
        _run(path)
    with pytest.raises(ProblemError, match="saved by a run with another medium"):
        _run(path, cs=1100.0)
    other = tmp_path / "notes.npz"
    other.write_bytes(b"not a state")
    with pytest.raises(ProblemError, match="is not a sonotile run state"):
        _run(str(other))
    assert other.read_bytes() == b"not a state"


def _simulate(path: str | None, steps: int = 20, start: int = 10, dtype: str = "float32"):
    """The run of :func:`_run` through ``st.simulate`` (its ``checkpoint`` option)."""
    x = np.arange(N) - N // 2
    shear = np.full((N, N), 1000.0)
    shear[:, :8] = 0.0
    mask = np.zeros((N, N), bool)
    mask[6, 10:20] = True
    source = st.ElasticSource(p0=1e3 * np.exp(-(x[:, None] ** 2 + x[None, :] ** 2) / 4.0))
    sensor = st.KSensor(mask=mask, record=RECORD, record_start_index=start)
    grid = st.KWaveGrid((N, N), 1e-4, dt=8e-9, nt=NT)
    medium = st.KWaveElasticMedium(2500.0, shear, 1800.0)
    cp = None if path is None else Checkpoint(path, steps=steps)
    return st.simulate(grid, medium, source, sensor, pml_size=4, dtype=dtype, quiet=True,
                       checkpoint=cp)  # fmt: skip


def test_simulate_stopped_and_resumed_equals_one_piece(tmp_path) -> None:
    whole = _simulate(None)
    path = str(tmp_path / "simulate.npz")
    stops = []
    for _ in range(4):
        try:
            res = _simulate(path)
            break
        except RunStopped as e:
            stops.append(e.step)
            assert os.path.exists(path)
    assert stops == [20, 40]
    assert not os.path.exists(path)
    assert set(res.keys()) == set(whole.keys())
    assert np.abs(whole["p"]).max() > 1.0 and whole["p"].shape == (10, NT - 9)
    assert np.array_equal(res.t, whole.t)
    for k in whole.keys():
        assert np.array_equal(res[k], whole[k]), k


def test_simulate_refuses_a_state_of_other_inputs(tmp_path) -> None:
    path = str(tmp_path / "simulate.npz")
    with pytest.raises(RunStopped):
        _simulate(path)
    with pytest.raises(ProblemError, match="saved by a run with another sensor"):
        _simulate(path, start=12)
    with pytest.raises(ProblemError, match="saved by a run with another grid"):
        _simulate(path, dtype="float64")
    assert os.path.exists(path)  # kept for the run it belongs to
    with pytest.raises(ProblemError, match="checkpoint steps must be a whole number"):
        _simulate(str(tmp_path / "other.npz"), steps=0)
    grid = st.KWaveGrid((N, N), 1e-4, dt=8e-9, nt=NT)
    acoustic = st.KWaveMedium(sound_speed=1500.0)
    sensor = st.KSensor(mask=np.ones((N, N), bool))
    with pytest.raises(ProblemError, match="checkpoint: simulate saves and resumes elastic"):
        st.simulate(grid, acoustic, st.KSource(p0=np.ones((N, N))), sensor,
                    checkpoint=Checkpoint(path))  # fmt: skip
