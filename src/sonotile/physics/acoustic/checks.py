"""Checks before the first step: stability, resolution of source spectra, memory estimate.

These do not change the problem; they return human-readable warnings (or a byte count) that the
front ends print before any work starts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sonotile.fft import sizes
from sonotile.model.grid import Grid
from sonotile.model.lazy import is_lazy
from sonotile.model.problem import Problem
from sonotile.physics.acoustic import constants
from sonotile.physics.acoustic.absorption import absorption_factors
from sonotile.physics.base import NONFINITE_HINT


def cfl_number(problem: Problem) -> float:
    """``max(c0) dt / min(spacing)``."""
    g = problem.grid
    return float(np.max(problem.medium.c0)) * g.dt / min(g.spacing)


def instability_hint(problem: Problem) -> str:
    """What NaN or Inf in a run of ``problem`` most likely means, with its CFL number and
    :func:`stability_limit` (the generic :data:`~sonotile.physics.base.NONFINITE_HINT` when
    the sound speed is read per process)."""
    if is_lazy(problem.medium.c0):
        return NONFINITE_HINT
    cfl = cfl_number(problem)
    limit = stability_limit(problem)
    stable = "" if math.isinf(limit) else f", stable up to {limit:.3g} s"
    return (
        f"the run became unstable or overflowed (CFL number {cfl:.3g}, dt = "
        f"{problem.grid.dt:.3g} s{stable}): check dt and the medium, and the source amplitudes "
        "(float32 overflows above 3.4e38)"
    )


def max_wavenumber(grid: Grid) -> float:
    """Largest wavenumber magnitude on the grid, ``max |k|`` [rad/m] (k-Wave's ``max(kgrid.k)``)."""
    return math.sqrt(sum(float(np.max(grid.wavenumbers(a) ** 2)) for a in range(grid.ndim)))


def stability_limit(problem: Problem) -> float:
    """k-Wave's largest stable time step [s] (``checkStability``; ``inf``: no limit).

    Lossless: unconditionally stable when ``c_ref >= max(c0)``, else
    ``dt <= 2 / (c_ref k_max) asin(c_ref / max(c0))``. Absorbing (power law or Stokes), with
    ``tau = -2 a0 c0^(y-1)`` and ``eta = 2 a0 c0^y tan(pi y / 2)`` (``eta = 0`` without
    dispersion and for Stokes), ``A = max(c0) min(tau) k_max^(y-1) kappa`` and
    ``B = 1 - min(eta) k_max^(y-1)``: the fixed point of
    ``dt = (A + sqrt(A^2 + 4 B)) / (B k_max kappa max(c0))`` with
    ``kappa = sinc(c_ref k_max dt / 2)``, started from ``kappa = 1``. Sharp for homogeneous
    media (a run at 0.95 times the limit stays bounded, at 1.05 times it blows up; tested), an
    estimate for heterogeneous ones (as in k-Wave). Where the iteration has no fixed point
    (weak absorption with ``eta > 0``, e.g. ``y < 1``) no limit is given (``inf``).
    """
    g, m = problem.grid, problem.medium
    assert m.c_ref is not None  # set by Medium
    c_max = float(np.max(m.c0))
    k_max = max_wavenumber(g)
    if m.absorption == "lossless" or not np.any(np.asarray(m.alpha_coeff) != 0):
        if m.c_ref >= c_max:
            return math.inf
        return 2 / (m.c_ref * k_max) * math.asin(m.c_ref / c_max)
    assert m.alpha_power is not None and m.alpha_coeff is not None  # absorbing: both checked
    y = float(m.alpha_power)
    tau, eta = absorption_factors(m.c0, m.alpha_coeff, y)
    if m.absorption == "stokes" or not m.dispersion:
        eta = np.zeros(1)
    a0 = c_max * float(np.min(tau)) * k_max ** (y - 1)
    b = 1 - float(np.min(eta)) * k_max ** (y - 1)

    def dt_for(kappa: float) -> float:
        a = a0 * kappa
        return (a + math.sqrt(a * a + 4 * b)) / (b * k_max * kappa * c_max)

    if b <= 0:
        return math.inf  # no real estimate (strong positive eta, y < 1 or y > 2)
    dt = dt_for(1.0)
    for _ in range(200):
        x = m.c_ref * k_max * dt / 2
        if x >= math.pi:
            break  # kappa <= 0: the iteration has left the range where it has a fixed point
        previous, dt = dt, dt_for(math.sin(x) / x)
        if abs(dt - previous) <= 1e-12 * dt:
            return dt
    return math.inf


def stability_warnings(problem: Problem) -> list[str]:
    """A warning when ``dt`` exceeds :func:`stability_limit`, and when the CFL number is above
    0.5 (inaccurate in heterogeneous media)."""
    g, m = problem.grid, problem.medium
    out: list[str] = []
    if is_lazy(m.c0) or is_lazy(m.alpha_coeff):
        return out  # fields read per process (distributed run): no whole-field extremes here
    limit = stability_limit(problem)
    if g.dt > limit:
        absorbing = "" if m.absorption == "lossless" else f", {m.absorption} absorption"
        out.append(
            f"time step dt = {g.dt:.4g} s exceeds the stability limit {limit:.4g} s of the "
            f"k-space scheme (c_ref = {m.c_ref:g} m/s, max c0 = {float(np.max(m.c0)):g} m/s"
            f"{absorbing}); the run may blow up: reduce dt"
            + (" or raise c_ref" if absorbing == "" else "")
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


def size_warnings(
    shape: Sequence[int],
    names: Sequence[str] = ("Nx", "Ny", "Nz"),
    added: Sequence[int] | None = None,
    advice: str = "",
) -> list[str]:
    """One warning naming the axes of the grid ``shape`` (points per axis, PML included) whose
    size has a prime factor above 7 (k-Wave's ``HIGHEST_PRIME_FACTOR_WARNING``), with the
    nearest sizes made of 2, 3, 5 and 7 (the vector FFT kernel's lengths); none when all are
    fine.

    Args:
        shape: the solver's grid.
        names: what the user calls each axis's size.
        added: points the front end added to each axis (a PML outside the user's grid): the
            message then gives the user's size and the sizes that reach the fast totals.
        advice: appended to the message (e.g. how to let the front end choose).
    """
    added = tuple(added) if added is not None else (0,) * len(shape)
    slow, near = [], []
    for name, n, a in zip(names, shape, added):
        if sizes.largest_prime_factor(n) <= sizes.WARN_ABOVE:
            continue
        below, above = sizes.nearest_fast(n)
        fast = [m for m in (below, above) if m is not None and m > a]
        if a:
            slow.append(f"{name} = {n - a} + {a} PML points = {n} ({sizes.factor_text(n)})")
            near.append(f"{name} = " + " or ".join(str(m - a) for m in fast))
        else:
            slow.append(f"{name} = {n} ({sizes.factor_text(n)})")
            near.append(f"{name} = " + " or ".join(str(m) for m in fast))
    if not slow:
        return []
    return [
        f"grid size: {', '.join(slow)}: a prime factor above {sizes.WARN_ABOVE} makes the FFTs "
        "slow (several times the time per point of sizes made of 2, 3, 5 and 7); the nearest "
        f"such sizes: {', '.join(near)}{advice}"
    ]


def memory_estimate(problem: Problem) -> int:
    """Device memory of a single-device run [bytes], from the compiled program's measured
    accounting (docs/performance.md): state, step temporaries, medium fields, half-spectrum
    operators and whole-field aggregates. 3-D float32: 40 B/point homogeneous lossless, 64
    B/point heterogeneous absorbing nonlinear. A rough figure for decompositions (halos,
    transposes and stored dt/rho0_sg come on top). Exact in Python integers at any size."""
    g, m = problem.grid, problem.medium
    item = np.dtype(problem.dtype).itemsize
    d = g.ndim
    absorbing = m.absorption != "lossless"

    def field(v: object) -> bool:
        return isinstance(v, np.ndarray) and np.ndim(v) > 0

    state = 1 + 2 * d
    # the compiled step's peak temporaries, in half fields: XLA keeps 2-3 fields lossless and
    # 3-4 absorbing, depending on the source and the CPU (docs/performance.md): the middle
    temp_halves = 7 if absorbing else 5
    medium = sum(field(v) for v in (m.c0, m.rho0))  # c0^2, rho0
    medium += m.nonlinear and (field(m.bona) or field(m.rho0))  # B/A / (2 rho0)
    medium += absorbing and (field(m.c0) or field(m.alpha_coeff))  # tau
    # dt/rho0_sg: assumed derived from rho0 in the step (staggered densities that are k-Wave's
    # interpolation of rho0, the usual case); other given ones add d fields
    half_spectra = 1 + (2 if absorbing else 0)  # kappa (and two nablas), half a field each
    # additive sources: the filtered grid (a temporary that shares the step's others: half a
    # field), and the filtered mask of those whose points share one signal
    # (step.with_source_patterns)
    additive = [
        v for v in (problem.sources.p, *problem.sources.u) if v is not None and v.mode == "additive"
    ]
    temp_halves += len(additive)
    sources = sum(v.common_signal is not None for v in additive)
    # and the plane kernels of those on one plane x = const: real half spectra (FFTW's
    # operators make them; elsewhere the estimate is that much too high)
    half_spectra += sum(constants.on_one_plane(v) for v in additive)
    rec = problem.sensor.record
    whole = sum(q.endswith("_all") for q in rec) * (1 if any(q.startswith("p") for q in rec) else d)
    fields = state + int(medium) + whole + sources
    return g.size * item * (2 * fields + temp_halves + half_spectra) // 2


# --------------------------------------------------------------------------- probable mistakes


def _source_points(problem: Problem) -> list[tuple[str, np.ndarray]]:
    """``(name, (N, d) grid indices)`` of every source that emits something."""
    s, out = problem.sources, []
    if s.p0 is not None and not is_lazy(s.p0) and np.any(np.asarray(s.p0) != 0):
        p0 = np.abs(np.asarray(s.p0))  # the smoothing window's ringing (< 1 %) is not a source
        out.append(("source.p0", np.argwhere(p0 > 0.01 * p0.max())))
    if s.p is not None and np.any(s.p.signal != 0):
        out.append(("source.p_mask", np.asarray(s.p.index)))
    emitting_u = [u for u in s.u if u is not None and np.any(u.signal != 0)]
    if emitting_u:
        out.append(("source.u_mask", np.asarray(emitting_u[0].index)))
    if s.transducer is not None and np.any(s.transducer.signal != 0):
        out.append(("source.transducer_mask", np.asarray(s.transducer.index)))
    return out


def _sensor_boxes(problem: Problem) -> np.ndarray | None:
    """``(Nb, 2, d)`` inclusive index boxes covering the sensor points (one per point or per
    cuboid), or ``None`` without sensor points."""
    sen = problem.sensor
    if sen.cuboids is not None:
        return np.asarray(sen.cuboids)
    if sen.index is not None:
        idx = np.asarray(sen.index)
        return np.stack([idx, idx], axis=1)
    if sen.positions is not None:  # off-grid points: the nodes around each
        pos = np.asarray(sen.positions)
        return np.stack([np.floor(pos), np.ceil(pos)], axis=1).astype(np.int64)
    return None


def _in_pml(boxes: np.ndarray, problem: Problem) -> int:
    """How many of the inclusive index ``boxes (N, 2, d)`` reach into the PML."""
    assert problem.pml is not None  # set by Problem
    lo = np.asarray(problem.pml.size)
    hi = np.asarray(problem.grid.shape) - lo
    if problem.radial_symmetry is not None:
        lo = lo.copy()
        lo[1] = 0  # the axis: no PML on the inner radial edge
    return int(np.sum(np.any((boxes[:, 0] < lo) | (boxes[:, 1] >= hi), axis=1)))


def _gap(a: np.ndarray, b: np.ndarray, spacing: tuple) -> float:
    """Distance [m] between the bounding boxes of the index sets ``a (N, 2, d)`` and ``b``."""
    a_lo, a_hi = a[:, 0].min(axis=0), a[:, 1].max(axis=0)
    b_lo, b_hi = b[:, 0].min(axis=0), b[:, 1].max(axis=0)
    per_axis = np.maximum(0, np.maximum(b_lo - a_hi, a_lo - b_hi)) * np.asarray(spacing)
    return float(np.linalg.norm(per_axis))


def input_warnings(problem: Problem) -> list[str]:
    """Input that runs but is probably not what was meant: a source that emits nothing, sources
    or sensors inside the PML (the wave is absorbed there), and sensor points that no wave can
    reach within the run (farther from every source than sound travels at ``max(c0)`` in
    ``(Nt - 1) dt``; they record nothing but round-off)."""
    if is_lazy(problem.medium.c0):
        return []  # fields read per process (distributed run)
    out = []
    sources = _source_points(problem)
    if not sources:
        out.append("source: nothing is emitted (no source, or all source values are zero)")
    for name, idx in sources:
        if k := _in_pml(np.stack([idx, idx], axis=1), problem):
            out.append(f"{name}: {k} point(s) inside the PML, where the wave is absorbed")
    boxes = _sensor_boxes(problem)
    if boxes is None:
        return out
    if k := _in_pml(boxes, problem):
        what = "cuboid(s) reaching" if problem.sensor.cuboids is not None else "point(s)"
        out.append(f"sensor: {k} {what} inside the PML record absorbed (wrong) values")
    needs_points = any(not q.endswith(("_all", "_final")) for q in problem.sensor.record)
    if sources and needs_points:
        g = problem.grid
        reach = float(np.max(problem.medium.c0)) * (g.nt - 1) * g.dt + 2 * max(g.spacing)
        gap = min(_gap(np.stack([i, i], axis=1), boxes, g.spacing) for _, i in sources)
        if gap > reach:
            out.append(
                f"sensor: every point is {gap * 1e3:.3g} mm or more from the sources, farther "
                f"than sound travels in the run ({reach * 1e3:.3g} mm in {g.nt} steps at max c0): "
                "it records nothing; raise Nt or move the sensor"
            )
    return out
