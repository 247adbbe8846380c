"""Source signals and steady-state analysis, as k-Wave's ``toneBurst``, ``createCWSignals`` and
``extractAmpPhase`` (numpy only).

Time series are sampled at ``fs`` [Hz]; a signal array holds one signal per row, time last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.problem import ProblemError


def _positive(name: str, v: float) -> float:
    v = float(v)
    if not (np.isfinite(v) and v > 0):
        raise ProblemError(f"{name} = {v}: must be finite and > 0")
    return v


def _tukey(n: int, r: float) -> np.ndarray:
    """Tukey (tapered cosine) window of ``n`` points with taper ratio ``r``."""
    if n < 2 or r <= 0:
        return np.ones(n)
    x = np.linspace(0.0, 1.0, n)
    w = np.ones(n)
    lo, hi = x < r / 2, x >= 1 - r / 2
    w[lo] = 0.5 * (1 + np.cos(2 * np.pi / r * (x[lo] - r / 2)))
    w[hi] = 0.5 * (1 + np.cos(2 * np.pi / r * (x[hi] - 1 + r / 2)))
    return w


def _ramp(n: int, up: bool) -> np.ndarray:
    """Cosine ramp of ``n`` points from 0 to 1 (``up``) or 1 to 0."""
    a = np.linspace(0.0, np.pi, max(n, 2))[:n]
    return (1 - np.cos(a)) / 2 if up else (1 + np.cos(a)) / 2


def tone_burst(
    sample_freq: float,
    signal_freq: float,
    num_cycles: float,
    envelope: str | Iterable[float] = "Gaussian",
    signal_length: int = 0,
    signal_offset: int | Sequence[int] | np.ndarray = 0,
) -> np.ndarray:
    """A windowed tone burst (k-Wave's ``toneBurst``).

    Args:
        sample_freq: sampling frequency [Hz] (``1 / dt``).
        signal_freq: tone frequency [Hz].
        num_cycles: number of cycles of the tone.
        envelope: ``"Gaussian"`` (default; a Gaussian over +-3 standard deviations, ends forced
            to zero by a 5 % Tukey window), ``"Rectangular"``, or ``(n_up, n_down)``: a
            continuous wave with cosine ramps of ``n_up`` and ``n_down`` cycles.
        signal_length: total length [samples]; zero-padded at the end when longer than the burst.
        signal_offset: samples of zeros before the burst; an integer or a sequence of integers
            (one output row per offset).

    Returns:
        ``(n_offsets, n_samples)`` signal (dimensionless, peak at most 1); one row for a scalar
        offset, as k-wave-python returns it.
    """
    fs = _positive("sample_freq", sample_freq)
    f0 = _positive("signal_freq", signal_freq)
    num_cycles = _positive("num_cycles", num_cycles)
    length = num_cycles / f0
    n = int(np.floor(length * fs + 1e-9)) + 1
    t = np.arange(n) / fs
    tone = np.sin(2 * np.pi * f0 * t)
    if isinstance(envelope, str):
        if envelope == "Gaussian":
            x = np.linspace(-3.0, 3.0, n)
            tone = tone * np.exp(-(x**2) / 2) * _tukey(n, 0.05)
        elif envelope != "Rectangular":
            raise ProblemError(
                f"envelope = {envelope!r}: expected 'Gaussian', 'Rectangular' or (n_up, n_down)"
            )
    else:
        up, down = (float(c) for c in envelope)
        if up + down > num_cycles:
            raise ProblemError(f"envelope = {envelope}: ramps longer than num_cycles={num_cycles}")
        nu, nd = round(up * fs / f0), round(down * fs / f0)
        tone[:nu] *= _ramp(nu, True)
        if nd:
            tone[-nd:] *= _ramp(nd, False)
    offsets = np.atleast_1d(np.asarray(signal_offset))
    if not np.issubdtype(offsets.dtype, np.integer) or np.any(offsets < 0):
        raise ProblemError(f"signal_offset = {signal_offset}: expected integers >= 0 [samples]")
    total = max(int(signal_length), int(offsets.max()) + n)
    out = np.zeros((offsets.size, total))
    for row, o in zip(out, offsets):
        row[o : o + n] = tone
    return out


def create_cw_signals(
    t_array: np.ndarray, freq: float, amp: ArrayLike, phase: ArrayLike, ramp_length: float = 4
) -> np.ndarray:
    """Continuous-wave signals ``amp sin(2 pi freq t + phase)`` with a cosine start-up ramp
    (k-Wave's ``createCWSignals``).

    Args:
        t_array: ``(Nt,)`` sample times [s], uniformly spaced.
        freq: frequency [Hz].
        amp: amplitudes, shape ``(N,)`` or ``(N1, N2)`` (units of the output).
        phase: phases [rad], a scalar or the shape of ``amp``.
        ramp_length: length of the start-up ramp [periods] (0: none).

    Returns:
        ``(N, Nt)`` or ``(N1, N2, Nt)`` signals.
    """
    t = np.asarray(t_array, dtype=np.float64).reshape(-1)
    f = _positive("freq", freq)
    a = np.asarray(amp, dtype=np.float64)
    ph = np.broadcast_to(np.asarray(phase, dtype=np.float64), a.shape)
    sig = a[..., None] * np.sin(2 * np.pi * f * t + ph[..., None])
    if ramp_length > 0 and t.size > 1:
        n = min(round(ramp_length / f / (t[1] - t[0])), t.size)
        sig[..., :n] *= _ramp(n, True)
    return sig.reshape(-1, t.size) if a.ndim <= 1 else sig


def extract_amp_phase(
    data: np.ndarray,
    fs: float,
    f0: float,
    dim: int | Literal["auto"] = "auto",
    fft_padding: int = 3,
    window: str = "Hanning",
) -> tuple[np.ndarray, np.ndarray, float]:
    """Amplitude and phase at ``f0`` of time series (k-Wave's ``extractAmpPhase``).

    The series are windowed (Hann by default, ``"Rectangular"`` for none), zero-padded to
    ``fft_padding`` times their length and transformed; the bin closest to ``f0`` is read and
    its amplitude corrected for the window's coherent gain.

    Args:
        data: time series, time along axis ``dim``.
        fs: sampling frequency [Hz].
        f0: frequency to extract [Hz].
        dim: time axis (0-based, negative allowed) or ``"auto"``: the last non-singleton axis.
        fft_padding: zero-padding factor.
        window: ``"Hanning"`` or ``"Rectangular"``.

    Returns:
        ``(amp, phase, f)``: amplitude (units of ``data``) and phase [rad] of the FFT bin, both
        with the time axis removed, and the frequency of that bin [Hz].
    """
    x = np.asarray(data, dtype=np.float64)
    fs, f0 = _positive("fs", fs), _positive("f0", f0)
    if dim == "auto":
        big = [i for i, n in enumerate(x.shape) if n > 1]
        dim = big[-1] if big else x.ndim - 1
    ax = int(dim) % x.ndim
    n = x.shape[ax]
    if window == "Hanning":
        w = 0.5 * (1 - np.cos(2 * np.pi * np.arange(n) / (n - 1))) if n > 1 else np.ones(1)
    elif window == "Rectangular":
        w = np.ones(n)
    else:
        raise ProblemError(f"window = {window!r}: expected 'Hanning' or 'Rectangular'")
    shape = [1] * x.ndim
    shape[ax] = n
    nfft = int(fft_padding) * n
    spec = np.fft.rfft(x * w.reshape(shape), n=nfft, axis=ax)
    freqs = np.fft.rfftfreq(nfft, 1 / fs)
    k = int(np.argmin(np.abs(freqs - f0)))
    b = np.take(spec, k, axis=ax)
    scale = (1.0 if k == 0 or (nfft % 2 == 0 and k == nfft // 2) else 2.0) / (n * w.mean())
    return np.abs(b) * scale, np.angle(b), float(freqs[k])


__all__ = ["tone_burst", "create_cw_signals", "extract_amp_phase"]
