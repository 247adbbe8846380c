"""Photoacoustic reconstruction in 2-D from a line sensor: FFT reconstruction and time reversal.

Shows: k-Wave's example_pr_2D_FFT_line_sensor and example_pr_2D_TR_line_sensor: three smoothed
discs of initial pressure ``p0`` in water, recorded on the grid's top row (PML outside the
grid), reconstructed by ``kspace_line_recon`` (linear interpolation, positivity; its depths
``i c dt`` resampled to the grid's rows) and by ``TimeReversal`` (the reversed data enforced on
the line, factor 2 for a sensor on one side, positivity). Physics: ``p0`` launches waves that
reach the line ``x = 0``; the line sees only the wave components travelling towards it (a
limited view: edges parallel to the line are sharp, those across it blurred into arcs).
Key numbers: the worst distance [grid points] between a reconstructed disc's centre (the
centroid of the reconstruction near it) and the true centre over both methods, and the
correlation of each reconstruction with ``p0`` in the visible region (under the line, away from
its ends).

Run: ``python examples/pr_2d_reconstruction.py [--quick] [--out gallery-out]``; about 4 s on
2 cores (``--quick``: about 3 s; times with compilation, on a loaded machine).
"""

from __future__ import annotations

import numpy as np
from _gallery import main, mm, pyplot, save

import sonotile as st
from sonotile.model.filters import smooth

C0 = 1500.0
DX = 1e-4  # [m]


def run(quick: bool = False, out: str | None = "gallery-out") -> dict:
    nx, ny, pml = (64, 128, 16) if quick else (88, 216, 20)  # totals of small prime factors
    grid = st.KWaveGrid((nx, ny), DX)
    grid.make_time(C0)
    centres = [(nx // 3, ny // 4), (nx // 2, ny // 2), (2 * nx // 3, 3 * ny // 4)]  # (x, y)
    radii = [nx // 12, nx // 10, nx // 16]
    p0 = sum(a * st.make_disc((nx, ny), (cx + 1, cy + 1), r)  # make_disc: 1-based centres
             for a, (cx, cy), r in zip([4.0, 6.0, 5.0], centres, radii))  # fmt: skip
    p0 = smooth(np.asarray(p0, np.float64), restore_max=True)  # [Pa], band-limited
    medium = st.KWaveMedium(sound_speed=C0)
    mask = np.zeros((nx, ny), bool)
    mask[0] = True  # the line x = 0
    sensor = st.KSensor(mask=mask)
    opts = dict(pml_inside=False, pml_size=pml, progress=False)
    res = st.simulate(grid, medium, st.KSource(p0=p0), sensor, **opts)
    p_xy = st.kspace_line_recon(res["p"], DX, grid.dt, C0, data_order="yt",
                                interp="linear", pos_cond=True)  # fmt: skip
    depth = np.arange(p_xy.shape[0]) * C0 * grid.dt  # [m]
    fft = np.stack([np.interp(np.arange(nx) * DX, depth, col) for col in p_xy.T], axis=1)
    tr = st.TimeReversal(grid, medium, sensor)(res["p"], **opts)
    errs = [centre_error(rec, c, r) for rec in (fft, tr) for c, r in zip(centres, radii)]
    visible = np.zeros((nx, ny), bool)
    visible[:, ny // 8 : ny - ny // 8] = True  # under the line, away from its ends
    plot(p0, fft, tr, out)
    return {"centre_error_px": float(max(errs)),
            "corr_fft": corr(fft, p0, visible), "corr_tr": corr(tr, p0, visible)}  # fmt: skip


def centre_error(rec: np.ndarray, centre: tuple[int, int], radius: int) -> float:
    """Distance [grid points] from ``centre`` to the centroid of ``rec`` within ``2 radius``."""
    x, y = np.ogrid[: rec.shape[0], : rec.shape[1]]
    near = (x - centre[0]) ** 2 + (y - centre[1]) ** 2 <= (2 * radius) ** 2
    w = np.where(near, np.maximum(rec, 0), 0.0)
    cx, cy = (w * x).sum() / w.sum(), (w * y).sum() / w.sum()
    return float(np.hypot(cx - centre[0], cy - centre[1]))


def corr(a: np.ndarray, b: np.ndarray, where: np.ndarray) -> float:
    """Pearson correlation of ``a`` and ``b`` over the points ``where``."""
    return float(np.corrcoef(a[where], b[where])[0, 1])


def plot(p0: np.ndarray, fft: np.ndarray, tr: np.ndarray, out: str | None) -> None:
    plt = pyplot()
    nx, ny = p0.shape
    ext = [mm(ny, DX)[0], mm(ny, DX)[-1], mm(nx, DX)[-1], mm(nx, DX)[0]]
    fig, ax = plt.subplots(3, 1, figsize=(6, 7.5))
    for a, f, title in zip(ax, (p0, fft, tr), ("p0 [Pa]", "kspace_line_recon [Pa]",
                                               "TimeReversal [Pa]")):  # fmt: skip
        im = a.imshow(f, extent=ext, cmap="viridis", vmin=0, vmax=p0.max())
        a.axhline(ext[3], color="w", lw=3)  # the sensor line
        a.set(title=title, ylabel="x [mm]")
        fig.colorbar(im, ax=a, label="pressure [Pa]")
    ax[-1].set(xlabel="y [mm]")
    save(fig, out, "pr_2d_reconstruction")


if __name__ == "__main__":
    main(run, __doc__, "pr_2d_reconstruction")
