"""A compressional pulse in water meeting a solid (bone-like) half-space at normal incidence:
reflected pressure and transmitted normal stress against the impedance coefficients."""

from __future__ import annotations

import jax
import numpy as np

import sonotile as st

NX, NY, DX = 320, 4, 1e-4
C1, R1 = 1500.0, 1000.0  # water
CP, CS, R2 = 2800.0, 1400.0, 1850.0  # cortical bone
XI = 170  # first solid plane


def test_normal_incidence_reflection_and_transmission():
    cp, cs, rho = np.full((NX, NY), C1), np.zeros((NX, NY)), np.full((NX, NY), R1)
    cp[XI:], cs[XI:], rho[XI:] = CP, CS, R2
    x = np.arange(NX)
    p0 = np.repeat(np.exp(-(((x - 100) / 3.0) ** 2))[:, None], NY, 1)  # a plane pulse
    dt = 0.1 * DX / CP
    sens = np.zeros((NX, NY), bool)
    sens[130, 0] = sens[220, 0] = True  # in the water, in the solid
    with jax.enable_x64(True):
        out = st.pstd_elastic_2d(
            st.KWaveGrid((NX, NY), DX, dt=dt, nt=2048), st.KWaveElasticMedium(cp, cs, rho),
            st.ElasticSource(p0=p0), st.KSensor(mask=sens, record=("p", "s")),
            pml_size=(30, 0), dtype="float64",
        )  # fmt: skip
    half = int(10 * DX / C1 / dt)

    def peak(sig: np.ndarray, t: float) -> float:
        w = sig[int(t / dt) - half : int(t / dt) + half]
        return float(w[np.argmax(np.abs(w))])

    incident = peak(out["p"][0], 30 * DX / C1)
    reflected = peak(out["p"][0], 110 * DX / C1)
    transmitted = peak(-out["sxx"][1], 70 * DX / C1 + 50 * DX / CP)  # -sigma_xx
    z1, z2 = R1 * C1, R2 * CP
    assert abs(reflected / incident / ((z2 - z1) / (z2 + z1)) - 1) < 0.01
    assert abs(transmitted / incident / (2 * z2 / (z1 + z2)) - 1) < 0.01
