"""3-D against 2-D: fields that do not vary along z (plane strain) evolve in the 3-D model as in
the 2-D one (k-Wave's pstdElastic3D_compare_with_pstdElastic2D), with velocity and shear-stress
sources, heterogeneous solid and fluid, Kelvin-Voigt absorption and the PML."""

from __future__ import annotations

import numpy as np

import sonotile as st

NX, NY, NZ, DX = 24, 28, 2, 1e-4


def test_plane_strain_3d_equals_2d():
    rng = np.random.default_rng(3)
    cp = 2400 + 300 * rng.random((NX, NY))
    cs = 1100 + 100 * rng.random((NX, NY))
    cs[:, :8] = 0.0  # fluid
    rho = 1500 + 500 * rng.random((NX, NY))
    kgrid2 = st.KWaveGrid((NX, NY), DX, dt=0.2 * DX / 2700, nt=128)  # two chunks of 64 steps
    kgrid3 = st.KWaveGrid((NX, NY, NZ), DX, dt=kgrid2.dt, nt=kgrid2.nt)
    t = kgrid2.t
    sig = np.sin(2 * np.pi * 1e6 * t) * np.hanning(len(t))
    mask2 = np.zeros((NX, NY), bool)
    mask2[12, 12:15] = True
    mask3 = np.repeat(mask2[:, :, None], NZ, axis=2)
    n3 = int(mask3.sum())

    def ext(f):  # a 2-D field or per-point signals as the 3-D run's
        return np.repeat(f[:, :, None], NZ, axis=2)

    src2 = st.ElasticSource(ux=sig * 1e-3, uy=-sig * 5e-4, u_mask=mask2, sxy=sig * 1e3,
                            s_mask=mask2)  # fmt: skip
    # additive stress sources are scaled by 1 / ndim: 3/2 gives the 3-D run the same sxy
    src3 = st.ElasticSource(ux=sig * 1e-3, uy=-sig * 5e-4, u_mask=mask3,
                            sxy=np.tile(1.5 * sig * 1e3, (n3, 1)), s_mask=mask3)  # fmt: skip
    sens2 = np.zeros((NX, NY), bool)
    sens2[6:20:3, 18] = True
    rec = ("u", "s", "u_final")
    m2 = st.KWaveElasticMedium(cp, cs, rho, 1.0, 3.0)
    m3 = st.KWaveElasticMedium(ext(cp), ext(cs), ext(rho), 1.0, 3.0)
    out2 = st.pstd_elastic_2d(kgrid2, m2, src2, st.KSensor(mask=sens2, record=rec),
                              pml_size=8, dtype="float64")  # fmt: skip
    out3 = st.pstd_elastic_3d(kgrid3, m3, src3, st.KSensor(mask=ext(sens2), record=rec),
                              pml_size=(8, 8, 0), dtype="float64")  # fmt: skip
    n2 = int(sens2.sum())
    for q in ("ux", "uy", "sxx", "syy", "sxy"):
        a, b = out2[q], out3[q][:n2]  # the z = 0 plane comes first (k-Wave's order)
        assert np.max(np.abs(b - a)) <= 1e-10 * np.max(np.abs(a)), q
    assert np.max(np.abs(out3["uz"])) <= 1e-12 * np.max(np.abs(out3["ux"]))
    assert np.allclose(
        out3["ux_final"][..., 1],
        out2["ux_final"],
        rtol=0,
        atol=1e-10 * np.abs(out2["ux_final"]).max(),
    )
