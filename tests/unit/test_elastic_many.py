"""``simulate_many`` with elastic media: each run equal to its own ``st.simulate`` run (one
after another, on one time axis); ``vectorize="vmap"`` (one vectorised program) equal to the
loop to round-off; a mix of models, and vmapped runs whose inputs differ in kind, refused by
name."""

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


@pytest.mark.parametrize(("dtype", "tol"), [("float64", 1e-12), ("float32", 1e-5)])
def test_elastic_vmap_equals_the_loop(dtype, tol):
    # heterogeneous media differing in every field (speeds, density, absorption), a p0 start
    # and a velocity source; float64 (XLA's FFT) and float32 (FFTW on a CPU)
    rng = np.random.default_rng(3)
    media = []
    for cs in (0.0, 700.0, 1100.0):
        shear = np.full((N, N), cs) * (1 + 0.1 * rng.random((N, N)))
        shear[:, :10] = 0.0
        media.append(st.KWaveElasticMedium(2000.0 + 400 * rng.random((N, N)), shear,
                                           1500.0 + cs / 4 * rng.random((N, N)),
                                           0.5 + cs / 1000, 1.0 + cs / 500))  # fmt: skip
    u_mask = np.zeros((N, N), bool)
    u_mask[16, 6:18:3] = True
    ux = 1e-3 * np.sin(np.arange(30) * 0.4)
    sources = [dataclasses.replace(_source(), ux=a * ux, u_mask=u_mask) for a in (1.0, 2.0, 0.5)]
    sensor = st.KSensor(mask=MASK, record=("p", "s", "u", "u_split_field", "p_max_all",
                                           "u_final", "p_rms"))  # fmt: skip
    grid = st.KWaveGrid((N, N), 1e-4, dt=1e-8, nt=40)
    loop = st.simulate_many(grid, media, sources, sensor, pml_size=4, dtype=dtype,
                            vectorize="loop")  # fmt: skip
    vmap = st.simulate_many(grid, media, sources, sensor, pml_size=4, dtype=dtype,
                            vectorize="vmap")  # fmt: skip
    for a, b in zip(loop, vmap):
        assert set(a.keys()) == set(b.keys()) and "ux_split_s" in b
        for k in a.keys():
            scale = np.abs(a[k]).max()
            np.testing.assert_allclose(b[k], a[k], rtol=0, atol=tol * scale, err_msg=k)
        np.testing.assert_array_equal(a.t, b.t)
    assert not np.allclose(vmap[1]["p"], vmap[2]["p"])  # the runs differ


def test_elastic_batch_refuses_mixed_models_and_unlike_vmap_runs():
    grid = st.KWaveGrid((N, N), 1e-4, dt=1e-8, nt=10)
    water = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    with pytest.raises(ProblemError, match=r"media\[1\] is acoustic"):
        st.simulate_many(grid, [_media()[0], water], _source(), SENSOR)
    for how in ("loop", "vmap"):
        with pytest.raises(ProblemError, match=r"media\[1\] is acoustic"):
            st.simulate_many(grid, [_media()[0], water], _source(), SENSOR, vectorize=how)
    absorbing = dataclasses.replace(_media()[1], alpha_coeff_compression=0.5,
                                    alpha_coeff_shear=1.0)  # fmt: skip
    with pytest.raises(ProblemError, match="vectorize='vmap'.*absorption.*use vectorize='loop'"):
        st.simulate_many(grid, [_media()[0], absorbing], _source(), SENSOR, pml_size=4,
                         vectorize="vmap")  # fmt: skip
    bad = st.KWaveElasticMedium(1500.0, 1600.0, 1000.0)  # shear above compression
    with pytest.raises(ProblemError, match=r"media\[1\].*sound_speed_shear"):
        st.simulate_many(grid, [_media()[0], bad], _source(), SENSOR, pml_size=4,
                         vectorize="vmap")  # fmt: skip
