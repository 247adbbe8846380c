"""Result files a user can read and re-run, ``sonotile plot``, and checks without tests so far:
resolution warnings, smoothing of the sound speed and density, ``--float64``."""

from __future__ import annotations

import subprocess
import sys
import warnings

import h5py
import numpy as np
import pytest
from paths import REFERENCE

import sonotile as st

SHAPE = (64, 56)


def case():
    grid = st.KWaveGrid(SHAPE, spacing=1e-4)
    c = np.full(SHAPE, 1500.0)
    c[40:] = 1600.0
    med = st.KWaveMedium(sound_speed=c, density=1000.0, alpha_coeff=0.5, BonA=6.0)
    x, y = np.meshgrid(*(np.arange(n) - n // 2 for n in SHAPE), indexing="ij")
    src = st.KSource(p0=1e5 * (x**2 + y**2 <= 9))
    mask = np.zeros(SHAPE, bool)
    mask[32, 24:32] = True
    return grid, med, src, st.KSensor(mask=mask, record=("p", "p_max", "p_max_all"))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = tmp_path_factory.mktemp("res") / "res.h5"
    res = st.simulate(*case(), pml_alpha=1.5, quiet=True)
    res.save(str(path))
    return path, res


def test_result_file_has_units_and_reruns_bit_identically(saved):
    path, res = saved
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "sonotile-results"
        assert f["results/p"].attrs["units"] == "Pa" and f["results/t"].attrs["units"] == "s"
        assert f["input/medium/sound_speed"].attrs["units"] == "m/s"
        assert tuple(f["input/grid"].attrs["shape"]) == SHAPE
        assert f["input/grid"].attrs["dt_units"] == "s"
        assert f["input/sensor/mask"].attrs["units"] == ""  # a mask has no unit
        assert f["results/sensor_points"].attrs["units"] == "grid index (0-based)"
    from sonotile.api.results import unit_of

    assert (unit_of("p_mask"), unit_of("u_mask"), unit_of("transducer_delays")) == (
        "", "", "time steps")  # fmt: skip
    inputs, options = st.load_input(str(path))
    assert options["pml_alpha"] == 1.5 and inputs[3].record == ("p", "p_max", "p_max_all")
    again = st.simulate(*inputs, **options, quiet=True)
    np.testing.assert_array_equal(again["p"], res["p"])
    np.testing.assert_array_equal(st.load_results(str(path))["p_max_all"], res["p_max_all"])


@pytest.mark.parametrize("which", ["sonotile", "kwave"])
def test_plot_command_writes_pngs(saved, tmp_path, which):
    src = saved[0] if which == "sonotile" else (
        REFERENCE / "3d_het_lossless_p0_cuboid_allfields_s25" / "output.h5")  # fmt: skip
    out = tmp_path / "fig.png"
    cmd = [sys.executable, "-m", "sonotile.commands.cli", "plot", str(src), "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"


def test_plot_command_refuses_other_files(tmp_path):
    bad = tmp_path / "x.h5"
    with h5py.File(bad, "w") as f:
        f["a"] = 1
    r = subprocess.run([sys.executable, "-m", "sonotile.commands.cli", "plot", str(bad)],
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "k-Wave output" in r.stderr


def test_resolution_warning_for_a_signal_above_the_grid_frequency():
    grid, med, _, sen = case()
    grid.dt, grid.nt = 1e-8, 200
    t = np.arange(200) * 1e-8
    mask = np.zeros(SHAPE, bool)
    mask[30, 28] = True
    for f0, warned in ((2e6, False), (12e6, True)):  # the grid resolves 7.5 MHz at 1500 m/s
        src = st.KSource(p=1e3 * np.sin(2 * np.pi * f0 * t), p_mask=mask)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            st.simulate(grid, med, src, sen)  # not quiet: the warnings are issued
        assert any("energy lies above" in str(x.message) for x in w) == warned, f0


def test_smoothing_sound_speed_and_density_acts_at_the_steps_only():
    from sonotile.api import Options, build_problem

    grid, med, src, sen = case()
    plain, _ = build_problem(grid, med, src, sen, Options())
    smooth, _ = build_problem(grid, med, src, sen, Options(smooth_c0=True, smooth_rho0=True))
    c0, c1 = np.asarray(plain.medium.c0), np.asarray(smooth.medium.c0)
    assert np.array_equal(c0, med.sound_speed)
    edge = np.abs(c1 - c0)[38:42].max()
    assert 5 < edge < 100  # the step at x = 40 is smoothed ...
    # ... and at the periodic wrap (x = 63 | 0, k-Wave's smoothing is spectral), nowhere else
    assert np.abs(c1 - c0)[8:30].max() < 1 and np.abs(c1 - c0)[50:56].max() < 1
    assert np.abs(np.asarray(smooth.medium.rho0) - 1000.0).max() < 1e-9  # uniform: unchanged
    rho = np.where(np.arange(SHAPE[0])[:, None] >= 40, 1200.0, 1000.0) * np.ones(SHAPE)
    med.density = rho
    only_rho, _ = build_problem(grid, med, src, sen, Options(smooth_rho0=True))
    r1 = np.asarray(only_rho.medium.rho0)
    assert np.array_equal(np.asarray(only_rho.medium.c0), c0)  # smooth_c0 off: untouched
    assert 10 < np.abs(r1 - rho)[38:42].max() < 200 and np.abs(r1 - rho)[8:30].max() < 2


def test_float64_command_line_run_matches_kwave(tmp_path):
    case_dir = REFERENCE / "2d_homog_lossless_p0_index"

    def run(*flags):
        out = tmp_path / f"o{len(flags)}.h5"
        r = subprocess.run([sys.executable, "-m", "sonotile.kwave.cli", "-i",
                            str(case_dir / "input.h5"), "-o", str(out), *flags],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
        assert r.returncode == 0, r.stderr
        with h5py.File(out) as f:
            return f["p"][()].astype(np.float64)

    p64, p32 = run("--float64"), run()
    with h5py.File(case_dir / "output.h5") as g:
        ref = g["p"][()].astype(np.float64)
    assert np.abs(p64 - ref).max() / np.abs(ref).max() < 1e-4
    # computed in double precision: not the float32 run's bits, but equal to its round-off
    assert 0 < np.abs(p64 - p32).max() / np.abs(ref).max() < 1e-5


def test_plot_reads_source_points_and_sensor_positions(saved):
    from sonotile.commands.plot import read_any

    d = read_any(str(saved[0]))
    assert d["labels"][0] == "x = 3.2, y = 2.4 mm"  # mask[32, 24], 0.1 mm spacing
    centre = d["source"].mean(axis=0)  # the p0 disc around (32, 28)
    np.testing.assert_allclose(centre, (32, 28), atol=0.5)
    assert d["t"].shape == (d["p"].shape[1],)


def test_signed_field_gets_a_centred_diverging_map():
    import matplotlib

    matplotlib.use("Agg")
    from sonotile.commands.plot import planes_through

    field = np.zeros((40, 30))
    field[10, 5], field[20, 20] = -3e5, 1e5  # [Pa]
    fig = planes_through(field, (1e-4, 1e-4), title="final pressure", mark="max |p|")
    ax = fig.axes[0]
    im = ax.images[0]
    assert im.get_cmap().name == "RdBu_r" and im.get_clim() == (-300.0, 300.0)  # kPa
    assert [t.get_text() for t in ax.texts] == ["max |p|"]
    assert "kPa" in fig.axes[1].get_ylabel()


def test_three_planes_through_the_focus_in_db_with_source_marked():
    import matplotlib

    matplotlib.use("Agg")
    from sonotile.commands.plot import planes_through

    x, y, z = np.meshgrid(np.arange(30), np.arange(20), np.arange(16), indexing="ij")
    field = 1e6 * np.exp(-((x - 20) ** 2 + (y - 8) ** 2 + (z - 5) ** 2) / 8)  # focus (20, 8, 5)
    source = np.argwhere((x == 3) & (abs(y - 8) <= 4) & (abs(z - 5) <= 4))  # a square at x = 3
    fig = planes_through(field, (2e-4, 1e-4, 1e-4), db=True, source=source)
    maps = [ax for ax in fig.axes if ax.images]
    assert [ax.get_title() for ax in maps] == [
        "max pressure, x = 4.0 mm",
        "max pressure, y = 0.8 mm",
        "max pressure, z = 0.5 mm",
    ]
    assert all(ax.images[0].get_clim() == (-40, 0) for ax in maps)
    assert [ax.get_ylabel() for ax in fig.axes if not ax.images] == ["dB re max"] * 3
    assert [t.get_text() for t in maps[0].texts] == ["focus"]
    legends = [ax.get_legend() for ax in maps]  # the source crosses the y and z planes only
    assert [lg is not None for lg in legends] == [False, True, True]
    assert maps[0].get_xlabel() == "z [mm]" and maps[0].get_ylabel() == "y [mm]"
