"""From a CT to a sonication plan, end to end on the phantom at a small grid: ``plan`` and
``write_plan`` in Python and the ``sonotile plan`` command: the volumes come back on the CT's
grid and affine where the plan put them, the report is written, every number is finite, and
bad input is refused before any work."""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import replace

import h5py
import numpy as np
import pytest

from sonotile.commands.cli import main as cli
from sonotile.kwave.cli import main as kwave_main
from sonotile.kwave.reader import read_input
from sonotile.planning.acoustics import find_focus
from sonotile.planning.chain import PlanSettings, plan
from sonotile.planning.export import write_kwave_input
from sonotile.planning.images import read_nifti, read_provenance
from sonotile.planning.outputs import FILES, volumes_on_ct, write_plan
from sonotile.planning.report import report_lines

TARGET = [0.0, 10.0, 45.0]
ENTRY = (np.array(TARGET) + 60 * np.array([0.3, 0.1, 1.0]) / np.linalg.norm([0.3, 0.1, 1])).tolist()
SMALL = dict(frequency=300e3, points_per_wavelength=2.5, margin_mm=3.0, beyond_mm=10.0)


@pytest.fixture(scope="module")
def planned(ct_path, tmp_path_factory):
    settings = PlanSettings(**SMALL, duration=5.0, cooling=2.0, focal_pressure=1.5e6)
    p = plan(ct_path, TARGET, ENTRY, "bowl:50:50", settings)
    out = str(tmp_path_factory.mktemp("plan") / "out")
    return p, out, write_plan(p, out)


def _numbers(v):
    if isinstance(v, dict):
        for x in v.values():
            yield from _numbers(x)
    elif isinstance(v, list):
        for x in v:
            yield from _numbers(x)
    elif isinstance(v, int | float) and not isinstance(v, bool):
        yield float(v)


def test_plan_writes_aligned_volumes_report_and_numbers(planned, ct_path):
    p, out, paths = planned
    assert sorted(os.path.basename(q) for q in paths) == sorted(FILES)
    ct = read_nifti(ct_path)
    for name in ("pressure_amplitude", "temperature_max", "cem43", "lesion"):
        img = read_nifti(os.path.join(out, f"{name}.nii.gz"))
        assert img.shape == ct.shape and np.allclose(img.affine, ct.affine)
        assert np.isfinite(img.hu).all()
    assert read_provenance(os.path.join(out, "pressure_amplitude.nii.gz"))["tissue"][
        "mapping"] == "aubry2003"  # fmt: skip
    summary = json.load(open(os.path.join(out, "plan.json")))
    numbers = list(_numbers(summary))
    assert len(numbers) > 50 and np.isfinite(numbers).all()
    f, h = summary["focus"], summary["heat"]
    np.testing.assert_allclose(f["peak_pa"], 1.5e6)  # scaled to the requested focal pressure
    assert f["error_mm"] < 15.0 and h["T_max_degC"] > 37.0 and h["rise_at_target_K"] > 0.1
    assert summary["settings"]["mapping"] == "aubry2003"
    # HU_max from the skull's 99.9th percentile (the phantom's cortical bone tops at 2000 HU),
    # stated in plan.json and the report; the phantom raises no warning
    bone = summary["tissue"]["bone"]
    assert 1900.0 < bone["hu_max"] <= 2000.0 and bone["hu_max_from"].startswith("99.9th")
    assert f"HU_max {bone['hu_max']:.0f} HU" in open(os.path.join(out, "report.html")).read()
    assert summary["warnings"] == [] and set(summary["timings_s"]) >= {"image", "properties"}
    # heated with each tissue class's thermal properties (IT'IS), stated in plan.json
    assert summary["thermal"]["classes"]["cortical bone"]["specific_heat"] == 1313.0
    assert "IT'IS" in summary["thermal"]["reference"]
    assert {1313.0, 3630.0} <= set(np.unique(p.thermal.specific_heat).tolist())
    assert summary["transducer"]["n_elements"] == 1
    assert os.path.getsize(os.path.join(out, "report.png")) > 20_000
    # -6 dB focal sizes per beam: a cigar along the beam, about a wavelength across in water
    b = summary["beams_at_source_pressure"]
    width = 1.02 * 1500 / 300e3 * 1e3 * 50 / 50  # 1.02 wavelength x F-number [mm]
    np.testing.assert_allclose(b["water"]["width_mm"], width, rtol=0.25)  # 2.5 points/wavelength
    assert abs(np.log(b["water"]["width_mm"][0] / b["water"]["width_mm"][1])) < 0.05  # round
    for beam in ("water", "uncorrected"):  # the grid ends 10 mm past the target: may stay open
        assert b[beam]["length_mm"] is None or b[beam]["length_mm"] > 2 * width
    assert "-6 dB focus, water" in open(os.path.join(out, "report.html")).read()
    assert "data:image/png;base64," in open(os.path.join(out, "report.html")).read()
    # the pressure on the CT peaks (near the target) where the plan says the focus is
    pa = read_nifti(os.path.join(out, "pressure_amplitude.nii.gz")).hu
    xyz = ct.world(np.moveaxis(np.indices(ct.shape), 0, -1))
    near = np.linalg.norm(xyz - TARGET, axis=-1) < 15.0
    peak = xyz[np.unravel_index(np.argmax(np.where(near, pa, 0)), ct.shape)]
    assert np.linalg.norm(peak - f["position_mm"]) < 2.5  # a CT voxel is 2 mm


def test_marker_at_the_target_comes_back_at_the_target(planned):
    p, _, _ = planned
    ijk = np.moveaxis(np.indices(p.grid.shape), 0, -1)
    r2 = np.sum((ijk - np.asarray(p.grid.target_index)) ** 2, axis=-1) * p.grid.spacing_mm**2
    marker = np.exp(-r2 / (2 * 3.0**2))  # a 3 mm Gaussian at the grid's target point
    v = volumes_on_ct(replace(p, p_amp=marker))["pressure_amplitude"]
    w = v / v.sum()
    centroid = np.tensordot(w, np.moveaxis(p.ct.world(np.moveaxis(np.indices(v.shape), 0, -1)),
                                           -1, 0), axes=([0, 1, 2], [1, 2, 3]))  # fmt: skip
    assert np.linalg.norm(centroid - TARGET) < 0.3


def test_plan_command(ct_path, tmp_path, capsys):
    out = str(tmp_path / "cli")
    args = [ct_path, "--target", *map(str, TARGET), "--entry", *map(str, ENTRY),
            "--transducer", "bowl:50:50", "--frequency", "200e3", "--ppw", "2.5",
            "--margin", "2", "--beyond", "6", "--duration", "1", "--kwave_input",
            "-o", out]  # fmt: skip
    start = time.perf_counter()
    assert cli(["plan", *args]) == 0
    wall = time.perf_counter() - start
    text = capsys.readouterr().out
    # every line's elapsed time within the run's, in order (also after the k-Wave export)
    clock = [float(m) for m in re.findall(r"^sonotile plan \[\s*(-?[0-9.]+) s\]", text, re.M)]
    assert len(clock) > 5 and clock == sorted(clock) and clock[-1] <= wall + 0.1
    assert "CW field: uncorrected" in text and "wrote 8 files" in text
    assert "--p_max_all -s" in text
    assert sorted(os.listdir(out)) == sorted([*FILES, "kwave_input.h5"])
    before = {f: os.path.getmtime(os.path.join(out, f)) for f in FILES}
    assert cli(["plan", *args]) == 2  # an existing folder is refused, nothing rewritten
    assert "exists" in capsys.readouterr().err
    assert before == {f: os.path.getmtime(os.path.join(out, f)) for f in FILES}


def test_kwave_input_holds_the_plans_run(planned, tmp_path):
    p, _, _ = planned
    path = str(tmp_path / "in.h5")
    start = write_kwave_input(p, path, record_periods=4)
    problem, _ = read_input(path)
    g = problem.grid
    assert g.shape == p.grid.total_shape and problem.pml.size == p.grid.pml_size
    np.testing.assert_allclose(g.spacing, p.grid.spacing_mm * 1e-3)
    per_period = 1.0 / (p.settings.frequency * g.dt)
    assert abs(per_period - round(per_period)) < 1e-6  # whole steps per period
    assert start == g.nt - 4 * round(per_period) + 1 and start > g.nt / 2
    c = np.asarray(problem.medium.c0)  # the skull is in the file's medium
    assert c.max() > 2500 and np.isclose(c.min(), 1500)


def test_exported_run_gives_the_plans_field(planned, tmp_path):
    """The exported drive, run by ``sonotile-kwave`` on the file, steps as the plan's own
    run (the same time axis): the steady-state amplitude (a DFT over the plan's last 3
    periods of the recorded pressure) equals the plan's field on a plane through the target
    to float32 round-off, not only at the focus."""
    p, _, _ = planned
    mask = np.zeros(p.grid.shape, bool)
    mask[:, :, p.grid.target_index[2]] = True
    src, out = str(tmp_path / "in.h5"), str(tmp_path / "out.h5")
    start = write_kwave_input(p, src, record_periods=3, sensor_mask=mask)
    assert kwave_main(["-i", src, "-o", out, "-p", "-s", str(start)]) == 0
    with h5py.File(out, "r") as f:
        raw = np.asarray(f["p"]).reshape(-1, int(mask.sum())).T.astype(np.float64)
        dt = float(np.asarray(f["dt"]).ravel()[0])
    per_period = round(1.0 / (p.settings.frequency * dt))
    assert raw.shape[1] == 3 * per_period
    w = np.exp(-2j * np.pi * np.arange(raw.shape[1]) / per_period)
    amp = 2 * np.abs(raw @ w) / raw.shape[1]
    ref = p.p_amp.reshape(-1, order="F")[mask.reshape(-1, order="F")]  # k-Wave's order
    assert np.max(np.abs(amp - ref)) < 1e-4 * ref.max()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"--target": ["0", "0", "500"]}, "outside the image"),
        ({"--entry": ["0.0", "10.0", "45.0"]}, "is the target"),
        ({"--transducer": ["ring:5"]}, "unknown transducer"),
        ({"--duty": ["1.5"]}, "duty"),
        ({"--mapping": ["hounsfield"]}, "unknown mapping"),
        ({"--transducer": ["bowl:20:20"]}, "touches the head"),
        ({"--refocus": ["1.5"]}, "--refocus 1.5: give a whole number"),
        ({"--refocus": ["11"]}, "refocus must be a whole number from 0 to 10"),
        (
            {"--target_dose": ["10"], "--focal_pressure": ["1e6"]},
            "--focal_pressure and --target_dose: give one goal, not both",
        ),
    ],
)
def test_plan_command_refuses_bad_input(ct_path, tmp_path, capsys, change, message):
    opts = {"--target": [str(v) for v in TARGET], "--entry": [str(v) for v in ENTRY],
            "--transducer": ["bowl:50:50"], "-o": [str(tmp_path / "o")]}  # fmt: skip
    opts.update(change)
    argv = ["plan", ct_path] + [x for k, v in opts.items() for x in (k, *v)]
    assert cli(argv) == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.slow
def test_plan_reaches_the_dose_asked_at_the_target(ct_path, tmp_path):
    """A dose goal instead of a focal pressure: the drive is scaled from a first heat run's
    history at the target, and the plan's own heat run at that scale gives the dose there to
    round-off (the heat model is linear in the source); the report names the goal. A bowl
    through the skull reaches 60 min in 5 s only by boiling the bone: the plan says so, and
    its dose volume holds the bone's 1e66 min as its ceiling, finite."""
    settings = PlanSettings(**SMALL, duration=5.0, cooling=2.0, target_dose=60.0)
    p = plan(ct_path, TARGET, ENTRY, "bowl:50:50", settings)
    dose = float(p.heat.data["cem43"][p.grid.target_index])
    np.testing.assert_allclose(dose, 60.0, rtol=1e-6)
    np.testing.assert_allclose(p.summary["heat"]["cem43_at_target_min"], dose)
    assert p.scale > 1 and 45 < p.summary["heat"]["rise_at_target_K"] + 37 < 60
    rows = dict(report_lines(p.summary))
    assert rows["goal"] == "thermal dose 60 CEM43 min at the target"
    assert rows["thermal dose at target"] == "60.0 CEM43 min"  # 3 significant figures
    assert p.summary["heat"]["T_max_degC"] > 100 and p.summary["heat"]["cem43_max_min"] > 1e30
    assert any("above 100 degC: tissue boils" in w for w in p.warnings)
    write_plan(p, str(tmp_path / "out"))
    cem = read_nifti(str(tmp_path / "out" / "cem43.nii.gz")).hu
    assert np.all(np.isfinite(cem)) and 1e29 < cem.max() <= np.float32(1e30)  # interpolated


@pytest.mark.slow
def test_array_plan_uses_the_corrected_drive(ct_path):
    settings = PlanSettings(**SMALL, duration=1.0, refocus=0)
    p = plan(ct_path, TARGET, ENTRY, "array:48:50:50:4", settings)
    b, drive = p.summary["beams_at_source_pressure"], p.summary["drive"]
    assert b["corrected"] is not None and b["focal_gain"] > 1.0
    assert len(drive["phase_rad"]) == 48 and np.ptp(drive["phase_rad"]) > 0.5  # not geometric
    np.testing.assert_array_equal(p.p_amp, p.beams.fields["corrected"])  # scale 1: no target
    assert p.summary["focus"]["error_mm"] == b["corrected"]["error_mm"]
    assert len(b["refocus"]) == 1 and np.allclose(b["aim_mm"], TARGET)  # aimed at the target


@pytest.mark.slow
def test_array_plan_aims_the_corrected_drive_at_the_target(ct_path):
    p = plan(ct_path, TARGET, ENTRY, "array:48:50:50:4", PlanSettings(**SMALL, duration=1.0))
    b, drive = p.summary["beams_at_source_pressure"], p.summary["drive"]
    # aimed (on by default): past the target, the pass nearest the target is the plan's, and
    # it drives, heats with and reports that pass
    assert 1 <= len(b["refocus"]) <= 3 and list(b["aim_mm"]) in [r["aim_mm"] for r in b["refocus"]]
    assert np.linalg.norm(np.subtract(b["refocus"][0]["aim_mm"], TARGET)) > 0.5
    assert b["corrected"]["error_mm"] == min(r["error_mm"] for r in b["refocus"]) < 1.0
    assert b["gain_at_target"] > 1.0 and p.summary["focus"]["error_mm"] < 1.0
    np.testing.assert_allclose(drive["phase_rad"], p.beams.phase)
    np.testing.assert_array_equal(p.p_amp, p.beams.fields["corrected"])


@pytest.mark.slow
def test_elastic_plan_heats_with_the_elastic_beam(ct_path):
    settings = PlanSettings(**SMALL, duration=1.0, elastic=True, focal_pressure=1e6)
    p = plan(ct_path, TARGET, ENTRY, "bowl:50:50", settings)
    el, f = p.summary["elastic_at_source_pressure"], p.summary["focus"]
    assert el is not None and 0.6 < el["over_fluid"] < 1.1
    assert el["elastic_corrected"] is None  # a bowl: nothing to correct
    assert el["fluid_corrected"]["position_mm"] == el["position_mm"]
    assert f["position_mm"] == el["position_mm"] and np.isclose(f["peak_pa"], 1e6)
    # the heating used the elastic beam, scaled to the requested focal pressure
    assert np.isclose(find_focus(p.p_amp, p.grid, p.target).peak_pa, 1e6, rtol=1e-5)
    assert not np.allclose(p.p_amp, p.beams.fields["uncorrected"] * p.scale, rtol=0.01)


@pytest.mark.slow
def test_elastic_array_plan_drives_the_elastic_correction(ct_path):
    settings = PlanSettings(**SMALL, duration=1.0, elastic=True)
    p = plan(ct_path, TARGET, ENTRY, "array:48:50:50:4", settings)
    el, drive = p.summary["elastic_at_source_pressure"], p.summary["drive"]
    assert el["elastic_corrected"] is not None and p.elastic is not None
    assert el["gain_at_target"] > 1.0 and el["position_mm"] == el["elastic_corrected"][
        "position_mm"]  # fmt: skip
    # the plan drives (and heats with) the elastic-corrected phases, not the fluid ones
    np.testing.assert_allclose(drive["phase_rad"], p.elastic.phase)
    assert np.ptp(np.angle(np.exp(1j * (p.elastic.phase - p.beams.phase)))) > 0.1
    np.testing.assert_array_equal(p.p_amp, p.elastic.p_amp)
    assert p.summary["focus"]["position_mm"] == el["elastic_corrected"]["position_mm"]


def test_report_lists_focal_sizes_and_the_elastic_correction(planned):
    p, _, _ = planned
    s = json.loads(json.dumps(p.summary, default=str))
    rows = dict(report_lines(s))
    w = s["beams_at_source_pressure"]["water"]["width_mm"]
    assert f"widths {w[0]:.1f} mm x {w[1]:.1f} mm" in rows["-6 dB focus, water"]
    assert "elastic skull" not in rows and "aim" not in rows  # a bowl: nothing aimed
    assert rows["position error"].endswith(
        f"(peak grid point {s['focus']['peak_voxel_error_mm']:.2f} mm)"
    )
    t = s["target_mm"]
    s["beams_at_source_pressure"] |= {
        "aim_mm": [t[0], t[1] + 0.6, t[2] + 0.8],
        "refocus": [{"error_mm": 0.4}, {"error_mm": 0.03}],
    }
    assert dict(report_lines(s))["aim"] == (
        "1.00 mm from the target; focus per pass 0.40, 0.03 mm from it"
    )
    focus = {**s["focus"], "length_mm": 12.34, "width_mm": [5.0, None]}
    s["elastic_at_source_pressure"] = {
        **focus, "over_fluid": 0.9, "fluid_corrected": focus, "elastic_corrected": focus,
        "gain_over_fluid_corrected": 1.25, "gain_at_target": 1.5,
        "shift_from_fluid_corrected_mm": 0.7}  # fmt: skip
    rows = dict(report_lines(s))
    assert rows["elastic skull"].endswith("length 12.3 mm, widths 5.0 mm x - (open)")
    assert "gain 1.250 (peak), 1.500 (at target)" in rows["elastic correction"]
