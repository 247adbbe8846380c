"""How a plan's CW runs are stepped and spread (``RunSettings``): the time step from the
k-space scheme's phase-speed error, checked against a simulated plane wave; the run's length
from the beam path; the decomposition, mesh and checkpoint through ``plan`` and
``sonotile plan``: the same plan on 2 virtual CPU devices as on one, a plan stopped between its
acoustic runs or in its heating and resumed as one uninterrupted, bad options refused before
any work."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from devices import run_on_cpu_devices

from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.api.simulation import simulate
from sonotile.api.types import KSensor, KSource, KWaveGrid, KWaveMedium
from sonotile.commands.cli import main as cli
from sonotile.model.problem import ProblemError
from sonotile.model.signals import create_cw_signals
from sonotile.planning.acoustics import RunSettings, make_kgrid, stable_step
from sonotile.planning.chain import PlanSettings, plan
from sonotile.planning.geometry import Pose, beam_grid
from sonotile.planning.saved_runs import PlanStopped, SavedRuns, digest, runs_folder

TARGET = [0.0, 10.0, 45.0]
ENTRY = (np.array(TARGET) + 60 * np.array([0.3, 0.1, 1.0]) / np.linalg.norm([0.3, 0.1, 1])).tolist()
#: a coarse plan: 200 kHz at 2.4 points per wavelength (3.1 mm), a 50 mm bowl
TINY = dict(frequency=200e3, points_per_wavelength=2.4, margin_mm=2.0, beyond_mm=6.0,
            duration=2.0, cooling=1.0, focal_pressure=1e6)  # fmt: skip


def test_time_step_from_the_phase_error():
    run = RunSettings()
    # 0.5 mm at 500 kHz through water (1482 m/s) and bone (3100 m/s): the largest step
    assert run.courant(0.5e-3, 500e3, 1482.0, 3100.0) == run.cfl_max == 0.5
    # 1 mm (3 points per wavelength): the error allows less than cfl, which is kept
    assert run.courant(1e-3, 500e3, 1482.0, 3100.0) == run.cfl == 0.3
    assert run.courant(1e-3, 500e3, 1500.0, 1500.0) == run.cfl_max  # one speed: exact
    between = run.courant(0.75e-3, 500e3, 1482.0, 3100.0)
    assert run.cfl < between < run.cfl_max
    x = between * 2 * np.pi * 500e3 * 0.75e-3 / 1482.0  # c_max k dt
    np.testing.assert_allclose(x**2 * (1 - (1482 / 3100) ** 2) / 24, run.phase_error)


def _phase_speed(c: float, c_ref: float, courant: float, dx: float, f: float) -> float:
    """The phase speed [m/s] of a simulated 1-D CW wave in a medium of speed ``c`` stepped
    with the k-space correction at ``c_ref`` and Courant number ``courant`` at ``c_ref``."""
    n = 512
    kgrid = KWaveGrid((n,), dx)
    kgrid.dt = courant * dx / c_ref
    kgrid.nt = int(np.ceil(1.2 * n * dx / c / kgrid.dt))
    mask = np.zeros(n, bool)
    mask[n // 8] = True
    sig = create_cw_signals(kgrid.t, f, np.array([1.0]), np.array([0.0]))
    at = np.zeros(n, bool)
    a, b = n // 4, n // 4 + 200
    at[[a, b]] = True
    res = simulate(kgrid, KWaveMedium(sound_speed=c, density=1000.0, sound_speed_ref=c_ref),
                   KSource(p_mask=mask, p=sig, p_mode="additive"),
                   KSensor(mask=at, record=("p_cw",), cw_frequency=f, cw_periods=3),
                   pml_size=32, quiet=True, progress=False)  # fmt: skip
    ph = np.asarray(res["p_cw_phase"]).ravel()
    lag = np.angle(np.exp(1j * (ph[0] - ph[1])))  # phase lost over b - a points, modulo 2 pi
    k_nominal = 2 * np.pi * f / c
    turns = np.round(((b - a) * dx * k_nominal - lag) / (2 * np.pi))
    return 2 * np.pi * f * (b - a) * dx / (lag + 2 * np.pi * turns)


def test_phase_error_formula_matches_a_simulated_wave():
    """Water stepped at a bone reference speed: the wave runs slow by the error the time
    step is chosen from, ``x^2 (1 - (c / c_ref)^2) / 24``, and is exact at ``c_ref``."""
    dx, f, c, c_ref, courant = 0.5e-3, 500e3, 1500.0, 3100.0, RunSettings().cfl_max
    x = courant * 2 * np.pi * f * dx / c
    predicted = x**2 * (1 - (c / c_ref) ** 2) / 24
    measured = 1 - _phase_speed(c, c_ref, courant, dx, f) / c
    assert predicted > 0.008  # the plan's largest step: under 1 % slow
    np.testing.assert_allclose(measured, predicted, rtol=0.1)
    assert abs(1 - _phase_speed(c, c, courant, dx, f) / c) < 1e-3


def test_run_length_from_the_beam_path():
    pose = Pose.from_target_entry(TARGET, ENTRY, focal_length_mm=50.0)
    grid = beam_grid(pose, TARGET, 200e3, points_per_wavelength=2.0, aperture_mm=50.0)
    medium = KWaveMedium(sound_speed=np.full(grid.shape, 1500.0), density=1000.0)
    for run in (RunSettings(), RunSettings(crossings=1.5, reach_mm=5.0, settle_periods=20.0)):
        kgrid = make_kgrid(grid, medium, 200e3, run)
        path = grid.spacing_mm * np.linalg.norm(np.subtract(grid.target_index,
                                                            grid.source_index))  # fmt: skip
        np.testing.assert_allclose(path, 50.0, atol=0.5 * grid.spacing_mm)
        t_end = run.crossings * (path + run.reach_mm) * 1e-3 / 1500 + run.settle_periods / 200e3
        assert 0 <= kgrid.nt * kgrid.dt - t_end < kgrid.dt
        per_period = 1.0 / (200e3 * kgrid.dt)  # whole steps per period: p_cw's whole periods
        assert abs(per_period - round(per_period)) < 1e-9
        dx = grid.spacing_mm * 1e-3
        assert kgrid.dt <= run.courant(dx, 200e3, 1500, 1500) * dx / 1500 * (1 + 1e-12)


def test_absorbing_run_steps_within_the_stability_limit():
    """Bone's attenuation (y = 2) at 0.5 mm bounds the step below the phase error's choice:
    the run keeps 0.9 of the solver's limit and the solver does not warn."""
    import warnings

    pose = Pose.from_target_entry(TARGET, ENTRY, focal_length_mm=12.0)
    grid = beam_grid(pose, TARGET, 500e3, points_per_wavelength=6.0, aperture_mm=8.0,
                     margin_mm=1.0, beyond_mm=2.0)  # fmt: skip
    c = np.full(grid.shape, 1482.0, np.float32)
    alpha = np.zeros(grid.shape, np.float32)
    c[:, :, 10:16], alpha[:, :, 10:16] = 3100.0, 8.0 * 0.5 / 0.5**2  # 8 dB/(MHz cm), at 0.5 MHz
    medium = KWaveMedium(sound_speed=c, density=1000.0, alpha_coeff=alpha, alpha_power=2.0)
    run = RunSettings()
    kgrid = make_kgrid(grid, medium, 500e3, run)
    limit = stable_step(kgrid, medium, grid)
    dx = grid.spacing_mm * 1e-3
    assert run.courant(dx, 500e3, 1482.0, 3100.0) * dx / 3100.0 > limit  # the error alone: unstable
    per_period = round(1.0 / (500e3 * kgrid.dt))  # the step shortened to whole periods
    np.testing.assert_allclose(kgrid.dt * per_period * 500e3, 1.0, rtol=1e-12)
    assert 0.9 * limit * per_period / (per_period + 1) < kgrid.dt <= 0.9 * limit
    mask = np.zeros(grid.shape, bool)
    mask[grid.target_index] = True
    kgrid.nt = 3  # a few steps: the solver checks the step before it starts
    sig = create_cw_signals(kgrid.t, 500e3, np.array([1.0]), np.array([0.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        simulate(kgrid, medium, KSource(p_mask=mask, p=sig), KSensor(mask=mask, record=("p",)),
                 quiet=False, progress=False, **grid.options())  # fmt: skip


def test_heating_stops_and_resumes_as_one_run(ct_path, tmp_path):
    whole = plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY))
    cp = Checkpoint(str(tmp_path / "heat.npz"), steps=7)
    with pytest.raises(RunStopped) as stop:
        plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY), checkpoint=cp)
    assert stop.value.step == 7 and os.path.exists(cp.path)
    resumed = plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY),
                   checkpoint=Checkpoint(cp.path))  # fmt: skip
    assert not os.path.exists(cp.path)  # a finished run removes its state
    for name in ("T_max", "cem43", "T_heated"):
        np.testing.assert_allclose(resumed.heat.data[name], whole.heat.data[name], rtol=1e-12)
    assert whole.summary["heat"]["T_max_degC"] > 38.0


def _same_plan(a, b):
    """Two plans with the same fields and heating (a resumed plan reads its runs back)."""
    np.testing.assert_array_equal(a.p_amp, b.p_amp)
    for name, field in b.beams.fields.items():
        np.testing.assert_array_equal(a.beams.fields[name], field)
    for name in ("T_max", "cem43"):
        np.testing.assert_allclose(a.heat.data[name], b.heat.data[name], rtol=1e-12)


def test_plan_stops_between_acoustic_runs_and_goes_on(ct_path, tmp_path):
    """Each call with an interval shorter than any run does one more acoustic run, keeps it
    and stops; the plan pieced together equals the uninterrupted one."""
    whole = plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY))
    cp = Checkpoint(str(tmp_path / "plan.npz"), interval=1e-6)
    folder = runs_folder(cp.path)
    stops = 0
    while True:
        with pytest.raises(RunStopped) as stop:
            plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY), checkpoint=cp)
        if not isinstance(stop.value, PlanStopped):
            break  # all acoustic runs kept: the heating stopped
        stops += 1
        assert stop.value.step == 1 and stop.value.path == folder
        assert len([f for f in os.listdir(folder) if f.startswith("run-")]) == stops
    assert stops == 2  # the bowl through water and through the skull
    resumed = plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY),
                   checkpoint=Checkpoint(cp.path))  # fmt: skip
    assert not os.path.exists(folder) and not os.path.exists(cp.path)
    _same_plan(resumed, whole)


def test_plan_stops_on_a_signal_after_the_run_under_way(ct_path, tmp_path):
    """SIGINT during the first acoustic run: the run is finished and kept, then the plan
    stops; the same call goes on and reads it back."""
    whole = plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY))
    cp = Checkpoint(str(tmp_path / "plan.npz"))
    said: list[str] = []

    def say(msg: str) -> None:
        said.append(msg)
        if len(said) == 1:
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(PlanStopped) as stop:
        plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY), checkpoint=cp,
             progress=say)  # fmt: skip
    assert stop.value.step == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    resumed = plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY), checkpoint=cp)
    assert not os.path.exists(runs_folder(cp.path))
    _same_plan(resumed, whole)


def test_plan_refuses_a_runs_folder_it_did_not_make(ct_path, tmp_path):
    cp = Checkpoint(str(tmp_path / "plan.npz"))
    folder = runs_folder(cp.path)
    os.mkdir(folder)
    mine = os.path.join(folder, "notes.txt")
    with open(mine, "w") as f:
        f.write("keep")
    with pytest.raises(ProblemError, match="not one a plan made"):
        plan(ct_path, TARGET, ENTRY, "bowl:50:50", PlanSettings(**TINY), checkpoint=cp)
    assert os.listdir(folder) == ["notes.txt"]


def test_saved_run_digest_names_every_input():
    medium = KWaveMedium(sound_speed=np.full((4, 4), 1500.0), density=1000.0)
    same = KWaveMedium(sound_speed=np.full((4, 4), 1500.0), density=1000.0)
    other = KWaveMedium(sound_speed=np.full((4, 4), 1500.0), density=1000.0)
    other.sound_speed[1, 2] = 1500.5
    assert digest(medium, RunSettings()) == digest(same, RunSettings())
    assert digest(medium, RunSettings()) != digest(other, RunSettings())
    assert digest(medium, RunSettings()) != digest(medium, RunSettings(settle_periods=13))
    assert digest(np.zeros(2, np.float32)) != digest(np.zeros(1, np.float64))
    assert digest((1, 2)) != digest(((1, 2),))


def test_a_damaged_saved_run_is_run_again(tmp_path):
    runs = SavedRuns(str(tmp_path / "r-runs"))
    calls = []

    def go():
        calls.append(1)
        return {"p": np.arange(3.0)}

    first = runs.run(("x",), go)
    (path,) = [os.path.join(runs.folder, f) for f in os.listdir(runs.folder) if f[:4] == "run-"]
    np.testing.assert_array_equal(runs.run(("x",), go)["p"], first["p"])
    assert len(calls) == 1  # read back
    with open(path, "r+b") as f:
        f.truncate(40)
    np.testing.assert_array_equal(runs.run(("x",), go)["p"], np.arange(3.0))
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("limit", "said", "kept"),
    [
        (["--checkpoint_steps", "5"], "heating stopped", "plan.npz"),  # the heating's state
        (["--checkpoint_interval", "1e-6"], "plan stopped: 1 acoustic run(s)", "plan-runs"),
    ],
)
def test_plan_command_stops_and_goes_on(ct_path, tmp_path, capsys, limit, said, kept):
    out, cp = str(tmp_path / "o"), str(tmp_path / "plan.npz")
    args = ["plan", ct_path, "--target", *map(str, TARGET), "--entry", *map(str, ENTRY),
            "--transducer", "bowl:50:50", "--frequency", "200e3", "--ppw", "2.4",
            "--margin", "2", "--beyond", "6", "--duration", "2", "-o", out,
            "--checkpoint", cp]  # fmt: skip
    assert cli([*args, *limit]) == 0
    assert said in capsys.readouterr().out
    assert os.path.exists(tmp_path / kept) and not os.path.exists(out)
    assert cli(args) == 0
    assert "wrote 7 files" in capsys.readouterr().out
    assert not os.path.exists(runs_folder(cp)) and not os.path.exists(cp)


def test_plan_command_refuses_runs_kept_in_its_output_folder(ct_path, tmp_path, capsys):
    argv = ["plan", ct_path, "--target", *map(str, TARGET), "--entry", *map(str, ENTRY),
            "--transducer", "bowl:50:50", "-o", str(tmp_path / "p-runs"),
            "--checkpoint", str(tmp_path / "p.npz")]  # fmt: skip
    assert cli(argv) == 2
    assert "the output folder" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (["--decomposition", "slabs"], "invalid choice"),
        (["--mesh", "2x"], "--mesh"),
        (["--mesh", "2"], "needs a decomposition"),
        (["--checkpoint_steps", "3"], "need --checkpoint"),
        (["--checkpoint", "CT", "--checkpoint_steps", "3"], "is also an input"),
    ],
)
def test_plan_command_refuses_bad_run_options(ct_path, tmp_path, capsys, change, message):
    change = [ct_path if v == "CT" else v for v in change]
    argv = ["plan", ct_path, "--target", *map(str, TARGET), "--entry", *map(str, ENTRY),
            "--transducer", "bowl:50:50", "-o", str(tmp_path / "o"), *change]  # fmt: skip
    try:
        code = cli(argv)
    except SystemExit as e:  # argparse's own refusal
        code = e.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o")


def test_run_settings_are_checked():
    from sonotile.planning.acoustics import check_run

    for bad, message in ((RunSettings(cfl=0.6), "above cfl_max"),
                         (RunSettings(settle_periods=0), "settle_periods"),
                         (RunSettings(decomposition="slabs"), "decomposition"),
                         (RunSettings(decomposition="pencil", mesh=(0,)), "mesh"),
                         (RunSettings(elastic_interface="smooth"), "elastic_interface"),
                         (RunSettings(decomposition="lfb", elastic_interface="slip"),
                          "one device")):  # fmt: skip
        with pytest.raises(ProblemError, match=message):
            check_run(bad)


SCRIPT = r"""
import json, sys
import jax
import numpy as np
from sonotile.planning.acoustics import RunSettings
from sonotile.planning.chain import PlanSettings, plan
from sonotile.planning.phantom import head_phantom

assert len(jax.devices()) == 2, jax.devices()
target, entry, tiny = json.loads(sys.argv[1])
ct = head_phantom((80, 96, 84), 2.0, seed=0)
out = {}
for name, run in (("single", RunSettings()), ("pencil", RunSettings(decomposition="pencil")),
                  ("lfb", RunSettings(decomposition="lfb", mesh=(2,)))):
    p = plan(ct, target, entry, "array:24:50:50:6", PlanSettings(**tiny), run=run)
    b = p.summary["beams_at_source_pressure"]
    out[name] = {"foci": {k: b[k] for k in ("water", "uncorrected", "corrected")},
                 "phase": p.beams.phase.tolist(), "T_max": p.summary["heat"]["T_max_degC"]}
print("RESULT" + json.dumps(out))
"""


@pytest.mark.slow
def test_plan_on_two_devices_agrees_with_one():
    """The whole plan (water, uncorrected, point source, corrected, heating) with each run
    split over 2 virtual CPU devices: pencil (exact FFTs) and LFB (local Fourier basis)."""
    import json

    res = run_on_cpu_devices(SCRIPT, 2, json.dumps([TARGET, ENTRY, TINY]), timeout=900)
    one = res["single"]
    for name, tol in (("pencil", 1e-4), ("lfb", 2e-2)):
        r = res[name]
        for beam in ("water", "uncorrected", "corrected"):
            a, b = one["foci"][beam], r["foci"][beam]
            np.testing.assert_allclose(b["peak_pa"], a["peak_pa"], rtol=tol)
            np.testing.assert_allclose(b["position_mm"], a["position_mm"], atol=100 * tol)
            np.testing.assert_allclose(b["volume_mm3"], a["volume_mm3"], rtol=10 * tol)
        dphi = np.angle(np.exp(1j * np.subtract(r["phase"], one["phase"])))
        assert np.abs(dphi).max() < 10 * tol
        np.testing.assert_allclose(r["T_max"], one["T_max"], rtol=tol)


def test_cw_source_signals_are_the_element_signals_distributed():
    from sonotile.planning.acoustics import cw_source_signals
    from sonotile.planning.transducers import parse_transducer

    tr = parse_transducer("array:16:30:30:5")
    pose = Pose.from_target_entry(TARGET, ENTRY, focal_length_mm=30.0)
    grid = beam_grid(pose, TARGET, 300e3, points_per_wavelength=3.0, aperture_mm=30.0)
    karray = tr.karray(pose, grid)
    kgrid = KWaveGrid(grid.shape, grid.spacing_mm * 1e-3)
    kgrid.dt, kgrid.nt = 5e-8, 400
    rng = np.random.default_rng(1)
    amp, phase = rng.uniform(0.5, 2.0, 16), rng.uniform(-np.pi, np.pi, 16)
    direct = karray.get_distributed_source_signal(
        kgrid, create_cw_signals(kgrid.t, 300e3, amp, phase)
    )
    fast = cw_source_signals(karray, kgrid, 300e3, amp, phase)
    assert fast.dtype == np.float32 and fast.shape == direct.shape
    np.testing.assert_allclose(fast, direct, atol=1e-5 * np.abs(direct).max())
