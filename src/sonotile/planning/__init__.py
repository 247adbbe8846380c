"""From a CT scan to a sonication plan: images in and out, tissue properties from Hounsfield
units, a synthetic head phantom, the transducer and simulation grid in the patient's frame,
CW runs with aberration correction, heating with each tissue's thermal properties, drives
optimised for the least skull heating (docs/planning.md). nibabel and pydicom
(``sonotile[planning]``) are imported when an image is read or written.

May import: every layer below the front ends, and the other front ends.
"""

from sonotile.planning.aberration import BeamComparison, compare_beams, conjugate_drive
from sonotile.planning.acoustics import (
    Focus,
    RunSettings,
    cw_field,
    element_response,
    find_focus,
    focal_size,
)
from sonotile.planning.chain import Plan, PlanSettings, Setup, plan, setup
from sonotile.planning.dicom import read_dicom_series
from sonotile.planning.elastic import ElasticBeams, elastic_beams, elastic_response
from sonotile.planning.geometry import (
    Pose,
    SimulationGrid,
    beam_grid,
    kwave_medium,
    resample,
    resample_maps,
    to_image,
)
from sonotile.planning.images import (
    CTImage,
    read_ct,
    read_nifti,
    read_provenance,
    write_nifti,
)
from sonotile.planning.optimize import OptimizedPlan, OptimizeSettings, optimize_drive
from sonotile.planning.outputs import volumes_on_ct, write_plan
from sonotile.planning.phantom import HeadShape, head_phantom, thickness_along_ray
from sonotile.planning.thermal import THERMAL_PROPERTIES, ThermalMaps, thermal_properties
from sonotile.planning.tissue import (
    MAPPINGS,
    BoneParameters,
    Classes,
    TissueMaps,
    classify,
    hounsfield2density,
    robust_hu_max,
    skull_mask,
    tissue_properties,
)
from sonotile.planning.transducers import Transducer, parse_transducer

__all__ = [
    "BeamComparison", "Focus", "RunSettings", "Transducer", "compare_beams", "conjugate_drive",
    "cw_field", "element_response", "find_focus", "parse_transducer", "Plan", "PlanSettings",
    "plan", "volumes_on_ct", "write_plan", "Setup", "setup", "robust_hu_max",
    "MAPPINGS", "BoneParameters", "CTImage", "Classes", "HeadShape", "Pose", "SimulationGrid",
    "TissueMaps", "beam_grid", "classify", "head_phantom", "hounsfield2density", "kwave_medium",
    "read_ct",
    "read_dicom_series", "read_nifti", "read_provenance", "resample", "resample_maps",
    "skull_mask",
    "thickness_along_ray", "tissue_properties", "to_image", "write_nifti",
    "THERMAL_PROPERTIES", "ThermalMaps", "thermal_properties",
    "ElasticBeams", "elastic_beams", "elastic_response", "focal_size",
    "OptimizeSettings", "OptimizedPlan", "optimize_drive",
]  # fmt: skip
