"""The equations: one package per model, each behind the interface of :mod:`.base`, so that
the time loop, the engines, sensors, checkpoints, batches and gradients never see which model
runs. :func:`model_for` picks a problem's model.

May import: sonotile.spectral, sonotile.fft, sonotile.model, sonotile.base.
"""

from __future__ import annotations

from typing import Any

from sonotile.physics.acoustic import AcousticModel, AxisymmetricModel
from sonotile.physics.base import Model, Records, point_index_keys, wave_records
from sonotile.physics.elastic.interface import ElasticModel
from sonotile.physics.elastic.problem import ElasticRun
from sonotile.physics.heat.model import HeatModel, HeatProblem


def model_for(problem: Any) -> Model:
    """The model that runs ``problem`` (chosen by what it simulates, as k-Wave does by the
    medium): a :class:`~sonotile.physics.heat.model.HeatProblem` the heat model, an
    :class:`~sonotile.physics.elastic.problem.ElasticRun` the elastic model, an acoustic
    :class:`~sonotile.model.problem.Problem` k-Wave's first-order acoustic model (on an
    axisymmetric grid when the problem has a radial symmetry)."""
    if isinstance(problem, HeatProblem):
        return HeatModel.of(problem)
    if isinstance(problem, ElasticRun):
        return ElasticModel.of(problem)
    if problem.radial_symmetry is not None:
        return AxisymmetricModel.of(problem)
    return AcousticModel.of(problem)


__all__ = ["Model", "Records", "model_for", "point_index_keys", "wave_records"]
