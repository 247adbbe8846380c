"""The elastic model with no shear is the fluid model: against sonotile's acoustic model on a
lossless heterogeneous case (k-Wave's pstdElastic2D_compare_with_kspaceFirstOrder2D)."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.model import filters
from sonotile.spectral import operators

NX, NY, DX = 48, 64, 1e-4
CP, RHO = 1500.0, 1000.0


def _case(dtype: str, smooth: bool = False):
    c = np.full((NX, NY), CP)
    c[NX // 2 :, :] = 2 * CP
    rho = np.full((NX, NY), RHO)
    rho[:, NY // 2 :] = 1.5 * RHO
    kgrid = st.KWaveGrid((NX, NY), DX)
    kgrid.make_time(2 * CP, cfl=0.1, t_end=3e-6)
    p0 = 5.0 * st.make_disc((NX, NY), (14, NY // 2), 4)
    if smooth:
        p0 = filters.smooth(p0, restore_max=True)
    mask = np.zeros((NX, NY), bool)
    mask[3 * NX // 4, 3 * NY // 4] = mask[NX // 4, NY // 4] = True
    sensor = st.KSensor(mask=mask, record=("p", "u", "p_final"))
    elastic = st.pstd_elastic_2d(
        kgrid, st.KWaveElasticMedium(c, 0.0, rho), st.ElasticSource(p0=p0), sensor,
        pml_size=0, dtype=dtype, smooth_p0=False,
    )  # fmt: skip
    fluid = st.simulate(
        kgrid, st.KWaveMedium(c, rho), st.KSource(p0=p0), sensor, pml_size=0,
        smooth_p0=False, dtype=dtype, quiet=True,
    )  # fmt: skip
    return elastic, fluid


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    """Relative L-inf difference from the second recorded step on (k-Wave's comparison: the
    elastic p0 enters over two steps, so the first sample is half of it)."""
    return float(np.max(np.abs(a[:, 1:] - b[:, 1:])) / np.max(np.abs(b[:, 1:])))


def test_no_shear_equals_fluid_without_kspace_correction(monkeypatch):
    # the acoustic step with kappa = 1: the same equations and time stepping
    monkeypatch.setattr(operators, "kappa_of", lambda kmag, c, dt: np.ones_like(kmag))
    elastic, fluid = _case("float64")
    for q in ("p", "ux", "uy"):
        assert _rel(elastic[q], fluid[q]) < 1e-10, q
    ref = np.abs(fluid["p_final"]).max()
    assert np.abs(elastic["p_final"] - fluid["p_final"]).max() < 1e-10 * ref


def test_no_shear_close_to_fluid_with_kspace_correction():
    # sonotile's acoustic step is exact in time for a homogeneous medium (kappa); the elastic
    # step's leapfrog is second order: the two differ by its dispersion, 0.4 % here (a smooth
    # p0; the sharp disc's near-Nyquist content makes it about 11 %)
    elastic, fluid = _case("float32", smooth=True)
    d = _rel(elastic["p"], fluid["p"])
    assert 1e-4 < d < 1e-2


@pytest.mark.parametrize(
    ("kind", "mode"),
    [("p", "additive"), ("p", "dirichlet"), ("ux", "additive"), ("ux", "dirichlet"),
     ("uy", "additive"), ("uy", "dirichlet")],
)  # fmt: skip
def test_sources_with_no_shear_equal_fluid_sources(monkeypatch, kind, mode):
    """A stress source ``sxx = syy = -p`` is a pressure source, a velocity source the fluid's
    (k-Wave's scaling; the fluid's additive sources without their k-space filter, as k-Wave's
    comparison runs them with UsekSpace false)."""
    monkeypatch.setattr(operators, "kappa_of", lambda kmag, c, dt: np.ones_like(kmag))
    nx, ny = 32, 40
    c = np.full((nx, ny), CP)
    c[nx // 2 :, :] = 2 * CP
    kgrid = st.KWaveGrid((nx, ny), DX)
    kgrid.make_time(2 * CP, cfl=0.1, t_end=1.5e-6)
    sig = 5 * np.sin(2 * np.pi * 1e6 * kgrid.t)
    mask = np.zeros((nx, ny), bool)
    mask[10, ny // 2] = True
    sensor = st.KSensor(mask=np.roll(mask, (12, 5), (0, 1)), record=("p", "u"))
    fluid_mode = "additive-no-correction" if mode == "additive" else mode
    if kind == "p":
        es = st.ElasticSource(sxx=-sig, syy=-sig, s_mask=mask, s_mode=mode)
        fs = st.KSource(p=sig, p_mask=mask, p_mode=fluid_mode)
    else:
        u = {kind: sig / (CP * RHO)}
        es = st.ElasticSource(u_mask=mask, u_mode=mode, **u)
        fs = st.KSource(u_mask=mask, u_mode=fluid_mode, **u)
    medium = st.KWaveElasticMedium(c, 0.0, RHO)
    elastic = st.pstd_elastic_2d(kgrid, medium, es, sensor, pml_size=0, dtype="float64")
    fluid = st.simulate(kgrid, st.KWaveMedium(c, RHO), fs, sensor, pml_size=0, dtype="float64",
                        quiet=True)  # fmt: skip
    for q in ("p", "ux", "uy"):
        assert _rel(elastic[q], fluid[q]) < 1e-9, q
