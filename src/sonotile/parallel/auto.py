"""Choosing a decomposition (``auto``): single, pencil or lfb, mesh and overlap."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

from sonotile.parallel.decomposition import LFB, PENCIL, SINGLE, Decomposition

# ---------------------------------------------------------------------------------------------
# choosing a decomposition


#: Measured LFB error with windowed boxes (worst relative error over the recorded quantities,
#: 3-D heterogeneous absorbing nonlinear case, bell width 0.5: overlaps 2-8 on a 2x2x2 mesh,
#: 16 and 32 on slabs whose boxes stay shorter than the axis; see docs/decomposition.md).
LFB_ERROR = {2: 5.1e-2, 4: 2.9e-3, 8: 2.1e-3, 16: 7.5e-4, 32: 5.6e-4}


class Pick(TypedDict):
    """What :func:`auto` chose."""

    decomposition: Decomposition
    mesh_shape: tuple[int, ...]
    overlap: int
    reason: str


def factor_mesh(n: int, k: int, shape: Sequence[int]) -> tuple[int, ...] | None:
    """Near-balanced factorisation of ``n`` devices over the first ``k`` grid axes, at most one
    device per grid point along each axis; among equally balanced ones those that cut the axes
    evenly (no dead points) first. None when impossible (fewer points than devices)."""
    best: tuple[tuple[float, int], tuple[int, ...]] | None = None
    divisors = [p for p in range(1, n + 1) if n % p == 0]

    def rec(prefix: list[int], rest: int) -> None:
        nonlocal best
        if len(prefix) == k - 1:
            cand = tuple(prefix) + (rest,)
            if all(c <= shape[a] for a, c in enumerate(cand)):
                uneven = sum(shape[a] % c != 0 for a, c in enumerate(cand))
                score = (max(cand) / min(cand), uneven)
                if best is None or score < best[0]:
                    best = (score, cand)
            return
        for p in divisors:
            if rest % p == 0:
                rec(prefix + [p], rest // p)

    rec([], n)
    return None if best is None else best[1]


def auto(
    grid_shape: tuple[int, ...],
    n_devices: int,
    accuracy: float = 1e-3,
    processes: int = 1,
) -> Pick:
    """Pick ``single``, ``pencil`` or ``lfb`` (and mesh, overlap) for a grid and a device count.

    Rules: one device -> single. A target tighter than LFB reaches at overlap 32 -> pencil.
    Otherwise LFB when the grid is split over several processes/nodes (all-to-all traffic then
    dominates) or when the padded blocks cost little extra work (``(1 + 2 ov / n)^k <= 2``),
    choosing the smallest overlap that meets the target; pencil when padding would more than
    double the work.

    Returns ``{"decomposition", "mesh_shape", "overlap", "reason"}``.
    """
    shape = tuple(int(n) for n in grid_shape)
    d = len(shape)
    if n_devices <= 1:
        return {
            "decomposition": SINGLE,
            "mesh_shape": (),
            "overlap": 0,
            "reason": "one device: no decomposition needed",
        }
    ok_ov = [ov for ov, e in sorted(LFB_ERROR.items()) if e <= accuracy]
    pencil_mesh = factor_mesh(n_devices, min(2, d - 1), shape) if d >= 2 else None
    if pencil_mesh is not None and len(pencil_mesh) == 2 and pencil_mesh[0] == 1:
        pencil_mesh = (pencil_mesh[1],)
    lfb_mesh = factor_mesh(n_devices, d, shape)
    if not ok_ov:
        return pencil_pick(
            pencil_mesh, n_devices, shape,
            f"accuracy target {accuracy:g} is tighter than LFB reaches "
            f"({min(LFB_ERROR.values()):g} at overlap 32): global FFT is exact",
        )  # fmt: skip
    ov = ok_ov[0]
    if lfb_mesh is not None:
        block = [-(-shape[a] // lfb_mesh[a]) for a in range(d)]
        work = math.prod((b + 2 * ov) / b for b, p in zip(block, lfb_mesh) if p > 1)
    else:
        work = math.inf
    if lfb_mesh is not None and (processes > 1 or pencil_mesh is None or work <= 2.0):
        why = (
            "several processes: nearest-neighbour exchange instead of all-to-all"
            if processes > 1
            else f"padded blocks cost {work:.2f}x the work, acceptable"
        )
        return {
            "decomposition": LFB,
            "mesh_shape": lfb_mesh,
            "overlap": ov,
            "reason": f"overlap {ov} meets accuracy {accuracy:g} "
            f"(measured {LFB_ERROR[ov]:g}); {why}",
        }
    return pencil_pick(
        pencil_mesh, n_devices, shape,
        f"LFB at overlap {ov} would cost {work:.2f}x the work on blocks of {shape} / "
        f"{lfb_mesh}; one process: all-to-all is cheap, pencil is exact",
    )  # fmt: skip


def pencil_pick(
    mesh: tuple[int, ...] | None, n_devices: int, shape: tuple[int, ...], reason: str
) -> Pick:
    if mesh is None:
        raise ValueError(f"grid {shape} has fewer points than {n_devices} devices along its axes")
    return {
        "decomposition": PENCIL,
        "mesh_shape": mesh,
        "overlap": 0,
        "reason": reason,
    }
