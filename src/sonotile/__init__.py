"""sonotile: nonlinear ultrasound in tissue with k-Wave's k-space pseudospectral method on JAX."""

__version__ = "0.1.0"

from sonotile.runtime import set_xla_flags  # noqa: E402

set_xla_flags()  # before JAX creates its CPU client

from sonotile.api import KSensor, KSource, KWaveGrid, KWaveMedium, Results, simulate  # noqa: E402

__all__ = [
    "KWaveGrid", "KWaveMedium", "KSource", "KSensor", "Results", "simulate", "simulate_many",
    "make_simulator",
    "__version__",
]  # fmt: skip


def __getattr__(name: str):
    """Heavier entry points, imported when first used (``import sonotile`` stays light)."""
    if name == "simulate_many":
        from sonotile.batch.many import simulate_many

        return simulate_many
    if name == "make_simulator":
        from sonotile.differentiable import make_simulator

        return make_simulator
    raise AttributeError(f"module 'sonotile' has no attribute {name!r}")
