"""The ``step_compare`` and ``whole_step`` parts of ``benchmarks/gpu_check.py`` in their dry runs
on the CPU: the stacked step on the stand-in FFT against the unstacked step (cuFFT refused, with
its reason), in one process and as whole ``sonotile-kwave`` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def dry_run(tmp_path: Path, parts: str) -> dict:
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(SCRIPT), str(out), "--dry-run", "--inline", "--parts", parts]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "step_compare fft xla" in p.stdout  # its summary line
    return json.loads(out.read_text())


def test_dry_run_step_compare(tmp_path):
    """The stacked step against the unstacked one on the CPU stand-in (no GPU: cuFFT refused,
    with its reason): equal to round-off, the byte count written, k-Wave's figures absent."""
    part = dry_run(tmp_path, "step_compare")["parts"]["step_compare"]
    assert part["status"] == "ok" and part["fft"] == "xla" and part["cufft_unavailable"]
    assert [(r["case"], r["n"]) for r in part["rows"]] == [("lossless", 12),
                                                          ("absorbing_nonlinear", 16)]  # fmt: skip
    for row in part["rows"]:
        assert all(d <= 5e-6 for d in row["max_rel_diff"].values()), row
        assert row["xla_ms_per_step"] > 0 and row["stacked_ms_per_step"] > 0
        assert "kwave_over_stacked" not in row
    prof = part["rows"][1]["profile"]  # the absorbing row: host events of both loops on a CPU
    assert prof["xla"]["source"] == prof["stacked"]["source"] == "host"
    assert part["counted_bytes"]["absorbing"]["total"] == 328
    assert part["transform_check"] == {"forward": 0.0, "inverse": pytest.approx(0, abs=1e-5)}


def test_rows_get_kwave_and_bandwidth_from_the_prior_run(monkeypatch, tmp_path):
    """k-Wave CUDA's loop time at the row's case and size comes from ``--prior``'s throughput
    rows when this run has none; each step's bytes become a fraction of the copy bandwidth;
    a worker cut off by its cap keeps the rows it had."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    row = {"case": "absorbing_nonlinear", "n": 256, "xla_ms_per_step": 3.6,
           "stacked_ms_per_step": 2.0, "xla_bytes_per_point": 353.0,
           "stacked_counted_bytes_per_point": 328}  # fmt: skip
    cut = {"status": "timeout", "partial": {"rows": [dict(row)]}}  # the rows it had
    monkeypatch.setattr(gc, "run_worker", lambda *a, **k: cut)
    prior = {"throughput": {"rows": [{"case": "absorbing_nonlinear", "n": 256,
                                      "kwave_cuda": {"ms_per_step": 3.2}}]},
             "env": {"copy_bandwidth_Bps": 3.0e12}}  # fmt: skip
    res = gc.Results(tmp_path / "r.json", {})
    ctx = {"res": res, "cfg": gc.DRY, "clock": gc.Clock(100), "env": {}, "prior": prior}
    gc.part_step_compare(ctx)
    (got,) = res.data["parts"]["step_compare"]["rows"]
    assert got["kwave_over_xla"] == pytest.approx(3.2 / 3.6)
    assert got["kwave_over_stacked"] == pytest.approx(1.6)
    assert got["stacked_fraction_of_copy_bandwidth"] == pytest.approx(
        328 * 256**3 / 2.0e-3 / 3.0e12
    )


def test_dry_run_whole_step(tmp_path):
    """``sonotile-kwave`` as whole processes with the plain and the stacked step (no cuFFT
    library on the CPU: its variants left out): each cold and warm, the stacked output within
    round-off of the plain one, the outputs' provenance naming the step that ran."""
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(SCRIPT), str(out), "--dry-run", "--inline", "--parts",
           "whole_step"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.endswith("_CUFFT_LIB")}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    part = json.loads(out.read_text())["parts"]["whole_step"]
    assert part["status"] == "ok" and part["variants"] == ["plain", "stacked"]
    assert [(r["case"], r["n"]) for r in part["rows"]] == [("lossless", 12),
                                                          ("absorbing_nonlinear", 16)]  # fmt: skip
    for row in part["rows"]:
        for v in ("plain", "stacked"):
            for phase in ("cold", "warm"):
                run = row["runs"][v][phase]
                assert run["loop_ms_per_step"] > 0 and run["wall_s"] > 0, run
                assert run["decomposition"].endswith(", stacked step") == (v == "stacked")
        assert row["max_rel_diff_vs_plain"]["plain"] == {"p": 0.0, "p_final": 0.0}
        assert 0 < row["max_rel_diff_vs_plain"]["stacked"]["p"] <= 5e-6
        assert "kwave_over" not in row  # no k-Wave figures in this run
    assert "whole lossless               12^3 stacked" in p.stdout  # its summary line


def test_whole_step_variants_and_kwave_ratio(monkeypatch, tmp_path):
    """The cuFFT variants run only where the library file exists; k-Wave CUDA's loop time at
    the row's case and size (from ``--prior``) over each variant's warm loop time."""
    from sonotile.bench import step_runs

    assert step_runs.variants(None) == step_runs.variants(str(tmp_path / "no.so")) == [
        "plain", "stacked"]  # fmt: skip
    lib = tmp_path / "lib.so"
    lib.write_bytes(b"")
    assert step_runs.variants(str(lib)) == ["plain", "stacked", "plain_cufft", "stacked_cufft"]
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    row = {
        "case": "lossless",
        "n": 256,
        "runs": {
            "plain": {"warm": {"loop_ms_per_step": 2.5}},
            "stacked": {"warm": {"loop_ms_per_step": 2.0}},
        },
    }
    monkeypatch.setattr(gc, "run_worker", lambda *a, **k: {"status": "ok", "rows": [row]})
    prior = {"throughput": {"rows": [{"case": "lossless", "n": 256,
                                      "kwave_cuda": {"ms_per_step": 2.2}}]}}  # fmt: skip
    res = gc.Results(tmp_path / "r.json", {})
    gc.part_whole_step({"res": res, "cfg": gc.DRY, "clock": gc.Clock(100), "env": {},
                        "prior": prior})  # fmt: skip
    (got,) = res.data["parts"]["whole_step"]["rows"]
    assert got["kwave_over"] == {"plain": pytest.approx(2.2 / 2.5), "stacked": pytest.approx(1.1)}


def test_only_the_stacked_step_parts_get_the_cufft_library(monkeypatch, tmp_path):
    """gpu_check.sh's library (``GPU_CHECK_CUFFT_LIB``) reaches the workers of step_compare and
    whole_step as ``SONOTILE_CUFFT_LIB``; the workers' common environment does not carry it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc)
    lib = tmp_path / "libsonotile_cufft.so"
    monkeypatch.delenv("SONOTILE_CUFFT_LIB", raising=False)
    monkeypatch.setenv("GPU_CHECK_CUFFT_LIB", str(lib))
    ctx = {"env": gc.worker_env(dry=True)}
    assert "SONOTILE_CUFFT_LIB" not in ctx["env"]
    assert gc._lib_env(ctx, 0)["SONOTILE_CUFFT_LIB"] == str(lib)
    seen = []
    monkeypatch.setattr(gc, "run_worker", lambda name, spec, cap, env: seen.append(env) or {})
    res = gc.Results(tmp_path / "r.json", {})
    ctx = {"res": res, "cfg": gc.DRY, "clock": gc.Clock(100), "env": ctx["env"]}
    gc.part_whole_step(ctx)
    gc.part_step_compare(ctx)
    assert [e.get("SONOTILE_CUFFT_LIB") for e in seen] == [str(lib)] * 2
