"""The Python API, one room per thing a user does:

- ``types``: what a k-Wave user describes (grid, medium, source, sensor, ``Options``), and which
  model a medium runs; ``inputs``: its checks in the user's own names; ``problem``: the
  acoustic solver-ready problem made from it;
- ``options``: how a run runs (``RunOptions``: decomposition, mesh, chunking, tape,
  checkpoint...), one spelling for every model and verb, parsed once at the front edge;
- ``simulation``: one run of any model (``simulate``);
- ``gradients``: differentiable runs (``make_simulator``; imported when used: it loads JAX);
- ``batches``: many runs on one grid in one process (``simulate_many``);
- ``reconstruction`` (with ``reversal``): images from sensor data (k-space reconstructions,
  time reversal);
- ``heating``: heat and thermal dose (``bioheat``, ``KWaveDiffusion``, sonications, saved and
  resumed runs);
- ``elastic``: the elastic model's front end (k-Wave's ``pstdElastic2D/3D``, its input, sensors,
  simulator and saved runs);
- ``results``: result files.

The module paths these rooms replaced stay importable (:data:`MOVED`).

May import: every layer below the front ends.
"""

from sonotile.api.options import RunOptions
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
from sonotile.base.moved import keep_importable

#: Old module path -> the room that holds it now (both import the same module).
MOVED = {
    "sonotile.api.differentiable": "sonotile.api.gradients",
    "sonotile.api.diffusion": "sonotile.api.heating.bioheat",
    "sonotile.api.heat": "sonotile.api.heating.sonication",
    "sonotile.api.heatrun": "sonotile.api.heating.checkpoint",
    "sonotile.api.elastic_simulator": "sonotile.api.elastic.simulator",
    "sonotile.api.elastic_sensor": "sonotile.api.elastic.sensor",
    "sonotile.api.elastic_intensity": "sonotile.api.elastic.intensity",
    "sonotile.api.elastic_reversal": "sonotile.api.elastic.reversal",
    "sonotile.api.elasticrun": "sonotile.api.elastic.checkpoint",
}
keep_importable(MOVED)

__all__ = [
    "MOVED", "Inputs", "KSensor", "KSource", "KWaveGrid", "KWaveMedium", "OptionArgs", "Options",
    "Results", "RunOptions", "TimeReversal", "build_problem", "kspace_line_recon",
    "kspace_plane_recon", "load_input", "load_results", "mask_points", "save_results",
    "shape_results", "simulate", "time_reversal",
]  # fmt: skip
