"""The slip-aware fluid-solid interface (``interface="slip"``, sonotile.physics.elastic.slip):
its continuations, its reflection coefficient against the analytic fluid-solid one (solid c_p
3000, c_s 1800 m/s, rho 1900 under water: critical angles 30 and 56 deg), that it leaves a
medium without fluid-solid faces to k-Wave's scheme, 3-D against 2-D, gradients, refusals."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError
from sonotile.physics.elastic import ElasticMedium, build
from sonotile.physics.elastic.slip import TAPER, continued, folded, line_gather

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "elastic"


def _bench(name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _continue(inside: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``f`` continued along axis 0 by :func:`line_gather` (numpy)."""
    dst, src, w = line_gather(inside, 0)
    out = np.where(inside, f, 0.0).ravel()
    out[dst] += np.sum(w * f.ravel()[src], axis=1)
    return out.reshape(f.shape)


def test_continuation_across_a_planar_face_and_its_transpose() -> None:
    """A quadratic in the solid is extrapolated exactly into the fluid, times the taper
    cos^2(pi j / 18) over 8 points (lines periodic, as the spectral derivatives); the step's
    ``continued`` and ``folded`` are that matrix and its transpose."""
    n, ni = 64, 30
    inside = np.repeat((np.arange(n) >= ni)[:, None], 3, 1)
    x = np.arange(n, dtype=float)[:, None] * np.ones((1, 3))
    quad = 1.0 + 0.3 * x - 0.02 * x**2
    got = _continue(inside, quad)
    j = np.arange(1, TAPER)
    taper = np.cos(np.pi * j / (2 * TAPER)) ** 2
    assert np.allclose(got[ni - j, 1], taper * quad[ni - j, 1], rtol=1e-12)
    # zero beyond the taper (the solid's top face continues into the first points)
    assert np.all(got[TAPER - 1 : ni - TAPER + 1] == 0) and np.all(got[ni:] == quad[ni:])
    rng = np.random.default_rng(0)
    f, d = rng.standard_normal((2, n, 3))
    with jax.enable_x64(True):
        g = tuple(jnp.asarray(a) for a in line_gather(inside, 0))
        cf = np.asarray(continued(jnp.asarray(f), jnp.asarray(inside), g))
        fd = np.asarray(folded(jnp.asarray(d), jnp.asarray(inside), g))
    assert np.allclose(cf, _continue(inside, f), rtol=1e-13)
    assert np.isclose(np.sum(d * cf), np.sum(fd * f), rtol=1e-12)  # <d, C f> = <C^T d, f>
    assert np.all(fd[:ni][~inside[:ni]] == 0)  # a fluid point gets nothing


def test_continuations_in_a_thin_gap_and_from_a_thin_plate() -> None:
    """A 4-point fluid gap between two solids: each point continued from the nearer solid,
    the taper 0 at the gap's middle; a 2-point plate: linear extrapolation; a 1-point plate:
    its value."""
    n = 40
    solid = np.ones(n, bool)
    solid[10:14] = False  # the gap
    lin = 1.0 + 0.5 * np.arange(n, dtype=float)
    got = _continue(solid[:, None], lin[:, None])[:, 0]
    # gap points 10..13: distances 1, 2 from the lower / upper solid; half-gap 2.5
    taper = np.cos(np.pi * np.array([1, 2]) / 5.0) ** 2
    assert np.allclose(got[[10, 11]], taper * lin[[10, 11]]) and np.allclose(
        got[[13, 12]], taper * lin[[13, 12]]
    )
    plate = np.zeros(n, bool)
    plate[20:22] = True
    got = _continue(plate[:, None], lin[:, None])[:, 0]
    t1 = np.cos(np.pi / (2 * TAPER)) ** 2
    assert np.isclose(got[19], t1 * lin[19]) and np.isclose(got[22], t1 * lin[22])
    plate[21] = False
    got = _continue(plate[:, None], lin[:, None])[:, 0]
    assert np.isclose(got[19], t1 * lin[20]) and np.isclose(got[21], t1 * lin[20])


def test_frequency_domain_reflection_between_the_critical_angles() -> None:
    """The scheme with the slip-aware interface (``benchmarks/elastic/elastic_interface_modes.py
    --slip model``: the model's gathers as matrices), 0.1 mm (15 points per water wavelength):
    |R| within 1 % of the analytic coefficient at 40-54 deg and 20 deg (measured -0.05, +0.07,
    +0.36, +0.54 %, 20 deg +0.13 %), where k-Wave's scheme is 0.9-5.0 % high; second order:
    within 0.15 % at 0.05 mm (measured 0.10 % at 50 deg)."""
    fd, ob = _bench("elastic_interface_modes"), _bench("elastic_oblique")
    for deg in (20.0, 40.0, 45.0, 50.0, 54.0):
        theta = np.radians(deg)
        ref = abs(ob.coefficients(theta, 1800.0)[0])
        slip = abs(fd.reflection(theta, slip=("model",))) / ref - 1
        assert abs(slip) < 0.01, deg
        if deg == 50.0:
            assert abs(fd.reflection(theta)) / ref - 1 > 0.04  # k-Wave's scheme
            assert abs(abs(fd.reflection(theta, sc=2.0, slip=("model",))) / ref - 1) < 1.5e-3


def test_time_domain_reflection_with_slip_coarse() -> None:
    """The time-domain model with ``interface="slip"`` at 45 deg on a grid of 0.2 mm (7.5
    points per water wavelength), PML 10 mm: |R| within 2 % (measured +0.2 %; k-Wave's scheme:
    +5.1 %, docs/elastic.md) and within 0.5 % of the frequency-domain solution of the same
    scheme."""
    ob, fd = _bench("elastic_oblique"), _bench("elastic_interface_modes")
    theta = np.radians(45.0)
    got = ob.measured(theta, 3, 1800.0, 0.5, (ob.C1, 0.0, ob.R1), 40.0, pml=100, interface="slip")
    ref = abs(ob.coefficients(theta, 1800.0)[0])
    assert abs(abs(got.r) / ref - 1) < 0.02
    want = abs(fd.reflection(theta, sc=0.5, freq=got.f, slip=("model",)))
    assert abs(abs(got.r) / want - 1) < 5e-3


@pytest.mark.slow
@pytest.mark.parametrize(("deg", "m"), [(45.0, 3), (50.0, 3)])
def test_reflection_and_transmission_with_slip(deg: float, m: int) -> None:
    """0.1 mm (15 points per water wavelength), PML 100 points: with the slip-aware interface
    |R| and |T_S| within 1 % of the analytic coefficients (measured R +0.1, +0.3 %, T_S -0.0,
    -0.0 %; k-Wave's scheme: R +2.8, +4.6 %, T_S -0.7, -1.1 %)."""
    ob = _bench("elastic_oblique")
    theta = np.radians(deg)
    got = ob.measured(theta, m, 1800.0, 1, (ob.C1, 0.0, ob.R1), 40.0, True, pml=100,
                      interface="slip")  # fmt: skip
    r, _, ts = ob.coefficients(theta, 1800.0)
    assert abs(abs(got.r) / abs(r) - 1) < 0.01
    assert abs(abs(got.ts) / abs(ts) - 1) < 0.01


def test_closed_box_with_thin_layers_stays_bounded() -> None:
    """No PML, no absorption: plates of 1, 2 and 3 points, water gaps of 1 and 2 points
    between solids and a stair-stepped tilted plate, 12000 steps (float32): the slip-aware
    step (a continuation and its transpose: k-Wave's energy-conserving pairing of derivatives)
    stays bounded as k-Wave's scheme does."""
    n = 48
    cp, cs, rho = np.full((n, n), 1500.0), np.zeros((n, n)), np.full((n, n), 1000.0)
    solid = np.zeros((n, n), bool)
    solid[14], solid[18:20], solid[23:26], solid[28:35] = True, True, True, True
    solid[30], solid[32:34] = False, False  # water gaps of 1 and 2 points
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    solid |= np.abs(i - 40 - 0.4 * (j - 24)) < 2
    cp[solid], cs[solid], rho[solid] = 3000.0, 1800.0, 1900.0
    p0 = np.exp(-((i - 8.0) ** 2 + (j - 24.0) ** 2) / 4.0)
    out = st.pstd_elastic_2d(
        st.KWaveGrid((n, n), 1e-4, dt=8e-9, nt=12000), st.KWaveElasticMedium(cp, cs, rho),
        st.ElasticSource(p0=p0), st.KSensor(mask=np.ones((n, n), bool), record=("p_final",)),
        pml_size=0, interface="slip",
    )  # fmt: skip
    assert np.all(np.isfinite(out["p_final"])) and np.abs(out["p_final"]).max() < 0.5


def _edge_solid_energy(interface: str, nt: int) -> np.ndarray:
    """The sum over the grid of the stresses squared per step [Pa^2]: a solid half-space
    touching the last plane along x (inside the PML, water at the first plane), periodic along
    y (no PML there), PML 50 at alpha 2, lossless, every mode excited by a random p0
    (float64)."""
    n, m = 128, 8
    cp, cs, rho = np.full((n, m), 1500.0), np.zeros((n, m)), np.full((n, m), 1000.0)
    cp[64:], cs[64:], rho[64:] = 3000.0, 1800.0, 1900.0
    p0 = np.random.default_rng(0).standard_normal((n, m))
    out = st.pstd_elastic_2d(
        st.KWaveGrid((n, m), 1e-4, dt=1e-8, nt=nt), st.KWaveElasticMedium(cp, cs, rho),
        st.ElasticSource(p0=p0), st.KSensor(mask=np.ones((n, m), bool), record=("s",)),
        pml_size=(50, 0), dtype="float64", smooth_p0=False, interface=interface,
    )  # fmt: skip
    return sum(np.sum(out[k] ** 2, axis=0) for k in ("sxx", "syy", "sxy"))


def test_solid_touching_a_pml_edge_stays_bounded() -> None:
    """A solid touching the PML'd last plane along x: its continuation would reach across the
    periodic wrap from the layer's most damped points into the water at the first plane (a
    mode growing about 70-fold per 1000 steps, PML 50 or 100 at alpha 2); the continuations
    stop where the PML starts, and the energy decays as with k-Wave's scheme."""
    e = _edge_solid_energy("slip", 3000)
    early, late = e[500:1000].mean(), e[2500:].mean()
    assert np.all(np.isfinite(e)) and late < early
    kwave = _edge_solid_energy("kwave", 3000)
    assert late < 2 * kwave[2500:].mean()


@pytest.mark.parametrize("where", ["plate", "corner"])
def test_face_inside_the_pml_without_a_pml_along_another_axis_is_refused(where: str) -> None:
    """No PML along y, and a fluid-solid face inside the x PML (a plate in it, or a block at a
    corner): such faces grow with either scheme, so the slip-aware one refuses the geometry
    before any work, naming the point, the axis and what to do; with PML on both axes, or
    with k-Wave's scheme, the same medium is taken."""
    n, m = 64, 16
    cp, cs, rho = np.full((n, m), 1500.0), np.zeros((n, m)), np.full((n, m), 1000.0)
    solid = (slice(4, 10), slice(None)) if where == "plate" else (slice(0, 8), slice(0, 6))
    cp[solid], cs[solid], rho[solid] = 3000.0, 1800.0, 1900.0

    def run(pml: tuple[int, int], interface: str) -> dict:
        return st.pstd_elastic_2d(
            st.KWaveGrid((n, m), 1e-4, dt=1e-8, nt=4), st.KWaveElasticMedium(cp, cs, rho),
            st.ElasticSource(p0=np.ones((n, m))), st.KSensor(mask=np.ones((n, m), bool)),
            pml_size=pml, dtype="float64", smooth_p0=False, interface=interface,
        )  # fmt: skip

    with pytest.raises(ProblemError, match=r"inside the PML along x while the grid has no PML "
                       r"along y.*keep fluid-solid faces out of the PML"):  # fmt: skip
        run((12, 0), "slip")
    assert np.isfinite(run((12, 4), "slip")["p"]).all()
    assert np.isfinite(run((12, 0), "kwave")["p"]).all()


def _layered(nx: int, ny: int) -> tuple[np.ndarray, ...]:
    cp, cs, rho = np.full((nx, ny), 1500.0), np.zeros((nx, ny)), np.full((nx, ny), 1000.0)
    cp[20:30], cs[20:30], rho[20:30] = 3000.0, 1800.0, 1900.0  # a plate
    cp[34:, 8:20], cs[34:, 8:20], rho[34:, 8:20] = 2500.0, 1000.0, 1700.0  # a block
    return cp, cs, rho


def _run2d(cp: np.ndarray, cs: np.ndarray, rho: np.ndarray, interface: str, dtype: str,
           record: tuple[str, ...] = ("p", "u", "s"),
           alpha: tuple = (None, None), nt: int = 240) -> dict:  # fmt: skip
    nx, ny = cp.shape
    x, y = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    sens = np.zeros((nx, ny), bool)
    sens[6, :] = sens[40, :] = True
    src = st.ElasticSource(p0=np.exp(-((x - 15.0) ** 2 + (y - 14.0) ** 2) / 3.0))
    return st.pstd_elastic_2d(
        st.KWaveGrid((nx, ny), 1e-4, dt=6e-9, nt=nt), st.KWaveElasticMedium(cp, cs, rho, *alpha),
        src,
        st.KSensor(mask=sens, record=record), pml_size=4, dtype=dtype, smooth_p0=False,
        interface=interface,
    )  # fmt: skip


def test_no_fluid_solid_face_is_kwave_scheme() -> None:
    """Shear speed 0 everywhere (a heterogeneous fluid) or > 0 everywhere (a heterogeneous
    solid): ``interface="slip"`` gives k-Wave's scheme bit for bit; with a fluid-solid face
    the two differ."""
    cp, cs, rho = _layered(48, 32)
    for shear in (np.zeros_like(cs), np.where(cs > 0, cs, 700.0)):
        a, b = (_run2d(cp, shear, rho, itf, "float32") for itf in ("kwave", "slip"))
        for k in a:
            assert np.array_equal(a[k], b[k]), k
    a, b = (_run2d(cp, cs, rho, itf, "float32") for itf in ("kwave", "slip"))
    assert np.abs(a["p"] - b["p"]).max() > 1e-3 * np.abs(a["p"]).max()
    assert np.all(np.isfinite(b["p"]))


def test_3d_with_the_interface_along_another_axis_equals_2d() -> None:
    """The 2-D plate-and-block case (Kelvin-Voigt absorption) in 3-D, its x along z and its y
    along x, constant along y: the 3-D slip-aware run's velocity equals the 2-D one within
    1e-10 of the largest (float64; the gathers along other pairs of axes), and float32 within
    1e-4 (the pressures differ: a 3-D solid's has a third normal stress)."""
    cp, cs, rho = _layered(48, 32)
    alpha = (np.where(cs > 0, 2.0, 0.5), np.where(cs > 0, 4.0, 0.0))  # Kelvin-Voigt
    ref = _run2d(cp, cs, rho, "slip", "float64", ("u_final",), alpha, nt=150)
    ny3 = 4

    def to3(f: np.ndarray) -> np.ndarray:  # 2-D (x, y) -> 3-D (y -> x, extruded y, x -> z)
        return np.repeat(f.T[:, None, :], ny3, 1)

    x, y = np.meshgrid(np.arange(48), np.arange(32), indexing="ij")
    p0 = np.exp(-((x - 15.0) ** 2 + (y - 14.0) ** 2) / 3.0)
    for dtype, tol in (("float64", 1e-10), ("float32", 1e-4)):
        out = st.pstd_elastic_3d(
            st.KWaveGrid((32, ny3, 48), 1e-4, dt=6e-9, nt=150),
            st.KWaveElasticMedium(to3(cp), to3(cs), to3(rho), to3(alpha[0]), to3(alpha[1])),
            st.ElasticSource(p0=to3(p0)),
            st.KSensor(mask=np.ones((32, ny3, 48), bool), record=("u_final",)),
            pml_size=(4, 0, 4), dtype=dtype, smooth_p0=False, interface="slip",
        )  # fmt: skip
        scale = max(np.abs(ref["ux_final"]).max(), np.abs(ref["uy_final"]).max())
        assert np.abs(out["uz_final"][:, 2, :].T - ref["ux_final"]).max() < tol * scale
        assert np.abs(out["ux_final"][:, 0, :].T - ref["uy_final"]).max() < tol * scale


def test_gradient_with_slip_matches_a_central_difference() -> None:
    """``jax.grad`` of a loss of the records through the slip-aware step (a linear gather)
    against one central difference along a random direction of c_p, c_s and rho, float64."""
    from sonotile.api.elastic import execute

    n, dx = 24, 1e-4
    rng = np.random.default_rng(0)
    cp, cs, rho = (f[:n, :n].copy() for f in _layered(48, 32))
    cp += 50 * rng.random((n, n))
    rho += 30 * rng.random((n, n))
    x = np.arange(n) - 8.0
    p0 = np.exp(-(x[:, None] ** 2 + (x[None, :] - 4) ** 2) / 4.0)
    with jax.enable_x64(True):
        run = build(ElasticMedium(cp, cs, rho, (n, n)), (dx, dx), 2e-9, 40, p0=p0,
                    sensor_points=np.array([[4, 4], [22, 10], [15, 20]]), record=("p", "u"),
                    pml_size=(4, 4), dtype="float64", interface="slip")  # fmt: skip
        assert run.statics.slip

        def loss(v: dict) -> jax.Array:
            out = execute(run, v, chunk=20)
            return jnp.sum(out["p"] ** 2) + 1e12 * jnp.sum(out["uy"] ** 2)

        base = {"sound_speed_compression": jnp.asarray(cp), "sound_speed_shear": jnp.asarray(cs),
                "density": jnp.asarray(rho)}  # fmt: skip
        grads = jax.grad(loss)(base)
        direction = {k: rng.standard_normal((n, n)) * (cs > 0 if k == "sound_speed_shear" else 1)
                     for k in base}  # fmt: skip
        h = 1e-6
        f = [float(loss({k: base[k] * (1 + s * h * direction[k]) for k in base})) for s in (1, -1)]
        fd = (f[0] - f[1]) / (2 * h)
        ad = sum(float(jnp.sum(grads[k] * base[k] * direction[k])) for k in base)
        assert abs(ad - fd) <= 1e-6 * abs(fd)


def test_bad_interface_refused_by_name() -> None:
    cp, cs, rho = _layered(48, 32)
    with pytest.raises(ProblemError, match="interface = 'glued'"):
        _run2d(cp, cs, rho, "glued", "float32")
    grid = st.KWaveGrid((48, 32), 1e-4, dt=2e-9, nt=10)
    with pytest.raises(ProblemError, match="interface='slip' with decomposition='pencil'"):
        st.pstd_elastic_2d(grid, st.KWaveElasticMedium(cp, cs, rho),
                           st.ElasticSource(p0=np.ones((48, 32))),
                           st.KSensor(mask=np.ones((48, 32), bool)), decomposition="pencil",
                           interface="slip")  # fmt: skip


def test_options_route_simulate_and_make_simulator() -> None:
    """``elastic_interface="slip"`` through ``st.simulate`` and ``st.make_simulator`` gives
    ``pstd_elastic_2d(..., interface="slip")``'s records; with an acoustic medium it is refused
    by name."""
    cp, cs, rho = _layered(48, 32)
    want = _run2d(cp, cs, rho, "slip", "float64")
    nx, ny = cp.shape
    x, y = np.meshgrid(np.arange(nx), np.arange(ny), indexing="ij")
    sens = np.zeros((nx, ny), bool)
    sens[6, :] = sens[40, :] = True
    args = (st.KWaveGrid((nx, ny), 1e-4, dt=6e-9, nt=240), st.KWaveElasticMedium(cp, cs, rho),
            st.ElasticSource(p0=np.exp(-((x - 15.0) ** 2 + (y - 14.0) ** 2) / 3.0)),
            st.KSensor(mask=sens, record=("p", "u", "s")))  # fmt: skip
    opts = {"pml_size": 4, "dtype": "float64", "smooth_p0": False, "elastic_interface": "slip"}
    res = st.simulate(*args, quiet=True, **opts)  # type: ignore[arg-type]
    assert np.array_equal(res["p"], want["p"])
    sim = st.make_simulator(*args, **opts)  # type: ignore[arg-type]
    got = sim()
    assert np.abs(np.asarray(got["uy"]) - want["uy"]).max() <= 1e-12 * np.abs(want["uy"]).max()
    water = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    with pytest.raises(ProblemError, match="elastic_interface = 'slip'"):
        st.simulate(st.KWaveGrid((32, 32), 1e-4), water, st.KSource(p0=np.ones((32, 32))),
                    st.KSensor(mask=np.ones((32, 32), bool)), elastic_interface="slip")  # fmt: skip
