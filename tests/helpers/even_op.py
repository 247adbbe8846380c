"""Spectral operators as the FFTW pass along x takes them: real and even along axis 0."""

from __future__ import annotations

import numpy as np


def even_along_x(op: np.ndarray) -> np.ndarray:
    """``op`` with rows ``X // 2 + 1 ..`` replaced by their mirror images (``op[x] = op[X - x]``):
    what a function of ``|k|`` is on the half spectrum, and what the numpy reference uses."""
    n = op.shape[0]
    return op[np.minimum(np.arange(n), (n - np.arange(n)) % n)]


def unread_rows_nan(op: np.ndarray) -> np.ndarray:
    """``op`` with its rows after ``X // 2`` set to NaN: the pass along x must not read them
    (only rows ``0 .. X // 2`` of an even operator), so a NaN there would show in every output."""
    out = np.array(op, copy=True)
    out[op.shape[0] // 2 + 1 :] = np.nan
    return out
