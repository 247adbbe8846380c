"""The isotropic elastic model (k-Wave's ``pstdElastic2D`` / ``pstdElastic3D``): medium,
constants, state, one pure step, sources and records, behind the model interface
(:class:`~sonotile.physics.elastic.interface.ElasticModel`; the common time loop runs it).

See ``docs/elastic.md``.
"""

from sonotile.model.units import db2neper
from sonotile.physics.elastic.medium import ElasticMedium
from sonotile.physics.elastic.model import (
    State,
    Statics,
    components,
    constants,
    pressure,
    split_field,
    step,
    zero_state,
)
from sonotile.physics.elastic.problem import ElasticRun, build

__all__ = [
    "ElasticMedium", "db2neper", "State", "Statics", "components", "constants", "pressure",
    "split_field", "step", "zero_state", "ElasticRun", "build",
]  # fmt: skip
