"""``benchmarks/gpu_check.py`` on the CPU: its dry run writes a results file of the expected
structure, the reference comparison inside it fails a perturbed output, and a part that
overruns its time cap is recorded as a timeout instead of stopping the run."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from paths import REFERENCE

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
QUICK_PARTS = "env,reference,throughput,profile"


def load_gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def dry_run(tmp_path: Path, parts: str) -> dict:
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(SCRIPT), str(out), "--dry-run", "--inline", "--parts", parts]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "== gpu_check summary ==" in p.stdout
    return json.loads(out.read_text())


def test_dry_run_results_structure(tmp_path):
    data = dry_run(tmp_path, QUICK_PARTS)
    meta, parts = data["meta"], data["parts"]
    assert meta["dry_run"] is True and "--dry-run" in meta["command"]
    assert meta["started"] and meta["finished"] and "1e-4" in meta["tolerance"]
    assert set(parts) == set(QUICK_PARTS.split(","))
    env = parts["env"]
    assert env["status"] == "ok" and env["jax"] and env["device_kind"]
    assert env["copy_bandwidth_Bps"] > 1e8
    ref = parts["reference"]
    assert ref["status"] == "ok" and ref["all_ok"] and ref["n_ok"] == len(ref["cases"]) == 1
    case = ref["cases"][0]
    assert case["datasets"]["p"]["ok"] and 0 < case["datasets"]["p"]["error"] < 1e-4
    assert ref["control"]["detected"] is True  # a 1e-3 error in our output fails
    rows = parts["throughput"]["rows"]
    assert [(r["case"], r["n"]) for r in rows] == [
        (c, n) for n in (12, 16) for c in ("lossless", "absorbing_nonlinear")
    ]  # both cases at a size, then the next size
    for r in rows:
        s = r["sonotile"]
        assert s["status"] == "ok" and s["ms_per_step"] > 0 and s["mcells_per_s"] > 0
        assert s["compile_s"] > 0 and s["first_step_s"] >= s["compile_s"]
        assert s["compiled_memory"]["temp_size_in_bytes"] >= 0
        assert s["bytes_per_point_step_at_copy_bw"] == pytest.approx(
            s["ms_per_step"] * 1e-3 * env["copy_bandwidth_Bps"] / r["n"] ** 3
        )
    prof = parts["profile"]
    assert prof["hlo"]["ops"]["fusion"] > 0 and prof["hlo_dump_bytes"] is None  # inline: none
    assert prof["xla_bytes_accessed_per_point_step"] > 0 and prof["ms_per_step"] > 0


@pytest.mark.slow
def test_dry_run_every_part(tmp_path):
    """All parts, the decompositions, gradients and the largest-grid search included
    (compiles a gradient: slow). On a CPU no peak device memory is known, so the search starts
    at its configured size and grows by 10 % steps to the dry run's ceiling."""
    parts = dry_run(tmp_path, "")["parts"]
    for key in ("sonotile/lossless", "sonotile/absorbing_nonlinear"):
        big = parts["largest"][key]
        assert big["largest_n_ran"] == 24 and [p["n"] for p in big["probes"]] == [16, 24]
        assert big["predicted_n"] is None and big["smallest_n_failed"] is None
    assert parts["kwave_reference"]["status"] == "skipped"  # no k-Wave binary given
    cpu = parts["cpu_scaling"]  # no k-Wave OMP binary given: sonotile alone, each count
    assert cpu["status"] == "ok" and cpu["tools"] == ["sonotile"]
    assert [(r["case"], r["threads"]) for r in cpu["rows"]] == [
        (c, t) for t in (1, 2) for c in ("ivp_lossless", "point_additive_absorbing_nonlinear")
    ]
    for dec in ("pencil", "lfb"):
        assert parts["parallel"][dec]["agree"], parts["parallel"][dec]
    g = parts["gradients"]
    assert g["status"] == "ok" and g["gradient_finite"] and g["gradient_s"] > 0
    assert g["fft"] in ("fftw", "fftw-separate-updates", "xla")  # a CPU's FFTs
    g = parts["gradients_cufft"]  # no cuFFT library on a CPU: the same run
    assert g["status"] == "ok" and g["gradient_finite"] and g["step_setting"] == "auto"
    plans = parts["plan"]["rows"]  # the plan, and the optimised plan, end to end
    assert [(r["status"], bool(r.get("optimize"))) for r in plans] == [(0, False), (0, True)]
    assert {"acoustics", "heat"} <= set(plans[0]["timings_s"])
    assert "optimize" in plans[1]["timings_s"]
    models = parts["models"]  # the elastic and heat steps beside the acoustic one
    assert {"acoustic", "elastic", "elastic-slip"} <= set(models["elastic"]["rows"])
    assert {"acoustic", "heat-homog", "heat-hetero"} <= set(models["heat"]["rows"])
    assert models["heat"]["rows"]["acoustic"]["over_acoustic"] == 1.0
    two = parts["mpi_one_gpu"]  # two MPI ranks on the one device against one process
    for dec in ("pencil", "lfb"):
        row = two["agree"][dec]
        assert row["agree"] and {"p", "p_final"} <= set(row["max_rel_error"]), row
    steps = two["steps"]
    assert steps["single"]["processes"] == 1 and steps["lfb"]["processes"] == 2, steps
    assert steps["lfb"]["sent_bytes_per_rank"]["collective-permute"] > 0, steps["lfb"]
    assert steps["pencil"]["sent_bytes_per_rank"]["all-to-all"] > 0, steps["pencil"]


def test_comparison_fails_a_perturbed_output(tmp_path):
    """The comparison the reference part applies: k-Wave's own output passes against itself;
    moved by 1e-3 of its peak in one sample of its largest dataset, it fails."""
    gc = load_gpu_check()
    folder = REFERENCE / "3d_het_lossless_p0_cuboid_allfields_s25"
    meta = json.loads((folder / "case.json").read_text())
    assert gc.compare_case(folder, folder / "output.h5", meta)["ok"]
    bad = tmp_path / "bad.h5"
    name = gc.perturb(folder / "output.h5", bad)
    res = gc.compare_case(folder, bad, meta)
    assert not res["ok"]
    assert [k for k, v in res["datasets"].items() if not v["ok"]] == [name]
    assert 9e-4 < res["datasets"][name]["error"] < 1.1e-3
    before = sorted(p.name for p in folder.iterdir())
    control = gc.control_check(folder, folder / "output.h5")
    assert control["detected"] and control["dataset"] == name
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing left beside the case


def test_overrun_part_is_recorded_not_fatal():
    """A worker past its cap is killed and recorded as a timeout; one that crashes is recorded
    as failed with what it had finished before (here the first of two cases)."""
    gc = load_gpu_check()
    env = gc.worker_env(dry=True)
    # 20 timed copies of 256 MiB take seconds on any machine: past the 1 s the cap allows
    slow = gc.run_worker("env", {"copy_mib": 256}, cap_s=0.2, env=env)
    assert slow["status"] == "timeout" and slow["seconds"] < 30
    cases = [str(REFERENCE / "2d_homog_lossless_p0_index"), "/nonexistent"]
    bad = gc.run_worker("reference", {"cases": cases}, cap_s=300, env=env)
    assert bad["status"] == "failed" and "nonexistent" in bad["log_tail"]
    (done,) = bad["partial"]["cases"]
    assert done["case"] == "2d_homog_lossless_p0_index" and done["ok"]


FAKE_KWAVE = """#!{python}
# Stands in for kspaceFirstOrder-CUDA: a reference case's input gets k-Wave's own output back,
# any other input an output file with k-Wave's timing attributes and one pressure dataset.
import shutil, sys
from pathlib import Path
import h5py, numpy as np
args = sys.argv[1:]
src, out = Path(args[args.index("-i") + 1]), Path(args[args.index("-o") + 1])
if (src.parent / "output.h5").exists():
    shutil.copyfile(src.parent / "output.h5", out)
else:
    with h5py.File(out, "w") as f:
        f["p"] = np.ones((1, 8, 8), np.float32)
        f.attrs["simulation_phase_execution_time"] = np.bytes_("0.40s")
        f.attrs["pre-processing_phase_execution_time"] = np.bytes_("0.10s")
print("| Peak device memory in use:                              321MB |")
"""


def test_kwave_parts_with_a_stand_in_binary(tmp_path):
    """The k-Wave CUDA plumbing: the reference cases through the binary and compared by the
    reference rule (k-Wave's own outputs pass), and a bench input's phase times and memory."""
    fake = tmp_path / "kspaceFirstOrder-CUDA"
    fake.write_text(FAKE_KWAVE.format(python=sys.executable))
    fake.chmod(0o755)
    out = tmp_path / "results.json"
    cmd = [sys.executable, str(SCRIPT), str(out), "--dry-run", "--inline", "--parts",
           "kwave_reference", "--kwave-binary", str(fake)]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["meta"]["kwave_cuda"] == str(fake)
    (case,) = data["parts"]["kwave_reference"]["cases"]
    assert case["status"] == "ok" and case["within_sonotile_rule"]
    gc = load_gpu_check()
    src = tmp_path / "in.h5"
    src.write_bytes(b"")
    r = gc.run_kwave_cuda(str(fake), src, tmp_path, 60, steps=8)
    assert r["status"] == "ok" and r["ms_per_step"] == pytest.approx(50.0)
    assert r["preprocessing_s"] == pytest.approx(0.1)
    assert r["reported_device_bytes"] == 321 * 2**20
    assert not (tmp_path / "kwave_cuda_out.h5").exists()  # its output is not kept


def test_bisection_steps():
    """Below a first miss; 10 % up from a fit until a miss; halves between; stops at the step."""
    gc = load_gpu_check()
    assert gc._next_n(None, 640, 32, 2048) == 512
    assert gc._next_n(512, None, 32, 2048) == 576
    assert gc._next_n(2048, None, 32, 2048) is None
    assert gc._next_n(512, 640, 32, 2048) == 576
    assert gc._next_n(576, 608, 32, 2048) is None


STAND_IN_SOLVER = """#!{python}
# Stands in for both programs of the cpu_scaling part: an output file whose loop timer is
# 0.4 s / N for k-Wave (ideal scaling) and 0.2 s / sqrt(N) for sonotile at N threads.
import sys
import h5py, numpy as np
if sys.argv[1:] == ["--version"]:
    sys.exit(print("│ Build number:     stand-in │"))
tool, args = sys.argv[1], sys.argv[2:]
t = int(args[args.index("-t") + 1])
loop = 0.4 / t if tool == "kwave" else 0.2 / t**0.5
with h5py.File(args[args.index("-o") + 1], "w") as f:
    f.attrs["simulation_phase_execution_time"] = np.bytes_(f"{{loop:8.2f}}s")
    f.attrs["pre-processing_phase_execution_time"] = np.bytes_("    0.30s")
"""


def test_cpu_scaling_part_with_stand_ins(tmp_path, monkeypatch):
    """The cpu_scaling part's plumbing, both programs replaced by a stand-in: every case at
    every thread count for both, alternating which goes first; loop time per step, speed-up
    and parallel efficiency from each program's own timer; the k-Wave / sonotile ratio."""
    from sonotile.bench import threads

    fake = tmp_path / "solver"
    fake.write_text(STAND_IN_SOLVER.format(python=sys.executable))
    fake.chmod(0o755)
    calls = []

    def command(tool, kwave, path, out, n):
        calls.append((tool, n))
        return [str(fake), tool, "-i", path, "-o", out, "-t", str(n)]

    monkeypatch.setattr(threads, "command", command)
    gc = load_gpu_check()
    for key, value in gc.worker_env(dry=True).items():  # main() --inline sets these
        monkeypatch.setenv(key, value)
    out = tmp_path / "results.json"
    argv = [str(out), "--dry-run", "--inline", "--parts", "cpu_scaling",
            "--kwave-omp-binary", str(fake)]  # fmt: skip
    assert gc.main(argv) == 0
    part = json.loads(out.read_text())["parts"]["cpu_scaling"]
    assert part["status"] == "ok" and part["complete"] and part["kwave_omp"] == str(fake)
    cases = ["ivp_lossless", "point_additive_absorbing_nonlinear"]
    warm = [("sonotile", 1), ("sonotile", 2)] * 2  # untimed: fill the caches
    timed = [(r["tool"], r["threads"]) for r in part["rows"]]
    assert calls == warm + timed and len(timed) == 8
    assert [r["case"] for r in part["rows"]] == [c for c in cases for _ in "ab"] * 2
    assert [r["tool"] for r in part["rows"][::2]] == ["kwave", "sonotile"] * 2  # alternating
    eff = part["efficiency"]["point_additive_absorbing_nonlinear"]
    assert eff["kwave"]["2"]["loop_ms_per_step"] == pytest.approx(50.0)  # 0.2 s / 4 steps
    assert eff["kwave"]["2"]["loop_efficiency"] == pytest.approx(1.0)
    assert eff["sonotile"]["2"]["loop_efficiency"] == pytest.approx(0.20 / (2 * 0.14))  # 2 decimals
    assert eff["kwave_over_sonotile"]["1"]["loop_ms_per_step"] == pytest.approx(2.0)
    assert all(r["peak_rss_bytes"] > 0 and r["wall_s"] > 0 for r in part["rows"])
    assert all(r["preprocessing_s"] == pytest.approx(0.3) for r in part["rows"])
    assert part["kwave_omp_version"] == ["Build number:     stand-in"]


def test_cpu_scaling_stops_at_its_deadline(tmp_path):
    """Past its deadline the sweep starts no process and says it is incomplete."""
    from sonotile.bench import threads

    res = threads.sweep(None, ["ivp_lossless"], 12, 2, [1, 2], str(tmp_path), {}, deadline=0.0)
    assert res["rows"] == [] and res["complete"] is False and res["tools"] == ["sonotile"]
