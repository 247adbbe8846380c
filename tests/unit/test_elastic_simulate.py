"""``st.simulate`` picks the elastic model from the medium (as k-Wave picks pstdElastic): the
same records as ``pstd_elastic_2d`` in a :class:`sonotile.Results`, result files that re-run,
and the options and inputs it cannot honour refused by name before any step."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError

N = 24
GRID = st.KWaveGrid((N, N), 1e-4, dt=1e-8, nt=40)
MASK = np.zeros((N, N), bool)
MASK[8, 4:20] = True
RECORD = ("p", "p_max", "u", "s", "p_final", "u_max_all")


def _p0() -> np.ndarray:
    p0 = np.zeros((N, N))
    p0[12, 12] = 1e3
    return p0


def _solid() -> st.KWaveElasticMedium:
    cs = np.full((N, N), 900.0)
    cs[:, :10] = 0.0  # water on one side
    return st.KWaveElasticMedium(2000.0, cs, 1500.0)


def test_simulate_with_elastic_medium_is_pstd_elastic(tmp_path):
    sensor = st.KSensor(mask=MASK, record=RECORD)
    res = st.simulate(GRID, _solid(), st.ElasticSource(p0=_p0()), sensor, pml_size=4,
                      dtype="float64", quiet=True)  # fmt: skip
    ref = st.pstd_elastic_2d(GRID, _solid(), st.ElasticSource(p0=_p0()), sensor, pml_size=4,
                             dtype="float64")  # fmt: skip
    assert set(res.keys()) == set(ref)
    assert {"p", "ux", "uy", "sxx", "syy", "sxy", "p_max", "p_final", "ux_max_all"} <= set(ref)
    for k, v in ref.items():
        np.testing.assert_array_equal(res[k], v, err_msg=k)
    assert res["p"].shape == (MASK.sum(), GRID.nt) and res["p"].dtype == np.float64
    np.testing.assert_allclose(res.t, np.arange(GRID.nt) * GRID.dt)
    np.testing.assert_array_equal(res.sensor_points[:, 0], 8)
    assert np.abs(res["p"]).max() > 1.0  # the wave reached the sensor line
    path = str(tmp_path / "elastic.h5")
    res.save(path)
    inputs, options = st.load_input(path)
    assert isinstance(inputs[1], st.KWaveElasticMedium)
    again = st.simulate(*inputs, **options, quiet=True)
    np.testing.assert_array_equal(again["sxy"], res["sxy"])
    assert st.load_results(path)["sxx"].shape == res["sxx"].shape


def test_kwave_medium_with_elastic_fields_runs_the_elastic_model(tmp_path):
    solid = _solid()
    medium = st.KWaveMedium(sound_speed=1500.0, density=1500.0, sound_speed_compression=2000.0,
                            sound_speed_shear=solid.sound_speed_shear)  # fmt: skip
    mask = np.zeros((N, N), bool)
    mask[6, 6] = True
    source = st.KSource(uy=1e-3 * np.sin(np.arange(20) * 0.6), u_mask=mask)
    sensor = st.KSensor(mask=MASK, record=("p", "s"))
    res = st.simulate(GRID, medium, source, sensor, pml_size=4, quiet=True)
    ref = st.simulate(GRID, solid, st.ElasticSource(uy=source.uy, u_mask=mask), sensor,
                      pml_size=4, quiet=True)  # fmt: skip
    assert "sxy" in res  # the elastic model ran: an acoustic run has no stresses
    np.testing.assert_array_equal(res["sxy"], ref["sxy"])
    assert np.abs(res["sxy"]).max() > 0
    res.save(str(tmp_path / "r.h5"))
    inputs, options = st.load_input(str(tmp_path / "r.h5"))
    assert isinstance(inputs[1], st.KWaveMedium) and isinstance(inputs[2], st.KSource)
    np.testing.assert_array_equal(st.simulate(*inputs, **options, quiet=True)["sxy"], res["sxy"])


def _refused(match: str, medium=None, source=None, sensor=None, grid=GRID, exc=ProblemError,
             **kw) -> None:  # fmt: skip
    medium = medium if medium is not None else _solid()
    source = source if source is not None else st.ElasticSource(p0=_p0())
    sensor = sensor if sensor is not None else st.KSensor(mask=MASK)
    with pytest.raises(exc, match=match):
        st.simulate(grid, medium, source, sensor, quiet=True, **{"pml_size": 4, **kw})


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"pml_inside": False}, "pml_inside: the elastic model's PML is inside"),
        ({"smooth_c0": True}, "smooth_c0: not available for the elastic model"),
        ({"axisymmetric": True}, "axisymmetric: the elastic model is 2-D or 3-D"),
        ({"pml_size": "auto"}, "pml_size = 'auto': the elastic model takes points"),
        ({"dtype": "float16"}, "dtype = 'float16'"),
    ],
)
def test_options_it_cannot_honour_are_named(kw, match):
    _refused(match, **kw)


def test_decomposition_it_has_not_is_named():
    # the differentiable simulator runs single, pencil or lfb; "auto" is not chosen for it
    with pytest.raises(ValueError, match="make_simulator takes single, pencil or lfb"):
        st.make_simulator(GRID, _solid(), st.ElasticSource(p0=_p0()), st.KSensor(mask=MASK),
                          pml_size=4, decomposition="auto")  # fmt: skip
    with pytest.raises(ProblemError, match="remat_step: not available for the elastic"):
        st.make_simulator(GRID, _solid(), st.ElasticSource(p0=_p0()), st.KSensor(mask=MASK),
                          pml_size=4, decomposition="lfb", remat_step=True)  # fmt: skip


def test_inputs_are_checked_in_the_users_names():
    shear_above = st.KWaveMedium(1500.0, 1000.0, sound_speed_compression=1500.0,
                                 sound_speed_shear=1600.0)  # fmt: skip
    _refused("medium.sound_speed_shear: must be below sound_speed_compression", shear_above)
    _refused("sound_speed_shear .* must be >= 0", st.KWaveElasticMedium(1500.0, -5.0, 1e3))
    _refused("density .* must be > 0", st.KWaveElasticMedium(1500.0, 100.0, -1e3))
    line = st.KWaveGrid((32,), 1e-4, dt=1e-8, nt=4)
    _refused("medium.sound_speed_shear: the elastic model needs a 2-D or 3-D grid",
             st.KWaveElasticMedium(1500.0, 500.0, 1e3), st.ElasticSource(p0=np.ones(32)),
             st.KSensor(mask=np.ones(32, bool)), grid=line, pml_size=2)  # fmt: skip
    _refused("medium.alpha_coeff: not a field of the elastic model",
             st.KWaveMedium(1500.0, alpha_coeff=0.5, sound_speed_compression=1500.0,
                            sound_speed_shear=0.0))  # fmt: skip
    _refused("medium.BonA: not a field of the elastic model",
             st.KWaveMedium(1500.0, BonA=6.0, sound_speed_compression=1500.0,
                            sound_speed_shear=0.0))  # fmt: skip
    _refused("source.p: the elastic model has no pressure source",
             source=st.KSource(p=np.ones(4), p_mask=MASK))  # fmt: skip
    _refused("source.transducer_mask: not a source of the elastic model",
             source=st.KSource(transducer_mask=MASK, transducer_signal=np.ones(4)))  # fmt: skip
