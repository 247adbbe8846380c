"""A point force in an unbounded homogeneous solid against the analytic elastodynamic Green's
function (2-D plane strain and 3-D), at the source's centre frequency: every velocity component
at receivers in several directions, in the near and intermediate field."""

from __future__ import annotations

import jax
import numpy as np
from scipy.special import hankel1

import sonotile as st

N, DX = 128, 1e-4
CP, CS, RHO = 2000.0, 1000.0, 1500.0
F0 = 1e6


def green(i: int, j: int, rx: float, ry: float, w: float) -> complex:
    """Displacement along i per unit line force along j [m / (N/m)], time factor e^{-i w t}:
    ``G = (k_s^2 g_s I + grad grad (g_s - g_p)) / (rho w^2)``, ``g = (i/4) H0(k r)``."""
    r = np.hypot(rx, ry)
    n = np.array([rx, ry]) / r
    d = float(i == j)

    def ddg(k: float) -> complex:  # d_i d_j of (i/4) H0(k r)
        h0, h1 = hankel1(0, k * r), hankel1(1, k * r)
        return 0.25j * (-k * h1 / r * (d - n[i] * n[j]) - k**2 * (h0 - h1 / (k * r)) * n[i] * n[j])

    ks, kp = w / CS, w / CP
    return (ks**2 * 0.25j * hankel1(0, ks * r) * d + ddg(ks) - ddg(kp)) / (RHO * w**2)


def test_point_force_matches_greens_function():
    dt = 0.3 * DX / CP
    nt = 640
    t = np.arange(nt) * dt
    sig = np.exp(-(((t - 3 / F0) * F0 * 1.2) ** 2)) * np.sin(2 * np.pi * F0 * (t - 3 / F0))
    s = (N // 2, N // 2)
    mask = np.zeros((N, N), bool)
    mask[s] = True
    offsets = [(20, 0), (0, 20), (14, 14), (-9, 17)]
    sens = np.zeros((N, N), bool)
    for o in offsets:
        sens[s[0] + o[0], s[1] + o[1]] = True
    with jax.enable_x64(True):
        out = st.pstd_elastic_2d(
            st.KWaveGrid((N, N), DX, dt=dt, nt=nt), st.KWaveElasticMedium(CP, CS, RHO),
            st.ElasticSource(ux=sig, u_mask=mask), st.KSensor(mask=sens, record=("u",)),
            dtype="float64",
        )  # fmt: skip
    pts = np.stack(np.unravel_index(np.flatnonzero(sens.ravel(order="F")), sens.shape, "F"), 1)
    w = 2 * np.pi * F0
    force = 2 * RHO * CP * DX  # line force [N/m] per unit signal: k-Wave's additive scaling
    spectrum = np.sum(sig * np.exp(1j * w * t)) * dt
    for row, p in enumerate(pts):
        rx, ry = (p - np.array(s)) * DX
        for i, name in enumerate(("ux", "uy")):
            # u_x sits where the force does (x + dx/2); u_y at (x, y + dy/2); velocity of step n
            # at time (n + 1/2) dt
            dx_, dy_ = (0.0, 0.0) if i == 0 else (-DX / 2, DX / 2)
            sim = np.sum(out[name][row] * np.exp(1j * w * (t + dt / 2))) * dt
            ref = -1j * w * green(i, 0, rx + dx_, ry + dy_, w) * force * spectrum
            if abs(ref) < 0.05 * abs(green(0, 0, rx, ry, w) * w * force * spectrum):
                continue  # a node of this component (on an axis)
            assert abs(abs(sim / ref) - 1) < 5e-3, (p, name, abs(sim / ref))
            assert abs(np.angle(sim / ref)) < 0.01, (p, name, np.angle(sim / ref))


def green3(i: int, j: int, r_vec: np.ndarray, w: float) -> complex:
    """The 3-D form: ``g = exp(i k r) / (4 pi r)`` [m / N per unit force along j]."""
    r = float(np.linalg.norm(r_vec))
    n = r_vec / r
    d = float(i == j)

    def ddg(k: float) -> complex:  # d_i d_j g(r) = g'' n_i n_j + g'/r (delta_ij - n_i n_j)
        g = np.exp(1j * k * r) / (4 * np.pi * r)
        g1 = (1j * k - 1 / r) * g
        g2 = ((1j * k - 1 / r) ** 2 + 1 / r**2) * g
        return g2 * n[i] * n[j] + g1 / r * (d - n[i] * n[j])

    ks, kp = w / CS, w / CP
    gs = np.exp(1j * ks * r) / (4 * np.pi * r)
    return (ks**2 * gs * d + ddg(ks) - ddg(kp)) / (RHO * w**2)


def test_point_force_matches_greens_function_3d():
    n = 48
    dt = 0.3 * DX / CP
    nt = 384
    t = np.arange(nt) * dt
    sig = np.exp(-(((t - 2.5 / F0) * F0 * 1.2) ** 2)) * np.sin(2 * np.pi * F0 * (t - 2.5 / F0))
    s = np.array((n // 2,) * 3)
    mask = np.zeros((n,) * 3, bool)
    mask[tuple(s)] = True
    sens = np.zeros((n,) * 3, bool)
    for o in [(6, 6, 2), (-5, 4, 7), (3, -7, 5), (7, 2, -6)]:  # 1-1.2 shear wavelengths
        sens[tuple(s + o)] = True
    with jax.enable_x64(True):
        out = st.pstd_elastic_3d(
            st.KWaveGrid((n,) * 3, DX, dt=dt, nt=nt), st.KWaveElasticMedium(CP, CS, RHO),
            st.ElasticSource(ux=sig, u_mask=mask), st.KSensor(mask=sens, record=("u",)),
            pml_size=8, dtype="float64",
        )  # fmt: skip
    pts = np.stack(np.unravel_index(np.flatnonzero(sens.ravel(order="F")), sens.shape, "F"), 1)
    w = 2 * np.pi * F0
    force = 2 * RHO * CP * DX**2  # point force [N] per unit signal: k-Wave's additive scaling
    spectrum = np.sum(sig * np.exp(1j * w * t)) * dt
    for row, p in enumerate(pts):
        for i, name in enumerate(("ux", "uy", "uz")):
            shift = np.zeros(3)  # u_i at x_i + d/2, the force at x + dx/2
            shift[0] -= DX / 2
            shift[i] += DX / 2
            sim = np.sum(out[name][row] * np.exp(1j * w * (t + dt / 2))) * dt
            ref = -1j * w * green3(i, 0, (p - s) * DX + shift, w) * force * spectrum
            assert abs(abs(sim / ref) - 1) < 5e-3, (p, name, abs(sim / ref))
            assert abs(np.angle(sim / ref)) < 0.01, (p, name, np.angle(sim / ref))
