"""The reconstruction numbers of docs/reconstruction.md, on the CPU (~30 s):

    PYTHONPATH=src .venv/bin/python benchmarks/accuracy/reconstruction.py [--figure PATH]

* sonotile's kspace_line_recon / kspace_plane_recon / time_reversal on k-Wave's recorded data
  against k-Wave's own results (tests/data/kwave-recon, k-Wave run by GNU Octave): max error /
  max value;
* k-Wave's line-sensor example (two discs, 88 x 216 grid, PML outside): the FFT reconstruction
  (linear, positivity) and time reversal (factor 2, positivity) against p0;
* a disc recorded on a closed ring and time-reversed: correlation and error against p0;
* the time of a reconstruction at the sizes of k-Wave's line and plane examples.

``--figure PATH`` draws p0 and the two reconstructions of the line-sensor example.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import sonotile as st
from sonotile.model.filters import smooth

C, DX = 1500.0, 1e-4
REF = Path(__file__).resolve().parents[2] / "tests" / "data" / "kwave-recon" / "reference.npz"


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a) - b).max() / np.abs(b).max())


def against_kwave() -> None:
    d = dict(np.load(REF))
    f64 = dict(dtype="float64", quiet=True)
    line, plane = {}, {}
    for i in ("nearest", "linear"):
        pos = i == "linear"
        line[i] = st.kspace_line_recon(d["line_data"], DX, float(d["line_dt"]), C,
                                       data_order="yt", interp=i, pos_cond=pos)  # fmt: skip
        plane[i] = st.kspace_plane_recon(d["plane_data"], DX, DX, float(d["plane_dt"]), C,
                                         data_order="yzt", interp=i)  # fmt: skip
    g = st.KWaveGrid((40, 40), DX, dt=float(d["ring_dt"]), nt=d["ring_data"].shape[1])
    ring = st.time_reversal(g, st.KWaveMedium(sound_speed=C), st.KSensor(mask=d["ring_mask"] > 0),
                            d["ring_data"], pml_inside=False, pml_size=10, **f64)  # fmt: skip
    g = st.KWaveGrid((48, 48), DX, dt=float(d["arc_dt"]), nt=d["arc_data"].shape[1])
    arc = st.time_reversal(g, st.KWaveMedium(sound_speed=C), st.KSensor(mask=d["arc_points"]),
                           d["arc_data"], pml_size=8, **f64)  # fmt: skip
    print("against k-Wave (max error / max value):")
    for name, got, want in [
        ("line, nearest", line["nearest"], d["line_nearest"]),
        ("line, linear + positivity", line["linear"], d["line_linear"]),
        ("plane, nearest", plane["nearest"], d["plane_nearest"]),
        ("plane, linear", plane["linear"], d["plane_linear"]),
        ("time reversal, binary ring, PML outside", ring, d["ring_tr"]),
        ("time reversal, Cartesian arc, PML inside", arc, d["arc_tr"]),
    ]:
        print(f"  {name:42s} {rel(got, want):.1e}")


def disc(shape: tuple[int, int], x: int, y: int, r: int, amp: float) -> np.ndarray:
    gx, gy = np.meshgrid(*(np.arange(n) for n in shape), indexing="ij")
    return amp * ((gx - x) ** 2 + (gy - y) ** 2 <= r**2)


def line_example() -> dict[str, np.ndarray]:
    """k-Wave's example_pr_2D_FFT_line_sensor / _TR_line_sensor (0-based disc centres)."""
    nx, ny = 88, 216
    p0 = smooth(disc((nx, ny), 59, 139, 5, 5.0) + disc((nx, ny), 29, 109, 8, 5.0), True)
    mask = np.zeros((nx, ny), bool)
    mask[0] = True
    grid = st.KWaveGrid((nx, ny), DX)
    grid.make_time(C)
    medium, sensor = st.KWaveMedium(sound_speed=C), st.KSensor(mask=mask)
    opts = dict(pml_inside=False, pml_size=20, quiet=True)
    data = st.simulate(grid, medium, st.KSource(p0=p0), sensor, smooth_p0=False, **opts)["p"]
    t0 = time.perf_counter()
    rec = st.kspace_line_recon(data, DX, grid.dt, C, data_order="yt", interp="linear",
                               pos_cond=True)  # fmt: skip
    t_fft = time.perf_counter() - t0
    depth = np.arange(rec.shape[0]) * C * grid.dt
    fft = np.apply_along_axis(lambda col: np.interp(np.arange(nx) * DX, depth, col), 0, rec)
    t0 = time.perf_counter()
    tr = st.TimeReversal(grid, medium, sensor)(data, **opts)
    t_tr = time.perf_counter() - t0
    print(f"k-Wave's line-sensor example ({nx} x {ny}, {grid.nt} steps):")
    for name, r, t in [
        ("FFT (linear, positivity)", fft, t_fft),
        ("time reversal (x2, >= 0)", tr, t_tr),
    ]:
        row = r[29]  # through the larger disc's centre, as k-Wave's profile plot
        print(f"  {name:26s} correlation {np.corrcoef(r.ravel(), p0.ravel())[0, 1]:.3f}, "
              f"peak on the larger disc's row {row.max():.2f} of {p0[29].max():.2f} Pa, "
              f"{t:.2f} s")  # fmt: skip
    return {"p0": p0, "fft": fft, "tr": tr}


def closed_ring() -> None:
    n = 64
    x, y = np.meshgrid(*(np.arange(n) - n // 2,) * 2, indexing="ij")
    p0 = smooth(2.0 * ((x - 5) ** 2 + (y + 4) ** 2 <= 25), True)
    ring = np.abs(np.hypot(x, y) - 26) < 0.5
    grid = st.KWaveGrid((n, n), DX)
    grid.make_time(C)
    medium, sensor = st.KWaveMedium(sound_speed=C), st.KSensor(mask=ring)
    opts = dict(pml_inside=False, quiet=True)
    data = st.simulate(grid, medium, st.KSource(p0=p0), sensor, smooth_p0=False, **opts)["p"]
    rec = st.time_reversal(grid, medium, sensor, data, **opts)
    inside = np.hypot(x, y) < 24
    err = np.linalg.norm((rec - p0)[inside]) / np.linalg.norm(p0[inside])
    print(f"time reversal on a closed ring ({n} x {n}, {int(ring.sum())} points, float32): "
          f"correlation {np.corrcoef(rec[inside], p0[inside])[0, 1]:.5f} inside the ring, "
          f"error {err:.1%}, peak {rec.max():.3f} of {p0.max():.3f} Pa")  # fmt: skip


def timings() -> None:
    rng = np.random.default_rng(0)

    def best(f, n: int = 3) -> float:  # noqa: ANN001
        out = []
        for _ in range(n):
            t0 = time.perf_counter()
            f()
            out.append(time.perf_counter() - t0)
        return min(out)

    p2, p3 = rng.standard_normal((216, 778)), rng.standard_normal((44, 44, 212))
    print("time (numpy, best of 3):")
    for interp in ("nearest", "linear"):
        t2 = best(lambda i=interp: st.kspace_line_recon(p2, DX, 2e-8, C, data_order="yt", interp=i))
        t3 = best(lambda i=interp: st.kspace_plane_recon(p3, DX, DX, 2e-8, C, data_order="yzt",
                                                         interp=i))  # fmt: skip
        print(f"  {interp:8s} line 216 x 778 samples {t2:.3f} s, plane 44 x 44 x 212 {t3:.3f} s")


def figure(images: dict[str, np.ndarray], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 2.6))
    for ax, (key, title) in zip(axes, [("p0", "p0 (line sensor on the top row)"),
                                       ("fft", "kspace_line_recon (linear, >= 0)"),
                                       ("tr", "TimeReversal (x2, >= 0)")]):  # fmt: skip
        im = ax.imshow(images[key], vmin=0, vmax=5, cmap="viridis")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("y [points]")
    axes[0].set_ylabel("x [points]")
    fig.colorbar(im, ax=axes, label="Pa", shrink=0.9)
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--figure", help="write the line-sensor example's images here")
    args = parser.parse_args()
    against_kwave()
    images = line_example()
    closed_ring()
    timings()
    if args.figure:
        figure(images, args.figure)


if __name__ == "__main__":
    main()
