"""Acoustic (and elastic) properties from Hounsfield units, by a named published mapping.

Voxels are first classed (:func:`classify`): water (air and everything outside the head, which
the coupling water replaces), soft tissue (scalp), brain (inside the skull), trabecular and
cortical bone (the skull mask: HU above a threshold; cortical above a second one). Then
:func:`tissue_properties` gives sound speed, density, attenuation and shear speed per voxel
with one of :data:`MAPPINGS`:

- ``"kwave"``: k-Wave's ``hounsfield2density`` (Schneider, Pedroni & Lomax, PMB 41:111, 1996,
  a four-piece linear fit) and the sound speed from density ``c = (rho + 349) / 0.893`` (Mast,
  ARLO 1:37, 2000) for every tissue voxel; bone attenuation from porosity as ``aubry2003``.
- ``"aubry2003"``: porosity ``phi = 1 - HU / HU_max`` in the skull, ``rho`` and ``c`` linear in
  ``phi`` between bone (2200 kg/m^3, 3100 m/s) and water, attenuation
  ``a_min + (a_max - a_min) phi^0.5`` (0.2 and 8 dB/(cm MHz)) (Aubry et al., JASA 113:84,
  2003, as BabelBrain implements it).
- ``"marsac2017"``: ``rho = 1000 + 1700 HU / HU_max``, ``c`` linear in ``rho`` from 1500 to
  3000 m/s (Marsac et al., Int. J. Hyperthermia 33:635, 2017, as BabelBrain's
  ``Marsac-Aubry`` mapping), attenuation from porosity as ``aubry2003``.

Soft tissue and brain take the transcranial benchmark's values (Aubry et al., JASA 152:1003,
2022) in the porosity mappings. Shear speed in bone (for the elastic model) is linear in
porosity between cortical and trabecular values that are linear in frequency through the
270 and 836 kHz measurements of Pichardo et al. (PMB 62:6938, 2017), shear attenuation
328.6 Np/(m MHz) (the same data); zero outside bone. Attenuation is linear in frequency
(``alpha_coeff`` in dB/(MHz cm), power 1) and also given at the planning frequency in Np/m.
The mapping's name and every parameter are returned as ``provenance``. ``HU_max`` is given, or
a high percentile of the skull's HU (:func:`robust_hu_max`), not its maximum: one outlier
would otherwise rescale the whole skull.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import ndimage

from sonotile.model.problem import ProblemError
from sonotile.model.units import db2neper

#: Tissue classes (:func:`classify`) and their names.
WATER, SOFT_TISSUE, BRAIN, TRABECULAR, CORTICAL = 0, 1, 2, 3, 4
CLASS_NAMES = ("water", "soft tissue", "brain", "trabecular bone", "cortical bone")
#: Neper per metre in one dB per centimetre.
NP_PER_M_PER_DB_PER_CM = db2neper(1.0, 0.0)

#: Sound speed [m/s], density [kg/m^3], attenuation [dB/(MHz cm)] of the soft classes (Aubry et
#: al. 2022's benchmark: skin 0.2 and brain 0.3 dB/cm at 500 kHz, scaled linearly in f).
SOFT_PROPERTIES = {
    WATER: (1500.0, 1000.0, 0.0),
    SOFT_TISSUE: (1610.0, 1090.0, 0.4),
    BRAIN: (1560.0, 1040.0, 0.6),
}


def hounsfield2density(ct_number: np.ndarray | float) -> np.ndarray:
    """k-Wave's ``hounsfield2density``: density [kg/m^3] from CT numbers in Schneider's scale
    (``HU + 1000``, water at 1000), a four-piece linear fit to Schneider et al. (1996)."""
    h = np.asarray(ct_number, dtype=np.float64)
    return np.select(
        [h < 930, h <= 1098, h < 1260],
        [
            1.025793065681423 * h - 5.680404011488714,
            0.9082709691264 * h + 103.6151457847139,
            0.5108369316599 * h + 539.9977189228704,
        ],
        0.6625370912451 * h + 348.8555178455294,
    )


def density_from_hu(hu: np.ndarray | float) -> np.ndarray:
    """Density [kg/m^3] from Hounsfield units: :func:`hounsfield2density` of ``HU + 1000``."""
    return hounsfield2density(np.asarray(hu, dtype=np.float64) + 1000.0)


def sound_speed_from_density(density: np.ndarray | float) -> np.ndarray:
    """k-Wave's soft-tissue sound speed [m/s] from density [kg/m^3]: ``(rho + 349) / 0.893``
    (Mast 2000)."""
    return (np.asarray(density, dtype=np.float64) + 349.0) / 0.893


@dataclass(frozen=True)
class Classes:
    """Thresholds of :func:`classify` [HU].

    Attributes:
        skull_hu: bone at or above this. cortical_hu: cortical bone at or above this.
        air_hu: air (replaced by water) below this. slice_axis: the voxel axis across which
            the skull is also filled slice by slice (the intracranial space of a skull open
            at its base; 2 for axial slices).
    """

    skull_hu: float = 250.0
    cortical_hu: float = 1000.0
    air_hu: float = -300.0
    slice_axis: int = 2


def skull_mask(hu: np.ndarray, skull_hu: float = Classes.skull_hu) -> np.ndarray:
    """Voxels at or above ``skull_hu`` [HU]."""
    return np.asarray(hu) >= skull_hu


def _inside(skull: np.ndarray, axis: int) -> np.ndarray:
    """The space the skull encloses: filled in 3-D and slice by slice across ``axis``."""
    inside = ndimage.binary_fill_holes(skull)
    moved = np.moveaxis(skull, axis, 0)
    slices = np.stack([ndimage.binary_fill_holes(s) for s in moved])
    return (inside | np.moveaxis(slices, 0, axis)) & ~skull


def classify(hu: np.ndarray, classes: Classes | None = None) -> np.ndarray:
    """Tissue class of each voxel (uint8: WATER, SOFT_TISSUE, BRAIN, TRABECULAR, CORTICAL)."""
    c = classes or Classes()
    h = np.asarray(hu)
    if h.ndim != 3:
        raise ProblemError(f"hu must be 3-D, got shape {h.shape}")
    if not c.air_hu < c.skull_hu <= c.cortical_hu:
        raise ProblemError("classes: need air_hu < skull_hu <= cortical_hu")
    skull = skull_mask(h, c.skull_hu)
    inside = _inside(skull, c.slice_axis)
    labels = np.full(h.shape, WATER, dtype=np.uint8)
    labels[(h >= c.air_hu) & ~skull] = SOFT_TISSUE
    labels[inside & (h >= c.air_hu)] = BRAIN
    labels[skull] = TRABECULAR
    labels[h >= c.cortical_hu] = CORTICAL
    return labels


@dataclass(frozen=True)
class BoneParameters:
    """Parameters of the porosity mappings (:data:`MAPPINGS`).

    Attributes:
        hu_max: HU of zero porosity (None: :func:`robust_hu_max` of the skull, a high
            percentile that one outlier, a metal clip or a saturated voxel, does not move).
        rho_water, rho_bone: [kg/m^3] at porosity 1 and 0 (Aubry 2003).
        c_water, c_bone: [m/s] at porosity 1 and 0 (Aubry 2003).
        alpha_min, alpha_max: [dB/(MHz cm)] at porosity 0 and 1; exponent ``alpha_exp``.
        rho_min, rho_max, c_min, c_max: Marsac 2017's density and sound speed ranges.
    """

    hu_max: float | None = None
    rho_water: float = 1000.0
    rho_bone: float = 2200.0
    c_water: float = 1500.0
    c_bone: float = 3100.0
    alpha_min: float = 0.2
    alpha_max: float = 8.0
    alpha_exp: float = 0.5
    rho_min: float = 1000.0
    rho_max: float = 2700.0
    c_min: float = 1500.0
    c_max: float = 3000.0


#: The percentile of the skull's HU taken as HU_max by default.
HU_MAX_PERCENTILE = 99.9


def robust_hu_max(bone_hu: np.ndarray, default: float) -> float:
    """HU_max of the porosity mappings from the HU of the skull's voxels [HU]: their
    :data:`HU_MAX_PERCENTILE` th percentile, not their maximum, so that a few outliers (metal,
    a saturated 3071 HU voxel, noise) do not rescale the whole skull; ``default`` without
    bone."""
    h = np.asarray(bone_hu, dtype=np.float64).reshape(-1)
    return float(np.percentile(h, HU_MAX_PERCENTILE)) if h.size else float(default)


def porosity(hu: np.ndarray, hu_max: float) -> np.ndarray:
    """Aubry 2003's porosity ``1 - HU / HU_max``, clipped to [0, 1]."""
    if hu_max <= 0:
        raise ProblemError(f"hu_max must be positive, got {hu_max}")
    return np.clip(1.0 - np.asarray(hu, dtype=np.float64) / hu_max, 0.0, 1.0)


def bone_attenuation(phi: np.ndarray, p: BoneParameters) -> np.ndarray:
    """Aubry 2003's attenuation [dB/(MHz cm)] from porosity."""
    return p.alpha_min + (p.alpha_max - p.alpha_min) * np.asarray(phi) ** p.alpha_exp


def aubry2003(hu: np.ndarray, p: BoneParameters, hu_max: float) -> tuple[np.ndarray, ...]:
    """Bone sound speed [m/s], density [kg/m^3], attenuation [dB/(MHz cm)] (Aubry 2003)."""
    phi = porosity(hu, hu_max)
    rho = p.rho_water * phi + p.rho_bone * (1.0 - phi)
    c = p.c_water * phi + p.c_bone * (1.0 - phi)
    return c, rho, bone_attenuation(phi, p)


def marsac2017(hu: np.ndarray, p: BoneParameters, hu_max: float) -> tuple[np.ndarray, ...]:
    """Bone sound speed, density and attenuation (Marsac 2017 with Aubry 2003's attenuation)."""
    h = np.clip(np.asarray(hu, dtype=np.float64), 0.0, hu_max)
    rho = p.rho_min + (p.rho_max - p.rho_min) * h / hu_max
    c = p.c_min + (p.c_max - p.c_min) * (rho - p.rho_min) / (p.rho_max - p.rho_min)
    return c, rho, bone_attenuation(porosity(hu, hu_max), p)


def kwave(hu: np.ndarray, p: BoneParameters, hu_max: float) -> tuple[np.ndarray, ...]:
    """Bone sound speed and density from k-Wave's conversions; attenuation as Aubry 2003."""
    rho = density_from_hu(hu)
    return sound_speed_from_density(rho), rho, bone_attenuation(porosity(hu, hu_max), p)


#: Mappings by name: HU in bone -> (sound speed, density, attenuation [dB/(MHz cm)]).
MAPPINGS: dict[str, Callable[..., tuple[np.ndarray, ...]]] = {
    "kwave": kwave,
    "aubry2003": aubry2003,
    "marsac2017": marsac2017,
}
REFERENCES = {
    "kwave": "k-Wave hounsfield2density (Schneider et al., PMB 41:111, 1996) and sound speed "
    "from density (Mast, ARLO 1:37, 2000); bone attenuation Aubry et al., JASA 113:84, 2003",
    "aubry2003": "Aubry et al., JASA 113:84, 2003 (porosity mapping as in BabelBrain)",
    "marsac2017": "Marsac et al., Int J Hyperthermia 33:635, 2017 (as BabelBrain's "
    "Marsac-Aubry); attenuation Aubry et al., JASA 113:84, 2003",
}


def shear_speed_bone(phi: np.ndarray, frequency: float) -> np.ndarray:
    """Shear speed in bone [m/s] from porosity at ``frequency`` [Hz]: linear in porosity
    between cortical and trabecular values, each linear in frequency through the means of
    Pichardo et al. (2017) at 270 and 836 kHz."""
    t = (frequency - 270e3) / (836e3 - 270e3)
    cortical = 1462.6667 + t * (1659.0 - 1462.6667)  # means of 1577/1498/1313, 1758/1674/1545
    trabecular = 1264.0 + t * (1384.3333 - 1264.0)  # of 1227/1365/1200, 1574/1252/1327
    return trabecular * np.asarray(phi) + cortical * (1.0 - np.asarray(phi))


#: Shear attenuation in bone [Np/(m MHz)]: the mean of 57 Np/m at 270 kHz and 373 Np/m at
#: 836 kHz per MHz (Pichardo et al. 2017).
SHEAR_ALPHA_NP_PER_M_MHZ = (57.0 / 0.27 + 373.0 / 0.836) / 2.0


@dataclass
class TissueMaps:
    """Per-voxel properties (arrays of the volume's shape) and how they were made.

    Attributes:
        labels: tissue class (:data:`CLASS_NAMES`). sound_speed: [m/s]. density: [kg/m^3].
        alpha_coeff: attenuation [dB/(MHz cm)], linear in frequency (``alpha_power`` 1).
        alpha_np_per_m: attenuation at ``frequency`` [Np/m]. shear_speed: [m/s] (0 outside
        bone). shear_alpha_np_per_m: [Np/m] at ``frequency``. porosity: in bone (0 elsewhere).
        provenance: mapping name, reference, parameters, thresholds, frequency.
    """

    labels: np.ndarray
    sound_speed: np.ndarray
    density: np.ndarray
    alpha_coeff: np.ndarray
    alpha_np_per_m: np.ndarray
    shear_speed: np.ndarray
    shear_alpha_np_per_m: np.ndarray
    porosity: np.ndarray
    alpha_power: float = 1.0
    provenance: dict[str, Any] = field(default_factory=dict)


def _soft(labels: np.ndarray, hu: np.ndarray, mapping: str) -> tuple[np.ndarray, ...]:
    """Sound speed, density and attenuation of the soft classes (bone voxels left at 0)."""
    shape = labels.shape
    c, rho, a = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    for cls, (c0, rho0, a0) in SOFT_PROPERTIES.items():
        m = labels == cls
        c[m], rho[m], a[m] = c0, rho0, a0
    if mapping == "kwave":
        tissue = (labels == SOFT_TISSUE) | (labels == BRAIN)
        rho[tissue] = density_from_hu(hu[tissue])
        c[tissue] = sound_speed_from_density(rho[tissue])
    return c, rho, a


def tissue_properties(
    hu: np.ndarray,
    mapping: str = "aubry2003",
    *,
    frequency: float,
    bone: BoneParameters | None = None,
    classes: Classes | None = None,
) -> TissueMaps:
    """Sound speed, density, attenuation and shear speed of every voxel of a CT volume.

    Args:
        hu: ``(nx, ny, nz)`` Hounsfield units.
        mapping: a name in :data:`MAPPINGS`.
        frequency: the planning frequency [Hz] (attenuation in Np/m, shear speed).
        bone: the porosity mappings' parameters. classes: the class thresholds.
    """
    if mapping not in MAPPINGS:
        raise ProblemError(f"mapping {mapping!r} unknown; choose one of {sorted(MAPPINGS)}")
    if not np.isfinite(frequency) or frequency <= 0:
        raise ProblemError(f"frequency must be positive [Hz], got {frequency}")
    p, cl = bone or BoneParameters(), classes or Classes()
    h = np.asarray(hu, dtype=np.float64)
    labels = classify(h, cl)
    in_bone = labels >= TRABECULAR
    if p.hu_max is None:
        hu_max = robust_hu_max(h[in_bone], cl.cortical_hu)
        hu_max_from = f"{HU_MAX_PERCENTILE:g}th percentile of {int(in_bone.sum())} bone voxels"
    else:
        hu_max, hu_max_from = float(p.hu_max), "given"
    if not (np.isfinite(hu_max) and hu_max > 0):
        raise ProblemError(f"hu_max must be a positive number of HU, got {hu_max}")
    c, rho, a = _soft(labels, h, mapping)
    c[in_bone], rho[in_bone], a[in_bone] = MAPPINGS[mapping](h[in_bone], p, hu_max)
    phi = np.zeros(h.shape)
    phi[in_bone] = porosity(h[in_bone], hu_max)
    shear = np.zeros(h.shape)
    shear[in_bone] = shear_speed_bone(phi[in_bone], frequency)
    f_mhz = frequency / 1e6
    provenance = {
        "mapping": mapping, "reference": REFERENCES[mapping], "frequency_hz": frequency,
        "bone": {**asdict(p), "hu_max": hu_max, "hu_max_from": hu_max_from},
        "classes": asdict(cl),
        "soft": {CLASS_NAMES[k]: v for k, v in SOFT_PROPERTIES.items()},
        "shear": "Pichardo et al., PMB 62:6938, 2017",
        "units": {"sound_speed": "m/s", "density": "kg/m^3", "alpha_coeff": "dB/(MHz cm)"},
    }  # fmt: skip
    return TissueMaps(
        labels, c, rho, a, a * f_mhz * NP_PER_M_PER_DB_PER_CM, shear,
        np.where(in_bone, SHEAR_ALPHA_NP_PER_M_MHZ * f_mhz, 0.0), phi, 1.0, provenance,
    )  # fmt: skip
