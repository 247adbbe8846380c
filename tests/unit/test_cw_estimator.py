"""The single-bin DFT of ``p_cw`` reads a steady tone exactly from any window."""

import numpy as np
import pytest

from sonotile.solver.sensors import CwWindow, cw_amp_phase


def _sums(p: np.ndarray, theta: float) -> tuple[float, float]:
    n = np.arange(p.size)
    return float(np.sum(p * np.cos(theta * n))), float(np.sum(-p * np.sin(theta * n)))


@pytest.mark.parametrize("steps, cycles", [(37, 0.0731), (60, 1 / 20), (91, 0.0333), (25, 0.11)])
def test_tone_read_exactly_from_any_window(steps, cycles):
    theta, n = 2 * np.pi * cycles, np.arange(steps)
    for amp, phase in ((1.3, 0.7), (2e5, -2.9), (0.01, 3.1)):
        re, im = _sums(amp * np.cos(theta * n + phase), theta)
        a, ph = cw_amp_phase(np.array(re), np.array(im), CwWindow(0, steps, cycles), np)
        assert a == pytest.approx(amp, rel=1e-12)
        assert np.angle(np.exp(1j * (ph - phase))) == pytest.approx(0, abs=1e-12)


def test_estimate_is_linear_in_the_complex_amplitude():
    # a quarter-period shift of the tone multiplies its phasor by i (1.37 periods in the window)
    steps, cycles = 41, 1.37 / 41
    theta, n = 2 * np.pi * cycles, np.arange(steps)
    w = CwWindow(0, steps, cycles)
    a0, p0 = cw_amp_phase(*map(np.array, _sums(np.cos(theta * n + 0.4), theta)), w, np)
    a1, p1 = cw_amp_phase(*map(np.array, _sums(np.cos(theta * n + 0.4 + np.pi / 2), theta)), w, np)
    assert a1 * np.exp(1j * p1) == pytest.approx(1j * a0 * np.exp(1j * p0), abs=1e-12)
