"""A plan's report for those who approve it: a warnings section (the plan's own warnings and
those of its figures against the thresholds below), the numbers rounded to what the grid
resolves (the focus's position with its uncertainty, pressures to 3 significant figures,
temperatures to 0.1 K), the exposure (mechanical index, spatial-peak intensities, acoustic
power, side lobes: :mod:`sonotile.planning.exposure`) and the path through the skull
(:mod:`sonotile.planning.skullpath`); and figures (:mod:`sonotile.planning.report_figures`):
pressure, maximum temperature and thermal dose over the CT in three planes through the
target, the transducer and the beam drawn on each. With an optimised drive (``p.optimized``)
both plans stand side by side: two columns of figures, the planes of each, the element drive
maps and the trade-off curve. Written as ``report.png`` and ``report.html`` (the PNG
embedded, the numbers as tables).
"""

from __future__ import annotations

import base64
import html
import io
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from sonotile.base import files
from sonotile.planning.chain import Plan
from sonotile.planning.report_figures import Row, draw_drive, draw_row, draw_trade_off

if TYPE_CHECKING:  # matplotlib is imported where used
    from matplotlib.figure import Figure

#: the mechanical index above which a plan is flagged (the limit of diagnostic ultrasound);
#: compared with the in-situ, non-derated MI of the plan's linear CW field
MI_MAX = 1.9
#: the skull's peak temperature rise above which a plan is flagged [K]
SKULL_RISE_MAX_K = 6.0
#: the focus farther than this from the target flags a plan [mm]
FOCUS_ERROR_MAX_MM = 1.0
#: the -6 dB focal volume above this multiple of the water path's flags a plan
VOLUME_RATIO_MAX = 1.5
#: the largest pressure in the brain outside the focal region above this fraction of the
#: focal peak flags a plan
SIDE_LOBE_MAX = 0.5


def plan_checks(focus: dict[str, Any], heat: dict[str, Any], exposure: dict[str, Any],
                volume_ratio: float | None, name: str = "the plan") -> list[str]:  # fmt: skip
    """A plan's figures against the thresholds (:data:`MI_MAX`, :data:`SKULL_RISE_MAX_K`,
    :data:`FOCUS_ERROR_MAX_MM`, :data:`VOLUME_RATIO_MAX`, :data:`SIDE_LOBE_MAX`): one sentence
    for each crossed, naming the plan."""
    out = []
    if exposure["mechanical_index"] > MI_MAX:
        out.append(f"{name}: mechanical index {exposure['mechanical_index']:.2f} is above "
                   f"{MI_MAX:g} (in situ, not derated)")  # fmt: skip
    rise = heat.get("skull_rise_K")
    if rise is not None and rise > SKULL_RISE_MAX_K:
        out.append(f"{name}: the skull heats by {rise:.1f} K, above {SKULL_RISE_MAX_K:g} K, at "
                   f"{_v(heat['skull_peak_mm'])} mm")  # fmt: skip
    if focus["error_mm"] > FOCUS_ERROR_MAX_MM:
        out.append(f"{name}: the focus is {focus['error_mm']:.1f} mm from the target (more "
                   f"than {FOCUS_ERROR_MAX_MM:g} mm)")  # fmt: skip
    if volume_ratio is not None and volume_ratio > VOLUME_RATIO_MAX:
        out.append(f"{name}: the -6 dB focal volume is {volume_ratio:.2f}x the water path's "
                   f"(above {VOLUME_RATIO_MAX:g}x)")  # fmt: skip
    if exposure["side_lobe_ratio"] > SIDE_LOBE_MAX:
        out.append(f"{name}: a side lobe in the brain reaches {exposure['side_lobe_ratio']:.2f} "
                   f"of the focal pressure (above {SIDE_LOBE_MAX:g}) at "
                   f"{_v(exposure['side_lobe_mm'])} mm")  # fmt: skip
    return out


def _volume_ratio(s: dict[str, Any], focus: dict[str, Any]) -> float | None:
    """A focus's -6 dB volume over the water path's."""
    water = (s["beams_at_source_pressure"].get("water") or {}).get("volume_mm3")
    return focus["volume_mm3"] / water if water else None


def review_warnings(s: dict[str, Any]) -> list[str]:
    """Every warning of a plan's summary: the plan's own (``warnings``), then its figures'
    (:func:`plan_checks`), and the optimised plan's where there is one."""
    out = list(s.get("warnings") or [])
    name = "phase-conjugated plan" if s.get("optimized") else "the plan"
    out += plan_checks(s["focus"], s["heat"], s["exposure"], _volume_ratio(s, s["focus"]), name)
    o = s.get("optimized")
    if o:
        out += plan_checks(o["focus"], o["heat"], o["exposure"], _volume_ratio(s, o["focus"]),
                           "optimised plan")  # fmt: skip
    return out


def sig3(x: float) -> str:
    """``x`` to 3 significant figures (``1.50``, ``123``, ``1230``, ``0.0123``)."""
    text = np.format_float_positional(float(x), precision=3, unique=False, fractional=False,
                                      trim="k")  # fmt: skip
    return text.rstrip(".")


def decimals(uncertainty_mm: list[float]) -> int:
    """The decimals [mm] a position of this uncertainty (per axis) is given to: the place of
    the smallest uncertainty's leading digit (0 to 2)."""
    u = max(min(float(v) for v in uncertainty_mm), 1e-3)
    return int(np.clip(-np.floor(np.log10(u)), 0, 2))


def position_text(xyz: Any, uncertainty_mm: list[float]) -> str:
    """``"(12.3, -4.1, 30.2) ± (0.5, 0.5, 1.4) mm"``: a position [mm] to the decimals its
    uncertainty allows (:func:`decimals`)."""
    d = decimals(uncertainty_mm)
    pos = ", ".join(f"{float(c):.{d}f}" for c in xyz)
    unc = ", ".join(f"{float(c):.{max(d, 1)}f}" for c in uncertainty_mm)
    return f"({pos}) \u00b1 ({unc}) mm"


def plan_figures(s: dict[str, Any], focus: dict[str, Any], heat: dict[str, Any],
                 exposure: dict[str, Any]) -> list[tuple[str, str]]:  # fmt: skip
    """One plan's figures as (label, value) rows: focal pressure, position and distance from
    the target, -6 dB volume, the dose at the target, skull heating, side lobe, MI,
    intensities and power."""
    unc = exposure["focus_uncertainty_mm"]
    ratio = _volume_ratio(s, focus)
    lobe = exposure["side_lobe_ratio"]
    skull = heat.get("T_max_skull_degC")
    return [
        ("focal pressure", f"{sig3(focus['peak_pa'] / 1e6)} MPa"),
        ("focal position", position_text(focus["position_mm"], unc)),
        ("distance from target", f"{focus['error_mm']:.{decimals(unc)}f} mm"),
        ("-6 dB focal volume", f"{sig3(focus['volume_mm3'])} mm^3"
         + ("" if ratio is None else f" ({ratio:.2f}x water)")),
        ("thermal dose at target", "-" if heat.get("cem43_at_target_min") is None else
         f"{sig3(heat['cem43_at_target_min'])} CEM43 min"),
        ("peak skull temperature", "-" if skull is None else
         f"{skull:.1f} degC (rise {heat['skull_rise_K']:.1f} K) at "
         f"{_v(heat['skull_peak_mm'])} mm"),
        ("side lobe (brain)", f"{lobe:.2f} of the focus ({sig3(exposure['side_lobe_pa'] / 1e6)} "
         f"MPa)" + ("" if exposure["side_lobe_mm"] is None else
                    f" at {_v(exposure['side_lobe_mm'])} mm")),
        ("mechanical index", f"{exposure['mechanical_index']:.2f} (in situ, not derated)"),
        ("I_spta / I_sppa", f"{sig3(exposure['i_spta_w_cm2'])} / "
         f"{sig3(exposure['i_sppa_w_cm2'])} W/cm^2"),
        ("acoustic power", f"{sig3(exposure['acoustic_power_w'])} W"),
    ]  # fmt: skip


def comparison_lines(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The phase-conjugated and the optimised plans' figures side by side:
    (label, phase-conjugated, optimised) rows; empty without an optimised plan."""
    o = s.get("optimized")
    if not o:
        return []
    a = plan_figures(s, s["focus"], s["heat"], s["exposure"])
    b = plan_figures(s, o["focus"], o["heat"], o["exposure"])
    return [(la, va, vb) for (la, va), (_, vb) in zip(a, b)]


def skull_path_text(sp: dict[str, Any]) -> str:
    """The path through the skull in a few words: along the beam axis, and the range over
    the rays."""
    ax, th, an = sp["axis"], sp["thickness_range_mm"], sp["angle_range_deg"]
    axis = f"axis {ax['thickness_mm']:.1f} mm of bone" + (
        "" if ax["angle_deg"] is None else f" at {ax['angle_deg']:.0f} deg incidence"
    )
    if th["min"] is None:
        return axis
    rays = (
        f"; from {sp['rays_from']}: {th['min']:.1f} to {th['max']:.1f} mm (median "
        f"{th['median']:.1f})"
    )
    if an["min"] is not None:
        rays += f", {an['min']:.0f} to {an['max']:.0f} deg (median {an['median']:.0f})"
    return axis + rays


def report_lines(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's numbers as (label, value) rows from a plan's summary (the plan's figures,
    :func:`plan_figures`, among them unless an optimised plan puts them side by side with
    its own, :func:`comparison_lines`)."""
    b, f, st = s["beams_at_source_pressure"], s["focus"], s["settings"]
    rows = [
        ("transducer", s["transducer"]["spec"]),
        ("frequency", f"{st['frequency'] / 1e3:g} kHz, grid {s['grid']['spacing_mm']:.3g} mm"),
        ("tissue mapping", _mapping(s["tissue"], st["mapping"])),
        ("target / entry [mm]", f"{_v(s['target_mm'])} / {_v(s['entry_mm'])}"),
        ("drive per element", f"{sig3(s['drive']['source_pressure_pa'] / 1e3)} kPa"),
        ("goal", _goal(st)),
    ]
    if not s.get("optimized") and "exposure" in s:
        rows += plan_figures(s, f, s["heat"], s["exposure"])
    rows += [
        ("position error", f"{f['error_mm']:.2f} mm from the target (peak grid point "
         f"{f['peak_voxel_error_mm']:.2f} mm)"),
        ("transmission loss", f"{b['transmission_loss_db']:.2f} dB against water"),
        ("uncorrected", f"loss {b['uncorrected_loss_db']:.2f} dB, focus "
         f"{b['uncorrected']['error_mm']:.2f} mm from target"),
    ]  # fmt: skip
    if s.get("skull_path"):
        rows.append(("path through the skull", skull_path_text(s["skull_path"])))
    return rows + _beam_rows(s) + _heat_rows(s)


def _beam_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The beams' focal sizes, the elastic skull's figures, the aim and the correction's
    gain."""
    b, rows = s["beams_at_source_pressure"], []
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
    return rows


def _heat_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    """The sonication and the plan's heating (temperatures to 0.1 K)."""
    h, st = s["heat"], s["settings"]
    return [
        ("thermal properties", _thermal(s.get("thermal", {}))),
        ("sonication", f"{st['duration']:g} s at duty {st['duty']:g}, {st['cooling']:g} s off"),
        ("temperature rise", f"{h['rise_at_target_K']:.1f} K at the target, "
         f"{h['rise_at_heat_peak_K']:.1f} K where most heat is deposited "
         f"{_v(h['heat_peak_mm'])}"),
        ("max temperature", f"{h['T_max_degC']:.1f} degC (brain {_t(h['T_max_brain_degC'])}, "
         f"skull {_t(h['T_max_skull_degC'])})"),
        ("thermal dose", f"max CEM43 {sig3(h['cem43_max_min'])} min, lesion "
         f"{sig3(h['lesion_volume_mm3'])} mm^3"),
    ]  # fmt: skip


def _goal(st: dict[str, Any]) -> str:
    """What the plan's drive was scaled to, in a few words."""
    if st.get("target_dose") is not None:
        return f"thermal dose {st['target_dose']:g} CEM43 min at the target"
    if st.get("focal_pressure") is not None:
        return f"focal pressure {sig3(st['focal_pressure'] / 1e6)} MPa"
    return "none: the drive per element as given"


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
    return "-" if v is None else f"{v:.1f}"


#: the optimised drive's volumes (:func:`~sonotile.planning.outputs.volumes_on_ct`) and files:
#: the plan's names with this ending
OPTIMIZED = "_optimized"


def field_rows(p: Plan, vols: dict[str, np.ndarray]) -> list[Row]:
    """The rows of planes: pressure, maximum temperature and thermal dose, for the plan and,
    where there is one, the optimised plan, each kind on one colour scale."""
    s, o = p.summary, p.summary.get("optimized")
    plans = [("phase-conjugated" if o else "plan", "", s)] + ([("optimised", OPTIMIZED, o)]
                                                             if o else [])  # fmt: skip
    peak = max(q["focus"]["peak_pa"] for _, _, q in plans) / 1e6
    t_max = max(q["heat"]["T_max_degC"] for _, _, q in plans)
    dose = max(q["heat"]["cem43_max_min"] for _, _, q in plans)
    rows = []
    for kind, name, top in (
        ("pressure", "pressure_amplitude", peak),
        ("temperature", "temperature_max", t_max),
        ("dose", "cem43", dose),
    ):
        for label, suffix, q in plans:
            rows.append(
                Row(
                    kind,
                    vols[name + suffix],
                    label,
                    q["focus"]["position_mm"],
                    vols["lesion" + suffix],
                    top,
                    q["focus"]["peak_pa"] / 2e6,
                )
            )
    return rows


def _drive_panels(fig: Figure, p: Plan) -> None:
    """The element drive maps of an array (and of the optimised drive) and the trade-off
    curve, in one row of a sub-figure each."""
    s, o = p.summary, p.summary.get("optimized")
    drives = [("phase-conjugated" if o else "plan", s["drive"])] + (
        [("optimised", o["drive"])] if o else []
    )
    panels = 2 * len(drives) * (p.transducer.kind == "array") + (1 if o else 0)
    axs = list(np.atleast_1d(fig.subplots(1, max(panels, 3))))
    for ax in axs[panels:]:
        ax.axis("off")
    if p.transducer.kind == "array":
        for label, d in drives:
            draw_drive(fig, axs.pop(0), axs.pop(0), p.transducer, d["amplitude_pa"],
                       d["phase_rad"], label)  # fmt: skip
    if o:
        draw_trade_off(axs.pop(0), o["trade_off"])


def report_text(s: dict[str, Any]) -> str:
    """The report's warnings and numbers as text (the PNG's last panel)."""
    warns = review_warnings(s)
    lines = ["WARNINGS:" if warns else "warnings: none"] + [f"  ! {w}" for w in warns]
    if s.get("optimized"):
        lines.append("phase-conjugated | optimised:")
        lines += [f"{a}: {b} | {c}" for a, b, c in comparison_lines(s)]
    return "\n".join(lines + [f"{a}: {b}" for a, b in report_lines(s)])


def report_figure(p: Plan, vols: dict[str, np.ndarray]) -> Figure:
    """The report's figure: a row of planes per field and plan (:func:`field_rows`), the drive
    maps and trade-off where there are any, and the text (:func:`report_text`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = field_rows(p, vols)
    panels = p.transducer.kind == "array" or bool(p.summary.get("optimized"))
    text = report_text(p.summary)
    heights = [3.2] * len(rows) + ([3.0] if panels else []) + [0.15 * (text.count("\n") + 2)]
    fig = plt.figure(figsize=(13, sum(heights)), layout="constrained")
    subs = list(fig.subfigures(len(heights), 1, height_ratios=heights, squeeze=False)[:, 0])
    for sub, row in zip(subs, rows):
        axs = list(sub.subplots(1, 3))
        draw_row(sub, axs, p, row)
    subs[0].axes[0].legend(fontsize=6, loc="lower left")
    if panels:
        _drive_panels(subs[len(rows)], p)
    ax = subs[-1].subplots()
    ax.axis("off")
    ax.text(0, 1, text, va="top", fontsize=7, family="monospace")
    fig.suptitle(f"sonication plan: {os.path.basename(p.ct.source) or 'CT'} (-6 dB in cyan, "
                 "lesion in magenta, transducer in blue, skull entry in yellow)")  # fmt: skip
    return fig


def report_page(s: dict[str, Any], png_b64: str) -> str:
    """The HTML page: the warnings, the two plans' figures side by side (with an optimised
    plan), the numbers and the figure."""
    e = html.escape
    warns = review_warnings(s)
    items = "".join(f"<li>{e(w)}</li>" for w in warns) or "<li>none</li>"
    page = (
        "<!doctype html><meta charset='utf-8'><title>sonication plan</title>"
        f"<h1>Sonication plan</h1><h2>Warnings</h2><ul class='warnings'>{items}</ul>"
    )
    compared = comparison_lines(s)
    if compared:
        rows = "".join(f"<tr><td>{e(a)}</td><td>{e(b)}</td><td>{e(c)}</td></tr>"
                       for a, b, c in compared)  # fmt: skip
        page += (
            "<h2>Phase-conjugated and optimised</h2><table><tr><th></th>"
            f"<th>phase-conjugated</th><th>optimised</th></tr>{rows}</table>"
        )
    rows = "".join(f"<tr><td>{e(a)}</td><td>{e(b)}</td></tr>" for a, b in report_lines(s))
    return (page + f"<h2>Numbers</h2><table>{rows}</table>"
            f"<img src='data:image/png;base64,{png_b64}' width='100%'>"
            "<p>Every number and setting: plan.json</p>")  # fmt: skip


def write_report(p: Plan, out_dir: str, vols: dict[str, np.ndarray]) -> list[str]:
    """``report.png`` and ``report.html`` in ``out_dir`` from a plan and its volumes on the CT's
    grid (:func:`sonotile.planning.outputs.volumes_on_ct`); their paths."""
    fig = report_figure(p, vols)
    import matplotlib.pyplot as plt  # after report_figure chose the backend

    png = os.path.join(out_dir, "report.png")
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=80)
    plt.close(fig)
    inputs = [("the CT", p.ct.source)]
    files.write_bytes(png, image.getvalue(), "plan file", inputs)
    page = report_page(p.summary, base64.b64encode(image.getvalue()).decode())
    page_path = os.path.join(out_dir, "report.html")
    files.write_bytes(page_path, page.encode(), "plan file", inputs)
    return [png, page_path]
