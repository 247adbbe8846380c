"""Tissue properties from Hounsfield units against the published formulas' values."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.model.problem import ProblemError
from sonotile.planning.tissue import (
    BRAIN,
    CORTICAL,
    SOFT_TISSUE,
    TRABECULAR,
    WATER,
    BoneParameters,
    Classes,
    classify,
    density_from_hu,
    hounsfield2density,
    porosity,
    shear_speed_bone,
    sound_speed_from_density,
    tissue_properties,
)


def test_kwave_hounsfield2density_pieces_and_continuity():
    # k-Wave's four pieces, evaluated by hand at one point each (CT number = HU + 1000)
    np.testing.assert_allclose(
        hounsfield2density(500.0), 1.025793065681423 * 500 - 5.680404011488714
    )
    np.testing.assert_allclose(density_from_hu(0.0), 1011.8861149111, rtol=1e-10)  # water
    np.testing.assert_allclose(
        hounsfield2density(1200.0), 0.5108369316599 * 1200 + 539.9977189228704
    )
    np.testing.assert_allclose(density_from_hu(1000.0), 1673.9297003357, rtol=1e-10)
    # the fit is continuous where the pieces meet (within a kg/m^3: it is a fit to data)
    for h in (930.0, 1098.0, 1260.0):
        lo, hi = hounsfield2density(h - 1e-9), hounsfield2density(h + 1e-9)
        assert abs(hi - lo) < 1.5, h
    # Mast's sound speed from density: (rho + 349) / 0.893
    np.testing.assert_allclose(sound_speed_from_density(1000.0), 1349.0 / 0.893)
    np.testing.assert_allclose(sound_speed_from_density(density_from_hu(0.0)), 1523.9486, rtol=1e-7)


def shell(hu_bone: float = 1500.0, n: int = 24) -> np.ndarray:
    """A closed cube shell of bone (HU) with brain inside, scalp around it and air outside."""
    hu = np.full((n, n, n), -1000.0)
    hu[3:-3, 3:-3, 3:-3] = 40.0
    hu[5:-5, 5:-5, 5:-5] = hu_bone
    hu[7:-7, 7:-7, 7:-7] = 30.0
    return hu


def test_classes_of_a_closed_and_an_open_skull():
    hu = shell(1500.0)
    hu[12, 12, 12] = 600.0  # bone below the cortical threshold inside: trabecular
    hu[5, 10, 10] = 500.0
    labels = classify(hu)
    assert labels[0, 0, 0] == WATER and labels[4, 12, 12] == SOFT_TISSUE
    assert labels[10, 10, 10] == BRAIN and labels[6, 12, 12] == CORTICAL
    assert labels[5, 10, 10] == TRABECULAR and labels[12, 12, 12] == TRABECULAR
    # a hole in the skull's base (foramen magnum): the slice-by-slice fill still finds brain
    open_ = shell(1500.0)
    open_[10:14, 10:14, 5:7] = 30.0
    lab = classify(open_, Classes(slice_axis=2))
    assert lab[10, 10, 12] == BRAIN and lab[12, 12, 6] == BRAIN
    assert lab[12, 12, 4] == SOFT_TISSUE  # below the skull: scalp, not brain


def test_aubry2003_values_from_porosity():
    hu = shell(1000.0)
    hu[6, 12, 12] = 2000.0  # HU_max
    hu[6, 11, 12] = 500.0  # porosity 0.75
    m = tissue_properties(hu, "aubry2003", frequency=5e5, bone=BoneParameters(hu_max=2000.0))
    assert m.provenance["bone"]["hu_max"] == 2000.0 and m.provenance["mapping"] == "aubry2003"
    assert m.provenance["bone"]["hu_max_from"] == "given"
    # porosity 0: bone's 2200 kg/m^3, 3100 m/s and the least attenuation, 0.2 dB/(MHz cm)
    i = (6, 12, 12)
    assert (m.density[i], m.sound_speed[i], m.alpha_coeff[i]) == pytest.approx((2200, 3100, 0.2))
    # porosity 0.5 (1000 HU): midway in rho and c; alpha = 0.2 + 7.8 sqrt(0.5)
    j = (5, 12, 12)
    assert m.porosity[j] == pytest.approx(0.5)
    assert (m.density[j], m.sound_speed[j]) == pytest.approx((1600.0, 2300.0))
    assert m.alpha_coeff[j] == pytest.approx(0.2 + 7.8 * np.sqrt(0.5))
    k = (6, 11, 12)
    assert m.density[k] == pytest.approx(1000 * 0.75 + 2200 * 0.25)
    assert m.alpha_coeff[k] == pytest.approx(0.2 + 7.8 * np.sqrt(0.75))
    # Np/m at 500 kHz: dB/(MHz cm) x 0.5 MHz x 100 / 8.686
    assert m.alpha_np_per_m[j] == pytest.approx(m.alpha_coeff[j] * 0.5 * 100 / 8.685889638)
    # soft classes: the transcranial benchmark's values
    assert (m.sound_speed[0, 0, 0], m.density[0, 0, 0], m.alpha_coeff[0, 0, 0]) == (1500, 1000, 0)
    assert (m.sound_speed[4, 12, 12], m.density[4, 12, 12]) == (1610.0, 1090.0)
    assert (m.sound_speed[12, 12, 12], m.density[12, 12, 12]) == (1560.0, 1040.0)
    assert m.shear_speed[12, 12, 12] == 0.0 and m.shear_speed[j] > 1000.0


def test_default_hu_max_is_a_high_percentile_of_the_skull_not_its_maximum():
    hu = shell(1000.0)
    hu[5:7, 5:-5, 5:-5] = np.linspace(1200.0, 1800.0, 2 * 14 * 14).reshape(2, 14, 14)
    bone = hu[classify(hu) >= TRABECULAR]
    m = tissue_properties(hu, "aubry2003", frequency=5e5)
    assert m.provenance["bone"]["hu_max"] == pytest.approx(np.percentile(bone, 99.9))
    assert 1790.0 < m.provenance["bone"]["hu_max"] < 1800.0
    assert m.provenance["bone"]["hu_max_from"].startswith("99.9th percentile of")
    hu[6, 12, 12] = 3071.0  # one saturated voxel: HU_max and every other voxel barely move
    o = tissue_properties(hu, "aubry2003", frequency=5e5)
    assert abs(o.provenance["bone"]["hu_max"] / m.provenance["bone"]["hu_max"] - 1) < 0.01
    rest = (classify(hu) >= TRABECULAR) & (hu < 3000)
    np.testing.assert_allclose(o.sound_speed[rest], m.sound_speed[rest], rtol=0.01)
    # without bone: the cortical threshold
    no_bone = tissue_properties(np.full((6, 6, 6), 30.0), "aubry2003", frequency=5e5)
    assert no_bone.provenance["bone"]["hu_max"] == Classes().cortical_hu


def test_marsac2017_and_kwave_bone():
    hu = shell(1000.0)
    bone = BoneParameters(hu_max=2000.0)
    m = tissue_properties(hu, "marsac2017", frequency=6.5e5, bone=bone)
    j = (5, 12, 12)
    # rho = 1000 + 1700 x 0.5; c from 1500 to 3000 linearly in rho over 1000..2700
    assert m.density[j] == pytest.approx(1850.0) and m.sound_speed[j] == pytest.approx(2250.0)
    assert m.alpha_coeff[j] == pytest.approx(0.2 + 7.8 * np.sqrt(0.5))
    k = tissue_properties(hu, "kwave", frequency=6.5e5, bone=bone)
    assert k.density[j] == pytest.approx(1673.9297003357)
    assert k.sound_speed[j] == pytest.approx((1673.9297003357 + 349) / 0.893)
    # soft tissue from HU too: scalp at 40 HU
    assert k.density[4, 12, 12] == pytest.approx(0.9082709691264 * 1040 + 103.6151457847139)
    assert k.provenance["mapping"] == "kwave" and "Schneider" in k.provenance["reference"]


def test_shear_speed_from_pichardo_2017():
    # at the measured frequencies the end points are the measurements' means
    assert shear_speed_bone(0.0, 270e3) == pytest.approx((1577 + 1498 + 1313) / 3, abs=1e-3)
    assert shear_speed_bone(1.0, 270e3) == pytest.approx((1227 + 1365 + 1200) / 3, abs=1e-3)
    assert shear_speed_bone(0.0, 836e3) == pytest.approx((1758 + 1674 + 1545) / 3, abs=1e-3)
    assert shear_speed_bone(0.5, 836e3) == pytest.approx(
        ((1758 + 1674 + 1545) / 3 + (1574 + 1252 + 1327) / 3) / 2, abs=1e-3
    )


def test_bad_mapping_inputs():
    with pytest.raises(ProblemError, match="aubry2003"):
        tissue_properties(shell(), "webb", frequency=5e5)
    with pytest.raises(ProblemError, match="frequency"):
        tissue_properties(shell(), "kwave", frequency=-1.0)
    with pytest.raises(ProblemError, match="hu_max"):
        porosity(np.ones(3), 0.0)
    with pytest.raises(ProblemError, match="hu_max must be a positive number"):
        tissue_properties(shell(), "aubry2003", frequency=5e5, bone=BoneParameters(np.nan))
    with pytest.raises(ProblemError, match="air_hu"):
        classify(shell(), Classes(skull_hu=-500.0))
