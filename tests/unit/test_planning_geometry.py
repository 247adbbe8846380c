"""The transducer and the simulation grid in the patient's frame: poses, FFT-friendly sizes,
and a marker at the target that survives CT -> simulation grid -> NIfTI on the CT's grid."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.model.problem import ProblemError
from sonotile.planning.geometry import (
    Pose,
    beam_grid,
    fft_size,
    is_fft_friendly,
    kwave_medium,
    resample,
    resample_maps,
    to_image,
)
from sonotile.planning.images import CTImage
from sonotile.planning.tissue import WATER


def test_fft_sizes():
    assert [n for n in range(1, 31) if is_fft_friendly(n)] == [
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 14, 15, 16, 18, 20, 21, 24, 25, 27, 28, 30,
    ]  # fmt: skip
    for n_min in (1, 50, 97, 131, 257, 401):
        n, pml = fft_size(n_min, (8, 24))
        assert n >= n_min and 8 <= pml <= 24 and is_fft_friendly(n + 2 * pml)
        # no smaller friendly total holds n_min with the thinnest PML
        assert not any(is_fft_friendly(t) for t in range(n_min + 16, n + 2 * pml))
    with pytest.raises(ProblemError, match="pml_range"):
        fft_size(10, (0, 4))


def test_pose_from_target_and_entry():
    target, entry = np.array([10.0, -20.0, 35.0]), np.array([60.0, -5.0, 80.0])
    pose = Pose.from_target_entry(target, entry)
    axis = (target - entry) / np.linalg.norm(target - entry)
    np.testing.assert_allclose(pose.axis, axis)
    np.testing.assert_allclose(pose.position, entry)
    r = pose.rotation
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-12)
    assert np.linalg.det(r) == pytest.approx(1.0)
    bowl = Pose.from_target_entry(target, entry, focal_length_mm=64.0)
    np.testing.assert_allclose(bowl.position, target - 64.0 * axis)
    np.testing.assert_allclose(bowl.to_world([0, 0, 64.0]), target)
    # a roll turns the lateral axes about the beam axis only
    rolled = Pose.from_position_direction(entry, axis, roll_deg=90.0)
    np.testing.assert_allclose(rolled.rotation[:, 0], pose.rotation[:, 1], atol=1e-12)
    np.testing.assert_allclose(rolled.axis, axis)
    with pytest.raises(ProblemError, match="different"):
        Pose.from_target_entry(target, target)
    with pytest.raises(ProblemError, match="entry"):
        Pose.from_target_entry(target, [1.0, 2.0])


def test_beam_grid_holds_transducer_and_target():
    target = np.array([5.0, 10.0, 0.0])
    pose = Pose.from_target_entry(target, (30.0, 20.0, 60.0), focal_length_mm=64.0)
    g = beam_grid(pose, target, 5e5, points_per_wavelength=6, aperture_mm=64.0)
    assert g.spacing_mm == pytest.approx(1500 / 5e5 / 6 * 1e3)  # 0.5 mm
    assert all(is_fft_friendly(n) for n in g.total_shape)
    assert g.options() == {"pml_size": g.pml_size, "pml_inside": False}
    np.testing.assert_allclose(g.world(g.target_index), target, atol=1e-9)
    np.testing.assert_allclose(g.world(g.source_index), pose.position, atol=1e-9)
    # the transducer 4 mm of water in from the back face, centred; the aperture fits across
    assert g.source_index[2] * g.spacing_mm >= 4.0 - 1e-9 and g.source_index[2] < g.target_index[2]
    np.testing.assert_allclose(g.source_index[:2], g.target_index[:2], atol=1e-9)
    assert (g.shape[0] - 1) * g.spacing_mm >= 64.0 + 2 * 5.0
    assert (g.shape[2] - 1 - g.target_index[2]) * g.spacing_mm >= 20.0
    # k-Wave's Cartesian positions: metres from the interior's index n // 2
    centre = np.array([n // 2 for n in g.shape])
    np.testing.assert_allclose(
        g.kwave_points(target)[:, 0], (np.array(g.target_index) - centre) * 0.5e-3, atol=1e-12
    )
    assert g.kwave_points([target, pose.position]).shape == (3, 2)
    # grid axis 2 runs along the beam
    step = g.world([0, 0, 1]) - g.world([0, 0, 0])
    np.testing.assert_allclose(step / g.spacing_mm, pose.axis, atol=1e-12)
    with pytest.raises(ProblemError, match="behind"):
        beam_grid(pose, pose.position - pose.axis, 5e5)
    with pytest.raises(ProblemError, match="points_per_wavelength"):
        beam_grid(pose, target, 5e5, points_per_wavelength=0)


def test_identical_grids_resample_exactly():
    """A CT grid that is the simulation grid: resampling copies values, and back again."""
    pose = Pose.from_position_direction((0.0, 0.0, -30.0), (0.0, 0.0, 1.0))
    g = beam_grid(pose, (0.0, 0.0, 0.0), 1e6, points_per_wavelength=3, aperture_mm=10.0)
    ct = CTImage(np.random.default_rng(0).normal(size=g.shape), g.affine)
    np.testing.assert_allclose(resample(ct.hu, ct, g), ct.hu, atol=1e-5)
    np.testing.assert_allclose(to_image(ct.hu, g, ct), ct.hu, atol=1e-5)
    with pytest.raises(ProblemError, match="crop the PML"):
        to_image(np.zeros(g.total_shape), g, ct)


def marker_ct(target: np.ndarray) -> CTImage:
    """An oblique anisotropic CT holding a smooth marker (Gaussian, 1.5 mm) at ``target``."""
    t = np.deg2rad(25.0)
    rot = np.array([[1, 0, 0], [0, np.cos(t), -np.sin(t)], [0, np.sin(t), np.cos(t)]])
    a = np.eye(4)
    a[:3, :3] = np.diag([-1.0, 1.0, 1.0]) @ rot @ np.diag([0.7, 0.8, 1.2])  # a flipped axis too
    a[:3, 3] = (30.0, -40.0, -20.0)
    shape = (90, 100, 60)
    ct = CTImage(np.zeros(shape), a)
    ijk = np.stack(np.meshgrid(*map(np.arange, shape), indexing="ij"), axis=-1)
    r2 = ((ct.world(ijk) - target) ** 2).sum(-1)
    return CTImage(1000.0 * np.exp(-r2 / (2 * 1.5**2)), a)


def centroid(values: np.ndarray, world) -> np.ndarray:
    """Intensity-weighted centre of a blob, in world millimetres."""
    w = np.where(values > 0.2 * values.max(), values, 0.0)
    ijk = np.stack(np.meshgrid(*map(np.arange, values.shape), indexing="ij"), axis=-1)
    return world((ijk * w[..., None]).reshape(-1, 3).sum(0) / w.sum())


def test_marker_at_target_comes_back_at_target(tmp_path):
    pytest.importorskip("nibabel")
    from sonotile.planning.images import read_ct, write_nifti

    target = np.array([1.3, -7.9, 12.4])
    ct = marker_ct(target)
    pose = Pose.from_target_entry(target, target + (25.0, 30.0, 55.0), focal_length_mm=40.0)
    g = beam_grid(pose, target, 5e5, points_per_wavelength=4, aperture_mm=20.0)
    on_grid = resample(ct.hu, ct, g)
    # on the simulation grid: brightest at the target's grid point, centred on the target
    assert np.unravel_index(on_grid.argmax(), g.shape) == g.target_index
    np.testing.assert_allclose(centroid(on_grid, g.world), target, atol=0.15)
    # a "result" on the grid, written on the CT's grid as NIfTI and read back
    write_nifti(tmp_path / "result.nii.gz", to_image(on_grid, g, ct), ct)
    back = read_ct(tmp_path / "result.nii.gz")
    np.testing.assert_allclose(back.affine, ct.affine, atol=1e-5)
    nearest = tuple(np.round(ct.voxel(target)).astype(int))
    assert np.unravel_index(back.hu.argmax(), back.shape) == nearest
    np.testing.assert_allclose(centroid(back.hu, back.world), target, atol=0.15)


def test_phantom_properties_on_a_beam_grid():
    """The phantom's properties, made on the CT and resampled onto a grid aimed radially at
    the head's centre: along the beam water, scalp, the three skull layers, then brain; the
    bone along the axis as thick as the phantom's skull in that direction."""
    from sonotile.planning.phantom import HeadShape, head_phantom, skull_thickness
    from sonotile.planning.tissue import (
        BRAIN,
        CORTICAL,
        SOFT_TISSUE,
        TRABECULAR,
        tissue_properties,
    )

    head = HeadShape(semi_axes_mm=(40.0, 48.0, 44.0))
    ct = head_phantom((96, 112, 104), 1.0, seed=5, head=head)
    maps = tissue_properties(ct.hu, "aubry2003", frequency=5e5)
    direction = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    pose = Pose.from_target_entry((0, 0, 0), 55.0 * direction, focal_length_mm=60.0)
    g = beam_grid(pose, (0, 0, 0), 5e5, points_per_wavelength=6, aperture_mm=20.0)
    on = resample_maps(maps, ct, g)
    i, j, k = g.target_index
    axis = on.labels[i, j, :k]
    runs = [int(axis[0])] + [int(b) for a, b in zip(axis[:-1], axis[1:]) if a != b]
    assert runs == [WATER, SOFT_TISSUE, CORTICAL, TRABECULAR, CORTICAL, BRAIN]
    bone = np.count_nonzero(axis >= TRABECULAR) * g.spacing_mm
    assert bone == pytest.approx(skull_thickness(direction, head, seed=5), abs=1.0)
    assert on.sound_speed[i, j, k] == 1560.0 and on.sound_speed[i, j, 0] == 1500.0
    assert on.sound_speed[i, j, :k].max() > 2500.0 and on.shear_speed[i, j, :k].max() > 1000.0
    assert on.provenance["grid"]["shape"] == list(g.shape)
    assert on.provenance["mapping"] == "aubry2003"
    # as a k-Wave medium: y = 2 with the mapped attenuation at 500 kHz
    medium = kwave_medium(on)
    assert medium.alpha_power == 2.0 and medium.sound_speed.shape == g.shape
    np.testing.assert_allclose(medium.alpha_coeff * 0.5**2, on.alpha_coeff * 0.5, rtol=1e-6)
