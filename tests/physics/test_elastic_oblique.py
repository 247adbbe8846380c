"""Oblique incidence on a water-solid interface (solid c_p 3000, c_s 1800 m/s, rho 1900:
critical angles 30 and 56 deg) against the analytic fluid-solid coefficients, with
``benchmarks/elastic/elastic_oblique.py``'s single-mode CW method: the reflected pressure and the
transmitted compressional and shear waves; and the coefficients themselves against the boundary
conditions and the energy balance."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "elastic" / "elastic_oblique.py"


def _oblique():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("elastic_oblique", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


# both critical angles (c_s 1800 > c_1), only the compressional one (c_s 1000)
ANGLES = [d for d in np.arange(0.0, 89.5, 0.5) if min(abs(d - 30.0), abs(d - 56.44)) > 0.05]


@pytest.mark.parametrize("cs", [1800.0, 1000.0])
def test_closed_form_coefficients_satisfy_the_boundary_conditions(cs: float) -> None:
    ob = _oblique()
    for deg in ANGLES:
        theta = np.radians(deg)
        closed = np.array(ob.coefficients(theta, cs))
        direct = np.array(ob.boundary_solution(theta, cs))
        assert np.allclose(closed, direct, rtol=1e-10, atol=1e-12), deg


@pytest.mark.parametrize("cs", [1800.0, 1000.0])
def test_coefficients_conserve_the_normal_energy_flux(cs: float) -> None:
    ob = _oblique()
    for deg in ANGLES:
        theta = np.radians(deg)
        flux = ob.energy_fluxes(theta, cs, *ob.coefficients(theta, cs))
        assert abs(flux.sum() - 1) < 1e-12, deg
        assert np.all(flux >= 0)
    # beyond both critical angles nothing is transmitted: total reflection
    r, tp, ts = ob.coefficients(np.radians(70.0), 1800.0)
    assert abs(abs(r) - 1) < 1e-12 and abs(tp) > 0.1 and abs(ts) > 0.1  # evanescent only


def test_coefficients_limits() -> None:
    ob = _oblique()
    z1, zp = ob.R1 * ob.C1, ob.RHO2 * ob.CP
    r, tp, ts = ob.coefficients(0.0, 1800.0)  # normal incidence: impedances, no shear
    assert np.isclose(r, (zp - z1) / (zp + z1)) and np.isclose(tp, 2 * z1 / (zp + z1))
    assert ts == 0
    # a shear-free solid is a fluid: Rayleigh's fluid-fluid coefficient
    theta = np.radians(20.0)
    cost = np.sqrt(1 - (ob.CP / ob.C1 * np.sin(theta)) ** 2)
    za, zb = z1 / np.cos(theta), zp / cost
    assert np.isclose(ob.coefficients(theta, 0.0)[0], (zb - za) / (zb + za))


def test_transmitted_waves_at_oblique_incidence_coarse() -> None:
    """20 deg (both transmitted waves propagate) on a grid of twice the spacing (11 points per
    water wavelength): reflected, transmitted compressional and shear amplitudes within 2 %."""
    ob = _oblique()
    theta = np.radians(20.0)
    got = ob.measured(theta, 1, 1800.0, 0.5, (ob.C1, 0.0, ob.R1), 40.0, transmitted=True)
    ref = ob.coefficients(theta, 1800.0)
    for v, a in zip((got.r, got.tp, got.ts), ref):
        assert abs(abs(v) / abs(a) - 1) < 0.02
        assert abs(np.angle(v / a)) < 0.05
    assert got.back < 0.01


@pytest.mark.slow
@pytest.mark.parametrize(
    ("deg", "m", "periods", "tol"),
    # before the compressional critical angle; beyond both (total reflection: the run must
    # outlast the slow build-up near the leaky Rayleigh angle, about 64 deg); between them,
    # where the model is 3.1 % high on this grid (2.8 % with a PML of 100 points), an error of
    # first order in the grid spacing (the spectral derivatives across the tangential
    # velocity's slip, see docs/elastic.md and the test below)
    [(20.0, 1, 40.0, 0.01), (60.0, 3, 120.0, 0.01), (45.0, 3, 40.0, 0.04)],
)
def test_reflection_from_a_solid_at_oblique_incidence(
    deg: float, m: int, periods: float, tol: float
) -> None:
    ob = _oblique()
    theta = np.radians(deg)
    _, r = ob.simulated(theta, m, 1800.0, 1, (ob.C1, 0.0, ob.R1), periods)
    assert abs(abs(r) / abs(ob.analytic(theta, 1800.0)) - 1) < tol


@pytest.mark.slow
@pytest.mark.parametrize(("deg", "m", "tol_r"), [(25.0, 2, 0.01), (45.0, 3, 0.04)])
def test_transmitted_waves_at_oblique_incidence(deg: float, m: int, tol_r: float) -> None:
    """PML of 100 points. Before the compressional critical angle every coefficient within 1 %
    (measured 0.0, +0.1, -0.2 %); between the critical angles the transmitted shear wave within
    2 % (measured -0.7 %) and the reflection 2.8 % high (docs/elastic.md). The measured
    coefficients balance the energy flux within 0.5 % (what the reflection gains, the shear
    wave loses)."""
    ob = _oblique()
    theta = np.radians(deg)
    got = ob.measured(theta, m, 1800.0, 1, (ob.C1, 0.0, ob.R1), 40.0, True, pml=100)
    r, tp, ts = ob.coefficients(theta, 1800.0)
    assert abs(abs(got.r) / abs(r) - 1) < tol_r
    assert abs(abs(got.ts) / abs(ts) - 1) < 0.02
    if deg < 30:
        assert abs(abs(got.tp) / abs(tp) - 1) < 0.01
    assert abs(ob.energy_fluxes(theta, 1800.0, got.r, got.tp, got.ts).sum() - 1) < 5e-3
    assert got.back < 0.01


@pytest.mark.slow
@pytest.mark.parametrize(("deg", "m"), [(45.0, 3), (50.0, 3)])
def test_reflection_between_the_critical_angles_converges_with_the_grid(deg: float, m: int) -> None:
    """Between the critical angles the reflection is high by an error of first order in the
    grid spacing: halving the spacing (11 -> 22 points per water wavelength, the same physical
    problem and PML) about halves it (measured 45 deg: +5.1 -> +2.8 %, 50 deg: +8.9 -> +4.6 %;
    at 0.05 mm +1.7 %, docs/elastic.md)."""
    ob = _oblique()
    theta = np.radians(deg)
    ref = abs(ob.analytic(theta, 1800.0))
    err = [abs(ob.measured(theta, m, 1800.0, sc, (ob.C1, 0.0, ob.R1), 40.0, pml=100).r) / ref - 1
           for sc in (0.5, 1.0)]  # fmt: skip
    assert 0 < err[1] < 0.6 * err[0]
    assert err[1] < 0.05


def _modes():  # type: ignore[no-untyped-def]
    path = BENCH.parent / "elastic_interface_modes.py"
    spec = importlib.util.spec_from_file_location("elastic_interface_modes", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_frequency_domain_scheme_has_the_model_derivatives_and_reproduces_its_reflection() -> None:
    """``benchmarks/elastic/elastic_interface_modes.py``'s matrices are the model's staggered
    Fourier derivatives (to round-off), its fluid-fluid interface gives Rayleigh's coefficient
    within 0.3 %, and its water-solid reflection is the time-domain model's at 45 deg (+2.8 %,
    0.99 MHz, docs/elastic.md) within 0.2 %, first order in the spacing."""
    import jax

    from sonotile.spectral.operators import FourierOps

    fd = _modes()
    n, dx = 48, 1e-4
    f = np.random.default_rng(3).standard_normal((n, 4))
    with jax.enable_x64(True):
        ops = FourierOps.build((n, 4), (dx, dx), 1500.0, 1e-8, "float64", fft="xla")
        got = [np.asarray(d) for d in ops.diffs(jax.numpy.asarray(f), [(0, 1), (0, -1)])]
    for d, shift in zip(got, (1, -1)):
        want = fd.staggered_diff(n, dx, shift) @ f
        assert np.abs(d - want).max() < 1e-9 * np.abs(d).max()
    ob = _oblique()
    theta = np.radians(20.0)
    fluid = fd.reflection(theta, cs=0.0)
    assert abs(abs(fluid) / abs(ob.analytic(theta, 0.0)) - 1) < 3e-3
    theta = np.radians(45.0)
    err = [abs(fd.reflection(theta, sc=sc, freq=0.99e6)) / abs(ob.analytic(theta, 1800.0)) - 1
           for sc in (1.0, 2.0)]  # fmt: skip
    assert abs(err[0] - 0.028) < 2e-3
    assert 0.4 < err[1] / err[0] < 0.6
