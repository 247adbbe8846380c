"""The plan's report for approvers, on the phantom plan of test_planning_plan (its ``planned``
fixture): the exposure figures in the summary against their formulas, the warnings when the
thresholds are crossed, and with an optimised drive (here a stand-in: the plan's fields
scaled) both plans side by side and its volumes written on the CT's grid and affine."""

from __future__ import annotations

import copy
import json
import os
from dataclasses import replace

import numpy as np
import pytest
import test_planning_plan as plan_tests

from sonotile.api.heating.sonication import HeatRun
from sonotile.model.problem import ProblemError
from sonotile.planning.chain import _summary
from sonotile.planning.heating import heat_summary
from sonotile.planning.images import read_nifti
from sonotile.planning.optimize import OptimizedPlan
from sonotile.planning.outputs import FILES, OPTIMIZED_FILES, prepare_output, write_plan
from sonotile.planning.report import (
    MI_MAX,
    SIDE_LOBE_MAX,
    SKULL_RISE_MAX_K,
    comparison_lines,
    report_lines,
    report_page,
    review_warnings,
)

planned = plan_tests.planned  # the phantom plan's fixture (ct_path is in conftest)
K = 0.8  # the stand-in optimised drive: the plan's amplitudes and pressures times K


def _optimized(p):
    """A stand-in OptimizedPlan: the plan's fields scaled by K (heating by K^2)."""
    t0, d = p.settings.T0, p.heat.data
    rise = {n: t0 + (d[n] - t0) * K**2 for n in ("T_max", "T_heated")}
    data = {**d, **rise, "cem43": d["cem43"] * 0.1, "lesion_map": d["lesion_map"] * 0}
    heat = HeatRun(data, p.heat.spacing, p.heat.dt)
    f = p.beams.plan
    focus = replace(f, peak_pa=f.peak_pa * p.scale * K, at_target_pa=f.at_target_pa * p.scale * K)
    amplitude, phase = p.drive
    o = OptimizedPlan(amplitude * p.scale * K, phase, p.p_amp * K, focus, heat)
    h, conj = heat_summary(heat, p.maps.labels, p.grid, t0), p.summary["heat"]["skull_rise_K"]
    fp = np.linspace(0.5e6, 2e6, 6)
    o.summary = {
        "focus": focus.as_dict(), "heat": h,
        "drive": {"amplitude_pa": o.amplitude.tolist(), "phase_rad": o.phase.tolist()},
        "trade_off": {"focal_pressure_pa": fp.tolist(),
                      "optimized_skull_rise_K": (h["skull_rise_K"] * (fp / 1.2e6) ** 2).tolist(),
                      "conjugated_skull_rise_K": (conj * (fp / 1.5e6) ** 2).tolist(),
                      "conjugated": {"focal_pressure_pa": 1.5e6, "skull_rise_K": conj},
                      "optimized": {"focal_pressure_pa": 1.2e6, "skull_rise_K": h["skull_rise_K"]}},
    }  # fmt: skip
    return o


def test_exposure_and_skull_path_in_the_summary(planned):
    p, out, _ = planned
    s = json.load(open(os.path.join(out, "plan.json")))
    e = s["exposure"]
    assert e["focal_pressure_pa"] == pytest.approx(1.5e6, rel=1e-6)  # the peak grid point
    assert e["mechanical_index"] == pytest.approx(1.5 / np.sqrt(0.3))  # 300 kHz
    rho, c = e["density_kg_m3"], e["sound_speed_m_s"]
    assert (rho, c) in {(1040.0, 1560.0), (1090.0, 1610.0)}  # brain or soft tissue (the maps)
    assert e["i_sppa_w_cm2"] == pytest.approx(1.5e6**2 / (2 * rho * c) / 1e4)
    assert e["i_spta_w_cm2"] == pytest.approx(e["i_sppa_w_cm2"])  # duty 1
    cap = 2 * np.pi * 50 * (50 - np.sqrt(50**2 - 25**2))  # mm^2
    a = s["drive"]["amplitude_pa"][0]
    assert e["acoustic_power_w"] == pytest.approx(a**2 * cap * 1e-6 / (2 * 1000 * 1500))
    assert 0 <= e["side_lobe_ratio"] <= 1 and len(e["focus_uncertainty_mm"]) == 3
    assert min(e["focus_uncertainty_mm"]) >= p.grid.spacing_mm / 2
    sp = s["skull_path"]  # the phantom's skull is some 6 to 8 mm thick
    assert 4.0 < sp["axis"]["thickness_mm"] < 12.0 and 0 <= sp["axis"]["angle_deg"] < 45
    assert sp["thickness_range_mm"]["min"] > 2.0 and len(sp["thickness_mm"]) == 64
    rows = dict(report_lines(s))
    assert rows["focal pressure"] == "1.50 MPa" and "\u00b1" in rows["focal position"]
    assert rows["mechanical index"].startswith(f"{e['mechanical_index']:.2f}")
    assert "path through the skull" in rows and "acoustic power" in rows


def test_warnings_when_thresholds_are_crossed(planned):
    p, out, _ = planned
    s = copy.deepcopy(p.summary)
    s["warnings"] = []
    s["exposure"] |= {"mechanical_index": MI_MAX - 0.1, "side_lobe_ratio": SIDE_LOBE_MAX - 0.1}
    s["heat"] |= {"skull_rise_K": SKULL_RISE_MAX_K - 0.1}
    s["focus"] = {**s["focus"], "error_mm": 0.9}
    water = s["beams_at_source_pressure"]["water"]["volume_mm3"]
    s["focus"]["volume_mm3"] = 1.4 * water
    assert review_warnings(s) == []
    assert "<li>none</li>" in report_page(s, "")
    s["warnings"] = ["the image's own warning"]
    s["exposure"] |= {"mechanical_index": MI_MAX + 0.1, "side_lobe_ratio": SIDE_LOBE_MAX + 0.1}
    s["heat"] |= {"skull_rise_K": SKULL_RISE_MAX_K + 0.1}
    s["focus"] |= {"error_mm": 1.1, "volume_mm3": 1.6 * water}
    w = review_warnings(s)
    assert w[0] == "the image's own warning" and len(w) == 6
    for part in (
        "mechanical index 2.00 is above 1.9",
        "skull heats by 6.1 K, above 6 K",
        "1.1 mm from the target",
        "1.60x the water path",
        "reaches 0.60 of the focal",
    ):
        assert sum(part in x for x in w) == 1, part  # fmt: skip
    page = report_page(s, "")
    assert page.index("Warnings") < page.index("Numbers")
    assert all(x.replace("'", "&#x27;") in page for x in w)
    # the phantom plan itself crosses them (a 1.5 MPa focus at 300 kHz: MI 2.7): in its report
    assert "mechanical index 2.74 is above 1.9" in open(os.path.join(out, "report.html")).read()


def test_both_plans_side_by_side_and_the_optimised_volumes(planned, ct_path, tmp_path):
    p, _, _ = planned
    q = replace(p, optimized=_optimized(p))
    q.summary = _summary(q)
    o = q.summary["optimized"]
    assert o["exposure"]["focal_pressure_pa"] == pytest.approx(K * 1.5e6, rel=1e-6)
    assert o["exposure"]["acoustic_power_w"] == pytest.approx(
        K**2 * q.summary["exposure"]["acoustic_power_w"]
    )
    compared = {a: (b, c) for a, b, c in comparison_lines(q.summary)}
    assert compared["focal pressure"] == ("1.50 MPa", "1.20 MPa")
    assert set(compared) >= {"focal position", "distance from target", "-6 dB focal volume",
                             "peak skull temperature", "side lobe (brain)", "mechanical index",
                             "I_spta / I_sppa", "acoustic power"}  # fmt: skip
    assert "focal pressure" not in dict(report_lines(q.summary))  # in the two columns only
    assert any(x.startswith("optimised plan: ") for x in review_warnings(q.summary))
    out = str(tmp_path / "out")
    paths = write_plan(q, out)
    assert sorted(os.path.basename(x) for x in paths) == sorted(FILES + OPTIMIZED_FILES)
    page = open(os.path.join(out, "report.html")).read()
    assert "<th>phase-conjugated</th><th>optimised</th>" in page and "1.20 MPa" in page
    ct = read_nifti(ct_path)
    plain = read_nifti(os.path.join(out, "pressure_amplitude.nii.gz")).hu
    for name in OPTIMIZED_FILES:
        img = read_nifti(os.path.join(out, name))
        assert img.shape == ct.shape and np.allclose(img.affine, ct.affine)
        assert np.isfinite(img.hu).all()
    opt = read_nifti(os.path.join(out, "pressure_amplitude_optimized.nii.gz")).hu
    np.testing.assert_allclose(opt, K * plain, rtol=1e-5, atol=1e-3 * plain.max())
    assert not read_nifti(os.path.join(out, "lesion_optimized.nii.gz")).hu.any()


def test_optimised_volumes_checked_before_any_work(tmp_path, ct_path):
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(ct_path, out / "cem43_optimized.nii.gz")
    with pytest.raises(ProblemError, match="cem43_optimized"):
        prepare_output(str(out), force=True, inputs=(ct_path,))
