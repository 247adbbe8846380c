"""Heating: Pennes' bioheat equation in k-Wave's names (``bioheat``: ``KWaveDiffusion``,
:func:`bioheat`, :func:`bioheat_batch`), a sonication heated from an acoustic result
(``sonication``: :func:`heat_from_result`, :func:`sonicate`), and a run saved and resumed
(``checkpoint``: :class:`Checkpoint`, :class:`RunStopped`, used by elastic runs too)."""

from sonotile.api.heating.bioheat import (
    HeatResult,
    KWaveDiffusion,
    bioheat,
    bioheat_batch,
    engine_run,
    traced_problem,
)
from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.api.heating.sonication import HeatRun, Tissue, heat_from_result, sonicate

__all__ = [
    "Checkpoint", "HeatResult", "HeatRun", "KWaveDiffusion", "RunStopped", "Tissue", "bioheat",
    "bioheat_batch", "engine_run", "heat_from_result", "sonicate", "traced_problem",
]  # fmt: skip
