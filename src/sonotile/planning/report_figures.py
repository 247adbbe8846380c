"""The report's figures (:mod:`sonotile.planning.report`): planes of the pressure amplitude
[MPa], the maximum temperature [degC] and the thermal dose (CEM43 [min], log scale) over the
CT through the target, each with its colour bar, the transducer (its element centres and the
cap's outline projected on the plane), the beam axis and where it enters the skull; the
element drive maps (amplitude and phase at each element's place on the cap) and the trade-off
between focal pressure and skull heating of an optimised drive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import ndimage

from sonotile.planning.chain import Plan
from sonotile.planning.images import CTImage
from sonotile.planning.transducers import Transducer

if TYPE_CHECKING:  # matplotlib is imported where used
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: plane name, fixed world axis, the two in-plane world axes (horizontal, vertical)
PLANES = (("axial", 2, (0, 1)), ("coronal", 1, (0, 2)), ("sagittal", 0, (1, 2)))
AXES = "xyz"
Extent = tuple[float, float, float, float]
#: the lowest thermal dose drawn [min CEM43] (the log scale's lower end)
DOSE_FLOOR_MIN = 0.01
#: the lesion's dose [min CEM43] (the contour drawn)
LESION_MIN = 240.0


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


def cap_outline(tr: Transducer, n: int = 90) -> list[np.ndarray]:
    """The transducer's cap in its own frame [mm]: the rim and the two meridians through the
    apex (in the local x-z and y-z planes), each ``(m, 3)``."""
    r = tr.radius_mm
    theta_max = np.arcsin(min(tr.aperture_mm / (2 * r), 1.0))
    phi = np.linspace(0, 2 * np.pi, n)
    z_rim = r * (1 - np.cos(theta_max))
    rim = np.stack([r * np.sin(theta_max) * np.cos(phi), r * np.sin(theta_max) * np.sin(phi),
                    np.full(n, z_rim)], 1)  # fmt: skip
    t = np.linspace(-theta_max, theta_max, n)
    arc = r * np.sin(t)
    zero, z = np.zeros(n), r * (1 - np.cos(t))
    return [rim, np.stack([arc, zero, z], 1), np.stack([zero, arc, z], 1)]


@dataclass
class Row:
    """One row of planes: what is drawn and over which plan.

    Attributes:
        kind: ``"pressure"``, ``"temperature"`` or ``"dose"``. volume: on the CT's grid.
        label: the plan's name. focus: the focus's position [mm]. lesion: on the CT's grid.
        vmax: the colour scale's top (MPa, degC or min). half: the -6 dB level [MPa].
    """

    kind: str
    volume: np.ndarray
    label: str
    focus: Any
    lesion: np.ndarray
    vmax: float
    half: float = 0.0


def _overlay(ax: Axes, row: Row, img: np.ndarray, ext: Extent, t0: float) -> Any:
    """The row's field over the CT plane; the image (for the colour bar)."""
    from matplotlib.colors import LogNorm

    if row.kind == "pressure":
        mpa = img / 1e6
        im = ax.imshow(np.ma.masked_less(mpa, 0.1 * row.vmax), cmap="hot", vmin=0,
                       vmax=row.vmax, alpha=0.75, origin="lower", extent=ext)  # fmt: skip
        if mpa.max() >= row.half > 0:
            ax.contour(mpa, levels=[row.half], colors="cyan", linewidths=0.8, origin="lower",
                       extent=ext)  # fmt: skip
        return im
    if row.kind == "temperature":
        rise = max(row.vmax - t0, 1e-6)
        return ax.imshow(np.ma.masked_less(img, t0 + 0.05 * rise), cmap="inferno", vmin=t0,
                         vmax=t0 + rise, alpha=0.75, origin="lower", extent=ext)  # fmt: skip
    top = max(row.vmax, 10 * DOSE_FLOOR_MIN)
    return ax.imshow(np.ma.masked_less(img, DOSE_FLOOR_MIN), cmap="viridis", alpha=0.8,
                     norm=LogNorm(DOSE_FLOOR_MIN, top), origin="lower", extent=ext)  # fmt: skip


def _transducer(ax: Axes, p: Plan, axes: tuple[int, int]) -> list[np.ndarray]:
    """The element centres and the cap's outline projected on the plane, the beam axis and
    where it enters the skull; the points drawn (for the limits)."""
    tr, pose, t = p.transducer, p.pose, p.target
    centres = pose.to_world(tr.element_centres())
    h, v = axes
    for line in cap_outline(tr):
        w = pose.to_world(line)
        ax.plot(w[:, h], w[:, v], "-", color="deepskyblue", lw=0.8)
    ax.plot(centres[:, h], centres[:, v], ".", color="deepskyblue", ms=2)
    ax.plot([pose.position[h], t[h]], [pose.position[v], t[v]], "--", color="w", lw=0.7)
    entry = p.summary.get("skull_path", {}).get("axis", {}).get("entry_mm")
    if entry is not None:
        ax.plot(entry[h], entry[v], "o", mfc="none", color="yellow", ms=5, label="skull entry")
    return [pose.to_world(line) for line in cap_outline(tr)] + [centres]


def draw_plane(ax: Axes, p: Plan, row: Row, k: int) -> Any:
    """Plane ``k`` of :data:`PLANES` through the target: the CT, the row's field, the target,
    the focus, the lesion, the transducer and the beam; the overlay image."""
    name, fixed, axes = PLANES[k]
    step = float(min(p.ct.spacing_mm.min(), p.grid.spacing_mm))
    t = p.target
    hu, ext = plane(p.ct.hu, p.ct, fixed, t[fixed], axes, step, fill=-1000.0)
    fill = p.settings.T0 if row.kind == "temperature" else 0.0
    img, _ = plane(row.volume, p.ct, fixed, t[fixed], axes, step, fill=fill)
    ax.set_facecolor("black")
    ax.imshow(hu, cmap="gray", vmin=-200, vmax=2000, origin="lower", extent=ext)
    im = _overlay(ax, row, img, ext, p.settings.T0)
    lesion, _ = plane(row.lesion.astype(np.float32), p.ct, fixed, t[fixed], axes, step)
    if lesion.max() >= 0.5:
        ax.contour(lesion, levels=[0.5], colors="magenta", linewidths=1.0, origin="lower",
                   extent=ext)  # fmt: skip
    f = row.focus
    ax.plot(t[axes[0]], t[axes[1]], "+", color="lime", ms=12, mew=1.5, label="target")
    ax.plot(f[axes[0]], f[axes[1]], "x", color="cyan", ms=8, mew=1.5, label="focus")
    drawn = np.concatenate(_transducer(ax, p, axes))
    lo = np.minimum([ext[0], ext[2]], drawn[:, list(axes)].min(axis=0)) - 5
    hi = np.maximum([ext[1], ext[3]], drawn[:, list(axes)].max(axis=0)) + 5
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    ax.set_title(f"{row.label}: {row.kind}, {name} ({AXES[fixed]} = {t[fixed]:.1f} mm)",
                 fontsize=8)  # fmt: skip
    ax.set_xlabel(f"{AXES[axes[0]]} [mm]", fontsize=7)
    ax.set_ylabel(f"{AXES[axes[1]]} [mm]", fontsize=7)
    ax.tick_params(labelsize=6)
    return im


#: each row kind's colour-bar label
UNITS = {"pressure": "pressure amplitude [MPa]", "temperature": "max temperature [degC]",
         "dose": "thermal dose CEM43 [min]"}  # fmt: skip


def draw_row(fig: Figure, axs: list[Axes], p: Plan, row: Row) -> None:
    """The three planes of a row and its colour bar."""
    im = None
    for k, ax in enumerate(axs):
        im = draw_plane(ax, p, row, k)
    fig.colorbar(im, ax=axs, label=UNITS[row.kind], shrink=0.9, pad=0.01)


def draw_drive(fig: Figure, ax_a: Axes, ax_p: Axes, tr: Transducer, amplitude: Any,
               phase: Any, label: str) -> None:  # fmt: skip
    """The drive per element at its place on the cap (the transducer's own x, y [mm]):
    amplitude [kPa] in ``ax_a``, phase [rad] in ``ax_p``, each with its colour bar."""
    xy = tr.element_centres()[:, :2]
    size = max(4.0, 2000.0 / max(len(xy), 1))
    amp = np.asarray(amplitude, dtype=np.float64) / 1e3
    im = ax_a.scatter(xy[:, 0], xy[:, 1], c=amp, s=size, cmap="viridis", vmin=0)
    fig.colorbar(im, ax=ax_a, label="amplitude [kPa]", shrink=0.9)
    im = ax_p.scatter(xy[:, 0], xy[:, 1], c=np.angle(np.exp(1j * np.asarray(phase))), s=size,
                      cmap="twilight", vmin=-np.pi, vmax=np.pi)  # fmt: skip
    fig.colorbar(im, ax=ax_p, label="phase [rad]", shrink=0.9)
    for ax, what in ((ax_a, "amplitude"), (ax_p, "phase")):
        ax.set_aspect("equal")
        ax.set_title(f"{label}: drive {what}", fontsize=8)
        ax.set_xlabel("transducer x [mm]", fontsize=7)
        ax.set_ylabel("transducer y [mm]", fontsize=7)
        ax.tick_params(labelsize=6)


def draw_trade_off(ax: Axes, trade: dict[str, Any]) -> None:
    """The peak skull temperature rise [K] against the focal pressure [MPa] of the
    phase-conjugated and the optimised drives, both plans marked."""
    x = np.asarray(trade["focal_pressure_pa"], dtype=np.float64) / 1e6
    ax.plot(x, trade["conjugated_skull_rise_K"], "-", color="tab:blue", label="phase-conjugated")
    ax.plot(x, trade["optimized_skull_rise_K"], "-", color="tab:orange", label="optimised")
    for name, colour in (("conjugated", "tab:blue"), ("optimized", "tab:orange")):
        pt = trade[name]
        ax.plot(pt["focal_pressure_pa"] / 1e6, pt["skull_rise_K"], "o", color=colour, ms=7,
                mec="k", label=f"{name} plan")  # fmt: skip
    ax.set_xlabel("focal pressure [MPa]", fontsize=7)
    ax.set_ylabel("peak skull temperature rise [K]", fontsize=7)
    ax.set_title("trade-off: skull heating against focal pressure", fontsize=8)
    ax.legend(fontsize=6)
    ax.tick_params(labelsize=6)
    ax.grid(alpha=0.3)
