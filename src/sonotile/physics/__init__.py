"""The equations: one package per model, each behind the interface of :mod:`.base`, so that
the time loop, the engines, sensors, checkpoints, batches and gradients never see which model
runs. :func:`model_for` picks a problem's model.

May import: sonotile.spectral, sonotile.fft, sonotile.model, sonotile.base.
"""

from __future__ import annotations

from sonotile.model.problem import Problem
from sonotile.physics.acoustic import AcousticModel, AxisymmetricModel
from sonotile.physics.base import Model, point_index_keys


def model_for(problem: Problem) -> Model:
    """The model that runs ``problem`` (chosen by its medium and coordinates, as k-Wave does)."""
    if problem.radial_symmetry is not None:
        return AxisymmetricModel.of(problem)
    return AcousticModel.of(problem)


__all__ = ["Model", "model_for", "point_index_keys"]
