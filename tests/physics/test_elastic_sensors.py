"""The elastic model's records: statistics agree with the series they summarise, the start
index drops the early steps, and the compressional/shear split separates the two waves."""

from __future__ import annotations

import numpy as np

import sonotile as st

N, DX = 48, 1e-4
CP, CS, RHO = 2000.0, 1000.0, 1500.0


def _run(record, start=1, source=None, cs=CS):
    grid = st.KWaveGrid((N, N), DX, dt=0.2 * DX / CP, nt=64)
    mask = np.zeros((N, N), bool)
    mask[30:34, 10:40:3] = True
    p0 = np.zeros((N, N))
    p0[22:26, 22:26] = 1e3
    source = source or st.ElasticSource(p0=p0)
    sensor = st.KSensor(mask=mask, record=record, record_start_index=start)
    return st.pstd_elastic_2d(grid, st.KWaveElasticMedium(CP, cs, RHO), source, sensor,
                              pml_size=10)  # fmt: skip


def test_statistics_summarise_the_series():
    rec = ("p", "p_max", "p_min", "p_rms", "u", "u_max", "u_min", "u_rms", "p_final",
           "u_final", "p_max_all", "s", "s_final")  # fmt: skip
    out = _run(rec, start=10)
    assert out["p"].shape == (40, 55)  # steps 10..64 (1-based)
    np.testing.assert_allclose(out["p_max"], out["p"].max(1), rtol=1e-6)
    np.testing.assert_allclose(out["p_min"], out["p"].min(1), rtol=1e-6)
    np.testing.assert_allclose(out["p_rms"], np.sqrt((out["p"] ** 2).mean(1)), rtol=1e-5)
    np.testing.assert_allclose(out["uy_max"], out["uy"].max(1), rtol=1e-6)
    np.testing.assert_allclose(out["ux_rms"], np.sqrt((out["ux"] ** 2).mean(1)), rtol=1e-5)
    assert out["p_final"].shape == out["ux_final"].shape == out["p_max_all"].shape == (N, N)
    # p = -(sxx + syy) / 2, at the points and on the grid
    np.testing.assert_allclose(-(out["sxx"] + out["syy"]) / 2, out["p"], rtol=1e-5, atol=1e-6)
    p_final = -(out["sxx_final"] + out["syy_final"]) / 2
    np.testing.assert_allclose(p_final, out["p_final"], rtol=1e-5, atol=1e-6)
    assert out["p_max_all"].max() >= out["p_max"].max() > 0
    assert np.abs(out["sxy"]).max() > 0


def test_split_field_separates_compressional_and_shear_waves():
    # p0 in a homogeneous solid radiates a compressional wave only
    out = _run(("u", "u_split_field", "u_non_staggered"))
    up = np.hypot(out["ux_split_p"], out["uy_split_p"]).max()
    us = np.hypot(out["ux_split_s"], out["uy_split_s"]).max()
    assert us < 1e-3 * up
    # the parts add up to the velocity on the grid points
    for a in "xy":
        parts = out[f"u{a}_split_p"] + out[f"u{a}_split_s"]
        ref = out[f"u{a}_non_staggered"]
        np.testing.assert_allclose(parts, ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    # and the velocity on the grid points is the staggered one moved by half a cell
    assert abs(np.abs(out["ux_non_staggered"]).max() / np.abs(out["ux"]).max() - 1) < 0.05
    # a shear-stress source in a solid radiates both; the shear part is the larger
    mask = np.zeros((N, N), bool)
    mask[24, 24] = True
    t = np.arange(64) * 0.2 * DX / CP
    sig = 1e3 * np.sin(2 * np.pi * 2e6 * t) * np.hanning(64)
    out = _run(("u_split_field",), source=st.ElasticSource(sxy=sig, s_mask=mask))
    up = np.hypot(out["ux_split_p"], out["uy_split_p"]).max()
    us = np.hypot(out["ux_split_s"], out["uy_split_s"]).max()
    assert us > 2 * up > 0
