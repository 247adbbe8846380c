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
    with pytest.raises(ValueError, match="fft must be auto, xla, fftw, cufft, not 'mkl'"):
        fft_backend.resolve("mkl", "float32")
    with pytest.raises(ValueError, match="unknown FFT backend 'mkl'"):
        fft_backend.get("mkl")


def test_unfused_names_the_variant_without_fused_updates():
    assert fft_backend.unfused("fftw") == "fftw-separate-updates"
    assert fft_backend.unfused("fftw-separate-updates") == "fftw-separate-updates"
    assert fft_backend.unfused("xla") == "xla"


@pytest.fixture
def cufft_lib(monkeypatch):
    """Sets ``Settings.cufft_lib`` for the test (``cufft_lib(path)``); cuFFT's load forgotten."""
    from sonotile.fft import cufft

    monkeypatch.setattr(cufft, "_loaded", {})
    saved = config.current()
    yield lambda path: config.configure(saved, cufft_lib=path)
    config.configure(saved)
    fft_backend.reset()


def test_cufft_is_never_autos_choice_on_a_cpu(cufft_lib, capsys):
    """On a CPU ``auto`` passes cuFFT over (it takes GPU runs only), with or without a library
    named; named, it gives XLA's FFT as FFTW does on a GPU."""
    for path in ("", "/dev/null"):
        cufft_lib(path)
        assert fft_backend.resolve("auto", "float32") in ("fftw", "fftw-separate-updates", "xla")
        assert fft_backend.resolve("auto", "float64") == "xla"
        assert fft_backend.resolve("cufft", "float32") == "xla"
    assert capsys.readouterr().err == ""


def test_cufft_on_a_gpu_without_its_library(cufft_lib, monkeypatch, capsys):
    """On a GPU: no library named, ``auto`` gives XLA's FFT without a word; named by
    ``SONOTILE_FFT`` it falls back with one line saying why; a library named but missing makes
    ``auto`` try it (one line) and deterministic mode refuse."""
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    cufft_lib("")
    assert fft_backend.resolve("auto", "float32") == "xla"
    assert capsys.readouterr().err == ""
    assert fft_backend.resolve("cufft", "float64") == "xla"
    err = capsys.readouterr().err
    assert err.count("cuFFT calls unavailable, using XLA's FFT") == 1
    assert "SONOTILE_CUFFT_LIB is not set" in err
    fft_backend.reset()
    cufft_lib("/nonexistent/libsonotile_cufft.so")
    assert fft_backend.resolve("auto", "float32") == "xla"
    assert "libsonotile_cufft.so: no such file" in capsys.readouterr().err
    config.configure(deterministic=True)
    with pytest.raises(RuntimeError, match="needs the cuFFT calls extension.*no such file"):
        fft_backend.resolve("auto", "float32")


def test_fft_settings_name_every_registered_backend():
    assert config.FFT_BACKENDS == ("auto", *fft_backend.SIBLINGS)
