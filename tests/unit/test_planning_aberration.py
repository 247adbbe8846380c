"""Transducers for a plan and aberration correction through the phantom skull: the array's
layout, the spec strings, and on a small 3-D grid (300 kHz, 2 mm) the corrected beam against
the uncorrected one and the water path."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from sonotile.model.problem import ProblemError
from sonotile.planning.aberration import (
    compare_beams,
    conjugate_drive,
    refocus,
    steering_phase,
    water_medium,
)
from sonotile.planning.acoustics import (
    Focus,
    RunSettings,
    cw_field,
    element_response,
    find_focus,
)
from sonotile.planning.elastic import elastic_beams, elastic_field, elastic_response
from sonotile.planning.geometry import Pose, beam_grid, kwave_medium, resample_maps
from sonotile.planning.phantom import head_phantom
from sonotile.planning.tissue import tissue_properties
from sonotile.planning.transducers import Transducer, parse_transducer

F0 = 300e3
SPEC = "array:48:50:50:4"


def test_transducer_specs():
    bowl = parse_transducer("bowl:64:64")
    assert (bowl.kind, bowl.radius_mm, bowl.aperture_mm, bowl.n_elements) == ("bowl", 64, 64, 1)
    arr = parse_transducer(" Array:128:80:100:5 ")
    assert (arr.n_elements, arr.radius_mm, arr.aperture_mm, arr.element_mm) == (128, 80, 100, 5)
    assert parse_transducer(arr.spec) == arr
    for bad in ("bowl:64", "disc:10", "array:12.5:64:64:4", "array:x:64:64:4", ""):
        with pytest.raises(ProblemError, match="unknown transducer"):
            parse_transducer(bad)
    with pytest.raises(ProblemError, match="aperture"):
        parse_transducer("bowl:30:64")
    with pytest.raises(ProblemError, match="overlap"):
        parse_transducer("array:128:64:64:8")


def test_array_elements_lie_on_the_cap_facing_the_focus():
    t = Transducer("array", 64.0, 100.0, 128, 4.0)
    c = t.element_centres()
    assert c.shape == (128, 3)
    # every element on the sphere about the focus (0, 0, R), inside the aperture
    np.testing.assert_allclose(np.linalg.norm(c - [0, 0, 64.0], axis=1), 64.0, rtol=1e-12)
    assert np.hypot(c[:, 0], c[:, 1]).max() <= 50.0 + 1e-9
    # evenly spread: nearest neighbours about one mean pitch apart, none much closer
    d = np.linalg.norm(c[:, None] - c[None], axis=2) + np.eye(128) * 1e9
    pitch = np.sqrt(t.cap_area_mm2 / 128)
    assert 0.7 * pitch < d.min(axis=1).min() and d.min(axis=1).max() < 1.3 * pitch


def test_conjugate_drive_undoes_the_element_phases():
    rng = np.random.default_rng(1)
    r = rng.uniform(0.5, 2.0, 16) * np.exp(1j * rng.uniform(-np.pi, np.pi, 16))
    amp, ph = conjugate_drive(r, 1e3)
    np.testing.assert_allclose(amp, 1e3)
    focused = np.exp(1j * ph) * r  # each element's contribution at the focus
    np.testing.assert_allclose(np.angle(focused * np.conj(focused[0])), 0.0, atol=1e-12)
    amp, _ = conjugate_drive(r, 1e3, amplitudes=True)
    np.testing.assert_allclose(amp, 1e3 * np.abs(r) / np.abs(r).max())
    with pytest.raises(ProblemError, match="element response"):
        conjugate_drive(np.zeros(4), 1e3)


@pytest.fixture(scope="module")
def setup():
    """The phantom at 2 mm, a 48-element cap array (R = D = 50 mm) on a 2 mm grid aimed at a
    target 45 mm above the head's centre from 17 degrees off the vertical."""
    ct = head_phantom((80, 96, 84), 2.0, seed=0)
    maps = tissue_properties(ct.hu, "aubry2003", frequency=F0)
    tr = parse_transducer(SPEC)
    target = np.array([0.0, 10.0, 45.0])
    entry = target + 60 * np.array([0.3, 0.1, 1.0]) / np.linalg.norm([0.3, 0.1, 1.0])
    pose = Pose.from_target_entry(target, entry, focal_length_mm=tr.radius_mm)
    grid = beam_grid(pose, target, F0, points_per_wavelength=2.5, aperture_mm=tr.aperture_mm,
                     margin_mm=3, beyond_mm=10)  # fmt: skip
    medium = kwave_medium(resample_maps(maps, ct, grid))
    return tr, pose, grid, target, medium


@pytest.fixture(scope="module")
def beams(setup):
    tr, pose, grid, _, medium = setup
    return compare_beams(medium, grid, tr, pose, F0)


def test_correction_brings_the_focus_to_the_target(beams):
    w, u, c = beams.water, beams.uncorrected, beams.corrected
    assert c is not None
    # the skull weakens the beam; the correction recovers part of it at and near the target
    assert u.peak_pa < 0.7 * w.peak_pa
    assert c.peak_pa > u.peak_pa and c.at_target_pa > 1.1 * u.at_target_pa
    assert c.error_mm < u.error_mm - 2.0 and c.error_mm < 3.0  # within 1.5 grid steps
    s = beams.summary()
    assert s["focal_gain"] > 1 and s["gain_at_target"] > 1.1
    np.testing.assert_allclose(s["transmission_loss_db"], 20 * np.log10(w.peak_pa / c.peak_pa))
    assert 1.0 < s["transmission_loss_db"] < 15.0
    assert 0.5 < s["volume_ratio_to_water"] < 3.0


def test_correction_in_water_is_geometric_focusing(setup, beams):
    tr, pose, grid, target, _ = setup
    karray = tr.karray(pose, grid)
    response = element_response(water_medium(), grid, karray, F0)
    amp, phase = conjugate_drive(response, 60e3)
    # every element of the cap is as far from its centre: equal phases (to the grid's error)
    assert np.ptp(phase) < 0.4
    p = cw_field(water_medium(), grid, karray, amp, phase, F0)[0]
    f, geometric = find_focus(p, grid, target), beams.water
    np.testing.assert_allclose(f.peak_pa, geometric.peak_pa, rtol=0.05)
    assert np.linalg.norm(np.subtract(f.position_mm, geometric.position_mm)) < 1.0


def test_bowl_reports_shift_and_loss(setup):
    _, _, grid, _, medium = setup
    bowl = parse_transducer("bowl:50:50")
    pose = Pose(grid.world(grid.source_index), np.asarray(grid.affine[:3, :3] / grid.spacing_mm))
    b = compare_beams(medium, grid, bowl, pose, F0)
    assert b.corrected is None and b.plan is b.uncorrected
    s = b.summary()
    assert "focal_gain" not in s and s["corrected"] is None
    assert 1.0 < s["uncorrected_loss_db"] < 15.0
    assert s["uncorrected_shift_from_water_mm"] >= 0.0 and np.isfinite(b.fields["water"]).all()


def _skull_water_bowl(grid):
    """The phantom's tissue maps on ``grid``, the same maps filled with water, and a bowl
    (R = D = 50 mm) at the grid's source point with its drive (60 kPa, phase 0)."""
    ct = head_phantom((80, 96, 84), 2.0, seed=0)
    skull = resample_maps(tissue_properties(ct.hu, "aubry2003", frequency=F0), ct, grid)
    z = np.zeros(grid.shape, np.float32)
    water = replace(skull, sound_speed=z + 1500, density=z + 1000, alpha_coeff=z,
                    alpha_np_per_m=z, shear_speed=z, shear_alpha_np_per_m=z)  # fmt: skip
    bowl = parse_transducer("bowl:50:50")
    pose = Pose(grid.world(grid.source_index), np.asarray(grid.affine[:3, :3] / grid.spacing_mm))
    return skull, water, bowl.karray(pose, grid), np.array([60e3]), np.array([0.0])


@pytest.mark.slow
def test_elastic_beam_matches_the_fluid_one_without_shear(setup):
    _, _, grid, target, _ = setup
    skull, water, karray, a, ph = _skull_water_bowl(grid)
    foci = {}
    for name, maps in (("water", water), ("skull", skull)):
        fluid = find_focus(cw_field(kwave_medium(maps), grid, karray, a, ph, F0)[0], grid, target)
        solid = find_focus(elastic_field(maps, grid, karray, a, ph, F0), grid, target)
        foci[name] = (fluid, solid)
    # no shear: the same wave (to the elastic scheme's dispersion at 2.5 points per wavelength)
    fluid, solid = foci["water"]
    assert 0.9 < solid.peak_pa / fluid.peak_pa < 1.1
    assert np.linalg.norm(np.subtract(solid.position_mm, fluid.position_mm)) < 2.0
    fluid, solid = foci["skull"]  # shear waves in bone take some of the energy
    assert 0.6 < solid.peak_pa / fluid.peak_pa < 1.1 and solid.error_mm < 15.0


def test_slip_interface_reaches_the_plans_elastic_runs(setup):
    """``RunSettings(elastic_interface="slip")`` runs the plan's elastic beam with the
    slip-aware interface: the skull's field changes (the water slips along the bone), a
    medium without shear is k-Wave's scheme bit for bit."""
    _, _, grid, _, _ = setup
    skull, water, karray, a, ph = _skull_water_bowl(grid)
    slip = RunSettings(elastic_interface="slip")
    for maps, same in ((water, True), (skull, False)):
        kw = elastic_field(maps, grid, karray, a, ph, F0)
        sl = elastic_field(maps, grid, karray, a, ph, F0, run=slip)
        assert np.isfinite(sl).all()
        diff = np.abs(sl - kw).max() / np.abs(kw).max()
        assert diff == 0.0 if same else 1e-3 < diff < 0.5, diff


def test_steering_moves_the_water_focus_between_grid_points(setup, beams):
    """The geometric drive plus the steering phases for an aim 3 mm across the beam and
    1.5 mm along it (off the 2 mm grid): the water focus follows the aim across the beam,
    and along it by less (at this Fresnel number, 2.5, the peak moves little along the
    axis) but the right way."""
    tr, pose, grid, target, _ = setup
    karray = tr.karray(pose, grid)
    elements = pose.to_world(tr.element_centres())
    move = 3.0 * pose.rotation[:, 0] + 1.5 * pose.axis
    ph = steering_phase(elements, target, target + move, F0, 1500.0)
    assert np.ptp(ph) > 1.0  # a real change of the drive
    p = cw_field(water_medium(), grid, karray, np.full(tr.n_elements, 60e3), ph, F0)[0]
    f, w = find_focus(p, grid, target), beams.water
    shift = np.subtract(f.position_mm, w.position_mm)
    along, across = shift @ pose.axis, shift - (shift @ pose.axis) * pose.axis
    assert np.linalg.norm(across - 3.0 * pose.rotation[:, 0]) < 0.6  # 0.3 grid steps
    assert 0.1 < along < 1.5
    assert 0.9 * w.peak_pa < f.peak_pa < w.peak_pa  # off the axis: the elements' directivity


def test_refocus_converges_on_a_beam_that_peaks_short():
    """A model beam that peaks 2 mm short of its aim and 0.3 mm aside, follows a lateral
    aim fully and an axial one by half (a small Fresnel number): the first move takes the
    offset, the next ones the secant gain along the last move, and stop within the
    tolerance or after the passes allowed; plain offset steps would halve the error per pass."""
    target = np.array([1.0, 2.0, 3.0])
    gain, offset = np.array([1.0, 1.0, 0.5]), np.array([0.3, 0.0, -2.0])

    def beam(aim: np.ndarray) -> Focus:
        peak = target + gain * (aim - target) + offset
        return Focus(1.0, tuple(peak), float(np.linalg.norm(peak - target)), 1.0, 1.0)

    passes = refocus(beam, target, target.copy(), iterations=5, tol_mm=0.01)
    errors = [f.error_mm for _, f in passes]
    assert len(passes) == 4 and errors[0] == pytest.approx(np.linalg.norm(offset))
    assert errors[1] == pytest.approx(1.0) and errors[2] < 0.15 and errors[3] < 0.01
    np.testing.assert_allclose(passes[-1][0], target + [-0.3, 0.0, 4.0], atol=0.02)
    # an earlier beam aimed at the target gives the gain for the first move
    first = target + [-0.3, 0.0, 2.0]
    primed = refocus(beam, target, first, iterations=5, tol_mm=0.01,
                     prior=(target, target + offset))  # fmt: skip
    assert len(primed) == 3 and primed[-1][1].error_mm < 0.01
    short = refocus(beam, target, target.copy(), iterations=1, tol_mm=0.01)
    assert len(short) == 2 and short[1][1].error_mm == pytest.approx(1.0)


@pytest.mark.slow
def test_refocus_puts_the_corrected_focus_on_the_target(setup, beams):
    tr, pose, grid, target, medium = setup
    # the secant closes in slowly on this long, flat focus (0.61, 0.58, 0.51, 0.44 mm from
    # the target pass by pass): three re-aims
    b = compare_beams(medium, grid, tr, pose, F0, refocus_iterations=3)
    assert b.corrected is not None and b.aim_mm is not None and 1 <= len(b.passes) <= 4
    # aimed past the target (the cap's pre-focal shift), off the grid, with the same
    # point-source run: the peak within a quarter grid step of the target (the correction
    # aimed at the target puts it 1.4 mm short)
    assert np.linalg.norm(np.subtract(b.aim_mm, target)) > 0.5
    assert b.corrected.error_mm < min(beams.corrected.error_mm, 0.25 * grid.spacing_mm)
    # at this Fresnel number (2.5) the focus is long and flat and aiming deeper costs some
    # amplitude: at the target within 10 % of the correction aimed at the target itself
    assert b.corrected.at_target_pa > 0.9 * beams.corrected.at_target_pa
    assert b.corrected.peak_pa > 0.9 * b.uncorrected.peak_pa
    s = b.summary()
    assert s["refocus"][0]["aim_mm"] == pytest.approx(
        (2 * target - np.asarray(b.water.position_mm)).tolist()
    )
    assert b.corrected.error_mm == min(p["error_mm"] for p in s["refocus"])


@pytest.mark.slow
def test_elastic_response_has_the_fluid_phases_in_water(setup):
    tr, pose, grid, _, _ = setup
    ct = head_phantom((80, 96, 84), 2.0, seed=0)
    skull = resample_maps(tissue_properties(ct.hu, "aubry2003", frequency=F0), ct, grid)
    z = np.zeros(grid.shape, np.float32)
    water = replace(skull, sound_speed=z + 1500, density=z + 1000, alpha_coeff=z,
                    alpha_np_per_m=z, shear_speed=z, shear_alpha_np_per_m=z)  # fmt: skip
    karray = tr.karray(pose, grid)
    off = tuple(int(v) for v in np.add(grid.target_index, (4, -3, 0)))  # 10 mm off the axis
    fluid = element_response(water_medium(), grid, karray, F0, source_index=off)
    solid = elastic_response(water, grid, karray, F0, source_index=off)
    _, ph_fluid = conjugate_drive(fluid, 1.0)
    _, ph_solid = conjugate_drive(solid, 1.0)
    assert np.ptp(ph_fluid) > 3.0  # off the axis: the elements' phases spread widely
    diff = np.angle(np.exp(1j * (ph_solid - ph_fluid)))
    assert np.sqrt(np.mean(diff**2)) < 0.3  # the same drive, to the schemes' dispersion


@pytest.mark.slow
def test_elastic_correction_focuses_through_the_elastic_skull(setup, beams):
    tr, pose, grid, target, _ = setup
    ct = head_phantom((80, 96, 84), 2.0, seed=0)
    skull = resample_maps(tissue_properties(ct.hu, "aubry2003", frequency=F0), ct, grid)
    e = elastic_beams(skull, grid, tr.karray(pose, grid), beams, F0)
    f, c = e.fluid_drive, e.corrected
    assert c is not None and e.plan is c and e.p_amp.shape == grid.shape
    # corrected for the skull the elastic model sees: more pressure at the target than the
    # fluid-corrected drive gives through the same skull, the target inside the focus near
    # its peak, and the peak on the beam line through the target (along the beam the focus
    # is long and flat at this grid: its peak may lie a few mm along it)
    assert c.at_target_pa > 1.02 * f.at_target_pa and c.at_target_pa > 0.95 * c.peak_pa
    offset = np.subtract(c.position_mm, target)
    assert np.linalg.norm(offset - (offset @ pose.axis) * pose.axis) < 1.0
    s = e.summary()
    assert s["gain_at_target"] == c.at_target_pa / f.at_target_pa
    assert np.ptp(np.angle(np.exp(1j * (e.phase - beams.phase)))) > 0.1  # a different drive
