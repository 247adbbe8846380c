"""Bad elastic input fails before any step, in the user's names."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError
from sonotile.physics.elastic import ElasticMedium

G2 = st.KWaveGrid((16, 16), 1e-4, dt=1e-8, nt=4)


def _run(medium=None, source=None, sensor=None, grid=G2, fn=st.pstd_elastic_2d):
    medium = medium or st.KWaveElasticMedium(1500.0, 800.0, 1000.0)
    source = source or st.ElasticSource(p0=np.ones(grid.shape))
    sensor = sensor or st.KSensor(mask=np.ones(grid.shape, bool))
    return fn(grid, medium, source, sensor, pml_size=2)


@pytest.mark.parametrize(
    ("medium", "match"),
    [
        (st.KWaveElasticMedium(1500.0, 1600.0, 1000.0), "sound_speed_shear: must be below"),
        (st.KWaveElasticMedium(1500.0, 1500.0, 1000.0), "sound_speed_shear: must be below"),
        (st.KWaveElasticMedium(1500.0, -1.0, 1000.0), "sound_speed_shear .* must be >= 0"),
        (st.KWaveElasticMedium(-1500.0, 0.0, 1000.0), "sound_speed_compression .* must be > 0"),
        (st.KWaveElasticMedium(1500.0, 0.0, 0.0), "density .* must be > 0"),
        (st.KWaveElasticMedium(1500.0, 0.0, np.ones((3, 3))), "density .* shape"),
        (st.KWaveElasticMedium(1500.0, 0.0, 1e3, 0.5), "alpha_coeff_shear: missing"),
        (st.KWaveElasticMedium(1500.0, 0.0, 1e3, -0.5, 1.0), "alpha_coeff_compression .* >= 0"),
        (st.KWaveMedium(1500.0, 1000.0), "sound_speed_compression: missing"),
    ],
)
def test_medium_errors(medium, match):
    with pytest.raises(ProblemError, match=match):
        _run(medium=medium)


def test_shear_above_compression_names_the_point():
    cs = np.full((16, 16), 500.0)
    cs[3, 7] = 2000.0
    with pytest.raises(ProblemError, match=r"2000 >= 1500 m/s at grid index \(3, 7\)"):
        _run(medium=st.KWaveElasticMedium(1500.0, cs, 1000.0))


def test_one_dimensional_grid_is_refused():
    with pytest.raises(ProblemError, match="sound_speed_shear: the elastic model needs a 2-D"):
        ElasticMedium(1500.0, 500.0, 1000.0, (32,))


def test_source_errors():
    mask = np.zeros((16, 16), bool)
    mask[5, 5] = True
    with pytest.raises(ProblemError, match="source.uz: not a source of a 2-D grid"):
        _run(source=st.ElasticSource(uz=np.ones(3), u_mask=mask))
    with pytest.raises(ProblemError, match="source.szz: not a source of a 2-D grid"):
        _run(source=st.ElasticSource(szz=np.ones(3), s_mask=mask))
    with pytest.raises(ProblemError, match="source.s_mask: missing"):
        _run(source=st.ElasticSource(sxx=np.ones(3)))
    with pytest.raises(ProblemError, match="source.ux: shape"):
        _run(source=st.ElasticSource(ux=np.ones((2, 3)), u_mask=mask))
    with pytest.raises(ProblemError, match="source.u_mode = 'mixed'"):
        _run(source=st.ElasticSource(ux=np.ones(3), u_mask=mask, u_mode="mixed"))
    with pytest.raises(ProblemError, match="source.p0 and source.s_mask"):
        _run(source=st.ElasticSource(p0=np.ones((16, 16)), sxx=np.ones(3), s_mask=mask))
    with pytest.raises(ProblemError, match="source.p0: shape"):
        _run(source=st.ElasticSource(p0=np.ones((8, 8))))


@pytest.mark.parametrize(
    ("labels", "match"),
    [
        ((1, 3), "source.u_mask: a labelled mask takes the integer labels 1..L.*found 1, 3"),
        ((2, 3), "source.u_mask: a labelled mask .*found 2, 3"),
        ((1, 1.5), "source.u_mask: a labelled mask .*found 1, 1.5"),
        ((-1, 1), "source.u_mask: a labelled mask .*found -1, 1"),
    ],
)
def test_bad_labels_are_refused(labels, match):
    mask = np.zeros((16, 16))
    mask[4, 4:6], mask[9, 9] = labels[0], labels[1]
    with pytest.raises(ProblemError, match=match):
        _run(source=st.ElasticSource(ux=np.ones((2, 3)), u_mask=mask))


def test_signal_rows_must_match_the_labels():
    mask = np.zeros((16, 16), int)
    mask[4, 4:6], mask[9, 9], mask[2, 2] = 1, 2, 3
    with pytest.raises(
        ProblemError,
        match=r"source.ux: shape \(2, 3\), expected finite \(3, "
        r"Nt\): one row per label of source.u_mask",
    ):
        _run(source=st.ElasticSource(ux=np.ones((2, 3)), u_mask=mask))
    with pytest.raises(ProblemError, match=r"source.uy: shape \(3,\), expected .*\(3, Nt\)"):
        _run(source=st.ElasticSource(ux=np.ones((3, 3)), uy=np.ones(3), u_mask=mask))
    with pytest.raises(ProblemError, match=r"source.sxy: shape \(4, 3\), .* source.s_mask"):
        _run(source=st.ElasticSource(sxy=np.ones((4, 3)), s_mask=mask))
    with pytest.raises(ProblemError, match="source.sxx: shape .*finite"):
        _run(source=st.ElasticSource(sxx=np.full((3, 3), np.nan), s_mask=mask))


def test_grid_sensor_and_record_errors():
    with pytest.raises(ProblemError, match="3-D grid .* given to pstd_elastic_2d"):
        _run(grid=st.KWaveGrid((8, 8, 8), 1e-4, dt=1e-8, nt=2))
    with pytest.raises(ProblemError, match=r"sensor.mask: shape \(3, 5\); .* Cartesian points"):
        _run(sensor=st.KSensor(mask=np.zeros((3, 5))))
    with pytest.raises(ProblemError, match=r"sensor.corners: expected \(lo, hi\) pairs of 2"):
        _run(sensor=st.KSensor(corners=[((0, 0), (3, 16))]))
    with pytest.raises(ProblemError, match=r"sensor.corners: the second corner \(hi\)"):
        _run(sensor=st.KSensor(corners=[((0, 0), (3, 3)), ((5, 5), (4, 6))]))
    with pytest.raises(ProblemError, match=r"sensor.mask: shape \(4, 2\); .* sensor.corners"):
        _run(sensor=st.KSensor(mask=np.array([[1, 2], [1, 2], [3, 4], [3, 4]])))
    with pytest.raises(ProblemError, match=r"pml_size \(8, 8\): the x layers need 2 x 8 < 16"):
        st.pstd_elastic_2d(
            G2,
            st.KWaveElasticMedium(1500.0, 0.0, 1e3),
            st.ElasticSource(p0=np.ones((16, 16))),
            None,
            pml_size=8,
        )
    with pytest.raises(ProblemError, match=r"sensor.record: \['I_max'\]"):
        _run(sensor=st.KSensor(mask=np.ones((16, 16), bool), record=("p", "I_max")))
