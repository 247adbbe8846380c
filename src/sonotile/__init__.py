"""sonotile: nonlinear ultrasound in tissue with k-Wave's k-space pseudospectral method on JAX."""

__version__ = "0.1.0"

from sonotile.runtime import set_xla_flags  # noqa: E402

set_xla_flags()  # before JAX creates its CPU client

from sonotile.api import KSensor, KSource, KWaveGrid, KWaveMedium, Results, simulate  # noqa: E402

__all__ = ["KWaveGrid", "KWaveMedium", "KSource", "KSensor", "Results", "simulate", "__version__"]
