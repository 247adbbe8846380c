"""``ElasticModel.memory_estimate`` (printed before a run, used by the fit check) follows XLA's
accounting of the compiled chunk program within 10 % on each of the step's code paths: 3-D
float32 with the updates inside FFTW's single-axis calls, 3-D through XLA's FFT (as on a GPU),
2-D float64, heterogeneous and homogeneous media, with and without absorption, and with
``u_split_field`` and whole-grid records (``benchmarks/elastic_memory.py`` makes the cases and
the table in docs/elastic.md)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import jax
import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "elastic_memory.py"


def _bench():
    spec = importlib.util.spec_from_file_location("elastic_memory", BENCH)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(
    "case",
    ["3d f32 fftw kv", "3d f32 fftw lossless homogeneous", "3d f32 xla kv",
     "2d f64 kv", "2d f32 kv u_split_field", "3d f32 fftw kv p_max_all"],
)  # fmt: skip
def test_estimate_follows_the_compiled_program(case: str) -> None:
    from sonotile.physics.elastic.interface import ElasticModel

    bench = _bench()
    nd, dtype, kv, fft, hetero, record = bench.CASES[case]
    n = 32 if nd == 3 else 64
    with jax.enable_x64(dtype == "float64"):
        run = bench.elastic_run(n, nd, dtype, kv, fft, hetero, record)
        compiled = bench.compiled_bytes(run)
        estimate = ElasticModel.of(run).memory_estimate(run)
    state = (24 if nd == 3 else 10) * n**nd * (4 if dtype == "float32" else 8)  # split fields
    assert compiled > state
    assert abs(estimate / compiled - 1) <= 0.1, (estimate / n**nd, compiled / n**nd)
