"""A plan's results on disk: NIfTI volumes on the CT's grid and affine (pressure amplitude,
maximum temperature, thermal dose, lesion; with an optimised drive the same four of it,
named ``*_optimized.nii.gz``), ``plan.json`` with every number and the provenance, and the
report (``report.png``, ``report.html``).

An output folder that exists is refused unless ``force`` is given; even then only the plan's
own file names are written, and never the input image.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from sonotile.api.heating.sonication import HeatRun
from sonotile.base import files
from sonotile.model.problem import ProblemError
from sonotile.planning.chain import Plan
from sonotile.planning.geometry import to_image
from sonotile.planning.images import write_nifti
from sonotile.planning.report import OPTIMIZED, write_report

#: name -> (description with units, fill outside the grid, interpolation order)
VOLUMES = {
    "pressure_amplitude": ("pressure amplitude [Pa]", 0.0, 1),
    "temperature_max": ("maximum temperature [degC]", None, 1),
    "cem43": ("thermal dose CEM43 [min], at most 1e30", 0.0, 1),
    "lesion": ("lesion (CEM43 >= 240 min) [0/1]", 0.0, 0),
}
FILES = [f"{n}.nii.gz" for n in VOLUMES] + ["plan.json", "report.png", "report.html"]
#: the optimised drive's volumes, written when the plan has one
OPTIMIZED_FILES = [f"{n}{OPTIMIZED}.nii.gz" for n in VOLUMES]
#: The largest dose a CEM43 volume holds [min]: a float32 volume cannot hold the doses of
#: boiling tissue (1e66 min at 270 degC for 5 s), and every dose above it is far past any
#: lesion threshold (240 min); plan.json keeps the dose itself.
CEM43_CEILING = 1e30
#: Room kept for plan.json and the report (the PNG, and in the HTML page again) [bytes].
REPORT_BYTES = 8 * 2**20


def prepare_output(out_dir: str, force: bool = False, inputs: tuple[str, ...] = (),
                   extra: tuple[str, ...] = ()) -> None:  # fmt: skip
    """Check ``out_dir`` before any work: refuse it if it exists (unless ``force``), if it is
    not a folder or is a symbolic link, or if one of the plan's files there (and ``extra``
    names, and the optimised drive's :data:`OPTIMIZED_FILES`, which a plan may add) would
    replace an input or is not a regular file (a link, a device, a FIFO)."""
    try:
        files.check_output_folder(out_dir, "output folder")
    except OSError as e:
        raise ProblemError(str(e)) from None
    if os.path.exists(out_dir) and not force:
        raise ProblemError(f"output folder {out_dir!r} exists (give --force to write into it)")
    named = [("the input", p) for p in inputs if p]
    for name in (*FILES, *OPTIMIZED_FILES, *extra) if os.path.isdir(out_dir) else ():
        try:
            files.check_output_path(os.path.join(out_dir, name), "plan file", named)
        except OSError as e:
            raise ProblemError(str(e)) from None


def _fields(p_amp: np.ndarray, heat: HeatRun) -> dict[str, np.ndarray]:
    """A drive's fields on the plan's grid, by the names of :data:`VOLUMES`."""
    return {
        "pressure_amplitude": p_amp, "temperature_max": heat.data["T_max"],
        "cem43": np.minimum(heat.data["cem43"], CEM43_CEILING),
        "lesion": heat.data["lesion_map"].astype(np.uint8),
    }  # fmt: skip


def volumes_on_ct(p: Plan) -> dict[str, np.ndarray]:
    """The plan's fields on the CT's grid (``p.ct.shape``), and the optimised drive's (names
    ending in :data:`OPTIMIZED`) where the plan has one."""
    drives = [("", _fields(p.p_amp, p.heat))]
    if p.optimized is not None:
        drives.append((OPTIMIZED, _fields(p.optimized.p_amp, p.optimized.heat)))
    out = {}
    for suffix, fields in drives:
        for name, (_, fill, order) in VOLUMES.items():
            f = p.settings.T0 if fill is None else fill
            v = to_image(fields[name], p.grid, p.ct, fill=f, order=order)
            out[name + suffix] = v.astype(np.uint8) if name == "lesion" else v.astype(np.float32)
    return out


def _json_default(v: Any) -> Any:
    if isinstance(v, np.ndarray | np.generic):
        return v.tolist()
    return str(v)


def write_plan(p: Plan, out_dir: str, force: bool = False) -> list[str]:
    """Write the plan's volumes, ``plan.json`` and the report into ``out_dir``; the paths.
    Each file is written under a temporary name and renamed into place
    (:func:`sonotile.base.files.partial_file`): a failure leaves what was there as it was."""
    prepare_output(out_dir, force, (p.ct.source,))
    os.makedirs(out_dir, exist_ok=True)
    provenance = {k: p.summary[k] for k in ("sonotile", "ct", "target_mm", "entry_mm",
                                            "transducer", "settings", "tissue")}  # fmt: skip
    inputs = [("the CT", p.ct.source)]
    paths, vols = [], volumes_on_ct(p)
    for name, v in vols.items():  # a NaN or Inf result is not written (exit status 1)
        try:
            files.check_finite(name, v, f"plan volumes in {out_dir!r}")
        except ValueError as e:
            raise files.OutputWriteError(str(e)) from None
    need = sum(v.nbytes + 2**16 for v in vols.values()) + REPORT_BYTES
    files.check_room(os.path.join(out_dir, "plan.json"), need, "plan files")  # before any
    for name, v in vols.items():
        path = os.path.join(out_dir, f"{name}.nii.gz")
        label = f"plan file '{path}'"
        files.check_room(path, v.nbytes + 2**16, label)  # compressed: at most this
        with files.partial_file(path, "plan file", suffix=".nii.gz", inputs=inputs) as tmp:
            with files.write_errors(label, path):
                description = VOLUMES[name.removesuffix(OPTIMIZED)][0]
                if name.endswith(OPTIMIZED):
                    description = f"optimised drive: {description}"
                write_nifti(tmp, v, p.ct, provenance=provenance, description=description)
        paths.append(path)
    path = os.path.join(out_dir, "plan.json")
    text = json.dumps(p.summary, indent=1, default=_json_default)
    files.write_bytes(path, text.encode(), "plan file", inputs)
    paths.append(path)
    paths += write_report(p, out_dir, vols)
    return paths
