"""sonotile's cuFFT custom calls compile (nvcc, sm_90, JAX's FFI headers) where nvcc and cuFFT's
headers are found (NVCC, else nvcc on PATH): no GPU is needed to build. Skipped elsewhere."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NVCC = os.environ.get("NVCC") or shutil.which("nvcc")


@pytest.mark.skipif(NVCC is None, reason="no nvcc (set NVCC)")
def test_cufft_ffi_builds(tmp_path):
    out = tmp_path / "libsonotile_cufft.so"
    env = {**os.environ, "NVCC": NVCC, "PYTHON": sys.executable}  # JAX's FFI headers
    p = subprocess.run(["bash", str(ROOT / "benchmarks/gpu/build_cufft.sh"), str(out)],
                       capture_output=True, text=True, timeout=240, env=env)  # fmt: skip
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    symbols = subprocess.run(["nm", "-D", str(out)], capture_output=True, text=True).stdout
    for name in ("sonotile_cufft_forward", "sonotile_cufft_inverse", "sonotile_cufft_plans"):
        assert f" T {name}" in symbols
