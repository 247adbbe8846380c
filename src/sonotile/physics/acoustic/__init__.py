"""k-Wave's first-order acoustic model (Treeby et al., JASA 131, 2012): nonlinear, power-law
absorbing, heterogeneous; the step (``step``), its device constants (``constants``), the
absorption factors (``absorption``) and the model object the loop holds (``model``).

May import: sonotile.spectral, sonotile.fft, sonotile.model, sonotile.base.
"""

from sonotile.physics.acoustic.axisymmetric import AxisymmetricModel
from sonotile.physics.acoustic.constants import release_host_medium
from sonotile.physics.acoustic.model import AcousticModel, step_inputs
from sonotile.physics.acoustic.step import State

__all__ = ["AcousticModel", "AxisymmetricModel", "State", "release_host_medium", "step_inputs"]
