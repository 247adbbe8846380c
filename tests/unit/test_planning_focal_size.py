"""The -6 dB focal length and widths of a plan's beams: on fields whose answer is known (an
anisotropic Gaussian focus off the grid points, and a focused bowl's on-axis pressure by
O'Neil's formula), sampled as coarsely as a plan's grid samples its beam."""

from __future__ import annotations

import numpy as np

from sonotile.planning.acoustics import focal_size, half_width


def oneil_on_axis(z: np.ndarray, radius: float, aperture: float, wavelength: float) -> np.ndarray:
    """O'Neil's on-axis pressure amplitude of a focused bowl, relative to the surface pressure
    (z from the bowl's apex, the same units throughout)."""
    a, k = aperture / 2, 2 * np.pi / wavelength
    h = radius - np.sqrt(radius**2 - a**2)
    return np.abs(2 / (1 - z / radius) * np.sin(k / 2 * (np.sqrt((z - h) ** 2 + a**2) - z)))


def _fwhm_fine(z: np.ndarray, p: np.ndarray) -> float:
    """The -6 dB width of a finely sampled profile about its maximum (reference)."""
    i = int(np.argmax(p))
    lo = i - np.argmax(p[i::-1] < p[i] / 2)
    hi = i + np.argmax(p[i:] < p[i] / 2)
    return float(z[hi] - z[lo])


def test_gaussian_focus_widths_from_coarse_samples():
    fwhm = np.array([3.1, 4.4, 11.0])  # mm across, across, along the beam
    sigma = fwhm / (2 * np.sqrt(2 * np.log(2)))
    dx = 1.0  # mm: 3 to 11 points across the focus
    centre = np.array([20.37, 19.81, 30.55])  # off the grid points
    ijk = np.indices((41, 40, 62), dtype=np.float64) * dx
    r2 = sum(((ijk[a] - centre[a]) / sigma[a]) ** 2 for a in range(3))
    p = 2e6 * np.exp(-r2 / 2)
    i = tuple(int(v) for v in np.unravel_index(np.argmax(p), p.shape))
    length, (w0, w1) = focal_size(p, i, dx)
    assert length is not None and w0 is not None and w1 is not None
    np.testing.assert_allclose([w0, w1, length], fwhm, rtol=1e-6)  # exact for a Gaussian
    # a voxel count would be off by up to a voxel either side
    assert abs(np.count_nonzero(p[:, i[1], i[2]] >= p.max() / 2) * dx - fwhm[0]) > 0.05


def test_bowl_on_axis_length_against_oneil():
    radius, aperture, wavelength = 50.0, 50.0, 1500 / 500e3 * 1e3  # mm, 500 kHz in water
    fine = np.arange(30.0, 80.0, 0.001) + 0.0005  # never exactly at the focus
    reference = _fwhm_fine(fine, oneil_on_axis(fine, radius, aperture, wavelength))
    assert 18.0 < reference < 30.0  # about 7 wavelengths at F-number 1 (21 mm), paraxially
    for dx in (0.5, 1.0):  # 6 and 3 points per wavelength
        z = np.arange(30.0, 80.0, dx) + 0.23 * dx
        p = oneil_on_axis(z, radius, aperture, wavelength)
        width = half_width(p, int(np.argmax(p)))
        assert width is not None
        np.testing.assert_allclose(width * dx, reference, rtol=0.01)


def test_profile_that_does_not_fall_to_half_has_no_width():
    p = np.array([0.9, 0.95, 1.0, 0.8, 0.3])
    assert half_width(p, 2) is None
    w = half_width(p[::-1], 2)
    assert w is None
    p3 = np.ones((5, 5, 5))
    assert focal_size(p3, (2, 2, 2), 1.0) == (None, (None, None))
