"""A :class:`sonotile.KWaveArray` as an elastic sensor, as for the acoustic model: the sensor
mask is the array's binary mask, ``combine_sensor_data`` turns the pressure recorded there into
one signal per element. Two line elements across a plane compressional wave, one on the grid
and one 0.37 of a point off it: each element's steady-state amplitude is the analytic
``rho (c_p^2 - c_s^2) / c_p u0``, and the off-grid element's phase lags the on-grid one's as
the analytic plane wave sampled by the element's own grid weights predicts (0.3886 of a point
for the offset 0.37: the band-limited interpolant truncated at ``bli_tolerance=0.01``)."""

from __future__ import annotations

import numpy as np

import sonotile as st

NX, NY, DX = 128, 32, 1e-4
CP, CS, RHO, F, U0 = 2000.0, 1000.0, 1500.0, 1e6, 1e-3
DT, NT = 0.3 * DX / CP, 700  # 200 steps are 3 periods exactly
GRID = st.KWaveGrid((NX, NY), DX, dt=DT, nt=NT)
OFFSET = 0.37  # [points]


def _array() -> st.KWaveArray:
    """Line elements across y at x index 64 and 64 + OFFSET (their interpolants clear of the
    PML and of the source)."""
    array = st.KWaveArray(bli_tolerance=0.01)
    for x in (64.0, 64.0 + OFFSET):
        xm = (x - NX // 2) * DX
        array.add_line_element((xm, -8 * DX), (xm, 8 * DX))
    return array


def test_array_as_elastic_sensor_combines_to_the_plane_wave_at_each_element():
    t = np.arange(NT) * DT
    sig = U0 * np.clip(t * F / 2, 0, 1) * np.sin(2 * np.pi * F * t)
    u_mask = np.zeros((NX, NY), bool)
    u_mask[22, :] = True  # a plane wave along x (periodic in y)
    array = _array()
    sensor = st.KSensor(mask=array.get_array_binary_mask(GRID), record=("p",))
    source = st.ElasticSource(ux=sig, u_mask=u_mask)
    res = st.simulate(GRID, st.KWaveElasticMedium(CP, CS, RHO), source, sensor,
                      pml_size=(20, 0), dtype="float64", quiet=True)  # fmt: skip
    combined = array.combine_sensor_data(GRID, res["p"])
    assert combined.shape == (2, NT)
    last = np.arange(NT - 200, NT)
    bins = combined[:, last] @ np.exp(-2j * np.pi * F * t[last]) * 2 / 200  # one-bin DFT
    np.testing.assert_allclose(np.abs(bins), RHO * (CP**2 - CS**2) / CP * U0, rtol=0.005)
    k = 2 * np.pi * F / CP * DX  # [rad per point]
    lag = np.angle(bins[0] / bins[1]) / k  # [points]
    w = array.get_element_grid_weights(GRID, 1).sum(axis=1)  # the element's weights along x
    predicted = -np.angle(np.sum(w * np.exp(-1j * k * (np.arange(NX) - 64)))) / k
    np.testing.assert_allclose(lag, predicted, atol=0.002)
    np.testing.assert_allclose(lag, OFFSET, atol=0.02)
    # the mask points' own signals are not each the element's: off the grid, the interpolant
    # spreads the element over several x columns whose signals differ in phase
    assert array.get_element_binary_mask(GRID, 1)[:, 16].sum() > 4
