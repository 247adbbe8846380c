"""The FFT backends' registry (sonotile.fft.backend): ``auto`` picks by priority per platform
among the registered backends that take the run and work here; a named one where it takes the
run; XLA's FFT otherwise; deterministic mode never falls back."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from sonotile.base import config
from sonotile.fft import backend as fft_backend
from sonotile.fft import xla


@pytest.fixture
def gpu_sibling(monkeypatch):
    """A backend for float32 runs on "gpu" (XLA's object under another name), registered for
    the test; ``state["up"]`` says whether it is available."""
    state = {"up": True}
    obj = dataclasses.replace(xla.BACKEND, name="gpufft")
    sib = fft_backend.Sibling(
        name="gpufft", title="GPUFFT", objects={"gpufft": obj},
        takes=lambda platform, dtype: platform == "gpu" and dtype == "float32",
        priority={"gpu": 20}, recorded=lambda settings: "gpufft",
        available=lambda: state["up"], reason=lambda: "no libgpufft",
    )  # fmt: skip
    monkeypatch.setitem(fft_backend.SIBLINGS, "gpufft", sib)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    yield state
    fft_backend.reset()


def test_auto_takes_the_highest_priority_sibling_of_the_platform(gpu_sibling):
    assert fft_backend.resolve("auto", "float32") == "gpufft"
    assert fft_backend.get("gpufft").name == "gpufft"
    assert fft_backend.chooses("gpufft", "float32")
    assert fft_backend.resolve("auto", "float64") == "xla"  # it does not take float64
    assert fft_backend.resolve("xla", "float32") == "xla"
    assert fft_backend.resolve("fftw", "float32") == "xla"  # FFTW: CPUs only


def test_an_unavailable_sibling_falls_back_once_or_refuses(gpu_sibling, capsys):
    gpu_sibling["up"] = False
    assert fft_backend.resolve("auto", "float32") == "xla"
    assert fft_backend.resolve("gpufft", "float32") == "xla"
    assert capsys.readouterr().err.count("GPUFFT unavailable, using XLA's FFT") == 1
    saved = config.current()
    config.configure(deterministic=True)
    try:
        with pytest.raises(RuntimeError, match="needs the GPUFFT extension.*no libgpufft"):
            fft_backend.resolve("auto", "float32")
    finally:
        config.configure(saved)


def test_an_unknown_name_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="fft must be auto, xla, fftw, not 'mkl'"):
        fft_backend.resolve("mkl", "float32")
    with pytest.raises(ValueError, match="unknown FFT backend 'mkl'"):
        fft_backend.get("mkl")


def test_unfused_names_the_variant_without_fused_updates():
    assert fft_backend.unfused("fftw") == "fftw-separate-updates"
    assert fft_backend.unfused("fftw-separate-updates") == "fftw-separate-updates"
    assert fft_backend.unfused("xla") == "xla"
