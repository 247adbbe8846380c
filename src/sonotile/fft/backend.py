"""The FFT backend interface: what the spectral operators and the decompositions ask of an FFT.

A backend is a sibling module of this package holding one object that satisfies
:class:`Backend` (``xla.BACKEND``: XLA's FFT, DUCC on CPUs and cuFFT on GPUs;
``fftw.BACKEND``: FFTW as XLA custom calls on CPUs). The choice is made once, when operators
are built (:func:`resolve`, from :attr:`sonotile.base.config.Settings.fft`), and recorded by
name in the operators' static part; :func:`get` gives the object back from the name. The
operators (:mod:`sonotile.spectral.operators`) and the decompositions (:mod:`sonotile.parallel`)
call these methods and never a backend's own module.

Everything is on real fields and their half spectra (last axis halved, numpy's ``rfftn``
layout). An operator is ``op`` (real, on the half spectrum, or None) times at most one complex
vector ``vec`` along one grid axis (a derivative's ``i k exp(+-i k d/2)``; on the last axis its
half length), applied between a forward and an inverse transform. Where a backend cannot take
an array (FFTW: float64, or rank above 3) :meth:`Backend.native` is False and the operators use
:func:`portable` for it.

The protocols live in :mod:`sonotile.fft.interface` (re-exported here). A new backend: a
module here with a class satisfying :class:`Backend` (and, optionally, :class:`SlabKernels`),
importing only the interface; its object registered in :func:`get` and chosen in
:func:`resolve`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sonotile.fft import fftw, xla
from sonotile.fft.interface import AxisVec, Backend, Epilogue, SlabKernels

if TYPE_CHECKING:
    import jax

__all__ = ["AxisVec", "Backend", "Epilogue", "SlabKernels", "describe", "for_array", "get",
           "portable", "real_scale", "resolve"]  # fmt: skip

#: ``F * k`` for a complex spectrum and a real operator, part by part (see
#: :func:`sonotile.fft.xla.real_scale`): for operators applied outside a backend call
real_scale = xla.real_scale


def get(name: str) -> Any:
    """The backend object of ``name`` (as :func:`resolve` returns it and operators record it):
    ``xla``, ``fftw``, or ``fftw-separate-updates`` (FFTW, derivative outputs without fused
    updates: ``Settings.fftw_updates`` off)."""
    if name == "xla":
        return xla.BACKEND
    if name in ("fftw", "fftw-separate-updates"):
        return fftw.BACKEND if name == "fftw" else fftw.SEPARATE_UPDATES
    raise ValueError(f"unknown FFT backend {name!r} (xla, fftw)")


def portable() -> Backend:
    """The backend every array and device can use (XLA's FFT)."""
    return get("xla")


def for_array(name: str, like: jax.Array) -> Backend:
    """Backend ``name`` where it takes fields like ``like``, else :func:`portable`."""
    be = get(name)
    return be if be.native(like) else portable()


def resolve(fft: str | None, dtype: str, settings: Any = None) -> str:
    """The name of the backend to use, chosen once per set of operators: ``fftw`` on the CPU
    for float32 when the extension works, else ``xla`` (``fft`` ``"auto"`` / None:
    ``settings.fft`` decides; ``settings`` default :func:`sonotile.base.config.current`).
    FFTW's name carries ``Settings.fftw_updates`` (``fftw-separate-updates`` when off). See
    :func:`sonotile.fft.fftw.resolve` for the fallback and deterministic-mode rules."""
    from sonotile.base import config

    settings = settings or config.current()
    name = fftw.resolve(fft if fft not in (None, "auto") else settings.fft, dtype)
    if name == "fftw" and not settings.fftw_updates:
        return "fftw-separate-updates"
    return name


def describe() -> dict[str, str]:
    """What this process's FFTs ran on (:func:`sonotile.fft.fftw.describe`: the backends
    resolved so far and each one's details)."""
    return fftw.describe()
