"""Axisymmetric runs (k-Wave's kspaceFirstOrderAS): the radial operators against the discrete
trigonometric transforms k-Wave computes them with, the radial PML, the input checks, and a
focused bowl (an arc on the axisymmetric grid) against O'Neil's solution on its axis.

k-Wave's C++ solver's own outputs for axisymmetric inputs are compared in
``tests/kwave/test_reference.py`` (the ``2d_axisym_*`` cases)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.fft as sf

import sonotile as st
from sonotile.model.grid import Grid
from sonotile.model.problem import Medium, Problem, ProblemError, Sensor, Sources
from sonotile.physics import model_for
from sonotile.spectral.radial import RadialOps

NX, NY, DX, DY, C, DT = 24, 18, 1e-4, 1.2e-4, 1500.0, 2e-8


def _fields(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((NX, NY)).astype(np.float32) for _ in range(3))


def _dtt(f: np.ndarray, kind: str, t: int) -> np.ndarray:
    """FFTW's unnormalised DCT / DST of type ``t`` along the radial axis (scipy's norm=None)."""
    return (sf.dct if kind == "c" else sf.dst)(f.astype(np.float64), type=t, axis=1)


def _rel(a, b) -> float:
    return float(np.abs(np.asarray(a, np.float64) - b).max() / np.abs(b).max())


def test_wswa_operators_are_kwave_dtt_operators():
    """kspaceFirstOrder-OMP's WSWA operators (DCT-III forward; DCT-II / DST-IV back; uy / y by
    DCT-IV): the gradient, the divergence with its uy / y term and the source filters agree
    with sonotile's mirrored-FFT ones to float32 rounding."""
    p, ux, uy = _fields()
    ops = RadialOps.build((NX, NY), (DX, DY), C, DT, "WSWA", source_filter=True)
    kx = 2 * np.pi * np.fft.fftfreq(NX, DX)[:, None]
    ky = ((np.arange(NY) + 0.5) * np.pi / (DY * NY))[None, :]
    k = np.sqrt(kx**2 + ky**2)
    kappa, skappa, m = np.sinc(C * DT * k / (2 * np.pi)), np.cos(C * DT * k / 2), 2 * NY

    def back(spec, kind, t):
        return _dtt(np.real(np.fft.ifft(spec, axis=0)), kind, t) / m

    def fwd(f, kind, t):
        return np.fft.fft(_dtt(f, kind, t), axis=0)

    pk = kappa * fwd(p, "c", 3)
    gx, gy = ops.grad(p)
    assert _rel(gx, back(1j * kx * np.exp(0.5j * kx * DX) * pk, "c", 2)) < 2e-6
    assert _rel(gy, back(-ky * pk, "s", 4)) < 2e-6
    ysg = (np.arange(NY) + 0.5) * DY
    dux, duy = ops.div((ux, uy))
    ddx_neg = 1j * kx * np.exp(-0.5j * kx * DX)
    assert _rel(dux, back(kappa * ddx_neg * fwd(ux, "c", 3), "c", 2)) < 2e-6
    want = back(kappa * (ky * fwd(uy, "s", 4) + fwd(uy / ysg, "c", 4)), "c", 2)
    assert _rel(duy, want) < 2e-6
    assert _rel(ops.filter_source(p), back(skappa * fwd(p, "c", 3), "c", 2)) < 2e-6
    assert _rel(ops.filter_velocity_source(uy, 1), back(skappa * fwd(uy, "s", 4), "s", 4)) < 2e-6
    # the uy / y term is there: without it the divergence differs at order one
    assert _rel(duy, back(kappa * ky * fwd(uy, "s", 4), "c", 2)) > 0.1


def test_wsws_operators_are_kwave_dct1_operators():
    """k-Wave's MATLAB WSWS operators (DCT-I; DST-III for the radial derivative, the last
    staggered column mirrored)."""
    p, _, _ = _fields(1)
    ops = RadialOps.build((NX, NY), (DX, DY), C, DT, "WSWS")
    kx = 2 * np.pi * np.fft.fftfreq(NX, DX)[:, None]
    ky = (np.arange(NY) * np.pi / (DY * (NY - 1)))[None, :]
    kappa, m = np.sinc(C * DT * np.sqrt(kx**2 + ky**2) / (2 * np.pi)), 2 * (NY - 1)
    pk = kappa * np.fft.fft(_dtt(p, "c", 1), axis=0)
    want_x = _dtt(np.real(np.fft.ifft(1j * kx * np.exp(0.5j * kx * DX) * pk, axis=0)), "c", 1) / m
    want_y = np.zeros((NX, NY))
    want_y[:, :-1] = _dtt(np.real(np.fft.ifft(-ky[:, 1:] * pk[:, 1:], axis=0)), "s", 3) / m
    want_y[:, -1] = -want_y[:, -2]
    gx, gy = ops.grad(p)
    assert _rel(gx, want_x) < 2e-6 and _rel(gy, want_y) < 2e-6


def _problem(**kw) -> Problem:
    from sonotile.model.problem import Pml

    g = Grid((NX, NY), (DX, DY), DT, 10)
    medium = kw.pop("medium", None) or Medium(C, 1000.0, g)
    pml = kw.pop("pml", Pml((5, 5), (2.0, 2.0)))
    return Problem(g, medium, Sources(p0=np.ones((NX, NY))), Sensor(index=np.array([[3, 0]])),
                   pml, **kw)  # fmt: skip


def test_radial_pml_only_on_the_outer_edge():
    from sonotile.model.problem import Pml

    prob = _problem(pml=Pml((5, 12), (2.0, 2.0)), radial_symmetry="WSWA")
    c = model_for(prob).constants(prob)
    for key in ("pml", "pml_sg"):
        x, y = (np.asarray(v).reshape(-1) for v in c[key])
        assert np.all(y[: NY - 12] == 1) and np.all(y[NY - 12 :] < 1)
        assert np.all(x[:5] < 1) and np.all(x[-5:] < 1)  # the axial PML keeps both sides
    with pytest.raises(ProblemError, match="pml_y_size = 12"):  # both sides need 2 x 12 < Ny
        _problem(pml=Pml((5, 12), (2.0, 2.0)))


@pytest.mark.parametrize(
    "kw,words",
    [
        ({"radial_symmetry": "WSWB"}, ["radial_symmetry", "WSWA"]),
        ({"radial_symmetry": "WSWA", "medium": "power_law"}, ["power-law", "stokes"]),
    ],
)
def test_problem_refuses_what_kwave_refuses(kw, words):
    if kw.get("medium") == "power_law":
        g = Grid((NX, NY), (DX, DY), DT, 10)
        kw["medium"] = Medium(C, 1000.0, g, alpha_coeff=0.5, alpha_power=1.5,
                              absorption="power_law")  # fmt: skip
    with pytest.raises(ProblemError) as e:
        _problem(**kw)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_api_refuses_a_3d_grid_and_cartesian_sensors():
    medium = st.KWaveMedium(sound_speed=C, density=1000.0)
    p0 = np.zeros((16, 16, 16))
    p0[8, 8, 8] = 1
    with pytest.raises(ValueError, match="2-D kgrid"):
        st.simulate(st.KWaveGrid((16, 16, 16), DX), medium, st.KSource(p0=p0),
                    st.KSensor(mask=p0 > 0), axisymmetric=True, quiet=True)  # fmt: skip
    with pytest.raises(ValueError, match="binary grid mask"):
        st.simulate(st.KWaveGrid((16, 16), DX), medium, st.KSource(p0=p0[..., 8]),
                    st.KSensor(mask=np.zeros((2, 3))), axisymmetric=True, quiet=True)  # fmt: skip


F0, RHO = 1e6, 1000.0


def bowl_on_axis(symmetry: str, radius: float = 15e-3, diameter: float = 15e-3,
                 ppw: float = 3, cfl: float = 0.1) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """A CW bowl as an arc on the axisymmetric grid (k-Wave's example ``at_focused_bowl_AS``):
    distances from the apex [m] and amplitudes on the axis [Pa] from the last 3 periods."""
    margin = 16
    dx = C / (ppw * F0)
    ppp = round(ppw / cfl)
    dt = 1 / (ppp * F0)
    nx, ny = margin + round((radius + 8e-3) / dx), round((diameter / 2 + 9e-3) / dx)
    nt = round(((nx * dx) * 1.2 / C + 6 / F0) / dt)
    kgrid = st.KWaveGrid((nx, ny), dx, dt=dt, nt=nt)
    x0 = (margin - nx // 2) * dx
    ka = st.KWaveArray(bli_tolerance=0.01, upsampling_rate=10, axisymmetric=True)
    ka.add_arc_element((x0, 0), radius, diameter, (x0 + radius, 0))
    sig = st.create_cw_signals(kgrid.t, F0, np.array([1e6]), np.array([0.0]))
    source = st.KSource(
        p_mask=ka.get_array_binary_mask(kgrid), p=ka.get_distributed_source_signal(kgrid, sig)
    )
    on_axis = np.zeros((nx, ny), bool)
    on_axis[:, 0] = True
    sensor = st.KSensor(mask=on_axis, record=("p",), record_start_index=nt - 3 * ppp + 1)
    medium = st.KWaveMedium(sound_speed=C, density=RHO)
    res = st.simulate(kgrid, medium, source, sensor, pml_inside=False, pml_size=10,
                      quiet=True, axisymmetric=True, radial_symmetry=symmetry)  # fmt: skip
    assert any("grid size" in w for w in res.warnings)  # 82 x 43 with the PML: not 2-3-5 sizes
    amp, _, _ = st.extract_amp_phase(res["p"], 1 / dt, F0, dim=1)
    return (np.arange(nx) - margin) * dx, amp


@pytest.mark.parametrize("symmetry", ["WSWA", "WSWS-FFT"])
def test_bowl_on_axis_matches_oneil(symmetry):
    """On the axis, from one wavelength in front of the apex: within 1 % of the focal amplitude
    (measured 0.86 %; k-Wave's example size R = D = 30 mm at 4 points per wavelength and CFL
    0.05: 0.74 %, docs/axisymmetric.md)."""
    radius = diameter = 15e-3
    z, amp = bowl_on_axis(symmetry, radius, diameter)
    ref, _, _ = st.focused_bowl_oneil(radius, diameter, 1e6 / (RHO * C), F0, C, RHO, z)
    sel = z >= C / F0 - 1e-9
    err = np.max(np.abs(amp - ref)[sel]) / ref.max()
    assert err <= 0.01, f"on-axis error {100 * err:.2f} % of the focal amplitude"
    assert abs(amp.max() / ref.max() - 1) < 0.01


def test_axisymmetric_runs_are_not_split_over_devices():
    """``auto`` runs an axisymmetric problem on one device; an explicit split is refused."""
    from sonotile.parallel.engine import engine_for

    prob = _problem(radial_symmetry="WSWA")
    with pytest.raises(ValueError, match="axisymmetric acoustic model runs with single, auto only"):
        engine_for(prob, "pencil")
    engine, reason = engine_for(prob, "auto")
    assert engine.describe.startswith("single device") and "axisymmetric" in reason


def test_kwave_writer_round_trip(tmp_path):
    """sonotile's k-Wave writer sets ``axisymmetric_flag`` for a WSWA problem (read back as one)
    and refuses a WSWS one, which k-Wave's C++ solver does not have."""
    from sonotile.kwave.reader import read_input
    from sonotile.kwave.writer import write_input

    path = tmp_path / "as.h5"
    write_input(str(path), _problem(radial_symmetry="WSWA"))
    back, _ = read_input(str(path))
    assert back.radial_symmetry == "WSWA"
    with pytest.raises(ProblemError, match="WSWA axisymmetric runs only"):
        write_input(str(tmp_path / "wsws.h5"), _problem(radial_symmetry="WSWS"))
    assert not (tmp_path / "wsws.h5").exists()


@pytest.mark.parametrize("symmetry", ["WSWA", "WSWS"])
def test_p0_smoothing_continues_the_field_as_the_operators_do(symmetry):
    """The API smooths p0 on the radial continuation the operators use (k-Wave's rule): one
    period of it, and the smoothed field keeps the input's peak."""
    from sonotile.model.filters import radial_continuation, smooth_axisymmetric
    from sonotile.spectral.radial import continue_collocated

    p, _, _ = _fields(2)
    ext = radial_continuation(p, symmetry)
    np.testing.assert_array_equal(ext, np.asarray(continue_collocated(p, symmetry)))
    out = smooth_axisymmetric(p, symmetry)
    assert out.shape == p.shape and np.isclose(np.abs(out).max(), np.abs(p).max(), rtol=1e-6)


def test_pml_size_auto_sizes_the_radial_transform():
    """``pml_size="auto"`` on an axisymmetric grid (k-Wave's getOptimalPMLSize with its
    symmetry): the outer radial PML makes the radial transform length, ``4 (Ny + p)`` (WSWA)
    or ``2 (Ny + p) - 2`` (WSWS), a power of two here; the axial PML is the Cartesian pick."""
    from sonotile.api.problem import pml_of
    from sonotile.api.types import Options
    from sonotile.fft.sizes import optimal_pml_size

    for sym, length in (("WSWA", lambda p: 4 * (33 + p)), ("WSWS-FFT", lambda p: 2 * (33 + p) - 2)):
        opts = Options(pml_size="auto", pml_inside=False, axisymmetric=True, radial_symmetry=sym)
        px, py = pml_of(opts, (50, 33)).size
        assert px == optimal_pml_size(50)
        n = length(py)
        assert n & (n - 1) == 0, (sym, py, n)
