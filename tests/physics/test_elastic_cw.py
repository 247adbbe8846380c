"""``p_cw`` / ``p_cw_all`` of the elastic model: a plane compressional wave from a line of
velocity source (periodic across, PML along) has the analytic steady-state pressure amplitude
``rho (c_p^2 - c_s^2) / c_p u0`` (``p = -(sxx + syy) / 2`` of a solid) and a phase that falls by
``2 pi f / c_p`` per metre."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError

NX, NY, DX = 128, 8, 1e-4
CP, CS, RHO, F, U0 = 2000.0, 1000.0, 1500.0, 1e6, 1e-3
DT, NT = 0.3 * DX / CP, 700


def _run(sensor: st.KSensor) -> st.Results:
    t = np.arange(NT) * DT
    sig = U0 * np.clip(t * F / 2, 0, 1) * np.sin(2 * np.pi * F * t)  # two-period ramp
    u_mask = np.zeros((NX, NY), bool)
    u_mask[30, :] = True
    return st.simulate(st.KWaveGrid((NX, NY), DX, dt=DT, nt=NT), st.KWaveElasticMedium(CP, CS, RHO),
                       st.ElasticSource(ux=sig, u_mask=u_mask), sensor, pml_size=(20, 0),
                       dtype="float64", quiet=True)  # fmt: skip


def test_plane_wave_cw_amplitude_and_phase():
    pts = np.array([[x, 3] for x in range(50, 100, 10)])
    sensor = st.KSensor(points=pts, record=("p", "p_cw", "p_cw_all"), cw_frequency=F)
    res = _run(sensor)
    amp = RHO * (CP**2 - CS**2) / CP * U0
    np.testing.assert_allclose(res["p_cw_amp"], amp, rtol=1e-3)
    k = -np.diff(np.unwrap(res["p_cw_phase"])) / (10 * DX)
    np.testing.assert_allclose(k, 2 * np.pi * F / CP, rtol=1e-3)
    m = int(round(3 / (F * DT)))  # the window: the last 3 periods, its DFT by hand
    dft = res["p"][:, -m:] @ np.exp(-2j * np.pi * F * DT * np.arange(m)) * 2 / m
    np.testing.assert_allclose(res["p_cw_amp"], np.abs(dft), rtol=1e-10)
    np.testing.assert_allclose(res["p_cw_phase"], np.angle(dft), atol=1e-9)
    assert res["p_cw_amp_all"].shape == (NX, NY)
    np.testing.assert_allclose(res["p_cw_amp_all"][pts[:, 0], pts[:, 1]], res["p_cw_amp"],
                               rtol=1e-10)  # fmt: skip


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({}, r"sensor.cw_frequency = None: recording p_cw needs a frequency"),
        ({"cw_frequency": 4e7}, "at or above the Nyquist frequency"),
        (
            {"cw_frequency": F, "cw_periods": 100},
            r"sensor.cw_periods = 100(\.0)?: window of 6667 steps must fit in the 700",
        ),
    ],
)
def test_cw_window_errors(kw, match):
    with pytest.raises(ProblemError, match=match):
        _run(st.KSensor(points=np.array([[60, 3]]), record=("p_cw",), **kw))


def test_cw_at_cartesian_points():
    """``p_cw`` at Cartesian points 0.3 of a point off the grid along the wave (``"linear"``):
    the analytic amplitude times what linear interpolation makes of a plane wave there,
    ``|0.7 + 0.3 exp(i k dx)|`` (0.990 at 20 points per wavelength), to 0.1 %, and the phase
    slope ``2 pi f / c_p`` to 0.1 %."""
    xs = np.arange(50.3, 100, 10.0)  # grid coordinates along x
    pts = np.stack([(xs - NX // 2) * DX, np.full(xs.size, (3.6 - NY // 2) * DX)])
    sensor = st.KSensor(mask=pts, record=("p_cw",), cw_frequency=F, cart_interp="linear")
    res = _run(sensor)
    linear = abs(0.7 + 0.3 * np.exp(2j * np.pi * F / CP * DX))
    np.testing.assert_allclose(res["p_cw_amp"], RHO * (CP**2 - CS**2) / CP * U0 * linear,
                               rtol=1e-3)  # fmt: skip
    k = -np.diff(np.unwrap(res["p_cw_phase"])) / (10 * DX)
    np.testing.assert_allclose(k, 2 * np.pi * F / CP, rtol=1e-3)
