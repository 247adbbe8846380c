"""Figures of results: maximum-pressure (or CW-amplitude) maps on the planes through the focus
and sensor traces, with mm axes, units on the colour bar and, optionally, dB.

Python helpers (matplotlib ``Axes`` in, nothing global) and the ``sonotile plot FILE`` command,
which reads a sonotile result file (``Results.save``, ``sonotile demo``) or a k-Wave / ``sonotile-
kwave`` output file and writes a PNG.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from sonotile.base import files
from sonotile.base.cliargs import Parser, utf8_path

if TYPE_CHECKING:  # matplotlib and h5py are imported where used
    import h5py
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.image import AxesImage

PLANES = ("y-z", "x-z", "x-y")  # the plane normal to x, y, z

#: A point in grid indices ``(i, j[, k])`` (e.g. what ``np.unravel_index`` gives).
Point = Sequence[int | np.integer]
#: Source points ``(N, d)`` in grid indices.
SourcePoints = np.ndarray | Sequence[Sequence[int]]


def _to_db(field: np.ndarray) -> np.ndarray:
    ref = np.max(np.abs(field)) or 1.0
    return 20 * np.log10(np.maximum(np.abs(field) / ref, 1e-6))


def field_map(ax: Axes, field2d: np.ndarray, spacing: Sequence[float],
              axes_names: Sequence[str], title: str, units: str = "Pa", db: bool = False,
              marks: Mapping[str, Point] | None = None) -> AxesImage:  # fmt: skip
    """One 2-D map ``field2d[i, j]`` (first index down the image) with mm axes, a colour bar
    with ``units`` (MPa/kPa chosen by the peak) or dB re the peak, and ``marks`` ``{label:
    (i, j)}`` in grid points (e.g. source, focus)."""
    import matplotlib.pyplot as plt

    d0, d1 = (s * 1e3 for s in spacing)
    ext = (0, field2d.shape[1] * d1, field2d.shape[0] * d0, 0)
    if db:
        data, label = _to_db(field2d), "dB re max"
        im = ax.imshow(data, extent=ext, cmap="inferno", vmin=-40, vmax=0, aspect="equal")
    else:
        peak = np.max(np.abs(field2d))
        scale, prefix = _scale(peak)
        signed = {"cmap": "RdBu_r", "vmin": -peak / scale, "vmax": peak / scale}
        look = signed if np.min(field2d) < -0.01 * peak else {"cmap": "inferno"}
        im = ax.imshow(field2d / scale, extent=ext, aspect="equal", **look)
        label = f"{prefix}{units}"
    plt.colorbar(im, ax=ax, label=label, shrink=0.85)
    ax.set(xlabel=f"{axes_names[1]} [mm]", ylabel=f"{axes_names[0]} [mm]", title=title)
    for name, (i, j) in (marks or {}).items():
        ax.plot((j + 0.5) * d1, (i + 0.5) * d0, "wx" if name == "source" else "c+", ms=10, mew=2)
        ax.annotate(name, ((j + 0.5) * d1, (i + 0.5) * d0), color="w", fontsize=8,
                    xytext=(4, 4), textcoords="offset points")  # fmt: skip
    return im


def _scale(peak: float) -> tuple[float, str]:
    for s, prefix in ((1e6, "M"), (1e3, "k")):
        if peak >= s:
            return s, prefix
    return 1.0, ""


def planes_through(field: np.ndarray, spacing: Sequence[float], point: Point | None = None,
                   title: str = "max pressure", units: str = "Pa", db: bool = False,
                   source: SourcePoints | None = None, mark: str = "focus") -> Figure:  # fmt: skip
    """A figure of a 3-D ``field`` on the three planes through ``point`` (grid index; default
    its maximum, marked and labelled ``mark``), or of a 2-D field as it is. ``source``: grid
    indices ``(N, d)`` of source points, marked where they cross each plane. Signed fields
    (e.g. ``p_final``) get a diverging colour map centred on 0."""
    import matplotlib.pyplot as plt

    field = np.asarray(field)
    focus = np.unravel_index(np.argmax(np.abs(field)), field.shape) if point is None else point
    if field.ndim == 2:
        fig, ax = plt.subplots(figsize=(6, 4.5))
        field_map(ax, field, spacing, ("x", "y"), title, units, db, {mark: focus})
        _mark_sources(ax, source, spacing, (0, 1))
        fig.tight_layout()
        return fig
    fig, axs = plt.subplots(1, 3, figsize=(15, 4.5))
    names = ("x", "y", "z")
    for normal, ax in enumerate(axs):
        keep = [a for a in range(3) if a != normal]
        sl: list[slice | int | np.integer] = [slice(None)] * 3
        sl[normal] = focus[normal]
        field_map(
            ax, field[tuple(sl)], tuple(spacing[a] for a in keep), tuple(names[a] for a in keep),
            f"{title}, {names[normal]} = {focus[normal] * spacing[normal] * 1e3:.1f} mm",
            units, db, {mark: tuple(focus[a] for a in keep)},
        )  # fmt: skip
        if source is not None:
            near = np.abs(np.asarray(source)[:, normal] - focus[normal]) <= 0.5
            _mark_sources(ax, np.asarray(source)[near], spacing, keep)
    fig.tight_layout()
    return fig


def _mark_sources(
    ax: Axes, source: SourcePoints | None, spacing: Sequence[float], keep: Sequence[int]
) -> None:
    if source is None or len(source) == 0:
        return
    s = np.asarray(source)
    ax.plot((s[:, keep[1]] + 0.5) * spacing[keep[1]] * 1e3,
            (s[:, keep[0]] + 0.5) * spacing[keep[0]] * 1e3, "w.", ms=2, label="source")  # fmt: skip
    ax.legend(loc="lower right", fontsize=8, markerscale=4, framealpha=0.6)


def traces(
    ax: Axes,
    t: np.ndarray,
    p: np.ndarray,
    labels: Sequence[str] | None = None,
    units: str = "Pa",
    n: int = 4,
    quantity: str = "p",
) -> None:
    """Up to ``n`` sensor time series ``p (N, T)`` against ``t [s]`` (µs axis); ``quantity``
    names them on the axis (``p``, ``ux``, ``sxy``...)."""
    p = np.atleast_2d(p)
    picks = np.unique(np.linspace(0, len(p) - 1, min(n, len(p))).astype(int))
    scale, prefix = _scale(np.max(np.abs(p)))
    for i in picks:
        label = labels[i] if labels is not None else f"sensor {i + 1}"
        ax.plot(t * 1e6, p[i] / scale, lw=0.8, label=label)
    title = "sensor traces" if quantity == "p" else f"sensor traces, {quantity}"
    ax.set(xlabel="t [µs]", ylabel=f"{quantity} [{prefix}{units}]", title=title)
    ax.legend(fontsize=8)


# --------------------------------------------------------------------------- files


TITLES = {"p_max_all": "max pressure", "p_final": "final pressure", "p_cw_amp": "CW amplitude"}
#: Velocity [m/s] and stress [Pa] series drawn beside the pressure (elastic results have both).
SERIES = {"velocity": ("ux", "uy", "uz"), "stress": ("sxx", "syy", "szz", "sxy", "sxz", "syz")}


class FileData(TypedDict):
    """What :func:`read_any` reads from a file for its figures."""

    kind: str  # "sonotile" or "k-Wave"
    field: np.ndarray | None  # a whole field, (x, y[, z])
    name: str | None  # its name (p_max_all, p_final, p_cw_amp)
    spacing: tuple[float, ...] | None  # [m]
    p: np.ndarray | None  # pressure at the sensors (N, T)
    t: np.ndarray | None  # their time [s]
    labels: list[str] | None  # sensor positions in mm
    source: np.ndarray | None  # source points (N, d), grid indices
    series: dict[str, np.ndarray]  # velocity and stress series (N, T) by name (ux, sxy...)


def read_any(path: str) -> FileData:
    """``{"kind", "field", "name", "spacing", "p", "t", "labels", "source"}`` from a sonotile
    result or a k-Wave output file (fields in ``(x, y[, z])`` order; ``labels`` the sensor
    positions in mm where known; ``source`` the source points' grid indices ``(N, d)``)."""
    from sonotile.api.results import FORMAT

    with files.open_hdf5(path) as f:
        if f.attrs.get("format") == FORMAT:
            return _read_sonotile(f)
        return _read_kwave(f)


def _read_sonotile(f: h5py.File) -> FileData:
    import h5py

    r, g = f["results"], f["input/grid"].attrs if "input" in f else {}
    names = [k for group in SERIES.values() for k in group]
    t_len = r["t"].shape[0] if "t" in r else -1
    series = {k: r[k][()] for k in names
              if k in r and isinstance(r[k], h5py.Dataset) and r[k].ndim == 2
              and r[k].shape[1] == t_len}  # fmt: skip
    name = next((k for k in ("p_max_all", "p_final", "p_cw_amp") if k in r), None)
    spacing = tuple(g["spacing"]) if "spacing" in g else None
    pts = r["sensor_points"][()] if "sensor_points" in r else None
    return {
        "kind": "sonotile",
        "field": r[name][()] if name else None,
        "name": name,
        "spacing": spacing,
        "p": r["p"][()] if "p" in r and isinstance(r["p"], h5py.Dataset) else None,
        "t": r["t"][()] if "t" in r else None,
        "labels": None if pts is None or spacing is None else position_labels(pts, spacing),
        "source": _source_points(f["input/source"]) if "input/source" in f else None,
        "series": series,
    }


def _source_points(g: h5py.Group) -> np.ndarray | None:
    """Grid indices of the source points stored with a result (masks, or p0 above 1 %)."""
    masks = [g[k][()] for k in ("p_mask", "u_mask", "s_mask", "transducer_mask") if k in g]
    if "p0" in g and np.ndim(g["p0"]) > 0:
        p0 = np.abs(g["p0"][()])
        masks.append(p0 > 0.01 * (p0.max() or 1.0))
    if not masks:
        return None
    return np.argwhere(np.logical_or.reduce([np.asarray(m, bool) for m in masks]))


def position_labels(points: np.ndarray, spacing: Sequence[float]) -> list[str]:
    """``"x = 1.2, y = 3.4 mm"`` for grid indices ``points (N, d)`` with ``spacing`` [m]."""
    pos = np.asarray(points) * np.asarray(spacing)[: np.shape(points)[1]] * 1e3
    return [", ".join(f"{a} = {v:.1f}" for a, v in zip("xyz", row)) + " mm" for row in pos]


def _read_kwave(f: h5py.File) -> FileData:
    from sonotile.kwave.layout import to_xyz

    if "Nx" not in f:
        raise ValueError(f"{f.filename}: neither a sonotile result nor a k-Wave output file")
    spacing = tuple(float(f[k][()].reshape(-1)[0]) for k in ("dx", "dy", "dz") if k in f)
    shape = tuple(int(f[k][()].reshape(-1)[0]) for k in ("Nx", "Ny", "Nz"))
    spacing, shape = (spacing[:2], shape[:2]) if shape[2] == 1 else (spacing, shape)
    name = next((k for k in ("p_max_all", "p_final") if k in f), None)
    p = f["p"][()] if "p" in f and hasattr(f["p"], "shape") else None
    if p is not None:
        p = p.reshape(-1, p.shape[-1]).T if p.ndim == 3 else p  # (1, Nt, Ns) -> (Ns, Nt)
    dt = float(f["dt"][()].reshape(-1)[0]) if "dt" in f else None
    t = None if p is None or dt is None else np.arange(p.shape[-1]) * dt  # from the first sample
    labels = None
    if p is not None and "sensor_mask_index" in f:  # written with --copy_sensor_mask
        lin = f["sensor_mask_index"][()].reshape(-1).astype(np.int64) - 1  # 1-based, x fastest
        if lin.size == p.shape[0]:
            labels = position_labels(np.stack(np.unravel_index(lin, shape, order="F"), 1), spacing)
    return {"kind": "k-Wave", "field": to_xyz(f[name][()]) if name else None, "name": name,
            "spacing": spacing, "p": p, "t": t, "labels": labels, "source": None,
            "series": {}}  # fmt: skip


def _outputs(out: str, n: int) -> list[str]:
    """The ``n`` PNG paths of ``out``: ``out``, ``out_2``, ..."""
    base, ext = os.path.splitext(out)
    return [out] + [f"{base}_{i + 1}{ext}" for i in range(1, n)]


def _save(figs: list[Figure], out: str, source: str) -> str:
    """Each figure to ``out``, ``out_2``, ... (PNG, none the file ``source``), closed; the
    paths written. Each is drawn in memory first and written through a temporary file renamed
    into place (:func:`sonotile.base.files.write_bytes`)."""
    import io

    import matplotlib.pyplot as plt

    paths = _outputs(out, len(figs))
    for p in paths:
        files.check_output_path(p, "figure", [("the input file", source)])
        files.check_replaces(p, "figure", "PNG")
    for fig, p in zip(figs, paths):
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=110)
        plt.close(fig)
        files.write_bytes(p, image.getvalue(), "figure", [("the input file", source)])
    return ", ".join(paths)


def heat_figures(path: str) -> list[Figure]:
    """A ``sonotile heat`` result: the maximum temperature [degC] and the thermal dose
    (log10 of CEM43 [min]; 2.38 is the lesion threshold of 240 min) on the planes through the
    focus, and the temperature at the focus against time."""
    import matplotlib.pyplot as plt

    with files.open_hdf5(path) as f:
        g = f["heat"]
        spacing = tuple(float(v) for v in g.attrs["spacing"])
        t_max, cem43 = g["T_max"][()], g["cem43"][()]
        t, t_focus, focus = g["t"][()], g["T_focus"][()], tuple(int(i) for i in g["focus"][()])
    dose = np.log10(np.maximum(cem43, 1.0))  # below 1 min: 0
    figs = [
        planes_through(t_max, spacing, focus, "maximum temperature", "degC"),
        planes_through(dose, spacing, focus, "thermal dose, log10 CEM43 (lesion: 2.38)",
                       "log10(min)"),
    ]  # fmt: skip
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(t, t_focus)
    ax.set(xlabel="t [s]", ylabel="temperature at the focus [degC]")
    fig.tight_layout()
    return [*figs, fig]


def plot_file(path: str, out: str, db: bool = False) -> str:
    """Write the figure of a result / output file to ``out`` (PNG); returns ``out``. The paths
    are checked before the file is read (:func:`sonotile.base.files.check_output_path`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sonotile.api.heating.sonication import FORMAT as HEAT

    files.check_input_path(path)
    files.check_output_path(out, "figure", [("the input file", path)])
    files.check_replaces(out, "figure", "PNG")
    with files.open_hdf5(path) as f:
        heat = f.attrs.get("format") == HEAT
    if heat:
        return _save(heat_figures(path), out, path)
    d = read_any(path)
    if d["field"] is None and d["p"] is None and not d["series"]:
        raise ValueError(f"{path}: no whole field (p_max_all, p_final), no pressure, velocity "
                         "or stress traces")  # fmt: skip
    figs = []
    if d["field"] is not None:
        spacing = d["spacing"] or (1e-3,) * d["field"].ndim
        title = f"{TITLES.get(d['name'], d['name'])} ({d['name']})"
        mark = "focus" if d["name"] in ("p_max_all", "p_cw_amp") else "max |p|"
        figs.append(planes_through(d["field"], spacing, title=title, db=db, source=d["source"],
                                   mark=mark))  # fmt: skip
    if d["p"] is not None and d["t"] is not None:
        fig, ax = plt.subplots(figsize=(7, 4))
        traces(ax, d["t"], d["p"], labels=d["labels"])
        fig.tight_layout()
        figs.append(fig)
    if d["series"] and d["t"] is not None:
        figs += series_figures(d["t"], d["series"], d["labels"])
    return _save(figs, out, path)


def series_figures(
    t: np.ndarray, series: Mapping[str, np.ndarray], labels: Sequence[str] | None
) -> list[Figure]:
    """One figure per kind of series present (velocity [m/s], stress [Pa]): the traces of each
    component (``ux``, ``uy``...; ``sxx``, ``sxy``...) side by side against ``t [s]``."""
    import matplotlib.pyplot as plt

    figs = []
    for kind, names in SERIES.items():
        have = [k for k in names if k in series]
        if not have:
            continue
        fig, axs = plt.subplots(1, len(have), figsize=(5 * len(have), 4), squeeze=False)
        units = "m/s" if kind == "velocity" else "Pa"
        for ax, k in zip(axs[0], have):
            traces(ax, t, series[k], labels=labels, units=units, quantity=k)
        fig.tight_layout()
        figs.append(fig)
    return figs


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="sonotile plot", description="Figures of a sonotile result or k-Wave output "
                "file: maximum-pressure map(s) on the planes through the maximum (mm, colour bar "
                "with units) and sensor traces (pressure; velocity and stress components where "
                "recorded, e.g. an elastic run's); of a sonotile heat result: maximum temperature, "
                "thermal dose and the focal temperature against time; as PNG.",
                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    ap.add_argument(
        "file",
        type=utf8_path,
        help="result file (sonotile, sonotile heat) or output file (k-Wave, sonotile-kwave)",
    )
    ap.add_argument("--out", help="PNG to write (default: FILE with .png)")
    ap.add_argument("--db", action="store_true", help="maps in dB re their maximum")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    out = a.out or os.path.splitext(a.file)[0] + ".png"
    try:
        written = plot_file(a.file, out, a.db)
    except (OSError, ValueError, KeyError) as e:  # bad input, or the figure was not written
        print(f"sonotile plot: error: {e}", file=sys.stderr)
        return 1
    print(f"figure: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
