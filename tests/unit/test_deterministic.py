"""Deterministic mode (``SONOTILE_DETERMINISTIC=1``, ``sonotile-kwave --deterministic``): the
same input gives bit-identical outputs run after run, each from a fresh cache (no wisdom, no
compiled programs); the FFT backend is fixed (no silent fall-back to XLA's FFT); and
:func:`sonotile.fft.backend.describe` reports what ran."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
from kwave_inputs import write_input
from require import require_fftw

from sonotile.base import cachedir, config
from sonotile.fft import backend as fft_backend
from sonotile.fft import fftw, fftw_library

RUN = "import sys; from sonotile.kwave.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.fixture
def fftw_so() -> str:
    if not fftw.available():
        require_fftw(False, f"FFTW extension unavailable: {fftw.reason()}")
    so = fftw.build()
    assert so is not None
    return so


def fresh_cache(tmp_path, name: str, so: str) -> str:
    """A new cache folder holding only the extension's build (no wisdom, no programs)."""
    home = tmp_path / name
    (home / "sonotile").mkdir(parents=True, mode=0o700)
    for f in (so, so + cachedir.DIGEST):
        shutil.copy2(f, home / "sonotile" / os.path.basename(f))
    return str(home)


def run(inp: str, out: str, home: str, *flags: str, env: dict | None = None) -> None:
    env = dict(env or os.environ, XDG_CACHE_HOME=home, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    cmd = [sys.executable, "-c", RUN, "-i", inp, "-o", out, "-t", "2", "--p_raw", "--p_final"]
    r = subprocess.run(cmd + list(flags), env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


def test_fresh_runs_are_bit_identical(tmp_path, fftw_so):
    """Two runs of one heterogeneous 3-D input, each with an empty cache (fresh planning):
    every output sample equal bit for bit; no wisdom was measured or stored."""
    inp = write_input(tmp_path / "in.h5", shape=(24, 20, 18), nt=40, p_source=True)
    outs = []
    for k, how in enumerate(("flag", "env")):
        home = fresh_cache(tmp_path, f"home{k}", fftw_so)
        out = str(tmp_path / f"out{k}.h5")
        if how == "flag":
            run(inp, out, home, "--deterministic")
        else:
            run(inp, out, home, env=dict(os.environ, SONOTILE_DETERMINISTIC="1"))
        assert not [n for n in os.listdir(os.path.join(home, "sonotile")) if "wisdom" in n]
        outs.append(out)
    with h5py.File(outs[0]) as a, h5py.File(outs[1]) as b:
        for name in ("p", "p_final"):
            x, y = np.asarray(a[name]), np.asarray(b[name])
            assert x.shape == y.shape and np.abs(x).max() > 0, name
            assert x.tobytes() == y.tobytes(), name


def test_no_silent_fallback_to_xla(monkeypatch, tmp_path):
    """FFTW unavailable: deterministic mode refuses to run on XLA's FFT (a third bit pattern)
    and says why; naming XLA's FFT explicitly is a fixed choice and runs."""
    saved_state, saved = dict(fftw_library._state), config.current()
    fftw_library.reset()
    fft_backend.reset()
    monkeypatch.setattr(fftw_library, "find_library", lambda: None)
    config.configure(deterministic=True, cache_dir=str(tmp_path))
    try:
        with pytest.raises(RuntimeError, match="deterministic mode needs the FFTW extension.*"
                                               "libfftw3f"):  # fmt: skip
            fft_backend.resolve("auto", "float32")
        with pytest.raises(RuntimeError, match="deterministic mode"):
            fft_backend.resolve("fftw", "float32")
        assert fft_backend.resolve("xla", "float32") == "xla"
        assert fft_backend.resolve("auto", "float64") == "xla"  # FFTW binds float32 only
        info = fft_backend.describe()
        assert info["fft_backend"] == "xla" and info["deterministic"] == "1"
        assert "xla_fft" in info and "fftw_plan" not in info
    finally:
        config.configure(saved)
        fftw_library._state.clear()
        fftw_library._state.update(saved_state)


DESCRIBE = """
import json
from sonotile.fft import backend as fft_backend
from sonotile.fft import fftw, fftw_library
from sonotile.spectral.operators import FourierOps
print(json.dumps(fft_backend.describe()))
FourierOps.build((12, 10, 8), (1e-4,) * 3, 1500.0, 2e-8)
print(json.dumps(fft_backend.describe()))
"""


@pytest.mark.parametrize("deterministic", ["1", "0"])
def test_describe_reports_what_ran(tmp_path, fftw_so, deterministic):
    import json

    home = fresh_cache(tmp_path, "home", fftw_so)
    env = dict(os.environ, XDG_CACHE_HOME=home, SONOTILE_DETERMINISTIC=deterministic,
               SONOTILE_FFTW_PLAN="patient", PYTHONPATH=os.pathsep.join(sys.path))  # fmt: skip
    r = subprocess.run([sys.executable, "-c", DESCRIBE], env=env, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    before, after = (json.loads(line) for line in r.stdout.splitlines())
    assert before == {"fft_backend": "none", "deterministic": deterministic}
    assert after["fft_backend"] == "fftw"
    assert after["fftw_version"].startswith("fftw-3.")
    assert after["fftw_extension"] == os.path.basename(fftw_so)
    assert after["fftw_extension_sha256"] == cachedir.digest(fftw_so)
    if deterministic == "1":
        assert after["fftw_plan"] == "estimate" and after["fftw_wisdom"] == "none"
    else:
        assert after["fftw_plan"] == "patient" and after["fftw_wisdom"].startswith(home)


def test_gpu_kernels_are_deterministic_too(monkeypatch):
    """XLA's GPU scatter-adds (source injection, sensors) sum in a varying order unless told
    not to: deterministic mode asks XLA for its deterministic kernels."""
    from sonotile.base import runtime

    saved = config.current()
    try:
        for on in (True, False):
            monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/nowhere")
            config.configure(deterministic=on, xla_scheduler_off=False)
            runtime.set_xla_flags()
            flags = os.environ["XLA_FLAGS"]
            assert ("--xla_gpu_deterministic_ops=true" in flags) == on
            assert flags.startswith("--xla_dump_to=/nowhere")
    finally:
        config.configure(saved)
