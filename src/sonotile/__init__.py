"""sonotile: nonlinear ultrasound in tissue with k-Wave's k-space pseudospectral method on JAX.

The public names are imported when first used (PEP 562), so that ``sonotile-kwave`` and other
entry points that import a submodule (``sonotile.kwave.run``) do not pay for the user API,
geometry and signal helpers at start-up (time to first step).
"""

from sonotile.base import interrupt as _interrupt

# the sonotile programs: Ctrl-C / SIGTERM end them with one line from here on (a library import
# leaves the signals alone)
_interrupt.install_for_programs()

from importlib import import_module  # noqa: E402
from typing import Any  # noqa: E402

from sonotile.base.version import __version__  # noqa: E402

# public name -> module that defines it
_WHERE = {
    **dict.fromkeys(
        ("KSensor", "KSource", "KWaveGrid", "KWaveMedium", "Results", "RunOptions", "simulate"),
        "sonotile.api",
    ),
    "KWaveArray": "sonotile.model.array",
    **dict.fromkeys(
        ("ElasticSource", "KWaveElasticMedium", "pstd_elastic_2d", "pstd_elastic_3d"),
        "sonotile.api.elastic",
    ),
    **dict.fromkeys(  # fmt: skip
        (
            "focused_annulus_oneil",
            "focused_bowl_oneil",
            "make_arc",
            "make_ball",
            "make_bowl",
            "make_cart_arc",
            "make_cart_bowl",
            "make_cart_circle",
            "make_cart_disc",
            "make_cart_rect",
            "make_cart_sphere",
            "make_cart_spherical_segment",
            "make_circle",
            "make_disc",
            "make_line",
            "make_sphere",
        ),
        "sonotile.model.geometry",
    ),  # fmt: skip
    **dict.fromkeys(
        ("create_cw_signals", "extract_amp_phase", "tone_burst"), "sonotile.model.signals"
    ),
    "simulate_many": "sonotile.api.batches",
    "load_input": "sonotile.api.results",
    "load_results": "sonotile.api.results",
    "make_simulator": "sonotile.api.gradients",
    "Tape": "sonotile.solver.tape",
    "SimulationDiverged": "sonotile.solver.finite",
    **dict.fromkeys(("KWaveDiffusion", "bioheat", "bioheat_batch"), "sonotile.api.heating.bioheat"),
    "bioheat_exact": "sonotile.physics.heat",
    "heat_from_result": "sonotile.api.heating.sonication",
    "plan": "sonotile.planning.chain",
    **dict.fromkeys(
        ("TimeReversal", "kspace_line_recon", "kspace_plane_recon", "time_reversal"),
        "sonotile.api.reconstruction",
    ),
}

__all__ = [
    "KWaveGrid", "KWaveMedium", "KSource", "KSensor", "Results", "RunOptions", "simulate",
    "simulate_many",
    "make_simulator", "Tape", "load_input", "load_results", "SimulationDiverged",
    "KWaveDiffusion", "bioheat", "bioheat_batch", "bioheat_exact", "heat_from_result", "plan",
    "kspace_line_recon", "kspace_plane_recon", "time_reversal", "TimeReversal",
    "pstd_elastic_2d", "pstd_elastic_3d", "KWaveElasticMedium", "ElasticSource",
    "__version__",
    "KWaveArray", "tone_burst", "create_cw_signals", "extract_amp_phase",
    "make_disc", "make_ball", "make_circle", "make_sphere", "make_line", "make_arc", "make_bowl",
    "make_cart_circle", "make_cart_sphere", "make_cart_bowl", "make_cart_arc", "make_cart_disc",
    "make_cart_rect", "make_cart_spherical_segment", "focused_bowl_oneil", "focused_annulus_oneil",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    """Public names and submodules, imported when first used (``import sonotile`` is light)."""
    module = _WHERE.get(name)
    if module is None:  # a submodule (``sonotile.api`` after a bare ``import sonotile``)
        try:
            return import_module(f"sonotile.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"sonotile.{name}":
                raise
            raise AttributeError(f"module 'sonotile' has no attribute {name!r}") from None
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
