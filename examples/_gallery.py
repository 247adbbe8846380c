"""Shared plumbing of the gallery scripts (examples/<category>_<name>.py): the command line
(``--quick``, ``--out``), the figure file and the printed key numbers."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import numpy as np

DEFAULT_OUT = "gallery-out"


class _Pyplot:
    """pyplot whose new figures use constrained layout (colour bars clear of the next panel),
    without changing matplotlib's settings for the rest of the process."""

    def __init__(self, plt) -> None:
        self._plt = plt

    def subplots(self, *args, **kwargs):
        return self._plt.subplots(*args, **{"layout": "constrained", **kwargs})

    def figure(self, *args, **kwargs):
        return self._plt.figure(*args, **{"layout": "constrained", **kwargs})

    def __getattr__(self, name: str):
        return getattr(self._plt, name)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend (figures in constrained layout)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return _Pyplot(plt)


def save(fig, out: str | None, name: str) -> str | None:
    """Write ``fig`` to ``out/name.png`` and close it (80 dpi; 256 colours where that is needed
    to stay under ~90 KB, for the docs); ``out=None``: no file. The figure is drawn in memory
    and written through a temporary file renamed into place (never through a link, a FIFO or
    a device: :func:`sonotile.base.files.write_bytes`)."""
    import io

    from sonotile.base import files

    plt = pyplot()
    path = None
    if out is not None:
        files.check_output_folder(out, "--out folder")
        os.makedirs(out, exist_ok=True)
        path = os.path.join(out, f"{name}.png")
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=80, bbox_inches="tight")
        if image.tell() > 90_000:  # keep the docs' figures small: 256 colours
            from PIL import Image  # matplotlib's own dependency

            image.seek(0)
            with Image.open(image) as im:
                small = im.convert("RGB").quantize(256)
            image = io.BytesIO()
            small.save(image, format="png", optimize=True)
        files.write_bytes(path, image.getvalue(), "figure")
    plt.close(fig)
    return path


def mm(n: int, dx: float) -> np.ndarray:
    """Axis [mm] of ``n`` points of spacing ``dx`` [m], centred as k-Wave's grid."""
    return (np.arange(n) - n // 2) * dx * 1e3


def main(run: Callable[..., dict], doc: str, name: str, argv: list[str] | None = None) -> dict:
    """Parse ``--quick``/``--out``, run the example, print its key numbers."""
    ap = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced size (what the tests run)")
    ap.add_argument("--out", default=DEFAULT_OUT, help="folder of the figure (default %(default)s)")
    a = ap.parse_args(argv)
    res = run(quick=a.quick, out=a.out)
    for k, v in res.items():
        print(f"{k}: {v:.6g}" if isinstance(v, float) else f"{k}: {v}")
    print(f"figure: {os.path.join(a.out, name + '.png')}")
    return res


def fast(n: int, pml: int = 0) -> int:
    """The smallest size ``>= n`` whose total with ``pml`` points on each side is a product of
    2, 3 and 5 (fast FFTs; sonotile warns about other sizes)."""
    from sonotile.fft.sizes import is_fast

    while not is_fast(n + 2 * pml):
        n += 1
    return n
