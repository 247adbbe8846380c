"""Physics of the solver against analytic solutions.

Each test builds a solver-ready :class:`~sonotile.model.problem.Problem` directly (no k-Wave scaling
layer), runs it in float64 and compares what the sensors record with a closed-form solution:

* 3-D lossless initial-value problem vs the exact spherical wave of a Gaussian p0;
* power-law absorption ``alpha0 omega^y`` and Kramers-Kronig dispersion (y = 1.1, 1.5, 1.9),
  and a check that switching the dispersion term off makes the dispersion check fail;
* nonlinear plane wave (B/A) vs the Fubini solution before the shock;
* PML reflection at normal (1-D, 3-D) and 45 degree (2-D) incidence vs a reference run on a
  grid so large that no reflection arrives;
* exact time stepping (k-space correction) in a lossless periodic box for any time step.

float64 is switched on for this module only (and restored afterwards) so that other test
modules keep JAX's default.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sonotile.model.grid import Grid
from sonotile.model.problem import MaskSource, Medium, Pml, Problem, Sensor, Sources
from sonotile.solver.runner import run

C0 = 1500.0  # sound speed [m/s]
RHO0 = 1000.0  # density [kg/m^3]


@pytest.fixture(autouse=True, scope="module")
def _float64(jax_float64):
    """64-bit JAX types for these tests only."""


def _run_p(problem: Problem) -> np.ndarray:
    """Run and return the recorded pressure ``(Ts, Ns)``, checking it really is float64."""
    raw, _ = run(problem, progress=False)
    p = raw["p"]
    assert p.dtype == np.float64, "float64 run fell back to float32 (jax_enable_x64 off?)"
    return p


def _mesh(shape: tuple[int, ...]) -> list[np.ndarray]:
    return np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")


# ---------------------------------------------------------------------------------------------
# 1. 3-D homogeneous lossless IVP vs the exact spherical wave
# ---------------------------------------------------------------------------------------------


def test_3d_ivp_matches_exact_spherical_wave():
    """A radially symmetric p0 = f(r) in 3-D evolves as
    ``p(r, t) = [(r - ct) f(r - ct) + (r + ct) f(r + ct)] / (2 r)`` (f extended evenly).

    The k-space scheme is exact in time for a homogeneous lossless medium (kappa correction,
    and k-Wave's start ``u(-dt/2) = dt/(2 rho0) grad p0`` is the exact velocity), and spectral
    in space, so the only errors are the sampling of the Gaussian (sigma = 2 dx: spectrum
    ~3e-9 at Nyquist) and the PML. Sensors lie on an axis, a face and a body diagonal; the run
    stops before anything reflected from the PML (10 points) can come back (the Gaussian is
    < e^-32 where that could happen).

    Tolerance: the issue asks for <= 1e-3 (expect ~1e-5); measured ~4e-9 per sensor, so we
    assert 1e-6 relative to each sensor's own peak.
    """
    n, dx = 64, 1e-4
    sigma = 2.0 * dx
    dt = 0.3 * dx / C0
    ctr = n // 2
    idx = (
        [(ctr + k, ctr, ctr) for k in range(1, 11)]
        + [(ctr - k, ctr + k, ctr) for k in range(1, 8)]
        + [(ctr + k, ctr - k, ctr + k) for k in range(1, 6)]
    )
    idx = np.array(idx)
    r = np.linalg.norm((idx - ctr) * dx, axis=1)
    nt = int(round((r.max() + 4 * sigma) / (C0 * dt))) + 1  # peak passes every sensor by 4 sigma
    grid = Grid((n, n, n), (dx, dx, dx), dt, nt)

    def f(s):
        return np.exp(-(s**2) / (2 * sigma**2))

    rr = dx * np.sqrt(sum((x - ctr) ** 2 for x in _mesh(grid.shape)))
    problem = Problem(
        grid,
        Medium(c0=C0, rho0=RHO0, grid=grid),
        Sources(p0=f(rr)),
        Sensor(index=idx),
        pml=Pml.default(3),
        dtype="float64",
    )
    p = _run_p(problem)
    ct = C0 * dt * np.arange(nt)[:, None]
    exact = ((r - ct) * f(r - ct) + (r + ct) * f(r + ct)) / (2 * r)
    err = np.abs(p - exact).max(axis=0) / np.abs(exact).max(axis=0)
    assert err.max() <= 1e-6, f"relative error per sensor {err} (worst {err.max():.2e})"


# ---------------------------------------------------------------------------------------------
# 2. Power-law absorption and dispersion
# ---------------------------------------------------------------------------------------------


def _alpha0_np(alpha_coeff: float, y: float) -> float:
    """dB/(MHz^y cm) -> Np/((rad/s)^y m)."""
    return 100.0 * alpha_coeff * (1e-6 / (2 * math.pi)) ** y / (20 * math.log10(math.e))


def _kk_speed(omega: float, alpha_coeff: float, y: float) -> float:
    """Kramers-Kronig (Szabo) phase speed of k-Wave's model, c0 being the speed at omega -> 0:
    ``1/c(w) = 1/c0 + alpha0 tan(pi y / 2) w^(y-1)`` (the reference term w0^(y-1) vanishes for
    y > 1, which is what k-Wave's ``eta = 2 alpha0 c0^y tan(pi y/2)`` term implies)."""
    a0 = _alpha0_np(alpha_coeff, y)
    return 1.0 / (1.0 / C0 + a0 * math.tan(math.pi * y / 2) * omega ** (y - 1))


FREQS = (1e6, 2e6, 3e6)  # measurement frequencies [Hz]


def _absorption_run(y: float, alpha_coeff: float, steps_per_dx: int, dispersion: bool = True):
    """1-D pulse past two sensors 20 points apart; returns per frequency (alpha [Np/m],
    phase speed [m/s]) from the transfer function between the sensors.

    The pulse is a Ricker wavelet (zero mean and zero first moment) so that the non-local
    fractional-Laplacian terms leave no slowly decaying field around the left-going half, and
    with no content near Nyquist. Sensor 2's record is shifted by exactly (separation) / c0 so both
    records are cut at the same delay behind their pulse (the causal tails are truncated
    alike).
    """
    n, dx = 256, 1e-4
    dt = dx / C0 / steps_per_dx
    lead, sep, tail, sig = 15, 20, 30, 2.0  # [points]
    xs = n // 2 - 20
    x1, x2 = xs + lead, xs + lead + sep
    shift = sep * steps_per_dx  # steps for c0 to cross the sensor separation
    nt = (lead + sep + tail) * steps_per_dx
    grid = Grid((n,), (dx,), dt, nt)
    s2 = ((np.arange(n) - xs) / sig) ** 2
    medium = Medium(
        c0=C0,
        rho0=RHO0,
        grid=grid,
        alpha_coeff=alpha_coeff,
        alpha_power=y,
        absorption="power_law",
        dispersion=dispersion,
    )
    problem = Problem(
        grid,
        medium,
        Sources(p0=(1 - s2) * np.exp(-s2 / 2)),
        Sensor(index=np.array([[x1], [x2]])),
        pml=Pml.default(1),
        dtype="float64",
    )
    p = _run_p(problem)
    m = nt - shift
    steps = np.arange(m)
    dist = sep * dx
    out = []
    for f in FREQS:
        w = 2 * math.pi * f
        e = np.exp(-1j * w * dt * steps)
        # H = P2 / P1 with P2 taken from a window starting dist/c0 later: the c0 delay is removed.
        h = (p[shift:, 1] * e).sum() / (p[:m, 0] * e).sum()
        alpha = -math.log(abs(h)) / dist
        speed = 1.0 / (1.0 / C0 - np.angle(h) / (w * dist))
        out.append((alpha, speed))
    return out


# (y, alpha_coeff [dB/(MHz^y cm)], time steps per dx / c0)
ABSORPTION_CASES = [(1.1, 0.05, 133), (1.5, 0.1, 222), (1.9, 0.03, 1000)]


def _dispersion_error(y: float, alpha_coeff: float, res) -> float:
    """Relative error of the measured c(3 MHz) - c(1 MHz) against Kramers-Kronig."""
    w1, w2 = 2 * math.pi * FREQS[0], 2 * math.pi * FREQS[-1]
    predicted = _kk_speed(w2, alpha_coeff, y) - _kk_speed(w1, alpha_coeff, y)
    measured = res[-1][1] - res[0][1]
    return measured / predicted - 1.0


@pytest.mark.parametrize(("y", "alpha_coeff", "steps_per_dx"), ABSORPTION_CASES)
def test_power_law_absorption_and_dispersion(y, alpha_coeff, steps_per_dx):
    """Attenuation between two sensors follows ``alpha0 f^y`` (alpha [Np/m] =
    ``100 alpha_coeff (f/1 MHz)^y / (20 log10 e)``) within 1 %, and the change of phase speed
    between 1 and 3 MHz follows Kramers-Kronig (``_kk_speed``) within 2 %; so does each
    ``c(f) - c0`` (c0 is the omega -> 0 speed of k-Wave's model for y > 1).

    Both analytic laws are first order in alpha/k, and the discrete scheme adds its own
    dispersion; the parameters keep both well inside the tolerances (computed from the exact
    discrete dispersion relation of the scheme, which the solver matches to <~1e-3):

    * model: relative deviations O(alpha/k) (x |tan(pi y/2)| for the attenuation, / |tan| for
      the dispersion), hence small alpha_coeff (alpha/k <= 5e-4 at 3 MHz);
    * time step: the tau term of the equation of state uses ``div u`` at ``n - 1/2`` (k-Wave's
      step order), a half-step lag that adds a spurious dispersion of relative size
      ~ omega dt / (2 |tan(pi y / 2)|), growing as omega^y where the true one grows as
      omega^(y-1) (so ~7x more in c(3 MHz) - c(1 MHz) for y = 1.1). For y = 1.5 at CFL 0.3
      with dt = 10 ns it is +18 %. Hence omega dt = 0.009, 0.006, 0.0013 at 3 MHz for
      y = 1.1, 1.5, 1.9 (133, 222, 1000 steps per dx / c0).

    Predicted total deviations: alpha -0.2 % (y 1.1), -0.14 % (1.5), -0.01 % (1.9);
    delta c +0.2 %, +0.5 %, +0.8 % (measured: alpha <= 0.21 %, delta c +0.16, +0.44, +0.80 %).
    """
    res = _absorption_run(y, alpha_coeff, steps_per_dx)
    a0 = _alpha0_np(alpha_coeff, y)
    for f, (alpha, speed) in zip(FREQS, res):
        w = 2 * math.pi * f
        expected = a0 * w**y
        assert abs(alpha / expected - 1) <= 0.01, (
            f"y={y} f={f:.0e}: alpha {alpha:.5g} Np/m vs {expected:.5g} "
            f"({alpha / expected - 1:+.2%})"
        )
        kk = _kk_speed(w, alpha_coeff, y)
        assert abs((speed - C0) / (kk - C0) - 1) <= 0.02, (
            f"y={y} f={f:.0e}: c - c0 = {speed - C0:.5g} m/s vs Kramers-Kronig {kk - C0:.5g}"
        )
    err = _dispersion_error(y, alpha_coeff, res)
    assert abs(err) <= 0.02, f"y={y}: c(3 MHz) - c(1 MHz) off Kramers-Kronig by {err:+.2%}"


def test_power_law_without_dispersion_fails_dispersion_check():
    """With ``Medium.dispersion=False`` (eta term dropped) the medium still absorbs as
    ``alpha0 f^y`` (within 1 %), but the Kramers-Kronig check of the previous test must fail:
    the phase-speed change is then almost nil (only the scheme's small spurious dispersion), so
    its relative error is far beyond 2 %. Shows the dispersion check can fail."""
    y, alpha_coeff, steps_per_dx = ABSORPTION_CASES[1]
    res = _absorption_run(y, alpha_coeff, steps_per_dx, dispersion=False)
    a0 = _alpha0_np(alpha_coeff, y)
    for f, (alpha, _) in zip(FREQS, res):
        expected = a0 * (2 * math.pi * f) ** y
        assert abs(alpha / expected - 1) <= 0.01, f"f={f:.0e}: alpha {alpha} vs {expected}"
    err = _dispersion_error(y, alpha_coeff, res)
    assert abs(err) > 0.5, f"dispersion check did not fail without dispersion ({err:+.2%})"


# ---------------------------------------------------------------------------------------------
# 3. Nonlinear plane wave vs Fubini
# ---------------------------------------------------------------------------------------------


def _bessel_j(n: int, x: float) -> float:
    """Bessel function J_n(x) by its power series (fine for |x| < ~10 in float64)."""
    term = (x / 2) ** n / math.factorial(n)
    total = 0.0
    for m in range(60):
        total += term
        term *= -((x / 2) ** 2) / ((m + 1) * (m + 1 + n))
    return total


def _fubini(n: int, sigma: float) -> float:
    """Fubini harmonic amplitude ``B_n = 2 J_n(n sigma) / (n sigma)`` (relative to p0)."""
    return 2 * _bessel_j(n, n * sigma) / (n * sigma)


def test_bessel_series():
    """The series J_n matches tabulated values (Abramowitz & Stegun table 9.1) to 1e-9."""
    assert _bessel_j(0, 1.0) == pytest.approx(0.7651976866, abs=1e-9)
    assert _bessel_j(1, 1.0) == pytest.approx(0.4400505857, abs=1e-9)
    assert _bessel_j(2, 1.0) == pytest.approx(0.1149034849, abs=1e-9)
    assert _bessel_j(2, 5.0) == pytest.approx(0.0465651163, abs=1e-9)


def test_nonlinear_plane_wave_matches_fubini():
    """A 1 MHz tone from a point source in 1-D steepens as Fubini's solution before the shock:
    ``p = p0 sum_n B_n sin(n(wt - kx))``, ``B_n = 2 J_n(n sigma)/(n sigma)``,
    ``sigma = x / x_shock``, ``x_shock = rho0 c0^3 / (beta w p0)``, ``beta = 1 + B/A / 2``.

    Water-like lossless medium with B/A = 5. The source is k-Wave's additive pressure source
    (scaled ``p 2 dt / (c0 dx)``) with a 3-period raised-cosine ramp; harmonics are measured by
    a DFT over 4 whole periods at steady state. p0 is the fundamental measured near the source
    (sigma = 0.02, where B1 = 1 - 5e-5) and sigma counts from the source point. The Mach number
    is small (3e-4), so the non-cumulative second-order terms that Fubini omits stay ~1e-3 of
    B2; 24 points per wavelength resolve ~12 harmonics.

    Tolerance (issue): B2 within 2 % for sigma = 0.1 ... 0.5 (measured +0.2 ... +0.3 %); we
    also hold B3 to 2 % for sigma >= 0.3 (measured +0.6 %).
    """
    bona = 5.0
    beta = 1 + bona / 2
    f0, ppw, ppt = 1e6, 24, 80  # points per wavelength, time steps per period
    n = 2048
    dx, dt = C0 / f0 / ppw, 1 / f0 / ppt
    w = 2 * math.pi * f0
    pml, xs = 20, 30
    x_end = n - pml - 140  # far sensor; the right PML is 140 points (5.8 wavelengths) beyond
    x_shock = (x_end - xs) * dx / 0.5
    p0 = RHO0 * C0**3 / (beta * w * x_shock)
    sigmas = np.array([0.02, 0.1, 0.2, 0.3, 0.4, 0.5])
    sens = xs + np.round(sigmas * x_shock / dx).astype(int)
    ramp, margin, window = 3, 2, 4  # [periods]
    nt = int(round((x_end - xs) * dx / (C0 * dt))) + (ramp + margin + window) * ppt
    t = np.arange(nt) * dt
    envelope = np.where(t < ramp / f0, 0.5 * (1 - np.cos(np.pi * t * f0 / ramp)), 1.0)
    signal = p0 * envelope * np.sin(w * t) * 2 * dt / (C0 * dx)
    grid = Grid((n,), (dx,), dt, nt)
    problem = Problem(
        grid,
        Medium(c0=C0, rho0=RHO0, grid=grid, bona=bona),
        Sources(p=MaskSource(np.array([[xs]]), signal, mode="additive")),
        Sensor(index=sens[:, None]),
        pml=Pml.default(1),
        dtype="float64",
    )
    p = _run_p(problem)[-window * ppt :]
    steps = np.arange(window * ppt)

    def harmonic(col: int, h: int) -> float:
        return 2 * abs((p[:, col] * np.exp(-2j * np.pi * h * steps / ppt)).mean())

    s_near = (sens[0] - xs) * dx / x_shock
    amp = harmonic(0, 1) / _fubini(1, s_near)
    assert amp / p0 == pytest.approx(1.0, abs=1e-3), "additive source did not radiate p0"
    for i in range(1, len(sens)):
        sigma = (sens[i] - xs) * dx * beta * w * amp / (RHO0 * C0**3)
        b2 = harmonic(i, 2) / amp
        assert b2 / _fubini(2, sigma) - 1 == pytest.approx(0, abs=0.02), (
            f"sigma={sigma:.3f}: B2 {b2:.5f} vs Fubini {_fubini(2, sigma):.5f}"
        )
        if sigma >= 0.29:
            b3 = harmonic(i, 3) / amp
            assert b3 / _fubini(3, sigma) - 1 == pytest.approx(0, abs=0.02), (
                f"sigma={sigma:.3f}: B3 {b3:.5f} vs Fubini {_fubini(3, sigma):.5f}"
            )


# ---------------------------------------------------------------------------------------------
# 4. PML reflection
# ---------------------------------------------------------------------------------------------

PML_DX = 1e-4
PML_CFL = 0.3
PML_SIGMA = 3.0  # Gaussian width [points]: spectrum 1.5e-5 of its peak at half Nyquist


def _gaussian_run(shape, src, sensors, nt, pml) -> np.ndarray:
    """Lossless run from a Gaussian p0 (width PML_SIGMA points) centred on ``src``."""
    grid = Grid(shape, (PML_DX,) * len(shape), PML_CFL * PML_DX / C0, nt)
    r2 = sum((x - s) ** 2 for x, s in zip(_mesh(shape), src))
    problem = Problem(
        grid,
        Medium(c0=C0, rho0=RHO0, grid=grid),
        Sources(p0=np.exp(-r2 / (2 * PML_SIGMA**2))),
        Sensor(index=np.array(sensors)),
        pml=pml,
        dtype="float64",
    )
    return _run_p(problem)


def _shifted(point, offset):
    return tuple(int(a + b) for a, b in zip(point, offset))


def test_pml_reflection_normal_incidence_1d():
    """k-Wave's default 1-D PML (20 points, alpha 2) reflects a pulse within half the Nyquist
    frequency at normal incidence below 1e-3 of its amplitude (issue); measured ~4e-7.

    Reflection = (sensor trace on a 128-point grid) - (same source/sensor on a 2048-point grid,
    where nothing reflected can arrive), over a record long enough for both walls' reflections
    (and anything wrapped through the PML) to pass the sensor; relative to the incident peak.
    Also held to 1e-5 (regression guard).
    """
    nt = int(round(130 / PML_CFL))
    small = _gaussian_run((128,), (64,), [(88,)], nt, Pml.default(1))[:, 0]
    off = (960,)
    ref = _gaussian_run((2048,), _shifted((64,), off), [_shifted((88,), off)], nt, Pml.default(1))
    ref = ref[:, 0]
    refl = np.abs(small - ref).max() / np.abs(ref).max()
    assert refl < 1e-3, f"normal-incidence reflection {refl:.2e}"
    assert refl < 1e-5, f"normal-incidence reflection {refl:.2e} (measured ~4e-7 before)"


def test_pml_reflection_45_degrees_2d():
    """k-Wave's default 2-D PML (20 points, alpha 2) reflects a pulse within half the Nyquist
    frequency at 45 degrees below 1e-2 of its amplitude (issue); measured ~3e-7.

    Source and sensor lie on a line parallel to the +x PML, 2h = 40 points apart, h from the
    PML, so the specular reflection hits it at 45 degrees after a path L = 2 sqrt(2) h. The
    reflection is the difference to a 224^2 reference run (same source-sensor geometry, PML
    far away); it is compared with the incident amplitude after the same path L (a reference
    sensor at distance L on the diagonal). The record also covers the other walls' normal
    reflections and anything wrapped through the PML. Also held to 1e-5 (regression guard).
    """
    n, h, pml = 128, 20, 20
    src = (n - pml - h, pml + 24)
    sens = (src[0], src[1] + 2 * h)
    path = 2 * math.sqrt(2) * h
    nt = int(round(100 / PML_CFL))
    small = _gaussian_run((n, n), src, [sens], nt, Pml.default(2))[:, 0]
    m = 224
    off = (m // 2 - src[0], m // 2 - 20 - src[1])
    src_r = _shifted(src, off)
    diag = _shifted(src_r, (round(path / math.sqrt(2)),) * 2)  # at distance L exactly
    ref = _gaussian_run((m, m), src_r, [_shifted(sens, off), diag], nt, Pml.default(2))
    refl = np.abs(small - ref[:, 0]).max() / np.abs(ref[:, 1]).max()
    assert refl < 1e-2, f"45-degree reflection {refl:.2e}"
    assert refl < 1e-5, f"45-degree reflection {refl:.2e} (measured ~3e-7 before)"


def test_pml_reflection_normal_incidence_3d():
    """k-Wave's default 3-D PML (10 points, alpha 2) reflects below 1e-3 at normal incidence
    (issue); measured ~2.5e-5.

    Source and sensor on the x axis of a 56 x 36 x 36 grid; the reference grid is longer only
    in x (116 points), so the y/z PML reflections are identical in both runs and cancel: the
    difference holds the x walls' normal-incidence reflections (and anything wrapped through
    the thinner 3-D PML). Relative to the incident amplitude after the +x reflection path.
    Also held to 2e-4 (regression guard).
    """
    nx, ny, pml = 56, 36, 10
    wall = nx - pml
    src = (wall - 20, ny // 2, ny // 2)
    sens = (wall - 10, ny // 2, ny // 2)
    path = 20 + 10
    nt = int(round((path + 20) / PML_CFL))
    small = _gaussian_run((nx, ny, ny), src, [sens], nt, Pml.default(3))[:, 0]
    off = (30, 0, 0)
    src_r = _shifted(src, off)
    far = _shifted(src_r, (path, 0, 0))
    ref = _gaussian_run((nx + 60, ny, ny), src_r, [_shifted(sens, off), far], nt, Pml.default(3))
    refl = np.abs(small - ref[:, 0]).max() / np.abs(ref[:, 1]).max()
    assert refl < 1e-3, f"3-D normal-incidence reflection {refl:.2e}"
    assert refl < 2e-4, f"3-D normal-incidence reflection {refl:.2e} (measured ~2.5e-5 before)"


# ---------------------------------------------------------------------------------------------
# 5. Exact time stepping in a periodic box
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cfl", [0.3, 2.0])
def test_periodic_box_is_exact_for_any_time_step(cfl):
    """With no PML the grid is a periodic box; in a homogeneous lossless medium every Fourier
    mode of p0 must evolve as ``cos(c0 |k| t)`` exactly, for any time step: the k-space
    correction ``sinc(c0 |k| dt / 2)`` makes leapfrog exact (its recurrence becomes
    ``z^2 - 2 cos(c0 |k| dt) z + 1 = 0``), and each mode's energy is conserved.

    A white-noise p0 on a 64 x 45 grid (even axis: Nyquist modes included) is run for 120
    steps at Courant numbers 0.3 and 2.0 (beyond the classical limit) and p_final is compared
    with the spectral solution. Tolerance 1e-9 relative (round-off: measured ~1e-13).
    """
    shape, dx = (64, 45), 1e-4
    dt = cfl * dx / C0
    nt = 120
    grid = Grid(shape, (dx, dx), dt, nt)
    p0 = np.random.default_rng(0).standard_normal(shape)
    problem = Problem(
        grid,
        Medium(c0=C0, rho0=RHO0, grid=grid),
        Sources(p0=p0),
        Sensor(record=("p_final",)),
        pml=Pml((0, 0), (2.0, 2.0)),
        dtype="float64",
    )
    _, final = run(problem, progress=False)
    kx = 2 * np.pi * np.fft.fftfreq(shape[0], dx)
    ky = 2 * np.pi * np.fft.fftfreq(shape[1], dx)
    k = np.sqrt(kx[:, None] ** 2 + ky[None, :] ** 2)
    t_end = (nt - 1) * dt
    exact = np.real(np.fft.ifft2(np.fft.fft2(p0) * np.cos(C0 * k * t_end)))
    got = np.asarray(final["p_final"])
    assert got.dtype == np.float64
    err = np.abs(got - exact).max() / np.abs(exact).max()
    assert err < 1e-9, f"periodic box at CFL {cfl}: relative error {err:.2e}"
