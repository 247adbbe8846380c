"""``sonotile demo``: focused ultrasound through a tissue layer in water (3-D, under a minute).

Equation: k-Wave's nonlinear, power-law absorbing acoustic model (see docs/method.md). Set-up: a
phased disc (delays focus it 14 mm away) radiates a 1 MHz, 0.5 MPa tone burst through water
into a 6 mm tissue layer (faster, denser, more absorbing and more nonlinear than water). The
run records the pressure along the beam axis and the maximum pressure everywhere, and writes
``results.h5`` and ``demo.png`` into the output folder.

Run: ``sonotile demo [--out DIR] [--size N] [--float64]``. Time: under a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from typing import TYPE_CHECKING, cast

import numpy as np

from sonotile.base import files
from sonotile.base.cliargs import Parser, integer, utf8_path

if TYPE_CHECKING:  # imported when run: the options act before JAX is imported
    from sonotile.api import Inputs, KWaveGrid, KWaveMedium, Results


def cross_size(n: int) -> int:
    """Points across the beam for ``n`` along it: the size made of 2, 3, 5 and 7 nearest
    ``0.8 n`` (the FFTs are fast on it; :mod:`sonotile.fft.sizes`), the smaller of two equally
    near."""
    from sonotile.fft import sizes

    m = int(0.8 * n)
    if sizes.is_fast(m):
        return m
    below, above = sizes.nearest_fast(m)
    return below if below is not None and m - below <= above - m else above


def setup(n: int = 128) -> Inputs:
    """The demo problem on an ``n x m x m`` grid, ``m`` about ``0.8 n`` (:func:`cross_size`;
    128 x 100 x 100 points of 0.1875 mm at n = 128)."""
    from sonotile.api import KSensor, KSource, KWaveGrid, KWaveMedium

    m = cross_size(n)
    shape = (n, m, m)
    dx = 24e-3 / n
    f0, c_w = 1.0e6, 1500.0
    grid = KWaveGrid(shape, dx)
    x = np.arange(shape[0])[:, None, None] * dx
    layer = (x >= 12e-3) & (x < 18e-3)
    ones = np.ones(shape)
    medium = KWaveMedium(
        sound_speed=np.where(layer, 1580.0, c_w) * ones,
        density=np.where(layer, 1060.0, 1000.0) * ones,
        alpha_coeff=np.where(layer, 0.6, 0.0022) * ones,
        alpha_power=1.5,
        BonA=np.where(layer, 7.0, 5.2) * ones,
    )
    grid.make_time(medium.sound_speed, cfl=0.3, t_end=1.2 * 24e-3 / c_w)
    # phased disc of radius 7 mm in the plane x = 12 points, focused 14 mm away
    x0 = 12
    yy, zz = np.meshgrid(*(np.arange(s) - s // 2 for s in shape[1:]), indexing="ij")
    disc = (yy**2 + zz**2) * dx**2 <= (7e-3) ** 2
    mask = np.zeros(shape, bool)
    mask[x0][disc] = True
    from sonotile.api import mask_points

    pts = mask_points(mask, shape, "demo source")
    focus = np.array([x0 * dx + 14e-3, shape[1] // 2 * dx, shape[2] // 2 * dx])
    dist = np.linalg.norm(pts * dx - focus, axis=1)
    delay = (dist.max() - dist) / c_w
    t = np.arange(grid.nt) * grid.dt
    cycles = 3
    tau = t[None, :] - delay[:, None]
    env = np.where((tau > 0) & (tau < cycles / f0), np.sin(np.pi * tau * f0 / cycles) ** 2, 0.0)
    signal = 0.5e6 * env * np.sin(2 * np.pi * f0 * tau)
    source = KSource(p=signal, p_mask=mask, p_mode="additive")
    axis_mask = np.zeros(shape, bool)
    axis_mask[x0 + 1 : shape[0] - 10, shape[1] // 2, shape[2] // 2] = True
    sensor = KSensor(mask=axis_mask, record=("p", "p_max", "p_max_all"))
    return grid, medium, source, sensor


def _check_out(out: str, h5: str, png: str) -> None:
    """Before any work: ``out`` a folder (not a link; made if new), the result file ``h5``
    and the figure ``png`` in it regular files or new (:mod:`sonotile.base.files`)."""
    files.check_output_folder(out, "--out folder")
    if os.path.isdir(out):
        files.check_output_path(h5, "result file")
        files.check_output_path(png, "figure")
    os.makedirs(out, exist_ok=True)


def parser() -> argparse.ArgumentParser:
    ap = Parser(
        prog="sonotile demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--out", type=utf8_path, default="sonotile-demo", help="output folder (default %(default)s)"
    )
    ap.add_argument(
        "--size", type=integer(32), default=128, help="points along the beam (default 128)"
    )
    ap.add_argument("--float64", action="store_true", help="double precision")
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    a = ap.parse_args(argv)
    h5, png = os.path.join(a.out, "results.h5"), os.path.join(a.out, "demo.png")
    try:
        _check_out(a.out, h5, png)
    except OSError as e:
        print(f"sonotile demo: error: {e}", file=sys.stderr)
        return 2
    if a.float64:
        import jax

        jax.config.update("jax_enable_x64", True)
    from sonotile.api import simulate
    from sonotile.solver.finite import NonFiniteError

    grid, medium, source, sensor = setup(a.size)
    print(
        f"sonotile demo: focused 1 MHz burst through a tissue layer, grid {grid.shape}, "
        f"{grid.nt} steps",
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        # progress: a bar on a terminal, a line per 10 % in a log
        res = simulate(grid, medium, source, sensor, dtype="float64" if a.float64 else "float32",
                       progress=True)  # fmt: skip
    except NonFiniteError as e:  # the run blew up: nothing is written
        print(f"sonotile demo: error: {e}", file=sys.stderr)
        return 1
    el = time.perf_counter() - t0
    cells = np.prod(grid.shape) * grid.nt
    print(f"done in {el:.1f} s ({cells / el / 1e6:.1f} Mcells/s incl. compile)")
    src = np.argwhere(source.p_mask)
    p_max_all = cast(np.ndarray, res["p_max_all"])  # a whole field: an array
    focus = np.unravel_index(np.argmax(p_max_all), p_max_all.shape)
    try:
        res.save(h5)
        _plot(png, grid, medium, res, src, focus)
    except (OSError, ValueError) as e:  # a full disk, a result with NaN: said in one line
        print(f"sonotile demo: error: {e}", file=sys.stderr)
        return 1
    pmax = float(p_max_all.max())
    print(f"peak pressure {pmax / 1e6:.2f} MPa")
    print(f"results: {os.path.abspath(h5)}")
    print(f"figure:  {os.path.abspath(png)}")
    return 0


def _plot(
    path: str,
    grid: KWaveGrid,
    medium: KWaveMedium,
    res: Results,
    source_points: np.ndarray,
    focus: tuple[np.integer, ...],
) -> None:
    """Max pressure on the x-y plane through the beam axis (tissue layer, source and focus
    marked) and pressure traces along the axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sonotile.commands.plot import field_map, traces

    spacing = cast("tuple[float, ...]", grid.spacing)  # per axis since KWaveGrid.__post_init__
    p_max_all, p_axis = cast(np.ndarray, res["p_max_all"]), cast(np.ndarray, res["p"])  # arrays
    dx = spacing[0]
    kz = grid.shape[2] // 2
    fig, ax = plt.subplots(1, 2, figsize=(12, 4.4))
    field_map(
        ax[0], p_max_all[:, :, kz], spacing[:2], ("x (beam axis)", "y"),
        f"max pressure, plane z = {kz * dx * 1e3:.1f} mm (through the beam axis)",
        marks={"focus": focus[:2]},
    )  # fmt: skip
    layer = np.nonzero(np.asarray(medium.sound_speed)[:, 0, 0] > 1540)[0]
    if layer.size:
        for edge in (layer[0], layer[-1] + 1):
            ax[0].axhline(edge * dx * 1e3, color="c", lw=0.8, ls="--")
        ax[0].text(0.5, (layer.mean() + 0.5) * dx * 1e3, "tissue layer", color="c", fontsize=8)
    on_plane = source_points[source_points[:, 2] == kz]
    ax[0].plot((on_plane[:, 1] + 0.5) * dx * 1e3, (on_plane[:, 0] + 0.5) * dx * 1e3, "w-",
               lw=2, label="source")  # fmt: skip
    ax[0].legend(fontsize=8, loc="lower right")
    pts = res.sensor_points
    traces(ax[1], res.t, p_axis, [f"x = {p[0] * dx * 1e3:.1f} mm" for p in pts])
    ax[1].set_title("pressure on the beam axis")
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, format="png", dpi=110)
    plt.close(fig)
    files.write_bytes(path, image.getvalue(), "figure")


if __name__ == "__main__":
    sys.exit(main())
