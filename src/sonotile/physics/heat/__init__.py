"""The heat model: Pennes' bioheat equation with k-Wave's k-space corrected time step, thermal
dose (CEM43) and lesion map, and heat sources from acoustic fields (see docs/heat.md).

Model interface (:class:`sonotile.physics.Model`): :class:`~.model.HeatModel` over a validated
:class:`~.model.HeatProblem` (:func:`~.model.heat_problem`), with :class:`~.step.State`, the
pure :func:`~.step.step` and the operators :class:`~.ops.HeatOps`; the common time loop
(:mod:`sonotile.solver.runner`, the engines of :mod:`sonotile.parallel`) drives it. User API
(:mod:`sonotile.api.heating.bioheat`): ``KWaveDiffusion``, ``bioheat``; here :func:`bioheat_exact`.
"""

from sonotile.physics.heat.dose import LESION_CEM43, cem43_of_history, cem43_rate
from sonotile.physics.heat.exact import bioheat_exact
from sonotile.physics.heat.medium import ThermalMedium, ThermalSource
from sonotile.physics.heat.model import HeatModel, HeatProblem, heat_problem
from sonotile.physics.heat.sources import acoustic_heat_source, alpha_np_per_m, sonication

__all__ = [
    "bioheat_exact", "ThermalMedium",
    "ThermalSource", "acoustic_heat_source", "alpha_np_per_m", "sonication", "cem43_rate",
    "cem43_of_history", "LESION_CEM43", "HeatModel", "HeatProblem", "heat_problem",
]  # fmt: skip
