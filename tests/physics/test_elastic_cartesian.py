"""Cartesian sensor points of the elastic model (``sensor.mask`` of shape ``(ndim, N)`` [m], as
k-Wave's pstdElastic2D/3D take it): ``"linear"`` reads every field on its own staggered grid at
the point, ``"nearest"`` records at the nearest grid point exactly as a binary mask does, in the
user's order; points outside the grid are refused in the user's names."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.interpolate import RegularGridInterpolator

import sonotile as st
from sonotile.api.elastic import prepare
from sonotile.api.elastic.checkpoint import fingerprint
from sonotile.model.problem import ProblemError

N, DX, NT, PML = 40, 1e-4, 40, 8
KWAVE = Path(__file__).parent.parent / "data" / "kwave-elastic-sensors"
CP, CS, RHO = 2000.0, 1000.0, 1500.0
#: every field a point sensor reads, and where it lives on the grid [points]
OFFSETS = {"p": (0, 0), "sxx": (0, 0), "syy": (0, 0), "ux": (0.5, 0), "uy": (0, 0.5),
           "sxy": (0.5, 0.5)}  # fmt: skip
POINT_RECORDS = ("p", "p_max", "p_min", "p_rms", "u", "u_max", "u_min", "u_rms",
                 "u_non_staggered", "u_split_field", "s")  # fmt: skip


def _grid(shape=(N, N), nt=NT):
    return st.KWaveGrid(shape, DX, dt=0.2 * DX / CP, nt=nt)


def _source(shape=(N, N), centre=(-3, 2)):
    x = np.meshgrid(*[np.arange(n) - n // 2 - c for n, c in zip(shape, centre)], indexing="ij")
    return st.ElasticSource(p0=1e3 * np.exp(-sum(a**2 for a in x) / (2 * 2.5**2)))


def _metres(coords, shape=(N, N)):
    """Continuous grid coordinates ``(N, ndim)`` as Cartesian points ``(ndim, N)`` [m]."""
    return ((np.asarray(coords, float) - np.array(shape) // 2) * DX).T


def _run(mask, record, interp="linear", start=1, **kw):
    sensor = st.KSensor(mask=mask, record=record, record_start_index=start, cart_interp=interp)
    return st.pstd_elastic_2d(_grid(), st.KWaveElasticMedium(CP, CS, RHO), _source(), sensor,
                              pml_size=PML, dtype="float64", **kw)  # fmt: skip


def _fourier_value(field, coords, offset):
    """The band-limited (trigonometric) interpolant of a periodic grid field at ``coords``
    ``(N, 2)`` [points], the field's samples lying at ``index + offset``."""
    f = np.fft.fft2(field) / field.size
    k = [2j * np.pi * np.fft.fftfreq(n) for n in field.shape]
    out = []
    for c in coords:
        ex = [np.exp(kk * (c[a] - offset[a])) for a, kk in enumerate(k)]
        out.append(np.real(ex[0] @ f @ ex[1]))
    return np.array(out)


def _bilinear_bound(field):
    """Largest error of bilinear interpolation on a unit grid of the band-limited field:
    ``(max |f_xx| + max |f_yy|) / 8``."""
    f = np.fft.fft2(field)
    k = np.meshgrid(*[2 * np.pi * np.fft.fftfreq(n) for n in field.shape], indexing="ij")
    return sum(np.abs(np.real(np.fft.ifft2(-(kk**2) * f))).max() for kk in k) / 8


RNG = np.random.default_rng(7)
COORDS = RNG.uniform(PML + 2, N - PML - 3, size=(16, 2))


def test_linear_reads_every_field_at_the_point():
    """Each record at the last step equals the bilinear interpolation of that field's final
    values on its own staggered grid (to round-off), and the band-limited field at the point
    within the bilinear error bound; reading the staggered fields as if they lay on the grid
    points would exceed that bound."""
    rec = ("p", "u", "s", "p_final", "u_final", "s_final")
    out = _run(_metres(COORDS), rec, start=NT)
    wrong_stagger = []
    for name, off in OFFSETS.items():
        final, got = out[f"{name}_final"], out[name][:, -1]
        axes = [np.arange(n) + o for n, o in zip(final.shape, off)]
        want = RegularGridInterpolator(axes, final)(COORDS)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(final).max())
        exact = _fourier_value(final, COORDS, off)
        bound = _bilinear_bound(final)
        assert np.abs(got - exact).max() <= bound, name
        if any(off):
            unshifted = RegularGridInterpolator([np.arange(n) for n in final.shape], final)
            wrong_stagger.append(np.abs(unshifted(COORDS) - exact).max() / bound)
    assert min(wrong_stagger) > 3, wrong_stagger


def test_bli_reads_the_band_limited_field():
    """``"bli"`` at tolerance 0.01: every field within 1 % of its peak of the band-limited
    interpolant at the point (the truncated sinc's error is about the tolerance)."""
    sensor = st.KSensor(mask=_metres(COORDS), record=("p", "u", "s", "p_final", "u_final",
                        "s_final"), record_start_index=NT, cart_interp="bli",
                        bli_tolerance=0.01)  # fmt: skip
    out = st.pstd_elastic_2d(_grid(), st.KWaveElasticMedium(CP, CS, RHO), _source(), sensor,
                             pml_size=PML, dtype="float64")  # fmt: skip
    for name, off in OFFSETS.items():
        final = out[f"{name}_final"]
        exact = _fourier_value(final, COORDS, off)
        err = np.abs(out[name][:, -1] - exact).max() / np.abs(final).max()
        assert err < 1e-2, (name, err)


def test_linear_on_grid_points_equals_the_binary_mask():
    """Cartesian points on grid nodes read the fields that live there (pressure, normal
    stresses, the velocity moved to the nodes, its compressional and shear parts) as a binary
    mask does, to round-off."""
    idx = np.array([[14, 20], [25, 11], [12, 27], [20, 20]])
    rec = ("p", "s", "u_non_staggered", "u_split_field")
    cart = _run(_metres(idx), rec)
    mask = np.zeros((N, N), bool)
    mask[tuple(idx.T)] = True
    binary = _run(mask, rec)
    order = np.lexsort((idx[:, 0], idx[:, 1]))  # the mask's column-major order
    names = ("p", "sxx", "syy", "ux_non_staggered", "uy_non_staggered", "ux_split_p",
             "ux_split_s", "uy_split_p", "uy_split_s")  # fmt: skip
    for name in names:  # the velocity's half-cell shift by other transforms: round-off
        ref = binary[name]
        np.testing.assert_allclose(cart[name][order], ref, rtol=0,
                                   atol=1e-13 * np.abs(ref).max(), err_msg=name)  # fmt: skip


def test_nearest_equals_the_binary_mask_at_the_nearest_points():
    """``"nearest"``: every point record equals the binary mask's at the nearest grid point
    (halves rounded away from the grid centre, as k-Wave's cart2grid), in the user's order."""
    coords = np.array([[14.3, 20.7], [25.5, 11.2], [12.9, 27.5], [19.6, 20.4], [14.49, 19.5]])
    nearest = np.array([[14, 21], [26, 11], [13, 28], [20, 20], [14, 19]])
    cart = _run(_metres(coords), POINT_RECORDS, interp="nearest")
    mask = np.zeros((N, N), bool)
    mask[tuple(nearest.T)] = True
    binary = _run(mask, POINT_RECORDS)
    order = np.lexsort((nearest[:, 0], nearest[:, 1]))
    assert set(cart) == set(binary)
    for name, v in binary.items():
        np.testing.assert_array_equal(cart[name][order], v, err_msg=name)


def test_bad_points_are_refused_in_the_users_names():
    inside = _metres(COORDS[:3])
    outside = inside.copy()
    outside[1, 2] = (N - N // 2) * DX  # one point beyond the last grid line along y
    kw = dict(pml_size=PML, dtype="float64")
    medium = st.KWaveElasticMedium(CP, CS, RHO)
    cases = [
        (st.KSensor(mask=outside, cart_interp="linear"), r"Cartesian point 2 .* outside the grid"),
        (st.KSensor(mask=inside, cart_interp="cubic"), r"sensor.cart_interp = 'cubic'"),
        (st.KSensor(mask=np.zeros((3, 4))), r"sensor.mask: shape \(3, 4\)"),
        (st.KSensor(mask=np.full((2, 2), np.nan)), r"sensor.mask: Cartesian points"),
    ]
    for sensor, msg in cases:
        with pytest.raises(ProblemError, match=msg):
            st.pstd_elastic_2d(_grid(), medium, _source(), sensor, **kw)
    with pytest.raises(ProblemError, match="outside the grid"):
        st.simulate(_grid(), medium, _source(), st.KSensor(mask=outside), quiet=True)


def test_simulate_3d_and_the_saved_state_digest():
    """``st.simulate`` with an elastic medium in 3-D: the Cartesian records equal
    ``pstd_elastic_3d``'s and the trilinear reading of the final fields; the result carries
    the points as grid coordinates; a saved state is tied to the points and their reading."""
    shape, nt = (20, 18, 16), 14
    grid = st.KWaveGrid(shape, DX, dt=0.2 * DX / CP, nt=nt)
    medium, source = st.KWaveElasticMedium(CP, CS, RHO), _source(shape, (1, -1, 0))
    coords = np.array([[8.3, 9.6, 7.2], [11.7, 6.1, 9.5], [10.0, 10.5, 8.0]])
    sensor = st.KSensor(mask=_metres(coords, shape), record=("p", "u", "s", "u_final",
                        "s_final"), record_start_index=nt, cart_interp="linear")  # fmt: skip
    res = st.simulate(grid, medium, source, sensor, pml_size=4, dtype="float64", quiet=True)
    out = st.pstd_elastic_3d(grid, medium, source, sensor, pml_size=4, dtype="float64")
    np.testing.assert_allclose(res.sensor_points, coords, rtol=0, atol=1e-12)
    offsets = {"ux": (0.5, 0, 0), "uz": (0, 0, 0.5), "sxz": (0.5, 0, 0.5), "syy": (0, 0, 0)}
    for name, off in offsets.items():
        np.testing.assert_array_equal(res[name], out[name])
        final = out[f"{name}_final"]
        axes = [np.arange(n) + o for n, o in zip(shape, off)]
        want = RegularGridInterpolator(axes, final)(coords)
        np.testing.assert_allclose(out[name][:, -1], want, rtol=0,
                                   atol=1e-12 * np.abs(final).max())  # fmt: skip
    runs = [prepare(grid, medium, source, st.KSensor(mask=_metres(c, shape), cart_interp=i),
                    pml_size=4) for c, i in ((coords, "linear"), (coords, "bli"),
                                             (coords + 0.1, "linear"))]  # fmt: skip
    prints = [fingerprint(r)["sensor"] for r in runs]
    assert len(set(prints)) == 3


def test_make_simulator_records_and_gradient():
    """``make_simulator`` with Cartesian points: the records equal ``pstd_elastic_2d``'s and
    the gradient with respect to the compressional speed matches central differences."""
    shape, nt = (24, 24), 20
    grid = st.KWaveGrid(shape, DX, dt=0.2 * DX / CP, nt=nt)
    rng = np.random.default_rng(1)
    cp = CP + 100 * rng.random(shape)
    medium, source = st.KWaveElasticMedium(cp, CS, RHO), _source(shape, (2, 0))
    coords = np.array([[7.3, 9.8], [15.6, 12.2], [11.5, 16.9]])
    sensor = st.KSensor(mask=_metres(coords, shape), record=("p", "u", "s"),
                        cart_interp="linear")  # fmt: skip
    ref = st.pstd_elastic_2d(grid, medium, source, sensor, pml_size=5, dtype="float64")
    sim = st.make_simulator(grid, medium, source, sensor, pml_size=5, dtype="float64")
    np.testing.assert_array_equal(sim.sensor_points, coords)
    with jax.enable_x64(True):
        out = sim()
        for name in ("p", "ux", "sxy"):
            np.testing.assert_allclose(np.asarray(out[name]), ref[name], rtol=0,
                                       atol=1e-12 * np.abs(ref[name]).max())  # fmt: skip

        def loss(c):
            o = sim({"sound_speed_compression": c})
            return jnp.sum(o["p"] ** 2) + 1e12 * jnp.sum(o["uy"] ** 2) + jnp.sum(o["sxy"] ** 2)

        c0 = jnp.asarray(cp)
        g = jax.grad(loss)(c0)
        d = rng.standard_normal(shape)
        h = 1e-2
        fd = (loss(c0 + h * d) - loss(c0 - h * d)) / (2 * h)
        assert abs(float(jnp.sum(g * d)) - float(fd)) <= 1e-6 * abs(float(fd))


def _kwave_case() -> dict:
    """The case run by k-Wave (tests/data/kwave-elastic-sensors): water beside a solid, a disc of
    p0, 12 Cartesian points at distinct nearest grid points."""
    n, nt = 48, 90
    x = np.meshgrid(*[np.arange(n) - n // 2] * 2, indexing="ij")
    cs = np.full((n, n), 800.0)
    cs[:, :16] = 0.0
    rng = np.random.default_rng(5)
    coords = np.unique(rng.integers(10, 38, size=(12, 2)), axis=0) + rng.uniform(-0.45, 0.45, (
        1, 2))  # fmt: skip
    return dict(shape=np.array([n, n]), dx=DX, Nt=nt, dt=0.2 * DX / 2000, pml=8,
                p0=1e3 * ((x[0] - 3) ** 2 + (x[1] + 2) ** 2 <= 9), cp=np.full((n, n), 2000.0),
                cs=cs, rho=np.full((n, n), 1500.0), points=_metres(coords, (n, n)))  # fmt: skip


def test_against_kwave():
    """k-Wave's own pstdElastic2D (GNU Octave, float64) with Cartesian points, CartInterp
    'nearest', recording p, p_max, u, u_rms, I and I_avg: every record equal to round-off, in
    the points' order."""
    d = _kwave_case()
    grid = st.KWaveGrid(tuple(d["shape"]), DX, dt=d["dt"], nt=d["Nt"])
    sensor = st.KSensor(mask=d["points"], record=("p", "p_max", "u", "u_rms", "I", "I_avg"),
                        cart_interp="nearest")  # fmt: skip
    out = st.pstd_elastic_2d(grid, st.KWaveElasticMedium(d["cp"], d["cs"], d["rho"]),
                             st.ElasticSource(p0=d["p0"]), sensor, pml_size=d["pml"],
                             dtype="float64")  # fmt: skip
    ref = dict(np.load(KWAVE / "sensors.npz"))
    assert set(ref) == set(out)
    for k, v in ref.items():
        assert np.abs(out[k] - v).max() <= 1e-13 * np.abs(v).max(), k


if __name__ == "__main__":  # writing k-Wave's inputs / reading its output (see the .m file)
    from scipy.io import loadmat, savemat

    where = Path(sys.argv[2])
    if sys.argv[1] == "--inputs":
        savemat(where / "in_sensors.mat", {k: np.asarray(v, float) for k, v in
                                           _kwave_case().items()})  # fmt: skip
    else:
        out = loadmat(where / "out_nearest.mat")
        keep = {k: np.squeeze(v) if k.endswith(("_avg", "_max", "_rms")) else v
                for k, v in out.items() if not k.startswith("__")}  # fmt: skip
        np.savez_compressed(KWAVE / "sensors.npz", **keep)
