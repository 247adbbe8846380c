"""The Python API: what a k-Wave user describes (``types``), its checks in the user's own names
(``inputs``), the solver-ready problem made from it (``problem``), ``simulate`` (``simulation``),
result files (``results``), photoacoustic reconstruction and time reversal
(``reconstruction``) and differentiable simulators (``differentiable``, imported when used: it
loads JAX).

May import: every layer below the front ends.
"""

from sonotile.api.problem import build_problem, mask_points
from sonotile.api.reconstruction import (
    TimeReversal,
    kspace_line_recon,
    kspace_plane_recon,
    time_reversal,
)
from sonotile.api.results import Results, load_input, load_results, save_results
from sonotile.api.simulation import shape_results, simulate
from sonotile.api.types import (
    Inputs,
    KSensor,
    KSource,
    KWaveGrid,
    KWaveMedium,
    OptionArgs,
    Options,
)

__all__ = [
    "Inputs", "KSensor", "KSource", "KWaveGrid", "KWaveMedium", "OptionArgs", "Options", "Results",
    "TimeReversal", "build_problem", "kspace_line_recon", "kspace_plane_recon", "load_input",
    "load_results", "mask_points", "save_results", "shape_results", "simulate", "time_reversal",
]  # fmt: skip
