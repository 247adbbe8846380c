"""sonotile: nonlinear ultrasound in tissue with k-Wave's k-space pseudospectral method on JAX."""

__version__ = "0.1.0"

from .api import KSensor, KSource, KWaveGrid, KWaveMedium, Results, simulate  # noqa: E402

__all__ = ["KWaveGrid", "KWaveMedium", "KSource", "KSensor", "Results", "simulate", "__version__"]
