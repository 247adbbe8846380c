"""Smoke test of ``sonotile bench`` (not a benchmark): a 16^3 grid, 3 steps, JSON keys."""

from __future__ import annotations

import json

from sonotile.cli import main


def test_bench_smoke(tmp_path):
    out = tmp_path / "bench.json"
    args = ["bench", "--size", "16", "--steps", "3", "--repeats", "1", "--json", str(out)]
    assert main([*args, "--workdir", str(tmp_path)]) == 0
    report = json.loads(out.read_text())
    assert {"machine", "jax", "device", "cases"} <= set(report)
    assert [c["case"] for c in report["cases"]] == ["lossless", "absorbing_nonlinear"]
    for case in report["cases"]:
        for key in ("mcells_per_s", "ms_per_step", "compile_s", "first_step_s", "peak_rss_bytes",
                    "bytes_per_point_rss", "breakdown_ms_per_step"):  # fmt: skip
            assert key in case, key
        assert case["mcells_per_s"]["median"] > 0
        assert case["memory_analysis"]["alias_size_in_bytes"] > 0  # the carry is donated
