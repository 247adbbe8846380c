"""``simulate_many``: a set of runs on one grid equals the same runs through ``simulate``, in
the loop (bit for bit) and vectorised (round-off) forms."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError

SHAPE = (72, 64)


def setup():
    grid = st.KWaveGrid(SHAPE, spacing=1e-4)
    x, y = np.meshgrid(*(np.arange(n) - n // 2 for n in SHAPE), indexing="ij")
    layer = x > 6
    media = [
        st.KWaveMedium(
            sound_speed=np.where(layer, c, 1500.0), density=np.where(layer, 1100.0, 1000.0),
            alpha_coeff=0.5, alpha_power=1.5, BonA=6.0,
        )
        for c in (1500.0, 1600.0, 1700.0)
    ]  # fmt: skip
    sources = [st.KSource(p0=a * ((x + 8) ** 2 + y**2 <= 9)) for a in (1e5, 2e5, 3e5)]
    ring = np.zeros(SHAPE, bool)
    ring[np.abs(np.hypot(x, y) - 14) < 0.5] = True
    sensor = st.KSensor(mask=ring, record=("p", "p_max", "p_max_all", "p_final"))
    return grid, media, sources, sensor


@pytest.fixture(scope="module")
def singles():
    grid, media, sources, sensor = setup()
    # the set shares one time axis: the default one for the fastest and slowest media
    grid.make_time(np.concatenate([np.ravel(m.sound_speed) for m in media]))
    return [st.simulate(grid, m, s, sensor, quiet=True) for m, s in zip(media, sources)]


@pytest.mark.parametrize("vectorize", ["loop", "vmap"])
def test_equals_single_runs(singles, vectorize):
    grid, media, sources, sensor = setup()
    many = st.simulate_many(grid, media, sources, sensor, vectorize=vectorize)
    assert len(many) == 3
    for one, res in zip(singles, many):
        np.testing.assert_array_equal(res.t, one.t)
        for k in ("p", "p_max", "p_max_all", "p_final"):
            ref = one[k]
            if vectorize == "loop":
                np.testing.assert_array_equal(res[k], ref, err_msg=k)
            else:
                err = np.abs(res[k] - ref).max() / np.abs(ref).max()
                assert err < 1e-5, (k, err)
    # the runs really differ (a set of copies would pass the comparison above too)
    assert not np.allclose(many[0]["p_max"] * 2, many[1]["p_max"], rtol=1e-2)


def test_shared_medium_broadcasts_and_mismatch_is_refused():
    grid, media, sources, sensor = setup()
    out = st.simulate_many(grid, media[0], sources[:2], sensor, vectorize="loop")
    assert len(out) == 2
    # linear in p0 away from nonlinearity? not tested here: only that both ran on their source
    assert out[1]["p_max"].max() > 1.5 * out[0]["p_max"].max()
    with pytest.raises(ProblemError, match="2 media for 3 runs"):
        st.simulate_many(grid, media[:2], sources, sensor)
    with pytest.raises(ValueError, match="vectorize"):
        st.simulate_many(grid, media, sources, sensor, vectorize="fast")


def test_vmap_refuses_inputs_of_different_shapes():
    grid, media, sources, sensor = setup()
    homogeneous = st.KWaveMedium(sound_speed=1500.0, density=1000.0, alpha_coeff=0.5,
                                 alpha_power=1.5, BonA=6.0)  # fmt: skip
    with pytest.raises(ProblemError, match="vectorize='loop'"):
        st.simulate_many(grid, [media[0], homogeneous], sources[:2], sensor, vectorize="vmap")


def test_vmap_homogeneous_media_of_different_sound_speeds():
    grid, _, sources, sensor = setup()
    media = [st.KWaveMedium(sound_speed=c, density=1000.0) for c in (1500.0, 1700.0)]
    a = st.simulate_many(grid, media, sources[0], sensor, vectorize="vmap")
    b = st.simulate_many(grid, media, sources[0], sensor, vectorize="loop")
    for x, y in zip(a, b):
        assert np.abs(x["p"] - y["p"]).max() / np.abs(y["p"]).max() < 1e-5
    # the faster medium's wave peaks earlier at the far side of the ring (by ~13 %)
    last = [int(np.argmax(np.abs(r["p"]), axis=1).max()) for r in a]
    assert last[1] < 0.92 * last[0], last
