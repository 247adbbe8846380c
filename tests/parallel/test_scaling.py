"""Communication accounting of the decompositions: bytes each device sends per step, read from
the compiled program, against the count each method implies (sonotile.bench.scaling)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sonotile.bench.processes import _results, default_transports
from sonotile.bench.scaling import (
    LINKS,
    large_run_rows,
    model_rows,
    predicted_bytes,
    step_time_model,
)


def test_predicted_bytes_by_hand():
    """pencil 2x4 on 64^3, 10 transforms: half spectrum 64*64*33 complex64 over 8 devices,
    kept 1/2 and 3/4 on the two transposes; lfb 2x2x2, overlap 4, one field: 2 * 4 planes of
    32x32, then 40x32, then 40x40 floats."""
    half = 64 * 64 * 33 * 8 / 8
    assert predicted_bytes((64,) * 3, (2, 4), "pencil", 10, 0) == pytest.approx(
        10 * half * (1 / 2 + 3 / 4)
    )
    lfb = 2 * 4 * (32 * 32 + 40 * 32 + 40 * 40) * 4
    assert predicted_bytes((64,) * 3, (2, 2, 2), "lfb", 0, 1, overlap=4) == pytest.approx(lfb)


def test_model_lfb_sends_less_than_pencil_and_gap_closes_with_devices():
    rows = model_rows(n=1024, devices=(8, 64, 512), overlap=16)
    assert all(r["lfb_MB"] < r["pencil_MB"] for r in rows)
    ratios = [r["ratio"] for r in rows]
    assert ratios == sorted(ratios, reverse=True)
    assert all(1 < r["lfb_work"] < 2.5 for r in rows)


def test_measured_bytes_match_the_method(tmp_path):
    """8 virtual devices, 48^3 heterogeneous absorbing case: the compiled step's collectives
    carry within 25 % of the predicted bytes (pencil pads the half-spectrum axis to divide)."""
    out = tmp_path / "bd.json"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    r = subprocess.run(
        [sys.executable, "-m", "sonotile.bench.scaling", "--size", "48", "--steps", "1",
         "--bytes-only", "--runs", "pencil:8,pencil:2x4,lfb:2x4,lfb:2x2x2", "--json", str(out)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 4
    for run in runs:
        sent, pred = run["bytes_sent_per_device_per_step"], run["bytes_predicted"]
        assert pred > 0 and 0.75 < sent / pred < 1.25, (
            run["decomposition"],
            run["mesh"],
            sent,
            pred,
        )


def test_bench_scaling_two_processes(tmp_path):
    """``sonotile bench --scaling`` on a tiny grid: 1 process, 2 independent processes and 2
    coupled ones (lfb, through each transport installed) run; the parts of a step add up to it,
    the bytes sent are the halos (the same whatever carries them), the efficiencies are the time
    ratios, and the PNG is written."""
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    transports = default_transports()
    r = subprocess.run(
        [sys.executable, "-m", "sonotile.commands.cli", "bench", "--scaling", "--size", "24",
         "--strong", "0", "--steps", "2", "--repeats", "1", "--rounds", "1",
         "--decompositions", "lfb", "--overlap", "4", "--json", str(out), "--png", str(png)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    s = json.loads(out.read_text())["summary"]
    coupled = {f"weak/lfb/{t}" for t in transports.split(",")}
    assert set(s) == {"weak/single", "weak/control"} | coupled
    single = s["weak/single"]
    assert single["exchange_ms"] == single["waiting_ms"] == 0
    assert single["mb_sent_per_step"] == 0
    sent = {s[k]["mb_sent_per_step"] for k in coupled}
    assert len(sent) == 1 and sent.pop() > 0, sent
    for k in coupled:
        lfb = s[k]
        parts = lfb["fft_ms"] + lfb["elementwise_ms"] + lfb["exchange_ms"] + lfb["waiting_ms"]
        assert abs(parts - lfb["ms_per_step"]) <= 1e-6 * lfb["ms_per_step"]
        # two processes do exchange (the part itself is capped: 0 when separately timed
        # programs on a loaded machine add up to more than the step)
        assert lfb["exchange_replay_ms"] > 0, k
        assert 0 <= lfb["exchange_ms"] <= lfb["exchange_replay_ms"], k
        ceiling = s["weak/control"]["ms_per_step"] / lfb["ms_per_step"]
        assert abs(lfb["efficiency_vs_ceiling"] - ceiling) < 1e-9
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_time_model_by_hand_and_what_it_implies():
    """Two devices in one node: pencil 256x128x128 sends 16 transforms of half its half
    spectrum over NVLink, one message each; LFB pays its padding on the FFT share only. Across
    nodes (2048^3, 64 GPUs) LFB's step is shorter than pencil's, and memory per device falls
    as 1/P."""
    m = step_time_model((256, 128, 128), (2,), "pencil", 1.0, n_transforms=16, n_exchanged=7)
    sent = 16 * 256 * 128 * 65 * 8 / 2 / 2
    assert m["bytes"] == pytest.approx(sent)
    assert m["comm_s"] == pytest.approx(sent / LINKS["nvlink"]["bandwidth"] + 16 * 10e-6)
    assert m["work_s"] == pytest.approx(1e-9 * 256 * 128 * 128 / 2)
    lfb = step_time_model((256, 128, 128), (2,), "lfb", 1.0, overlap=16, fft_share=0.5)
    assert lfb["pad"] == pytest.approx(160 / 128)
    assert lfb["work_s"] == pytest.approx(1e-9 * 128**3 * (0.5 + 0.5 * 1.25))
    rows = {r["devices"]: r for r in large_run_rows(2048, devices=(8, 64, 512))}
    assert rows[64]["lfb"]["step_s"] < rows[64]["pencil"]["step_s"]
    assert rows[8]["pencil"]["GB_per_device"] == pytest.approx(74 * 2048**3 / 8 / 1e9)
    assert rows[512]["lfb"]["GB_per_device"] < rows[64]["lfb"]["GB_per_device"] / 4


def test_results_of_ranks_forwarded_on_one_line():
    # mpirun can forward two ranks' RESULT lines joined: both must be read, not a JSON error
    out = 'noise\nRESULT{"ms_per_step": 1.5}RESULT{"ms_per_step": 2.0}\nrank 1: RESULT{"x": 3}\n'
    assert _results(out) == [{"ms_per_step": 1.5}, {"ms_per_step": 2.0}, {"x": 3}]
