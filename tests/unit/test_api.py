"""The k-Wave-style API: source scaling, PML outside the grid, intensity, input errors."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st
from sonotile.model.filters import smooth, smoothing_window
from sonotile.model.problem import ProblemError

C, RHO, DX, F0, A = 1500.0, 1000.0, 1e-4, 0.5e6, 1.0e3  # m/s, kg/m^3, m, Hz, Pa or m/s


def plane_wave_1d(source: st.KSource, record=("p",), n=512, steps=1500):
    """1-D run with a point source at x = 100 and sensors downstream."""
    grid = st.KWaveGrid((n,), DX, dt=0.2 * DX / C, nt=steps)
    mask = np.zeros(n, bool)
    mask[[160, 180]] = True
    res = st.simulate(
        grid,
        st.KWaveMedium(C, RHO),
        source,
        st.KSensor(mask=mask, record=record),
        progress=False,
        dtype="float32",
    )
    return grid, res


def tone(grid_dt: float, steps: int) -> np.ndarray:
    t = np.arange(steps) * grid_dt
    ramp = np.clip(t * F0 / 3, 0, 1)  # 3-cycle ramp
    return ramp * np.sin(2 * np.pi * F0 * t)


def source_mask(n=512):
    m = np.zeros(n, bool)
    m[100] = True
    return m


def steady_amplitude(trace: np.ndarray, dt: float) -> float:
    """Amplitude of the last 4 periods (steady state), from the Fourier coefficient at F0."""
    n_per = int(round(1 / (F0 * dt)))
    seg = trace[-4 * n_per :]
    t = np.arange(seg.size) * dt
    return float(2 * abs(np.mean(seg * np.exp(-2j * np.pi * F0 * t))))


@pytest.mark.parametrize("mode", ["additive", "additive-no-correction"])
def test_additive_pressure_source_radiates_its_amplitude(mode):
    """k-Wave scales an additive pressure source (p * 2 dt / (D c dx)) so that a 1-D point
    source radiates a wave of the signal's amplitude."""
    dt = 0.2 * DX / C
    src = st.KSource(p=A * tone(dt, 1500), p_mask=source_mask(), p_mode=mode)
    grid, res = plane_wave_1d(src)
    amp = steady_amplitude(res["p"][0], grid.dt)
    assert amp == pytest.approx(A, rel=0.02)


def test_dirichlet_pressure_source_sets_pressure_exactly():
    dt = 0.2 * DX / C
    sig = A * tone(dt, 1200)
    mask = source_mask()
    grid = st.KWaveGrid((512,), DX, dt=dt, nt=1200)
    res = st.simulate(
        grid,
        st.KWaveMedium(C, RHO),
        st.KSource(p=sig, p_mask=mask, p_mode="dirichlet"),
        st.KSensor(mask=mask, record=("p",)),
        progress=False,
    )
    np.testing.assert_allclose(res["p"][0], sig, rtol=1e-5, atol=1e-6 * A)


def test_additive_velocity_source_radiates_its_amplitude():
    dt = 0.2 * DX / C
    u0 = A / (RHO * C)
    src = st.KSource(ux=u0 * tone(dt, 1500), u_mask=source_mask(), u_mode="additive")
    grid, res = plane_wave_1d(src, record=("u",))
    assert steady_amplitude(res["ux"][0], grid.dt) == pytest.approx(u0, rel=0.02)


def test_intensity_of_a_plane_wave():
    """Time-averaged intensity of a plane wave: p0^2 / (2 rho c) (k-Wave's I_avg)."""
    dt = 0.2 * DX / C
    src = st.KSource(p=A * tone(dt, 1200), p_mask=source_mask(), p_mode="additive")
    grid = st.KWaveGrid((512,), DX, dt=dt, nt=1200)
    mask = np.zeros(512, bool)
    mask[160] = True
    res = st.simulate(
        grid,
        st.KWaveMedium(C, RHO),
        src,
        st.KSensor(mask=mask, record=("I", "I_avg"), record_start_index=700),
        progress=False,
    )
    assert res["Ix_avg"][0] == pytest.approx(A**2 / (2 * RHO * C), rel=0.03)
    assert res["Ix"].shape == (1, 1200 - 699)


def test_pml_outside_keeps_user_grid_and_matches_inside():
    """With ``pml_inside=False`` the grid grows by the PML and whole-field outputs come back on
    the user's grid; the wave inside equals a PML-inside run on the larger grid."""
    n, pml = 64, 12
    x, y = np.meshgrid(np.arange(n) - n // 2, np.arange(n) - n // 2, indexing="ij")
    p0 = np.exp(-(x**2 + y**2) / 8.0)
    mask = np.zeros((n, n), bool)
    mask[40, 32] = True
    grid = st.KWaveGrid((n, n), DX, dt=0.3 * DX / C, nt=80)
    out = st.simulate(
        grid,
        st.KWaveMedium(C, RHO),
        st.KSource(p0=p0),
        st.KSensor(mask=mask, record=("p", "p_final")),
        pml_size=pml,
        pml_inside=False,
        progress=False,
    )
    big = np.pad(smooth(p0, restore_max=True), pml)  # k-Wave smooths before expanding
    mask_big = np.pad(mask, pml)
    grid2 = st.KWaveGrid((n + 2 * pml,) * 2, DX, dt=0.3 * DX / C, nt=80)
    ins = st.simulate(
        grid2,
        st.KWaveMedium(C, RHO),
        st.KSource(p0=big),
        st.KSensor(mask=mask_big, record=("p", "p_final")),
        pml_size=pml,
        smooth_p0=False,
        progress=False,
    )
    assert out["p_final"].shape == (n, n)
    np.testing.assert_allclose(out["p"], ins["p"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(out["p_final"], ins["p_final"][pml:-pml, pml:-pml], atol=1e-6)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"medium": st.KWaveMedium(-1.0)}, "sound_speed"),
        ({"source": st.KSource(p=np.ones(10))}, "p_mask"),
        ({"source": st.KSource(p=np.ones(10), p_mask=np.ones((3, 3), bool))}, "p_mask: shape"),
        ({"source": st.KSource(p0=np.ones((5, 5)))}, "p0"),
        ({"sensor": st.KSensor(mask=np.zeros((64, 64), bool))}, "sensor.mask: no points"),
        ({"sensor": st.KSensor(mask=np.ones((64, 64), bool), record=("q",))}, "unknown quantity"),
        ({"medium": st.KWaveMedium(C, alpha_coeff=0.5, alpha_power=1.0)}, "alpha_power"),
    ],
)
def test_bad_input_names_the_parameter(kwargs, message):
    args = {
        "kgrid": st.KWaveGrid((64, 64), DX),
        "medium": st.KWaveMedium(C, RHO),
        "source": st.KSource(p0=np.ones((64, 64))),
        "sensor": st.KSensor(mask=np.ones((64, 64), bool)),
    }
    args.update(kwargs)
    with pytest.raises(ProblemError, match=message):
        st.simulate(**args, progress=False)


def test_unstable_time_step_warns():
    grid = st.KWaveGrid((64, 64), DX, dt=0.9 * DX / 1500, nt=2)
    c = np.full((64, 64), 1500.0)
    c[:32] = 3000.0
    with pytest.warns(UserWarning, match="stability limit"):
        st.simulate(
            grid,
            st.KWaveMedium(c, RHO, sound_speed_ref=1500.0),
            st.KSource(p0=np.ones((64, 64))),
            st.KSensor(mask=np.ones((64, 64), bool)),
            progress=False,
        )


@pytest.mark.parametrize("shape", [(31,), (32, 20), (9, 12, 7)])
def test_smoothing_window_keeps_dc_and_removes_nyquist(shape):
    """k-Wave's smoothing window: exactly 1 at DC (a constant field is unchanged) and close to
    0 at the highest wavenumbers; restore_max keeps the peak."""
    win = np.fft.ifftshift(smoothing_window(shape))
    assert win.flat[0] == pytest.approx(1.0, abs=1e-12)
    corner = tuple(n // 2 for n in shape)
    assert win[corner] < 0.01
    assert np.allclose(smooth(np.full(shape, 3.0)), 3.0)
    rng = np.random.default_rng(1)
    a = rng.random(shape)
    assert np.abs(smooth(a, restore_max=True)).max() == pytest.approx(np.abs(a).max())


def test_transducer_source_equals_delayed_velocity_sources():
    """A transducer source (one signal, per-point delays, on ux) equals an additive-no-
    correction ux source whose per-point signals are the delayed signal (k-Wave's scaling
    2 c0 dt / dx applies to both)."""
    n = (64, 64)
    mask = np.zeros(n, bool)
    mask[30, 22:42:4] = True
    delays = np.arange(5) * 3
    dt = 0.3 * DX / C
    sig = 1e-3 * tone(dt, 120)
    grid = st.KWaveGrid(n, DX, dt=dt, nt=80)
    sens = st.KSensor(mask=np.ones(n, bool) & ~mask, record=("p",))
    tr = st.simulate(
        grid,
        st.KWaveMedium(C, RHO),
        st.KSource(transducer_mask=mask, transducer_signal=sig, transducer_delays=delays),
        sens,
        progress=False,
    )
    per_point = np.stack([sig[d : d + 80] for d in delays])
    ux = st.simulate(
        grid,
        st.KWaveMedium(C, RHO),
        st.KSource(ux=per_point, u_mask=mask, u_mode="additive-no-correction"),
        sens,
        progress=False,
    )
    assert np.abs(tr["p"]).max() > 0
    np.testing.assert_allclose(tr["p"], ux["p"], rtol=0, atol=1e-6 * np.abs(ux["p"]).max())


def test_sensor_points_in_given_order_equal_mask_sensor():
    n = (64, 64)
    x, y = np.meshgrid(np.arange(64) - 32, np.arange(64) - 32, indexing="ij")
    src = st.KSource(p0=np.exp(-(x**2 + y**2) / 6.0))
    pts = np.array([[40, 30], [20, 10], [33, 50]])
    mask = np.zeros(n, bool)
    mask[tuple(pts.T)] = True
    grid = st.KWaveGrid(n, DX, dt=0.3 * DX / C, nt=40)
    a = st.simulate(grid, st.KWaveMedium(C, RHO), src, st.KSensor(points=pts), progress=False)
    b = st.simulate(grid, st.KWaveMedium(C, RHO), src, st.KSensor(mask=mask), progress=False)
    order = np.lexsort((pts[:, 0], pts[:, 1]))  # k-Wave's mask order: x fastest
    np.testing.assert_array_equal(a["p"][order], b["p"])
    with pytest.raises(ProblemError, match="sensor.points"):
        st.simulate(grid, st.KWaveMedium(C, RHO), src, st.KSensor(points=[[64, 0]]), progress=False)
