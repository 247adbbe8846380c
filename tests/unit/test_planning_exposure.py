"""The exposure figures and the path through the skull against hand values: the mechanical
index and the intensities of a known pressure, the acoustic power of a bowl's and an array's
drive, the focus's uncertainty on a Gaussian, and a slab of bone of known thickness crossed at
known angles."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.planning.exposure import (
    RIDGE_LEVEL,
    acoustic_power,
    element_areas_mm2,
    focus_uncertainty,
    mechanical_index,
    pulse_average_intensity,
    temporal_average_intensity,
)
from sonotile.planning.geometry import Pose, SimulationGrid
from sonotile.planning.report import decimals, position_text, sig3
from sonotile.planning.skullpath import BOWL_RAYS, BoneMask, ray_starts, skull_path
from sonotile.planning.tissue import BRAIN, CORTICAL
from sonotile.planning.transducers import Transducer

DX = 0.5  # mm


def _grid(shape: tuple[int, int, int], dx: float = DX) -> SimulationGrid:
    """An axis-aligned grid, index (0, 0, 0) at the origin [mm]."""
    affine = np.eye(4)
    affine[:3, :3] *= dx
    centre = tuple(n // 2 for n in shape)
    return SimulationGrid(shape, dx, affine, (8, 8, 8), centre, np.zeros(3), 1e6, 3.0, 1500.0)


def test_mechanical_index_and_intensities_of_a_known_pressure():
    assert mechanical_index(1.5e6, 250e3) == pytest.approx(3.0)  # 1.5 MPa / sqrt(0.25 MHz)
    assert mechanical_index(1e6, 1e6) == pytest.approx(1.0)
    # 1 MPa in water: (1e6)^2 / (2 * 1000 * 1500) W/m^2 = 333333 W/m^2 = 33.33 W/cm^2
    i_sppa = pulse_average_intensity(1e6, 1000.0, 1500.0)
    assert i_sppa == pytest.approx(33.3333, rel=1e-5)
    assert temporal_average_intensity(i_sppa, 0.2) == pytest.approx(6.66667, rel=1e-5)


def test_acoustic_power_of_a_bowl_and_an_array():
    bowl = Transducer("bowl", 50.0, 50.0)
    area = element_areas_mm2(bowl)  # cap: 2 pi R (R - sqrt(R^2 - (D/2)^2)) = 2104.47 mm^2
    np.testing.assert_allclose(area, [2104.468], rtol=1e-6)
    # 100 kPa over 2104.47 mm^2 in water: 1e10 * 2.10447e-3 / (2 * 1000 * 1500) = 7.0149 W
    assert acoustic_power(np.array([1e5]), area) == pytest.approx(7.01489, rel=1e-5)
    array = Transducer("array", 50.0, 50.0, 3, 4.0)
    areas = element_areas_mm2(array)  # discs of 4 mm: 12.566 mm^2 each
    np.testing.assert_allclose(areas, [4 * np.pi] * 3)
    # (1e10 + 4e10 + 0) Pa^2 * 12.566e-6 m^2 / 3e6 kg/(m^2 s) = 0.20944 W
    assert acoustic_power(np.array([1e5, 2e5, 0.0]), areas) == pytest.approx(0.209440, rel=1e-5)


def test_focus_uncertainty_of_a_gaussian():
    g = _grid((41, 41, 81))
    sigma = np.array([2.0, 3.0, 12.0])  # mm
    xyz = (np.moveaxis(np.indices(g.shape), 0, -1) - np.array([20, 20, 40])) * DX
    p = np.exp(-0.5 * np.sum((xyz / sigma) ** 2, axis=-1))
    half = np.array(focus_uncertainty(p, g, (20, 20, 40)))
    reach = sigma * np.sqrt(-2 * np.log(RIDGE_LEVEL))  # 0.64, 0.96, 3.84 mm
    expected = np.maximum(np.floor(reach / DX) * DX, DX / 2)  # the grid points within it
    np.testing.assert_allclose(half, expected)
    assert np.all(np.abs(half - reach) < DX)  # within the grid spacing of the true reach
    assert half[2] == 3.5 and half[0] == DX  # along the beam the longest; at least half a voxel


def test_figures_rounded_to_what_the_grid_resolves():
    assert [sig3(x) for x in (1.5, 123.4, 1234.0, 0.012345)] == ["1.50", "123", "1230", "0.0123"]
    assert decimals([0.5, 0.5, 1.4]) == 1 and decimals([1.0, 1.0, 2.0]) == 0
    text = position_text([12.34, -4.06, 30.21], [0.5, 0.5, 1.4])
    assert text == "(12.3, -4.1, 30.2) \u00b1 (0.5, 0.5, 1.4) mm"


def _slab(g: SimulationGrid, angle_deg: float, thickness: float) -> tuple[np.ndarray, np.ndarray]:
    """Labels of a bone slab ``thickness`` [mm] thick tilted by ``angle_deg`` about y (its
    faces between voxel centres) in brain; its normal."""
    n = np.array([np.sin(np.radians(angle_deg)), 0.0, np.cos(np.radians(angle_deg))])
    d = (g.world(np.moveaxis(np.indices(g.shape), 0, -1)) - [12.5, 12.5, 15.0]) @ n
    inside = (d > DX / 2) & (d < DX / 2 + thickness)
    return np.where(inside, CORTICAL, BRAIN).astype(np.uint8), n


@pytest.mark.parametrize("angle", [0.0, 20.0, 35.0])
def test_bone_thickness_and_incidence_on_a_slab(angle):
    g = _grid((50, 50, 70))
    thickness = 4.0
    labels, _ = _slab(g, angle, thickness)
    mask = BoneMask(labels, g)
    crossed = thickness / np.cos(np.radians(angle))  # the path length through the slab
    errors, angles = [], []
    for off in np.linspace(-2.0, 2.0, 9):  # parallel rays along -z
        r = mask.ray([12.5 + off, 12.5 + 0.3 * off, 30.0], [12.5 + off, 12.5 + 0.3 * off, 3.0])
        errors.append(r["thickness_mm"] - crossed)
        angles.append(r["angle_deg"])
    errors, angles = np.array(errors), np.array(angles)
    if angle == 0.0:  # faces on the grid's planes: exact to the sampling
        assert np.all(np.abs(errors) <= DX / 4)
    else:  # a voxelised oblique slab: each ray within a voxel, their mean within a quarter
        assert np.all(np.abs(errors) <= DX) and abs(errors.mean()) <= DX / 4
    assert np.all(np.abs(angles - angle) <= 5.0) and abs(angles.mean() - angle) <= 2.0


def test_skull_path_of_a_bowl_and_an_array_through_a_slab():
    g = _grid((50, 50, 70))
    labels, _ = _slab(g, 20.0, 3.0)
    target = np.array([12.5, 12.5, 5.0])
    pose = Pose.from_target_entry(target, [12.5, 12.5, 30.0], focal_length_mm=24.0)
    bowl = Transducer("bowl", 24.0, 16.0)
    starts, what = ray_starts(bowl)
    assert starts.shape == (BOWL_RAYS, 3) and "cap" in what
    np.testing.assert_allclose(np.linalg.norm(starts - [0, 0, 24.0], axis=1), 24.0)  # on the cap
    sp = skull_path(labels, g, bowl, pose, target)
    assert abs(sp["axis"]["thickness_mm"] - 3.0 / np.cos(np.radians(20))) <= DX
    assert abs(sp["axis"]["angle_deg"] - 20.0) <= 5.0
    assert len(sp["thickness_mm"]) == BOWL_RAYS
    r = sp["thickness_range_mm"]
    assert r["min"] <= r["median"] <= r["max"] and r["min"] >= 3.0 - DX  # never thinner
    array = Transducer("array", 24.0, 16.0, 8, 2.0)
    sp = skull_path(labels, g, array, pose, target)
    assert sp["rays_from"] == "element centres" and len(sp["angle_deg"]) == 8
    assert sp["angle_range_deg"]["max"] < 45.0
