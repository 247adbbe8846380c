"""Checks before the first step: stability, resolution of source spectra, memory estimate.

These do not change the problem; they return human-readable warnings (or a byte count) that the
front ends print before any work starts.
"""

from __future__ import annotations

import math

import numpy as np

from sonotile.model.absorption import absorption_factors
from sonotile.model.lazy import is_lazy
from sonotile.model.problem import Problem


def cfl_number(problem: Problem) -> float:
    """``max(c0) dt / min(spacing)``."""
    g = problem.grid
    return float(np.max(problem.medium.c0)) * g.dt / min(g.spacing)


def stability_warnings(problem: Problem) -> list[str]:
    """k-Wave's stability criterion for the k-space scheme (``checkStability``).

    Lossless: with ``c_ref >= max(c0)`` the scheme is unconditionally stable; otherwise
    ``dt <= 2 / (c_ref k_max) asin(c_ref / c_max)``. With power-law absorption the
    absorption term adds ``dt <= 2 / (c_ref^2 k_max^2 |tau|)``-type limits; CFL above 0.5 is
    flagged as inaccurate.
    """
    g, m = problem.grid, problem.medium
    out: list[str] = []
    if is_lazy(m.c0) or is_lazy(m.alpha_coeff):
        return out  # fields read per process (distributed run): no whole-field extremes here
    c_max = float(np.max(m.c0))
    k_max = math.pi * math.sqrt(sum(1 / d**2 for d in g.spacing))
    limit = math.inf
    if m.c_ref < c_max:
        limit = 2 / (m.c_ref * k_max) * math.asin(m.c_ref / c_max)
    if m.absorption == "stokes":
        tau, _ = absorption_factors(m.c0, m.alpha_coeff, m.alpha_power)
        tau_max = float(np.max(np.abs(tau)))
        if tau_max > 0:
            limit = min(limit, 2 / (c_max**2 * k_max**2 * tau_max) * 1.0)
    if g.dt > limit:
        out.append(
            f"time step dt = {g.dt:.4g} s exceeds the stability limit {limit:.4g} s of the "
            f"k-space scheme (c_ref = {m.c_ref:g} m/s, max c0 = {c_max:g} m/s); the run may "
            "blow up: reduce dt or raise c_ref"
        )
    cfl = cfl_number(problem)
    if cfl > 0.5:
        out.append(
            f"CFL number {cfl:.3f} > 0.5: the time integration is inaccurate in heterogeneous "
            "media (k-Wave's default is 0.3)"
        )
    return out


def max_supported_frequency(problem: Problem) -> float:
    """Highest frequency the grid resolves at 2 points per wavelength [Hz]."""
    return float(np.min(problem.medium.c0)) / (2 * max(problem.grid.spacing))


def resolution_warnings(problem: Problem, energy_fraction: float = 0.01) -> list[str]:
    """Warn when a source signal has more than ``energy_fraction`` of its spectral energy above
    the grid's maximum supported frequency (fewer than 2 points per wavelength)."""
    if is_lazy(problem.medium.c0):
        return []  # fields read per process (distributed run): no whole-field minimum here
    f_max = max_supported_frequency(problem)
    dt = problem.grid.dt
    s = problem.sources
    out = []
    signals = [("source.p", s.p)] + [(f"source.u{'xyz'[i]}", u) for i, u in enumerate(s.u)]
    for name, src in signals:
        if src is None or src.length < 4:
            continue
        sig = np.asarray(src.signal)
        sig = sig if sig.ndim == 1 else sig[:, : min(sig.shape[1], 64)]
        spec = np.abs(np.fft.rfft(sig - sig.mean(axis=0), axis=0)) ** 2
        f = np.fft.rfftfreq(sig.shape[0], dt)
        total = spec.sum()
        if total <= 0:
            continue
        power = spec if spec.ndim == 1 else spec.sum(axis=1)
        above = power[f > f_max].sum() / total
        if above > energy_fraction:
            f_peak = max(float(f[np.argmax(power)]), 1e-30)
            ppw = float(np.min(problem.medium.c0)) / (f_peak * max(problem.grid.spacing))
            out.append(
                f"{name}: {100 * above:.1f} % of the signal's energy lies above "
                f"{f_max / 1e6:.3g} MHz, the highest frequency the grid supports (2 points per "
                f"wavelength at min c0; the spectral peak has {ppw:.2g}): refine the grid or "
                "filter the signal"
            )
    return out


def memory_estimate(problem: Problem) -> int:
    """Device memory of a single-device run [bytes], from the compiled program's measured
    accounting (docs/performance.md): state, step temporaries, medium fields, half-spectrum
    operators and whole-field aggregates. 3-D float32: 38 B/point homogeneous lossless, 70
    B/point heterogeneous absorbing nonlinear. A rough figure for decompositions (halos,
    transposes and stored dt/rho0_sg come on top)."""
    g, m = problem.grid, problem.medium
    item = np.dtype(problem.dtype).itemsize
    d = g.ndim
    absorbing = m.absorption != "lossless"

    def field(v) -> bool:
        return isinstance(v, np.ndarray) and np.ndim(v) > 0

    state = 1 + 2 * d
    temps = 2 + (3 if absorbing else 0)  # measured peaks of the compiled step
    medium = sum(field(v) for v in (m.c0, m.rho0))  # c0^2, rho0
    medium += m.nonlinear and (field(m.bona) or field(m.rho0))  # B/A / (2 rho0)
    medium += absorbing and (field(m.c0) or field(m.alpha_coeff))  # tau
    # dt/rho0_sg: assumed derived from rho0 in the step (staggered densities that are k-Wave's
    # interpolation of rho0, the usual case); other given ones add d fields
    operators = 0.5 * (1 + (2 if absorbing else 0))  # kappa (and two nablas), half spectra
    rec = problem.sensor.record
    whole = sum(q.endswith("_all") for q in rec) * (1 if any(q.startswith("p") for q in rec) else d)
    return int(g.size * item * (state + temps + medium + operators + whole))
