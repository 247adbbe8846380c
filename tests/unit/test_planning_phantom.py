"""The synthetic head CT: Hounsfield units of each layer, the layers' order, and the skull's
irregular thickness measured through the volume against the phantom's own thickness model."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.model.problem import ProblemError
from sonotile.planning.phantom import HeadShape, head_phantom, skull_thickness, thickness_along_ray
from sonotile.planning.tissue import BRAIN, CORTICAL, SOFT_TISSUE, TRABECULAR, WATER, classify

#: A small head (semi-axes 40 x 48 x 44 mm) at 1 mm: fast, with the adult skull's layers.
SMALL = HeadShape(semi_axes_mm=(40.0, 48.0, 44.0))


@pytest.fixture(scope="module")
def phantom():
    return head_phantom((96, 112, 104), 1.0, seed=7, head=SMALL)


def test_hounsfield_units_of_each_tissue(phantom):
    hu, labels = phantom.hu, classify(phantom.hu)
    for cls, lo, hi in ((CORTICAL, 1500, 2000), (TRABECULAR, 300, 800)):
        v = hu[labels == cls]
        assert v.size > 1000 and lo <= v.min() and v.max() <= hi, cls
        assert v.std() > 20  # textured, not one value
    assert np.all(hu[labels == BRAIN] == 30.0) and np.all(hu[labels == SOFT_TISSUE] == 40.0)
    assert np.all(hu[labels == WATER] == -1000.0)
    # the corner is air; the centre brain; the world origin is the head's centre
    assert (
        hu[0, 0, 0] == -1000.0
        and labels[tuple(np.round(phantom.voxel([0, 0, 0])).astype(int))] == BRAIN
    )
    np.testing.assert_allclose(phantom.world((np.array(phantom.shape) - 1) / 2), 0, atol=1e-12)


def test_layers_in_order_along_a_ray(phantom):
    """From the centre outward: brain, inner cortical table, diploe, outer table, scalp, air."""
    i, j, k = (np.array(phantom.shape) - 1) // 2
    labels = classify(phantom.hu)[i:, j, k]
    runs = [int(labels[0])] + [int(b) for a, b in zip(labels[:-1], labels[1:]) if a != b]
    assert runs == [BRAIN, CORTICAL, TRABECULAR, CORTICAL, SOFT_TISSUE, WATER]


def test_skull_thickness_is_irregular_and_as_modelled(phantom):
    rng = np.random.default_rng(0)
    d = rng.normal(size=(60, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    model = skull_thickness(d, SMALL, seed=7)
    # the phantom's thickness: mean 6.5 mm, varying by +-35 % at most
    assert 4.2 <= model.min() and model.max() <= 8.8 and model.std() > 0.8
    # measured through the 1 mm voxels: with the nearest voxel, unbiased and within the
    # voxels' quantisation ray by ray; with trilinear sampling partial volume widens the bone
    # (the soft-bone edge crosses the 250 HU threshold close to the soft voxel)
    nearest = np.array([thickness_along_ray(phantom, (0, 0, 0), u, 70.0, order=0) for u in d])
    err = nearest - model
    assert abs(err.mean()) < 0.25 and err.std() < 0.55 and np.abs(err).max() < 1.5
    assert np.corrcoef(nearest, model)[0, 1] > 0.93
    assert nearest.std() > 0.8 and 5.5 < nearest.mean() < 7.5
    linear = np.array([thickness_along_ray(phantom, (0, 0, 0), u, 70.0) for u in d])
    assert 0.3 < (linear - model).mean() < 1.2 and np.corrcoef(linear, model)[0, 1] > 0.95


def test_seeded_and_checked():
    a = head_phantom((96, 112, 104), 1.0, seed=1, head=SMALL)
    b = head_phantom((96, 112, 104), 1.0, seed=1, head=SMALL)
    c = head_phantom((96, 112, 104), 1.0, seed=2, head=SMALL)
    assert np.array_equal(a.hu, b.hu) and not np.array_equal(a.hu, c.hu)
    assert a.meta["seed"] == 1 and a.meta["thickness_mm"] == 6.5
    with pytest.raises(ProblemError, match="does not fit"):
        head_phantom((64, 64, 64), 1.0, head=SMALL)
    with pytest.raises(ProblemError, match="spacing_mm"):
        head_phantom((96, 112, 104), -1.0)
