"""A plan's one-page report: the beam over the CT in three planes through the target (axial,
coronal, sagittal, in scanner millimetres), the -6 dB focal contour, the target and the
focus, the maximum temperature, and the numbers and settings (the -6 dB focal length and
widths of the water, uncorrected and corrected beams among them); written as ``report.png`` and
``report.html`` (the PNG embedded, the numbers as a table).
"""

from __future__ import annotations

import base64
import html
import io
import os
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import ndimage

from sonotile.base import files
from sonotile.planning.chain import Plan
from sonotile.planning.images import CTImage

if TYPE_CHECKING:  # matplotlib is imported where used
    from matplotlib.axes import Axes

#: plane name, fixed world axis, the two in-plane world axes (horizontal, vertical)
PLANES = (("axial", 2, (0, 1)), ("coronal", 1, (0, 2)), ("sagittal", 0, (1, 2)))
AXES = "xyz"
Extent = tuple[float, float, float, float]


def plane(volume: np.ndarray, ct: CTImage, fixed: int, value: float, axes: tuple[int, int],
          step_mm: float, fill: float = 0.0) -> tuple[np.ndarray, Extent]:  # fmt: skip
    """A world-aligned plane through ``volume`` (on the CT's grid) at world coordinate
    ``value`` [mm] of axis ``fixed``, sampled every ``step_mm``: ``(image (v, h), extent)``
    with the extent ``[h0, h1, v0, v1]`` in mm for ``imshow(origin="lower")``."""
    corners = ct.world(np.array(np.meshgrid(*[[0, n - 1] for n in ct.shape])).reshape(3, -1).T)
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    h = np.arange(lo[axes[0]], hi[axes[0]] + step_mm / 2, step_mm)
    v = np.arange(lo[axes[1]], hi[axes[1]] + step_mm / 2, step_mm)
    hh, vv = np.meshgrid(h, v)
    xyz = np.zeros(hh.shape + (3,))
    xyz[..., fixed], xyz[..., axes[0]], xyz[..., axes[1]] = value, hh, vv
    ijk = ct.voxel(xyz)
    img = ndimage.map_coordinates(volume, np.moveaxis(ijk, -1, 0), order=1, cval=fill)
    return img, (float(h[0]), float(h[-1]), float(v[0]), float(v[-1]))


def _draw_plane(ax: Axes, p: Plan, vols: dict[str, np.ndarray], k: int) -> None:
    name, fixed, axes = PLANES[k]
    step = float(min(p.ct.spacing_mm.min(), p.grid.spacing_mm))
    t = p.target
    hu, ext = plane(p.ct.hu, p.ct, fixed, t[fixed], axes, step, fill=-1000.0)
    pa, _ = plane(vols["pressure_amplitude"], p.ct, fixed, t[fixed], axes, step)
    ax.imshow(hu, cmap="gray", vmin=-200, vmax=2000, origin="lower", extent=ext)
    rel = pa / max(float(p.summary["focus"]["peak_pa"]), 1e-30)  # 1 at the focal peak
    ax.set_facecolor("black")
    ax.imshow(np.ma.masked_less(np.minimum(rel, 1.0), 0.1), cmap="hot", vmin=0, vmax=1,
              alpha=0.7, origin="lower", extent=ext)  # fmt: skip
    ax.contour(rel, levels=[0.5], colors="cyan", linewidths=0.8, origin="lower", extent=ext)
    lesion, _ = plane(vols["lesion"].astype(np.float32), p.ct, fixed, t[fixed], axes, step)
    if lesion.max() >= 0.5:
        ax.contour(lesion, levels=[0.5], colors="magenta", linewidths=1.0, origin="lower",
                   extent=ext)  # fmt: skip
    f = p.summary["focus"]["position_mm"]
    ax.plot(t[axes[0]], t[axes[1]], "+", color="lime", ms=12, mew=1.5, label="target")
    ax.plot(f[axes[0]], f[axes[1]], "x", color="cyan", ms=8, mew=1.5, label="focus")
    tr = p.pose.position
    ax.plot([tr[axes[0]], t[axes[0]]], [tr[axes[1]], t[axes[1]]], "--", color="w", lw=0.7)
    ax.set_title(f"{name} ({AXES[fixed]} = {t[fixed]:.1f} mm)", fontsize=9)
    ax.set_xlabel(f"{AXES[axes[0]]} [mm]", fontsize=8)
    ax.set_ylabel(f"{AXES[axes[1]]} [mm]", fontsize=8)
    ax.tick_params(labelsize=7)


def report_lines(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's numbers as (label, value) rows from a plan's summary."""
    b, f, h, st = s["beams_at_source_pressure"], s["focus"], s["heat"], s["settings"]
    rows = [
        ("transducer", s["transducer"]["spec"]),
        ("frequency", f"{st['frequency'] / 1e3:g} kHz, grid {s['grid']['spacing_mm']:.3g} mm"),
        ("tissue mapping", _mapping(s["tissue"], st["mapping"])),
        ("target / entry [mm]", f"{_v(s['target_mm'])} / {_v(s['entry_mm'])}"),
        ("drive per element", f"{s['drive']['source_pressure_pa'] / 1e3:.4g} kPa"),
        ("focal pressure", f"{f['peak_pa'] / 1e6:.4g} MPa at {_v(f['position_mm'])} mm"),
        ("position error", f"{f['error_mm']:.2f} mm from the target (peak grid point "
         f"{f['peak_voxel_error_mm']:.2f} mm)"),
        ("-6 dB focal volume", f"{f['volume_mm3']:.4g} mm^3 "
         f"({b['volume_ratio_to_water']:.2f}x water)"),
        ("transmission loss", f"{b['transmission_loss_db']:.2f} dB against water"),
        ("uncorrected", f"loss {b['uncorrected_loss_db']:.2f} dB, focus "
         f"{b['uncorrected']['error_mm']:.2f} mm from target"),
    ]  # fmt: skip
    for name in ("water", "uncorrected", "corrected"):
        if b.get(name):
            rows.append((f"-6 dB focus, {name}", _size(b[name])))
    el = s.get("elastic_at_source_pressure")
    if el:
        rows.append(("elastic skull", f"peak {el['over_fluid']:.3f}x the fluid plan's, "
                     f"{_size(el)}"))  # fmt: skip
    if el and el.get("elastic_corrected"):
        rows.append(("elastic correction", f"gain {el['gain_over_fluid_corrected']:.3f} (peak), "
                     f"{el['gain_at_target']:.3f} (at target) over the fluid-corrected drive, "
                     f"focus {el['shift_from_fluid_corrected_mm']:.1f} mm from its"))  # fmt: skip
    if b.get("refocus"):
        aim = np.subtract(b["aim_mm"], s["target_mm"])
        passes = ", ".join(f"{p['error_mm']:.2f}" for p in b["refocus"])
        rows.append(("aim", f"{np.linalg.norm(aim):.2f} mm from the target; focus per pass "
                     f"{passes} mm from it"))  # fmt: skip
    if "focal_gain" in b:
        rows.append(("correction gain", f"{b['focal_gain']:.3f} (peak), "
                     f"{b['gain_at_target']:.3f} (at target)"))  # fmt: skip
    rows += [
        ("thermal properties", _thermal(s.get("thermal", {}))),
        ("sonication", f"{st['duration']:g} s at duty {st['duty']:g}, {st['cooling']:g} s off"),
        ("temperature rise", f"{h['rise_at_target_K']:.3g} K at the target, "
         f"{h['rise_at_heat_peak_K']:.3g} K where most heat is deposited "
         f"{_v(h['heat_peak_mm'])}"),
        ("max temperature", f"{h['T_max_degC']:.2f} degC (brain {_t(h['T_max_brain_degC'])}, "
         f"skull {_t(h['T_max_skull_degC'])})"),
        ("thermal dose", f"max CEM43 {h['cem43_max_min']:.3g} min, lesion "
         f"{h['lesion_volume_mm3']:.3g} mm^3"),
    ]  # fmt: skip
    return rows


def _mapping(tissue: dict[str, Any], default: str) -> str:
    """The HU mapping's name and the HU_max it used, in a few words."""
    bone = tissue.get("bone", {})
    text = str(tissue.get("mapping", default))
    if bone.get("hu_max") is not None:
        text += f", HU_max {bone['hu_max']:.0f} HU ({bone.get('hu_max_from', 'given')})"
    return text


def _thermal(th: dict[str, Any]) -> str:
    """The thermal properties' source and overrides, in a few words."""
    over = th.get("overrides", {})
    names = {"specific_heat": "C", "conductivity": "k", "perfusion_rate": "w"}
    extra = ", ".join(f"{names[n]} = {v:g} everywhere" for n, v in over.items())
    return "per tissue (IT'IS v4.1)" + (f"; {extra}" if extra else "")


def _size(focus: dict[str, Any]) -> str:
    """A focus's -6 dB length along the beam and widths across it [mm], in a few words."""
    w = focus.get("width_mm") or (None, None)
    return f"length {_mm(focus.get('length_mm'))}, widths {_mm(w[0])} x {_mm(w[1])}"


def _mm(v: float | None) -> str:
    return "- (open)" if v is None else f"{v:.1f} mm"


def _v(xyz: Any) -> str:
    return "(" + ", ".join(f"{float(c):.1f}" for c in xyz) + ")"


def _t(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def write_report(p: Plan, out_dir: str, vols: dict[str, np.ndarray]) -> list[str]:
    """``report.png`` and ``report.html`` in ``out_dir`` from a plan and its volumes on the CT's
    grid (:func:`sonotile.planning.outputs.volumes_on_ct`); their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axs = plt.subplots(2, 2, figsize=(11, 10), layout="constrained")
    for k, ax in enumerate((axs[0, 0], axs[0, 1], axs[1, 0])):
        _draw_plane(ax, p, vols, k)
    axs[0, 0].legend(fontsize=7, loc="lower left")
    axs[1, 1].axis("off")
    text = "\n".join(f"{a}: {b}" for a, b in report_lines(p.summary))
    axs[1, 1].text(0, 1, text, va="top", fontsize=8, family="monospace", wrap=True)
    fig.suptitle(
        f"sonication plan: {os.path.basename(p.ct.source) or 'CT'} "
        "(beam / focal peak; -6 dB in cyan, lesion in magenta)"
    )
    png = os.path.join(out_dir, "report.png")
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=90)
    plt.close(fig)
    inputs = [("the CT", p.ct.source)]
    files.write_bytes(png, image.getvalue(), "plan file", inputs)
    b64 = base64.b64encode(image.getvalue()).decode()
    rows = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>"
                   for a, b in report_lines(p.summary))  # fmt: skip
    page = (f"<!doctype html><meta charset='utf-8'><title>sonication plan</title>"
            f"<h1>Sonication plan</h1><img src='data:image/png;base64,{b64}' width='100%'>"
            f"<table>{rows}</table><p>Every number and setting: plan.json</p>")  # fmt: skip
    page_path = os.path.join(out_dir, "report.html")
    files.write_bytes(page_path, page.encode(), "plan file", inputs)
    return [png, page_path]
