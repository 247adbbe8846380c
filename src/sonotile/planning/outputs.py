"""A plan's results on disk: NIfTI volumes on the CT's grid and affine (pressure amplitude,
maximum temperature, thermal dose, lesion), ``plan.json`` with every number and the
provenance, and the one-page report (``report.png``, ``report.html``).

An output folder that exists is refused unless ``force`` is given; even then only the plan's
own file names are written, and never the input image.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from sonotile.model.problem import ProblemError
from sonotile.planning.chain import Plan
from sonotile.planning.geometry import to_image
from sonotile.planning.images import write_nifti
from sonotile.planning.report import write_report

#: name -> (description with units, fill outside the grid, interpolation order)
VOLUMES = {
    "pressure_amplitude": ("pressure amplitude [Pa]", 0.0, 1),
    "temperature_max": ("maximum temperature [degC]", None, 1),
    "cem43": ("thermal dose CEM43 [min]", 0.0, 1),
    "lesion": ("lesion (CEM43 >= 240 min) [0/1]", 0.0, 0),
}
FILES = [f"{n}.nii.gz" for n in VOLUMES] + ["plan.json", "report.png", "report.html"]


def prepare_output(out_dir: str, force: bool = False, inputs: tuple[str, ...] = ()) -> None:
    """Check ``out_dir`` before any work: refuse it if it exists (unless ``force``), if it is
    a file, or if one of the plan's files there would replace an input."""
    if os.path.isfile(out_dir):
        raise ProblemError(f"output folder {out_dir!r} is a file")
    if os.path.exists(out_dir) and not force:
        raise ProblemError(f"output folder {out_dir!r} exists (give --force to write into it)")
    parent = os.path.dirname(os.path.abspath(out_dir))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise ProblemError(f"output folder {out_dir!r}: {parent!r} is not a writable folder")
    ours = {os.path.abspath(os.path.join(out_dir, f)) for f in FILES}
    clash = [p for p in inputs if p and os.path.abspath(p) in ours]
    if clash:
        raise ProblemError(f"output folder {out_dir!r} would overwrite the input {clash[0]!r}")


def volumes_on_ct(p: Plan) -> dict[str, np.ndarray]:
    """The plan's fields on the CT's grid (``p.ct.shape``)."""
    fields = {
        "pressure_amplitude": p.p_amp, "temperature_max": p.heat.data["T_max"],
        "cem43": p.heat.data["cem43"], "lesion": p.heat.data["lesion_map"].astype(np.uint8),
    }  # fmt: skip
    out = {}
    for name, (_, fill, order) in VOLUMES.items():
        f = p.settings.T0 if fill is None else fill
        v = to_image(fields[name], p.grid, p.ct, fill=f, order=order)
        out[name] = v.astype(np.uint8) if name == "lesion" else v.astype(np.float32)
    return out


def _json_default(v: Any) -> Any:
    if isinstance(v, np.ndarray | np.generic):
        return v.tolist()
    return str(v)


def write_plan(p: Plan, out_dir: str, force: bool = False) -> list[str]:
    """Write the plan's volumes, ``plan.json`` and the report into ``out_dir``; the paths."""
    prepare_output(out_dir, force, (p.ct.source,))
    os.makedirs(out_dir, exist_ok=True)
    provenance = {k: p.summary[k] for k in ("sonotile", "ct", "target_mm", "entry_mm",
                                            "transducer", "settings", "tissue")}  # fmt: skip
    paths, vols = [], volumes_on_ct(p)
    for name, v in vols.items():
        path = os.path.join(out_dir, f"{name}.nii.gz")
        write_nifti(path, v, p.ct, provenance=provenance, description=VOLUMES[name][0])
        paths.append(path)
    path = os.path.join(out_dir, "plan.json")
    with open(path, "w") as f:
        json.dump(p.summary, f, indent=1, default=_json_default)
    paths.append(path)
    paths += write_report(p, out_dir, vols)
    return paths
