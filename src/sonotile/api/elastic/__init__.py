"""The elastic model's front end: k-Wave's ``pstdElastic2D/3D`` (:func:`pstd_elastic_2d`,
:func:`pstd_elastic_3d`) and the elastic input built into a run and run through the engines or
traced (``pstd``); its sensor points (``sensor``), intensity records (``intensity``), time
reversal from boundary data (``reversal``), differentiable simulator (``simulator``) and saved
and resumed runs (``checkpoint``). ``simulate``, ``make_simulator`` and ``simulate_many`` choose
it for an elastic medium."""

from sonotile.api.elastic.pstd import (
    ElasticSource,
    KWaveElasticMedium,
    check_options,
    check_single,
    execute,
    prepare,
    pstd_elastic_2d,
    pstd_elastic_3d,
    run_elastic,
    simulate_elastic,
    x64,
)

__all__ = [
    "ElasticSource", "KWaveElasticMedium", "check_options", "check_single", "execute", "prepare",
    "pstd_elastic_2d", "pstd_elastic_3d", "run_elastic", "simulate_elastic", "x64",
]  # fmt: skip
