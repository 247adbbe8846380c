"""sonotile: nonlinear ultrasound in tissue with k-Wave's k-space pseudospectral method on JAX."""

from sonotile.api import KSensor, KSource, KWaveGrid, KWaveMedium, Results, simulate  # noqa: E402
from sonotile.model.array import KWaveArray  # noqa: E402
from sonotile.model.geometry import (  # noqa: E402
    focused_annulus_oneil,
    focused_bowl_oneil,
    make_arc,
    make_ball,
    make_bowl,
    make_cart_arc,
    make_cart_bowl,
    make_cart_circle,
    make_cart_disc,
    make_cart_rect,
    make_cart_sphere,
    make_cart_spherical_segment,
    make_circle,
    make_disc,
    make_line,
    make_sphere,
)
from sonotile.model.signals import create_cw_signals, extract_amp_phase, tone_burst  # noqa: E402
from sonotile.version import __version__

__all__ = [
    "KWaveGrid", "KWaveMedium", "KSource", "KSensor", "Results", "simulate", "simulate_many",
    "make_simulator", "load_input", "load_results",
    "__version__",
    "KWaveArray", "tone_burst", "create_cw_signals", "extract_amp_phase",
    "make_disc", "make_ball", "make_circle", "make_sphere", "make_line", "make_arc", "make_bowl",
    "make_cart_circle", "make_cart_sphere", "make_cart_bowl", "make_cart_arc", "make_cart_disc",
    "make_cart_rect", "make_cart_spherical_segment", "focused_bowl_oneil", "focused_annulus_oneil",
]  # fmt: skip


def __getattr__(name: str):
    """Heavier entry points, imported when first used (``import sonotile`` stays light)."""
    if name == "simulate_many":
        from sonotile.batch.many import simulate_many

        return simulate_many
    if name in ("load_input", "load_results"):
        from sonotile import results_io

        return getattr(results_io, name)
    if name == "make_simulator":
        from sonotile.differentiable import make_simulator

        return make_simulator
    raise AttributeError(f"module 'sonotile' has no attribute {name!r}")
