"""Sources and records of the elastic model (the time loop is the common one,
:mod:`sonotile.solver.runner`; what sensors read is the model's,
:mod:`sonotile.physics.elastic.interface`).

Sources follow k-Wave's ``kspaceFirstOrder_scaleSourceTerms`` for the elastic codes: additive
velocity sources are scaled by ``2 c_p dt / d_axis``, additive stress sources by
``2 c_p dt / (ndim dx)`` (dx for every axis, as k-Wave), Dirichlet stress sources by
``1 / ndim`` (each split gets that share; for a shear component in 3-D only two splits exist,
so the enforced total is 2/3 of the given value, as in k-Wave). ``c_p`` is taken at each source
point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

#: What an elastic sensor can record (k-Wave's elastic names, plus ``s`` / ``s_final``: the
#: stress components at the points / on the whole grid, and ``p_cw`` / ``p_cw_all``: the
#: steady-state amplitude and phase of ``p`` at ``cw_frequency``; ``I`` / ``I_avg`` are made
#: from the series of ``p`` and ``u_non_staggered`` after the run).
RECORDS = (
    "p", "p_max", "p_min", "p_rms", "p_final", "p_max_all", "p_min_all", "p_cw", "p_cw_all",
    "u", "u_max", "u_min", "u_rms", "u_final", "u_max_all", "u_min_all", "u_non_staggered",
    "u_split_field", "I", "I_avg",
    "s", "s_final",
)  # fmt: skip


@dataclass(frozen=True)
class Recording:
    """What to record (static). ``start``: first recorded step, 0-based; ``cw_frequency``
    [Hz] and ``cw_periods``: the window of ``p_cw`` (the last periods of the run)."""

    record: tuple[str, ...]
    start: int
    ndim: int
    cw_frequency: float | None = None
    cw_periods: float = 3.0

    def wants(self, *names: str) -> bool:
        return any(n in self.record for n in names)


@dataclass
class SourceSignals:
    """One mask source: grid indices ``(N, ndim)`` and per field a signal ``(N|1, Nt_src)`` in
    the user's units (m/s or Pa) or None; ``mode``: ``additive`` or ``dirichlet``; ``rows``:
    for a labelled mask, the row of the user's signals ``(L, Nt_src)`` each point takes
    ``(N,)`` (its label - 1; the signals here are already expanded to the points), else None."""

    index: np.ndarray
    signals: tuple[np.ndarray | None, ...]
    mode: str
    rows: np.ndarray | None = None


def scale_signals(
    src: SourceSignals, kind: str, cp: Any, spacing: Sequence[float], dt: float
) -> list[np.ndarray | None]:
    """k-Wave's source scaling (module docstring); ``kind``: ``"u"`` or ``"s"``; ``cp``: the
    compressional speed (number or grid) [m/s]."""
    nd = len(spacing)
    c0 = np.broadcast_to(np.asarray(cp, dtype=np.float64), ()) if np.ndim(cp) == 0 else None
    if c0 is None:
        c0 = np.asarray(cp)[tuple(src.index.T)][:, None]  # per point
    out: list[np.ndarray | None] = []
    for a, sig in enumerate(src.signals):
        if sig is None:
            out.append(None)
            continue
        if kind == "u":
            scale = 1.0 if src.mode == "dirichlet" else 2 * c0 * dt / spacing[a]
        else:
            scale = 1 / nd if src.mode == "dirichlet" else 2 * dt * c0 / (nd * spacing[0])
        out.append(np.asarray(sig, dtype=np.float64) * scale)
    return out


def step_inputs(signals: Sequence[np.ndarray | None], nt: int, dtype: Any) -> tuple[Any, Any]:
    """Per-step values ``(nt, N|1)`` (zero past a signal's end) and ``on`` flags ``(nt,)``."""
    vals: list[jax.Array | None] = []
    ons: list[jax.Array | None] = []
    for sig in signals:
        if sig is None:
            vals.append(None)
            ons.append(None)
            continue
        m = min(sig.shape[1], nt)
        v = np.zeros((nt, sig.shape[0]))
        v[:m] = sig[:, :m].T
        vals.append(jnp.asarray(v, dtype))
        ons.append(jnp.asarray(np.arange(nt) < sig.shape[1]))
    return tuple(vals), tuple(ons)
