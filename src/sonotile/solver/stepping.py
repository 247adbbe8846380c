"""Which step a single-device run takes.

``Settings.step`` (``SONOTILE_STEP``) decides: ``plain`` runs the model's step
(:func:`sonotile.solver.runner.run_chunk`); ``stacked`` runs its step on stacked fields
(:meth:`sonotile.physics.Model.stacked`: the acoustic model's split density and velocity each
one ``(ndim, *grid)`` buffer, transformed in batched calls;
:func:`sonotile.solver.runner.run_stacked_chunk`) and refuses, before any work, a problem that
has none; ``auto`` takes the stacked step on a GPU where the operators' FFT is sonotile's cuFFT
calls (``SONOTILE_FFT`` resolved to ``cufft``) and the problem has one, the model's step
elsewhere (on XLA's FFT the stacked step is not measured against the plain one). Decomposed runs
take the model's step (``stacked`` asked for there is refused).
"""

from __future__ import annotations

from typing import Any

import jax

from sonotile.base import config
from sonotile.physics import Model
from sonotile.physics.base import LoopStep

#: JAX's names of the platforms where ``auto`` takes the stacked step
GPU_PLATFORMS = ("gpu", "cuda")


def choose(phys: Model, ops: Any, settings: config.Settings | None = None) -> LoopStep | None:
    """The stacked step to run with the single-device operators ``ops``, or None for the
    model's own (see the module docstring; ``settings`` default :func:`config.current`).
    Raises ValueError naming ``SONOTILE_STEP`` where ``stacked`` is asked for and the problem
    has none."""
    choice = (settings or config.current()).step
    on_cufft = jax.default_backend() in GPU_PLATFORMS and getattr(ops, "fft", None) == "cufft"
    if choice == "plain" or (choice == "auto" and not on_cufft):
        return None
    loop = phys.stacked(ops)
    if not isinstance(loop, str):
        return loop
    if choice == "stacked":
        raise ValueError(f"SONOTILE_STEP=stacked: {loop}; use SONOTILE_STEP=plain or auto")
    return None


def single_device_only(run: str, settings: config.Settings | None = None) -> None:
    """Raise ValueError naming ``SONOTILE_STEP`` where ``stacked`` is asked for in ``run`` (a
    decomposed run, in words), which takes the model's step."""
    if (settings or config.current()).step == "stacked":
        raise ValueError(f"SONOTILE_STEP=stacked: the stacked step runs on one device, not in "
                         f"{run}; use SONOTILE_STEP=plain or auto")  # fmt: skip
