"""The Python API in the details a user hits: float64 without x64, device choice, the time axis
of recorded samples, k-Wave's Nt for a given dt, errors in the user's names, and warnings for
input that runs but is probably not what was meant."""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError

SHAPE = (64, 56)


def case(record=("p",), start=1, **medium):
    grid = st.KWaveGrid(SHAPE, spacing=1e-4)
    med = st.KWaveMedium(**{"sound_speed": 1500.0, "density": 1000.0, **medium})
    x, y = np.meshgrid(*(np.arange(n) - n // 2 for n in SHAPE), indexing="ij")
    src = st.KSource(p0=1e5 * (x**2 + y**2 <= 9))
    mask = np.zeros(SHAPE, bool)
    mask[32, 24:32] = True
    return grid, med, src, st.KSensor(mask=mask, record=record, record_start_index=start)


def test_float64_without_x64_runs_in_float64_and_restores_the_mode():
    assert not jax.config.jax_enable_x64
    res = st.simulate(*case(), dtype="float64", quiet=True)
    assert res["p"].dtype == np.float64
    assert not jax.config.jax_enable_x64
    ref = st.simulate(*case(), quiet=True)
    assert np.abs(res["p"] - ref["p"]).max() < 1e-4 * np.abs(ref["p"]).max()


def test_device_choice():
    dev = jax.devices()[0]
    res = st.simulate(*case(), device=dev, quiet=True)
    assert res["p"].shape[0] == 8
    with pytest.raises(ValueError, match="decomposition 'single'"):
        st.simulate(*case(), devices=[dev, dev], quiet=True)


def test_time_axis_matches_recorded_samples_when_recording_starts_late():
    res = st.simulate(*case(start=11), quiet=True)
    assert res["p"].shape[1] == len(res.t)
    assert res.t[0] == pytest.approx(10 * res.grid.dt)
    assert res.t[-1] == pytest.approx((res.grid.nt - 1) * res.grid.dt)


def test_given_dt_without_nt_gives_kwaves_nt():
    grid, med, src, sen = case()
    grid.dt = 2e-8
    res = st.simulate(grid, med, src, sen, quiet=True)
    t_end = math.hypot(*(n * 1e-4 for n in SHAPE)) / 1500.0  # k-Wave: diagonal at min c
    assert res.grid.dt == 2e-8
    assert res.grid.nt == math.floor(t_end / 2e-8) + 1


def test_given_dt_on_an_anisotropic_heterogeneous_grid_gives_kwaves_nt():
    """k-wave-python's makeTime: t_end = |grid size| / min(c), Nt = floor(t_end / dt) + 1."""
    _, _, src, sen = case()
    c = np.full(SHAPE, 1500.0)
    c[:10] = 1400.0
    grid = st.KWaveGrid(SHAPE, spacing=(2e-4, 1e-4), dt=3e-8)
    res = st.simulate(grid, st.KWaveMedium(sound_speed=c), src, sen, quiet=True)
    t_end = math.hypot(SHAPE[0] * 2e-4, SHAPE[1] * 1e-4) / 1400.0
    assert (res.grid.dt, res.grid.nt) == (3e-8, math.floor(t_end / 3e-8) + 1)
    assert len(res.t) == res.grid.nt and res.t[-1] == pytest.approx((res.grid.nt - 1) * 3e-8)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(sound_speed=np.full(SHAPE[::-1], 1500.0)), "pass medium.sound_speed.T"),
        (dict(sound_speed=np.full((3, 3), 1500.0)), "medium.sound_speed: shape (3, 3)"),
        (dict(density=-1.0), "medium.density: must be > 0"),
        (dict(BonA=np.nan), "medium.BonA: contains NaN"),
        (dict(sound_speed_ref=-5.0), "medium.sound_speed_ref"),
    ],
)
def test_errors_name_the_users_parameter(change, message):
    with pytest.raises(ProblemError) as e:
        st.simulate(*case(**change), quiet=True)
    assert message in str(e.value)
    assert "medium.c0" not in str(e.value) and "medium.rho0" not in str(e.value)


def source_and_sensor_errors() -> list:
    mask = np.zeros(SHAPE, bool)
    mask[30, 20:25] = True  # 5 source points
    sig = np.ones((5, 40))
    return [
        (st.KSource(p=sig.T, p_mask=mask), None, "pass source.p.T (one row per source point)"),
        (
            st.KSource(ux=sig[:3], u_mask=mask),
            None,
            "source.ux: shape (3, 40), expected (Nt,) or (5, Nt) for the 5 points of its mask",
        ),
        (st.KSource(p=sig, p_mask=mask.T), None, "source.p_mask: shape (56, 64)"),
        (None, st.KSensor(points=np.array([[1, 2, 3], [4, 5, 6]])), "pass sensor.points.T"),
        (None, st.KSensor(points=np.array([[1, 2], [70, 5]])), "point (70, 5) is outside the grid"),
        (None, st.KSensor(mask=mask, record_start_index=0), "sensor.record_start_index = 0"),
    ]


@pytest.mark.parametrize("source, sensor, message", source_and_sensor_errors())
def test_source_and_sensor_errors_in_the_users_terms(source, sensor, message):
    grid, med, src, sen = case()
    with pytest.raises(ProblemError) as e:
        st.simulate(grid, med, source or src, sensor or sen, quiet=True)
    assert message in str(e.value)
    assert ".index" not in str(e.value) and "sensor.start" not in str(e.value)


def test_points_are_grid_indices_not_metres():
    grid, med, src, _ = case()
    with pytest.raises(ProblemError, match="grid indices"):
        st.simulate(grid, med, src, st.KSensor(points=np.array([[1.5e-3, 2e-3]])), quiet=True)
    with pytest.raises(ProblemError, match="Cartesian point lies outside the grid"):
        st.simulate(grid, med, src, st.KSensor(mask=np.full((2, 10), 5e-3)), quiet=True)


def test_warnings_for_input_that_is_probably_wrong():
    grid, med, src, sen = case()
    pml_sensor = np.zeros(SHAPE, bool)
    pml_sensor[2, 30] = pml_sensor[30, 30] = True
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        st.simulate(grid, med, st.KSource(p0=np.zeros(SHAPE)), sen)  # not quiet: warned
        st.simulate(grid, med, src, st.KSensor(mask=pml_sensor))
        st.simulate(grid, med, src, st.KSensor(mask=sen.mask, record=()))
    text = " | ".join(str(x.message) for x in w)
    assert "nothing is emitted" in text
    assert "sensor: 1 point(s) inside the PML" in text
    assert "nothing will be recorded" in text


def messages(*args, **kwargs) -> list[str]:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        st.simulate(*args, **kwargs)  # not quiet: the warnings are issued
    return [str(x.message) for x in w]


def test_no_warning_for_sound_input():
    assert messages(*case()) == []


def test_warnings_for_sources_and_cuboids_in_the_pml():
    grid, med, _, sen = case()
    p0 = np.zeros(SHAPE)
    p0[3:6, 20:24] = 1e5  # 12 points in the x PML (20 points)
    text = " | ".join(messages(grid, med, st.KSource(p0=p0), sen, smooth_p0=False))
    assert "source.p0: 12 point(s) inside the PML" in text
    mask = np.zeros(SHAPE, bool)
    mask[30, 25:28] = True
    corners = [((30, 30), (34, 34)), ((25, 10), (27, 40))]  # the second reaches y < 20
    sig = np.sin(np.arange(100) * 0.3)
    text = " | ".join(messages(grid, med, st.KSource(p=sig, p_mask=mask),
                               st.KSensor(corners=corners, record=("p",))))  # fmt: skip
    assert "sensor: 1 cuboid(s) reaching inside the PML" in text
    assert "source.p_mask" not in text


def test_warning_for_cartesian_sensor_points_in_the_pml():
    grid, med, src, _ = case()
    inside = np.array([[0.0, 0.5e-3], [0.2e-3, 0.0]])  # (2, N) [m] from the grid centre
    assert messages(grid, med, src, st.KSensor(mask=inside)) == []
    edge = np.array([[0.0, -3.05e-3], [0.2e-3, 0.0]])  # the second at x index 1.5 (PML: 20)
    (text,) = messages(grid, med, src, st.KSensor(mask=edge))
    assert "sensor: 1 point(s) inside the PML" in text


def test_warning_for_a_sensor_no_wave_reaches():
    grid, med, src, _ = case()
    grid.dt, grid.nt = 2e-8, 40  # sound travels 1.2 mm in the run
    near, far = np.zeros(SHAPE, bool), np.zeros(SHAPE, bool)
    near[44, 28] = True  # 0.9 mm from the edge of the p0 disc (radius 0.3 mm around (32, 28))
    far[58, 28] = True  # 2.3 mm from it
    assert messages(grid, med, src, st.KSensor(mask=near), pml_size=4) == []
    (text,) = messages(grid, med, src, st.KSensor(mask=far), pml_size=4)
    assert "sensor: every point is 2" in text and "records nothing" in text


def test_stokes_absorption_takes_alpha_power_two_with_a_warning():
    """As in k-Wave, ``alpha_mode="stokes"`` absorbs with alpha_power = 2 whatever the user gave,
    and warns in the user's names: alpha_power = 1.5 gives the alpha_power = 2 field."""
    n, dx = 64, 1e-4
    grid = st.KWaveGrid((n,), spacing=dx)
    grid.dt, grid.nt = 0.3 * dx / 1500, 120
    p0 = np.exp(-(((np.arange(n) - 20) / 3.0) ** 2))
    out = {}
    for y in (1.5, 2.0):
        med = st.KWaveMedium(sound_speed=1500.0, density=1000.0, alpha_coeff=20.0,
                             alpha_mode="stokes", alpha_power=y)  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out[y] = st.simulate(grid, med, st.KSource(p0=p0), st.KSensor(mask=np.ones(n, bool)),
                                 pml_size=10)["p"]  # fmt: skip
        said = [str(w.message) for w in caught if "alpha_power" in str(w.message)]
        assert said == ([] if y == 2.0 else [
            "medium.alpha_mode = 'stokes': absorption is Stokes' (alpha_power = 2, "
            "medium.alpha_coeff in dB/(MHz^2 cm)); medium.alpha_power = 1.5 is ignored, as in "
            "k-Wave (set it to 2 to silence this warning)"])  # fmt: skip
    np.testing.assert_array_equal(out[1.5], out[2.0])


def test_stokes_absorption_matches_the_analytic_plane_wave_decay():
    """1-D CW plane wave in a Stokes (frequency-squared) absorbing medium: the amplitude ratio of
    two points 10 mm apart is exp(-alpha dx), alpha = a0 f^2 in dB/(MHz^2 cm) -> Np/m."""
    n, dx, f0, a0 = 800, 5e-5, 1e6, 5.0
    grid = st.KWaveGrid((n,), spacing=dx)
    grid.dt, grid.nt = 0.3 * dx / 1500, 4400
    med = st.KWaveMedium(sound_speed=1500.0, density=1000.0, alpha_coeff=a0, alpha_mode="stokes",
                         alpha_power=2.0)  # fmt: skip
    t = np.arange(grid.nt) * grid.dt
    mask = np.zeros(n, bool)
    mask[40] = True
    src = st.KSource(p=1e3 * np.sin(2 * np.pi * f0 * t) * np.minimum(1, t * f0 / 3),
                     p_mask=mask)  # fmt: skip
    sen_mask = np.zeros(n, bool)
    x1, x2 = 200, 400
    sen_mask[[x1, x2]] = True
    res = st.simulate(grid, med, src, st.KSensor(mask=sen_mask), pml_size=30, quiet=True)
    period = int(round(1 / (f0 * grid.dt)))
    last = res["p"][:, -6 * period :]
    amp = np.abs(last).max(axis=1)
    alpha = a0 * (f0 / 1e6) ** 2 * 100 / (20 / np.log(10))  # Np/m
    expected = math.exp(-alpha * (x2 - x1) * dx)
    assert amp[1] / amp[0] == pytest.approx(expected, rel=0.02)
    lossless = st.simulate(grid, st.KWaveMedium(sound_speed=1500.0, density=1000.0), src,
                           st.KSensor(mask=sen_mask), pml_size=30, quiet=True)  # fmt: skip
    ratio = np.abs(lossless["p"][:, -6 * period :]).max(axis=1)
    assert ratio[1] / ratio[0] == pytest.approx(1.0, rel=0.01)  # the decay is the absorption


def test_command_line_spelling_and_unknown_flags():
    import subprocess
    import sys

    def run(*args):
        return subprocess.run([sys.executable, "-m", "sonotile.commands.cli", *args],
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    r = run()
    assert r.returncode == 2 and "usage: sonotile <command>" in r.stderr
    r = run("bach")
    assert r.returncode == 2 and "did you mean batch?" in r.stderr
    r = run("demo", "--sise", "3")
    assert r.returncode == 2 and "did you mean --size?" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run("kwave", "-i", "a.h5", "-o", "b.h5", "--p_mx")
    assert r.returncode == 1 and "did you mean --p_max?" in r.stderr
    # k-Wave's underscore spelling everywhere, the hyphenated one accepted too
    assert "--cpu_devices" in run("launch", "-h").stdout
    bench_help = run("bench", "-h").stdout
    assert "[--kwave_binary KWAVE_BINARY]" in bench_help and "--kwave-binary" not in bench_help
    assert "[--devices_per_run DEVICES_PER_RUN]" in run("batch", "-h").stdout
    r = run("launch", "-n", "1", "--cpu-devices", "1", "--", sys.executable, "-c", "pass")
    assert r.returncode == 0, r.stderr


def test_kwave_flags_share_the_spelling_rule():
    from sonotile.kwave.cli import UsageError, parse

    a = parse(["-i", "in.h5", "-o", "out.h5", "--cpu-devices", "2", "--p-max", "--p_raw"])
    assert (a.cpu_devices, a.record) == (2, ("p", "p_max"))
    with pytest.raises(UsageError, match=r"unknown option --p-maxx \(did you mean --p_max\?\)"):
        parse(["-i", "in.h5", "-o", "out.h5", "--p-maxx"])
