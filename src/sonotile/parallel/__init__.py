"""Many devices and processes: meshes, the pencil and LFB decompositions, engines running
the one step on a mesh, ``auto``, ``jax.distributed`` set-up and the local launcher.

May import: sonotile.solver, sonotile.physics (not a model's package), sonotile.spectral,
sonotile.fft, sonotile.model, sonotile.base.

The names below are imported on first use (PEP 562): a single-device run imports
:mod:`.distributed` only, not the decompositions (~0.1 s of a k-Wave run's start).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# eager (light, no JAX): the function must shadow its submodule's name before anything else
# imports that submodule, or ``from sonotile.parallel import auto`` would give the module
from sonotile.parallel.auto import auto

if TYPE_CHECKING:
    from sonotile.parallel.engine import (
        DECOMPOSITIONS,
        decomposed_engine,
        engine_for,
        run_decomposed,
    )
    from sonotile.parallel.lfb import erf_bell
    from sonotile.parallel.mesh import make_mesh

#: public name -> the submodule defining it
_WHERE = {
    "DECOMPOSITIONS": "engine",
    "decomposed_engine": "engine",
    "engine_for": "engine",
    "erf_bell": "lfb",
    "make_mesh": "mesh",
    "run_decomposed": "engine",
}

__all__ = [
    "DECOMPOSITIONS",
    "auto",
    "decomposed_engine",
    "engine_for",
    "erf_bell",
    "make_mesh",
    "run_decomposed",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # once imported, a plain attribute
    return value
