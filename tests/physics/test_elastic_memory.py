"""``ElasticModel.memory_estimate`` (printed before a run, used by the fit check) follows XLA's
accounting of the compiled chunk program within 10 % on each of the step's code paths: 3-D
float32 with the updates inside FFTW's single-axis calls, 3-D through XLA's FFT (as on a GPU),
2-D float64, heterogeneous and homogeneous media, with and without absorption, with
``u_split_field`` and whole-grid records, and with the slip-aware interface
(``benchmarks/elastic/elastic_memory.py`` makes the cases and the table in docs/elastic.md).
Measured in a fresh process with sonotile's XLA flags set as the API's first run sets them:
XLA reads them once, and a process that started JAX without them (XLA:CPU's
concurrency-optimised scheduler on) keeps more temporaries alive."""

from __future__ import annotations

from pathlib import Path

import pytest
from devices import run_on_cpu_devices

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "elastic" / "elastic_memory.py"
CASES = ["3d f32 fftw kv", "3d f32 fftw lossless homogeneous", "3d f32 xla kv", "2d f64 kv",
         "2d f32 kv u_split_field", "3d f32 fftw kv p_max_all", "3d f32 kv slip",
         "2d f32 kv slip"]  # fmt: skip

SCRIPT = r"""
import importlib.util, json, sys
from sonotile.base import runtime
runtime.set_xla_flags()
import jax
from sonotile.physics.elastic.interface import ElasticModel

spec = importlib.util.spec_from_file_location("elastic_memory", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
out = {}
for case in sys.argv[2].split(","):
    nd, dtype, kv, fft, hetero, record, *itf = bench.CASES[case]
    n = 32 if nd == 3 else 64
    with jax.enable_x64(dtype == "float64"):
        run = bench.elastic_run(n, nd, dtype, kv, fft, hetero, record, *itf)
        out[case] = {"compiled": bench.compiled_bytes(run), "points": n**nd, "nd": nd,
                     "itemsize": 4 if dtype == "float32" else 8,
                     "estimate": ElasticModel.of(run).memory_estimate(run)}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def measured() -> dict:
    return run_on_cpu_devices(SCRIPT, 1, str(BENCH), ",".join(CASES), timeout=900)


@pytest.mark.parametrize("case", CASES)
def test_estimate_follows_the_compiled_program(measured: dict, case: str) -> None:
    m = measured[case]
    state = (24 if m["nd"] == 3 else 10) * m["points"] * m["itemsize"]  # the split fields
    assert m["compiled"] > state
    ratio = m["estimate"] / m["compiled"]
    assert abs(ratio - 1) <= 0.1, (m["estimate"] / m["points"], m["compiled"] / m["points"])
