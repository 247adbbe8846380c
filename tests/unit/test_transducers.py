"""Geometry helpers, signals and KWaveArray's band-limited weights (no simulation)."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.api import mask_points
from sonotile.model.array import bli_weights, star_stencil
from sonotile.model.problem import ProblemError

# --- signals -----------------------------------------------------------------------------


def test_tone_burst_shape_envelope_and_offsets():
    fs, f0 = 20e6, 1e6
    s = st.tone_burst(fs, f0, 5)
    assert s.shape == (1, 101)  # 5 cycles at 20 samples per cycle, both ends included
    assert abs(s[0, 0]) < 1e-12 and abs(s[0, -1]) < 1e-12
    assert np.argmax(np.abs(s[0])) in range(40, 61)  # Gaussian peak in the middle
    r = st.tone_burst(fs, f0, 5, envelope="Rectangular")
    np.testing.assert_allclose(r[0], np.sin(2 * np.pi * f0 * np.arange(101) / fs), atol=1e-12)
    m = st.tone_burst(fs, f0, 5, signal_offset=np.array([0, 7]), signal_length=150)
    assert m.shape == (2, 150)
    np.testing.assert_allclose(m[1, 7:108], m[0, :101])
    with pytest.raises(ProblemError, match="envelope"):
        st.tone_burst(fs, f0, 5, envelope="Hann")


def test_tone_burst_ramped_cw():
    fs, f0 = 20e6, 1e6
    s = st.tone_burst(fs, f0, 6, envelope=(2, 1))[0]
    t = np.arange(s.size) / fs
    mid = slice(45, 95)  # after the 2-cycle ramp, before the 1-cycle ramp
    np.testing.assert_allclose(s[mid], np.sin(2 * np.pi * f0 * t[mid]), atol=1e-12)
    assert abs(s[0]) < 1e-12 and abs(s[-1]) < 1e-9


def test_create_cw_signals_and_extract_amp_phase():
    f0, fs = 0.5e6, 12e6
    t = np.arange(480) / fs  # 20 periods
    amp = np.array([1.0, 2.5, 0.3])
    phase = np.array([0.0, 0.7, -2.0])
    sig = st.create_cw_signals(t, f0, amp, phase, ramp_length=2)
    assert sig.shape == (3, 480)
    after = slice(48, None)
    np.testing.assert_allclose(
        sig[:, after], amp[:, None] * np.sin(2 * np.pi * f0 * t[after] + phase[:, None]), atol=1e-12
    )
    last = sig[:, -240:]  # last 10 periods (steady)
    a, ph, f = st.extract_amp_phase(last, fs, f0)
    assert f == pytest.approx(f0)
    np.testing.assert_allclose(a, amp, rtol=1e-3)
    # FFT phase of sin(w t + phase) is phase - pi/2 (t from the window's first sample)
    t0 = t[-240]
    want = np.angle(np.exp(1j * (phase + 2 * np.pi * f0 * t0 - np.pi / 2)))
    np.testing.assert_allclose(np.angle(np.exp(1j * (ph - want))), 0, atol=1e-3)
    a0, _, _ = st.extract_amp_phase(last.T, fs, f0, dim=0)
    np.testing.assert_allclose(a0, a)


# --- geometry on the grid ----------------------------------------------------------------


def test_disc_and_ball_measure():
    d = st.make_disc((64, 64), (0, 0), 20)
    assert d.sum() == pytest.approx(np.pi * 20**2, rel=0.02)
    assert d[32, 32] and d[52, 32] and not d[53, 32]  # centre N // 2 + 1 (1-based)
    b = st.make_ball((48, 48, 48), (20, 24, 24), 12)
    assert b.sum() == pytest.approx(4 / 3 * np.pi * 12**3, rel=0.02)
    assert b[19, 23, 23] and b[31, 23, 23] and not b[32, 23, 23]
    with pytest.raises(ProblemError, match="center"):
        st.make_disc((10, 10), (11, 1), 2)


def test_circle_sphere_shells():
    c = st.make_circle((80, 80), (40, 41), 25)
    i, j = np.nonzero(c)
    r = np.hypot(i - 39, j - 40)
    assert np.all(np.abs(r - 25) <= 0.5) and c.sum() > 2 * np.pi * 25
    half = st.make_circle((80, 80), (40, 41), 25, arc_angle=np.pi)
    assert half.sum() == pytest.approx(c.sum() / 2, rel=0.05)
    s = st.make_sphere((40, 40, 40), 12)
    i, j, k = np.nonzero(s)
    assert np.all(np.abs(np.sqrt((i - 20) ** 2 + (j - 20) ** 2 + (k - 20) ** 2) - 12) <= 0.5)


def test_line_is_gapless_and_hits_endpoints():
    m = st.make_line((50, 50), (3, 5), (40, 20))
    pts = np.argwhere(m)
    assert m[2, 4] and m[39, 19] and len(pts) == 38  # one point per x step
    assert np.all(np.diff(pts[:, 0]) == 1) and np.all(np.abs(np.diff(pts[:, 1])) <= 1)
    a = st.make_line((50, 50), (10, 10), angle=np.pi / 2, length=20)
    assert np.array_equal(np.argwhere(a)[:, 1], np.arange(9, 30))


def test_bowl_and_arc_on_grid():
    b = st.make_bowl((64, 64, 64), (5, 32, 32), 40, 50, (60, 32, 32))
    pts = np.argwhere(b).astype(float)
    centre = np.array([4 + 40, 31, 31])  # 0-based apex + radius along +x
    r = np.linalg.norm(pts - centre, axis=1)
    assert np.all(np.abs(r - 40) <= 0.5)
    lateral = np.hypot(pts[:, 1] - 31, pts[:, 2] - 31)
    assert lateral.max() <= 25.5 and lateral.max() > 23
    assert b[4, 31, 31]
    a = st.make_arc((64, 64), (5, 32), 40, 50, (60, 32))
    pa = np.argwhere(a).astype(float)
    assert np.all(np.abs(np.linalg.norm(pa - [44, 31], axis=1) - 40) <= 0.5)
    assert np.abs(pa[:, 1] - 31).max() <= 25.5


# --- Cartesian point sets ----------------------------------------------------------------


def test_cart_circle_and_sphere():
    c = st.make_cart_circle(2e-3, 16, (1e-3, 0.0))
    assert c.shape == (2, 16)
    np.testing.assert_allclose(np.hypot(c[0] - 1e-3, c[1]), 2e-3)
    np.testing.assert_allclose(c.mean(axis=1), [1e-3, 0], atol=1e-12)  # evenly spaced
    s = st.make_cart_sphere(3e-3, 500, (0, 1e-3, 0))
    np.testing.assert_allclose(np.linalg.norm(s - [[0], [1e-3], [0]], axis=0), 3e-3)
    assert np.abs(s.mean(axis=1) - [0, 1e-3, 0]).max() < 3e-3 * 0.01


def test_cart_bowl_is_an_equal_area_cap():
    pos, focus = np.array([1e-3, -2e-3, 0.0]), np.array([1e-3, 28e-3, 0.0])
    b = st.make_cart_bowl(pos, 30e-3, 30e-3, focus, 4000)
    centre = pos + 30e-3 * np.array([0, 1, 0])
    np.testing.assert_allclose(np.linalg.norm(b - centre[:, None], axis=0), 30e-3, rtol=1e-12)
    lateral = np.hypot(b[0] - 1e-3, b[2])
    assert lateral.max() <= 15e-3 + 1e-12 and lateral.max() > 14.9e-3
    # equal area per point: points inside the cap of half the area ~ half of all
    h = 30e-3 * (1 - np.sqrt(1 - 0.25))  # depth of the full cap
    depth = b[1] - pos[1]
    assert np.mean(depth <= h / 2) == pytest.approx(0.5, abs=0.01)


def test_cart_disc_arc_rect():
    d = st.make_cart_disc((0, 0, 1e-3), 2e-3, (1.0, 0, 1e-3), 300)
    np.testing.assert_allclose(d[0], 0, atol=1e-15)  # normal along x
    assert np.hypot(d[1], d[2] - 1e-3).max() <= 2e-3
    assert np.mean(np.hypot(d[1], d[2] - 1e-3) < 2e-3 / np.sqrt(2)) == pytest.approx(0.5, abs=0.01)
    a = st.make_cart_arc((0, 0), 10e-3, 10e-3, (0, 1), 50)
    np.testing.assert_allclose(np.hypot(a[0], a[1] - 10e-3), 10e-3)
    assert np.abs(a[0]).max() <= 5e-3
    r = st.make_cart_rect((0, 0, 0), 4e-3, 2e-3, (0, 0, 90), 200)
    assert r.shape[1] >= 200
    assert np.abs(r[0]).max() <= 1e-3 + 1e-15 and np.abs(r[1]).max() <= 2e-3 + 1e-15


# --- KWaveArray ----------------------------------------------------------------------------


def test_on_grid_point_is_a_kronecker_delta():
    w = bli_weights(np.array([[2e-3], [-1e-3]]), np.array([1.0]), (16, 16), 1e-3, 0.05)
    assert np.count_nonzero(w) == 1 and w[10, 7] == 1.0


def test_star_stencil():
    s = star_stencil(3, 0.05)  # K = ceil(1 / (0.05 pi)) = 7
    assert np.abs(s).max() == 7 and np.all(np.abs(np.prod(s, axis=1)) <= 7)
    assert (0, 0, 7) in set(map(tuple, s)) and (2, 2, 2) not in set(map(tuple, s))


def test_bli_interpolates_band_limited_functions():
    """sum_i w_i f(x_i) = f(p) for f band-limited well below Nyquist (the sensor property)."""
    shape, dx = (96, 96), 1e-3
    rng = np.random.default_rng(1)
    pts = rng.uniform(-5e-3, 5e-3, (2, 20))
    x = (np.arange(96) - 48) * dx
    kx, ky, sigma = 0.3 * np.pi / dx, 0.2 * np.pi / dx, 5 * dx

    def f(x, y):
        return np.exp(-(x**2 + y**2) / (2 * sigma**2)) * np.cos(kx * x + 0.3) * np.cos(ky * y)

    field = f(x[:, None], x[None, :])
    errs = []
    for tol in (0.05, 0.001):
        err = 0.0
        for p in pts.T:
            w = bli_weights(p[:, None], np.array([1.0]), shape, dx, tol)
            err = max(err, abs(np.sum(w * field) - f(*p)))
        errs.append(err)
    assert errs[1] < 1e-4 and errs[0] < 3e-2 and errs[1] < errs[0] / 50


def test_element_weights_sum_to_its_measure():
    kgrid = st.KWaveGrid((64, 64, 64), 0.5e-3)
    ka = st.KWaveArray(bli_tolerance=0.01, upsampling_rate=4)
    ka.add_bowl_element((-12e-3, 0, 0), 15e-3, 12e-3, (5e-3, 0, 0))
    ka.add_disc_element((5e-3, 1e-3, 0), 4e-3, (5e-3, 1e-3, 1.0))
    for i, el in enumerate(ka.elements):
        w = ka.get_element_grid_weights(kgrid, i)
        assert w.sum() == pytest.approx(el.measure / 0.5e-3**2, rel=0.01)
    area = 2 * np.pi * 15e-3**2 * (1 - np.sqrt(1 - 0.4**2))
    assert ka.elements[0].measure == pytest.approx(area)


def test_distributed_signal_and_combined_data_follow_mask_order():
    kgrid = st.KWaveGrid((40, 40), 1e-3)
    ka = st.KWaveArray(bli_tolerance=0.05, upsampling_rate=5)
    ka.add_line_element((-10e-3, -5.3e-3), (8e-3, 6.1e-3))
    ka.add_arc_element((-12e-3, 0.2e-3), 15e-3, 10e-3, (5e-3, 0.2e-3))
    mask = ka.get_array_binary_mask(kgrid)
    sig = np.array([np.sin(np.arange(30) / 3), np.cos(np.arange(30) / 5)])
    dist = ka.get_distributed_source_signal(kgrid, sig)
    idx = mask_points(mask, kgrid.shape, "mask")  # the API's point order
    w = [ka.get_element_grid_weights(kgrid, i)[tuple(idx.T)] for i in range(2)]
    np.testing.assert_allclose(dist, w[0][:, None] * sig[0] + w[1][:, None] * sig[1])
    comb = ka.combine_sensor_data(kgrid, dist)
    m = [el.measure / 1e-3 for el in ka.elements]
    np.testing.assert_allclose(comb[0], (w[0] @ dist) / m[0])
    assert comb.shape == (2, 30)
    with pytest.raises(ProblemError, match="source_signal"):
        ka.get_distributed_source_signal(kgrid, sig[:1])


def test_array_rejects_bad_input():
    ka = st.KWaveArray()
    with pytest.raises(ProblemError, match="no elements"):
        ka.get_array_binary_mask(st.KWaveGrid((8, 8), 1e-3))
    with pytest.raises(ProblemError, match="diameters"):
        ka.add_bowl_element((0, 0, 0), 10e-3, 30e-3, (1, 0, 0))
    with pytest.raises(ProblemError, match="bli_tolerance"):
        st.KWaveArray(bli_tolerance=0)
    ka.add_disc_element((0, 0, 0), 2e-3, (0, 0, 1))
    with pytest.raises(ProblemError, match="2-D"):
        ka.add_arc_element((0, 0), 5e-3, 4e-3, (1, 0))
    with pytest.raises(ProblemError, match="equal spacing"):
        ka.get_array_binary_mask(st.KWaveGrid((8, 8, 8), (1e-3, 1e-3, 2e-3)))


def test_oneil_limits():
    """Focal gain k h, the far field of a flat-ish cap, annuli summing to the whole bowl."""
    r, d, u, f, c, rho = 64e-3, 64e-3, 0.04, 5e5, 1500.0, 1000.0
    k, h = 2 * np.pi * f / c, r - np.sqrt(r**2 - (d / 2) ** 2)
    z = np.array([10e-3, r, 2 * r, 300e-3])
    pa, pl, pc = st.focused_bowl_oneil(r, d, u, f, c, rho, z, np.array([0.0, 5e-3]))
    assert pa[1] == pytest.approx(rho * c * u * k * h, rel=1e-12) == pl[0]
    near = st.focused_bowl_oneil(r, d, u, f, c, rho, np.array([r * (1 + 1e-7)]))[0]
    assert near[0] == pytest.approx(pa[1], rel=1e-5)  # continuous through the focus
    rings = st.focused_annulus_oneil(r, [(0, 20e-3), (20e-3, d)], [u, u], [0.0, 0.0], f, c, rho, z)
    np.testing.assert_allclose(rings, pc, rtol=1e-12)
