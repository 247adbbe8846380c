"""``simulate_many`` with elastic media: each run equal to its own ``st.simulate`` run (one
after another, on one time axis), ``vectorize="vmap"`` and a mix of models refused by name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError

N = 24
MASK = np.zeros((N, N), bool)
MASK[8, 4:20] = True
SENSOR = st.KSensor(mask=MASK, record=("p", "s", "p_max_all"))


def _media() -> list[st.KWaveElasticMedium]:
    out = []
    for cs in (0.0, 600.0, 1100.0):
        shear = np.full((N, N), cs)
        shear[:, :10] = 0.0  # water on one side
        out.append(st.KWaveElasticMedium(2000.0 + cs / 4, shear, 1500.0))
    return out


def _source() -> st.ElasticSource:
    p0 = np.zeros((N, N))
    p0[12, 12] = 1e3
    return st.ElasticSource(p0=p0)


def test_elastic_media_each_equal_their_own_simulate_run():
    grid = st.KWaveGrid((N, N), 1e-4, dt=1e-8, nt=40)
    runs = st.simulate_many(grid, _media(), _source(), SENSOR, pml_size=4, dtype="float64")
    assert len(runs) == 3
    for m, res in zip(_media(), runs):
        ref = st.simulate(grid, m, _source(), SENSOR, pml_size=4, dtype="float64", quiet=True)
        assert set(res.keys()) == set(ref.keys()) and "sxy" in res
        for k in ref.keys():
            np.testing.assert_array_equal(res[k], ref[k], err_msg=k)
        np.testing.assert_array_equal(res.t, ref.t)
    # the shear speed matters: the fluid run has no shear stress past the water
    assert np.abs(runs[0]["sxy"]).max() < 1e-6 * np.abs(runs[2]["sxy"]).max()
    assert not np.allclose(runs[1]["p"], runs[2]["p"])


def test_elastic_batch_shares_the_time_axis_of_its_fastest_medium():
    grid = st.KWaveGrid((N, N), 1e-4)
    media = _media()[1:]
    sources = [_source(), st.ElasticSource(p0=2 * _source().p0)]
    runs = st.simulate_many(grid, media, sources, SENSOR, pml_size=4, vectorize="loop")
    dt = 0.3 * 1e-4 / (2000.0 + 1100.0 / 4)  # k-Wave's makeTime at CFL 0.3, fastest c_p
    for m, s, res in zip(media, sources, runs):
        assert res.t[1] - res.t[0] == pytest.approx(dt, rel=1e-6)
        timed = dataclasses.replace(grid, dt=res.t[1] - res.t[0], nt=len(res.t))
        ref = st.simulate(timed, m, s, SENSOR, pml_size=4, quiet=True)
        np.testing.assert_array_equal(res["p"], ref["p"])


def test_elastic_batch_refuses_vmap_and_mixed_models():
    grid = st.KWaveGrid((N, N), 1e-4, dt=1e-8, nt=10)
    with pytest.raises(ProblemError, match="vectorize='vmap'.*elastic model runs one medium"):
        st.simulate_many(grid, _media(), _source(), SENSOR, vectorize="vmap")
    water = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    with pytest.raises(ProblemError, match=r"media\[1\] is acoustic"):
        st.simulate_many(grid, [_media()[0], water], _source(), SENSOR)
