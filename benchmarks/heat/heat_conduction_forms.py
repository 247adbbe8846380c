"""Why the heat step keeps k-Wave's gradient-divergence form for a heterogeneous conductivity.

    .venv/bin/python benchmarks/heat/heat_conduction_forms.py [--points 64] [--contrasts 1.6,5,20]

Builds, as dense matrices on a periodic line of ``--points`` points (spacing 1, ``kappa = 1``),
the spectral operators of ``div(k grad T)`` for a conductivity ``k`` that is 1 outside and
``contrast`` inside a slab of a third of the line (sharp, and smoothed by a Gaussian filter):

* ``grad-div``: ``-D^T diag(k) D`` (``D`` the spectral first derivative without its Nyquist
  bin, as the model applies it: 8 transforms per 3-D step);
* ``symmetric``: ``(L diag(k) + diag(k) L - diag(L k)) / 2`` with ``L`` the spectral Laplacian,
  from ``div(k grad T) = (lap(k T) + k lap T - T lap k) / 2`` (4 transforms; it conserves heat
  exactly too, because ``L`` is symmetric).

and prints the largest real part of each operator's eigenvalues [D / dx^2]. A positive value is a
mode that grows without a source: the step would not be dissipative. The gradient-divergence
operator is negative semi-definite for any ``k >= 0``; the symmetric one is not.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def operators(k: np.ndarray) -> dict[str, np.ndarray]:
    """``{"grad-div": ..., "symmetric": ...}``: dense ``div(k grad .)`` matrices on a periodic
    line of unit spacing."""
    n = k.size
    w = 2 * np.pi * np.fft.fftfreq(n)
    odd = np.where(np.abs(w) == np.max(np.abs(w)), 0.0, w) if n % 2 == 0 else w
    f = np.fft.fft(np.eye(n), axis=0)
    fi = np.linalg.inv(f)
    d = np.real(fi @ np.diag(1j * odd) @ f)
    lap = np.real(fi @ np.diag(-(odd**2)) @ f)
    kk = np.diag(k)
    return {"grad-div": -d.T @ kk @ d, "symmetric": 0.5 * (lap @ kk + kk @ lap - np.diag(lap @ k))}


def conductivity(n: int, contrast: float, smooth: bool) -> np.ndarray:
    """1 outside, ``contrast`` inside the middle third; ``smooth``: Gaussian-filtered (width 2)."""
    x = np.arange(n)
    k = np.where((x >= n // 3) & (x < 2 * n // 3), contrast, 1.0)
    if smooth:
        w = 2 * np.pi * np.fft.fftfreq(n)
        k = np.real(np.fft.ifft(np.exp(-((2 * w) ** 2)) * np.fft.fft(k)))
    return k


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--points", type=int, default=64)
    p.add_argument("--contrasts", default="1.6,5,20")
    a = p.parse_args(argv)
    print("contrast  profile   largest Re(eigenvalue) [D/dx^2]: grad-div   symmetric")
    for c in (float(v) for v in a.contrasts.split(",")):
        for smooth in (False, True):
            ops = operators(conductivity(a.points, c, smooth))
            top = {name: np.max(np.linalg.eigvals(m).real) for name, m in ops.items()}
            print(f"{c:8.1f}  {'smooth' if smooth else 'sharp':8s}  "
                  f"{top['grad-div']:+.2e}  {top['symmetric']:+.2e}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
