"""A :class:`sonotile.KWaveArray` as an elastic source, as k-Wave's elastic examples use one:
``u_mask`` / ``s_mask`` = the array's binary mask, ``ux`` / ``sxx`` = ``syy`` its distributed
signals. A line element across a periodic grid radiates a plane compressional wave: its
steady-state pressure amplitude is the analytic ``rho (c_p^2 - c_s^2) / c_p u0`` (less the
interpolants' tails cut at the grid's edges), and moving the element off the grid by a fraction
of a point moves the wave's phase by ``k`` times that distance, for velocity and stress
sources alike."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st

NX, NY, DX = 128, 32, 1e-4
CP, CS, RHO, F, U0 = 2000.0, 1000.0, 1500.0, 1e6, 1e-3
DT, NT = 0.3 * DX / CP, 700
GRID = st.KWaveGrid((NX, NY), DX, dt=DT, nt=NT)


def _phase_and_amp(kind: str, offset: float) -> tuple[np.ndarray, np.ndarray]:
    t = np.arange(NT) * DT
    sig = U0 * np.clip(t * F / 2, 0, 1) * np.sin(2 * np.pi * F * t)
    array = st.KWaveArray(bli_tolerance=0.01)
    x0 = (-34 + offset) * DX  # grid point 30 plus the offset
    array.add_line_element((x0, -NY / 2 * DX), (x0, NY / 2 * DX))
    mask = array.get_array_binary_mask(GRID)
    if kind == "u":
        source = st.ElasticSource(ux=array.get_distributed_source_signal(GRID, sig), u_mask=mask)
    else:
        s = array.get_distributed_source_signal(GRID, -RHO * CP * sig)
        source = st.ElasticSource(sxx=s, syy=s, s_mask=mask)
    pts = np.array([[x, NY // 2] for x in range(70, 100, 10)])
    sensor = st.KSensor(points=pts, record=("p_cw",), cw_frequency=F)
    res = st.simulate(GRID, st.KWaveElasticMedium(CP, CS, RHO), source, sensor,
                      pml_size=(20, 0), dtype="float64", quiet=True)  # fmt: skip
    return res["p_cw_phase"], res["p_cw_amp"]


@pytest.mark.parametrize("kind", ["u", "s"])
def test_array_line_element_radiates_a_plane_wave_from_its_off_grid_position(kind):
    on, amp = _phase_and_amp(kind, 0.0)
    off, _ = _phase_and_amp(kind, 0.37)
    shift = np.angle(np.exp(1j * (off - on))) / (2 * np.pi * F / CP * DX)  # [points]
    np.testing.assert_allclose(shift, 0.37, atol=0.015)
    if kind == "u":  # 1 % of the weights lie past the grid's edges in y, and ripple across
        np.testing.assert_allclose(amp, RHO * (CP**2 - CS**2) / CP * U0, rtol=0.04)
