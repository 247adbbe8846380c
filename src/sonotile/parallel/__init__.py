"""Many devices and processes: meshes, the pencil and LFB decompositions, engines running
the one step on a mesh, ``auto``, ``jax.distributed`` set-up and the local launcher.

May import: sonotile.solver, sonotile.model, sonotile.fft, sonotile.runtime.
"""

from sonotile.parallel.auto import auto
from sonotile.parallel.engine import DECOMPOSITIONS, decomposed_engine, engine_for, run_decomposed
from sonotile.parallel.lfb import erf_bell
from sonotile.parallel.mesh import make_mesh

__all__ = [
    "DECOMPOSITIONS",
    "auto",
    "decomposed_engine",
    "engine_for",
    "erf_bell",
    "make_mesh",
    "run_decomposed",
]
