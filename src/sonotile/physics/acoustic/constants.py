"""Plan: turn a validated :class:`~sonotile.model.problem.Problem` into device constants.

Everything the time step needs that does not change in time is computed here once: PML
profiles, ``c0^2``, ``dt/rho0`` on the staggered grids, the absorption factors tau and eta,
``B/A / (2 rho0)``, source and sensor index arrays. Medium values stay scalars when the medium
is homogeneous (k-Wave's scalar fast path) and become fields otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from sonotile.model.grid import along
from sonotile.model.lazy import LazyField, is_lazy
from sonotile.model.problem import MaskSource, Problem, Scalar, is_field, pml_profile
from sonotile.model.staggering import staggered_mean
from sonotile.physics.acoustic.absorption import eta_per_c0_tau, tau_of
from sonotile.spectral.device import to_device
from sonotile.spectral.operators import FourierOps

#: A device constant of the medium: a Python float (homogeneous), a device array, or a lazily
#: read field (a distributed run makes its shards).
Const = float | jax.Array | LazyField


def _const(v: ArrayLike | LazyField, dtype: jax.typing.DTypeLike) -> Const:
    """A medium constant: Python float for scalars, device array for fields (a lazily read
    field stays lazy: each process of a distributed run makes only its shards)."""
    if is_lazy(v):
        return v
    if is_field(v):
        return to_device(v, dtype)
    return float(np.asarray(v))


def sound_speed_squared(c0: Any) -> Any:
    """``c0^2`` [m^2/s^2] (numpy or JAX values)."""
    return c0 * c0


def nonlinearity_factor(bona: Any, rho0: Any) -> Any:
    """``B/A / (2 rho0)`` [m^3/kg] (numpy or JAX values)."""
    return bona / (2 * rho0)


def medium_constants(problem: Problem, derive_axes: tuple[int, ...] = ()) -> dict:
    """Device constants of the medium and PML (global arrays, grid-shaped or broadcastable).

    Fields are computed in the run's dtype (no float64 temporaries of grid size for float32
    runs); scalars stay Python floats. ``eta`` is not stored: the step derives it from ``tau``
    and ``c0^2`` (``eta = -tan(pi y/2) c0 tau``, ``eta_per_c0_tau``). ``dt/rho0`` on the
    staggered grid of each axis in ``derive_axes`` (axes the engine's shards hold whole: all on
    one device, the unsplit ones of a pencil mesh) is left out (None) when the problem's
    staggered densities are k-Wave's interpolation of ``rho0``
    (:func:`staggered_is_interpolated`); the step then computes it from ``rho0`` (4 bytes per
    grid point and axis less for a heterogeneous medium).
    """
    if problem.extras.get("host_medium_released"):
        raise RuntimeError("the problem's host medium was released (release_host_medium)")
    m, pml, dt = problem.medium, problem.pml, problem.grid.dt
    assert pml is not None and m.c_ref is not None and m.rho0_sg is not None  # set when validated
    dtype = problem.dtype

    def arr(v: Scalar) -> float | np.ndarray:
        return np.asarray(v, dtype) if is_field(v) else float(np.asarray(v))

    def field(fn: Callable[..., ArrayLike], *vals: Scalar, name: str) -> Const:
        """``fn`` of the medium values, computed now or (lazy inputs) piece by piece."""
        lazy = [v for v in vals if is_lazy(v)]
        if lazy:
            return LazyField(lazy[0].shape, lambda *p: fn(*map(arr, p)), *vals, dtype=dtype,
                             name=name)  # fmt: skip
        return _const(fn(*map(arr, vals)), dtype)

    derive = bool(derive_axes) and staggered_is_interpolated(m.rho0, m.rho0_sg, dtype)
    pml_c = {k: tuple(to_device(v, dtype) for v in vs) for k, vs in pml_constants(problem).items()}
    dt_rho0_sg = tuple(
        None
        if derive and a in derive_axes
        else field(lambda r: np.divide(dt, r), r, name=f"dt/rho0_sg{'xyz'[a]}")
        for a, r in enumerate(m.rho0_sg)
    )
    values = {"c0": m.c0, "rho0": m.rho0, "bona": m.bona, "alpha_coeff": m.alpha_coeff}
    return constant_dict(problem, field, values, pml_c, dt_rho0_sg)


def constant_dict(
    problem: Problem,
    field: Callable[..., Any],
    values: dict[str, Any],
    pml: dict[str, tuple],
    dt_rho0_sg: tuple,
) -> dict:
    """The step's medium constants (the keys of :func:`medium_constants`) from the medium's
    ``values`` (``c0`` [m/s], ``rho0`` [kg/m^3], ``bona``, ``alpha_coeff`` [dB/(MHz^y cm)]):
    ``field(fn, *values, name=...)`` evaluates one formula on them (on the host, lazily, or
    traced), ``pml`` and ``dt_rho0_sg`` [s m^3/kg] made by the caller."""
    m = problem.medium
    y = m.alpha_power
    c: dict = {
        "dt": float(problem.grid.dt),
        "c2": field(sound_speed_squared, values["c0"], name="c0^2"),
        "rho0": field(lambda r: r, values["rho0"], name="rho0"),
        **pml,
        "dt_rho0_sg": dt_rho0_sg,
    }
    if m.nonlinear:
        assert values["bona"] is not None  # what nonlinear means
        bona_2rho0 = field(nonlinearity_factor, values["bona"], values["rho0"], name="B/A/(2 rho0)")
        c["bona_2rho0"] = bona_2rho0
    if m.absorption != "lossless":
        assert y is not None and values["alpha_coeff"] is not None  # absorbing: Medium checked
        c["tau"] = field(lambda c0, a: tau_of(c0, a, y), values["c0"], values["alpha_coeff"],
                         name="tau")  # fmt: skip
        c["eta_per_c0_tau"] = eta_per_c0_tau(y)
    return c


def staggered_is_interpolated(
    rho0: Scalar, rho0_sg: tuple[Scalar, ...], dtype: DTypeLike, chunk: int | None = None
) -> bool:
    """Whether every ``rho0_sg`` field equals k-Wave's interpolation of the field ``rho0``
    (:func:`~sonotile.model.problem.staggered_density`) to the rounding of ``dtype`` (4 units in
    the last place), checked ``chunk`` planes at a time along the fields' memory order
    (default: slabs of ~2^17 points, whose temporaries stay in cache and below the pinned mmap
    threshold; 256^3 k-Wave fields 0.33-0.38 s against 0.97 s for 16-plane slabs along x), in
    ``dtype`` (float32 arithmetic adds at most 1 unit to the comparison; float64 conversions
    of three fields were 0.15 s of a 128^3 start). False for scalar or lazy densities."""
    if not is_field(rho0) or is_lazy(rho0) or any(is_lazy(r) or not is_field(r) for r in rho0_sg):
        return False
    tol = 4 * float(np.finfo(dtype).eps)
    work = np.dtype(dtype)

    def close(sg: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
        # in `work`, two temporaries updated in place (the expression form made seven per slab)
        want = np.add(a, b, dtype=work)
        want *= 0.5  # exact, as / 2
        diff = np.subtract(sg, want, dtype=work)
        np.abs(diff, out=diff)
        np.abs(want, out=want)
        want *= tol
        return bool(np.all(diff <= want))

    r = np.asarray(rho0)
    sgs = [np.asarray(sg) for sg in rho0_sg]
    axes = list(range(r.ndim))
    if not r.flags.c_contiguous and r.T.flags.c_contiguous:  # a k-Wave file's fields (x fastest)
        r, sgs, axes = r.T, [sg.T for sg in sgs], [r.ndim - 1 - a for a in axes]
    n0 = r.shape[0]
    if chunk is None:
        chunk = max(1, 2**17 // max(1, r[0].size))
    for ax, sg in zip(axes, sgs):
        for lo in range(0, n0, chunk):
            hi = min(lo + chunk, n0)
            a, s = r[lo:hi], sg[lo:hi]
            if ax == 0:  # planes lo..hi and their next neighbours; the last plane keeps rho0
                m = min(hi, n0 - 1) - lo
                ok = close(s[:m], a[:m], r[lo + 1 : lo + 1 + m]) and close(s[m:], a[m:], a[m:])
            else:  # the midpoints along `ax`, and its last plane (rho0 itself)
                inner = [slice(None)] * a.ndim
                nxt, last = list(inner), list(inner)
                inner[ax], nxt[ax], last[ax] = slice(0, -1), slice(1, None), slice(-1, None)
                ok = close(s[tuple(inner)], a[tuple(inner)], a[tuple(nxt)]) and close(
                    s[tuple(last)], a[tuple(last)], a[tuple(last)]
                )
            if not ok:
                return False
    return True


def medium_extremes(problem: Problem) -> tuple[float, float, float, float] | None:
    """``(rho_max, rho_min, c_max, c_min)`` of the problem's medium [kg/m^3, m/s] (kept by
    :func:`release_host_medium` in ``problem.extras["medium_extremes"]``); None where a field
    is read shard by shard (a distributed run: no process holds the whole field)."""
    if "medium_extremes" in problem.extras:
        return problem.extras["medium_extremes"]
    if is_lazy(problem.medium.rho0) or is_lazy(problem.medium.c0):
        return None
    rho, c = np.asarray(problem.medium.rho0), np.asarray(problem.medium.c0)
    return float(rho.max()), float(rho.min()), float(c.max()), float(c.min())


def release_host_medium(problem: Problem) -> int:
    """Free the Problem's grid-sized host medium arrays once a run's device constants exist.

    Each field becomes a zero-stride NaN array of the same shape and dtype (4-8 bytes), so
    shape checks still hold but the values are gone; :func:`medium_constants` refuses a
    released problem. For one-shot runs (``sonotile-kwave``, ``sonotile bench``): a k-Wave
    file's heterogeneous medium is 7 float32 fields, 28 bytes per grid point. Returns the bytes
    of the arrays dropped (freed when nothing else references them).
    """
    m = problem.medium
    problem.extras.setdefault("medium_extremes", medium_extremes(problem))
    freed = 0

    def gone(v: Scalar | None) -> Scalar | None:
        nonlocal freed
        if isinstance(v, np.ndarray) and v.ndim > 0 and v.strides != (0,) * v.ndim:
            freed += v.nbytes
            return np.broadcast_to(np.array(np.nan, v.dtype), v.shape)
        return v

    for name in ("c0", "rho0", "bona", "alpha_coeff"):
        object.__setattr__(m, name, gone(getattr(m, name)))
    assert m.rho0_sg is not None  # set by Medium
    object.__setattr__(m, "rho0_sg", tuple(gone(r) for r in m.rho0_sg))
    problem.extras["host_medium_released"] = True
    return freed


def source_constants(problem: Problem) -> dict:
    """Device index arrays of the sources (0-based, one int32 array per axis)."""
    s, dtype = problem.sources, problem.dtype
    c: dict = {}

    def idx(index: np.ndarray) -> tuple[jax.Array, ...]:
        return tuple(to_device(index[:, ax], jnp.int32) for ax in range(index.shape[1]))

    if s.p is not None:
        c["p_index"] = idx(s.p.index)
    c["u_index"] = tuple(None if u is None else idx(u.index) for u in s.u)
    if s.transducer is not None:
        t = s.transducer
        c["tr_index"] = idx(t.index)
        c["tr_signal"] = to_device(t.signal, dtype)
        c["tr_delay"] = to_device(t.delay, jnp.int32)
    if s.p0 is not None:
        c["p0"] = s.p0 if is_lazy(s.p0) else to_device(s.p0, dtype)
    return c


def shared_signal(src: MaskSource | None) -> np.ndarray | None:
    """The signal ``(Nt,)`` of an ``additive`` (k-space filtered) source whose points all carry
    the same one, else None: its filtered grid is ``signal(t)`` times the filtered mask
    (:func:`sonotile.physics.acoustic.step.with_source_patterns`)."""
    if src is None or src.mode != "additive":
        return None
    return src.common_signal


def on_one_plane(src: MaskSource | None) -> bool:
    """True for an ``additive`` source whose points carry signals of their own (not
    :func:`shared_signal`) and all lie on one plane ``x = const`` of a 2-D / 3-D grid: its
    filtered grid is one plane transform forward and one per plane back
    (:meth:`sonotile.spectral.operators.FourierOps.filter_plane_source`)."""
    if src is None or src.mode != "additive" or src.common_signal is not None:
        return False
    idx = np.asarray(src.index)
    return idx.ndim == 2 and idx.shape[1] in (2, 3) and bool(np.all(idx[:, 0] == idx[0, 0]))


def spectral_ops(problem: Problem, unstagger: bool) -> FourierOps:
    """Single-device operators for the problem."""
    g, m, s = problem.grid, problem.medium, problem.sources
    assert m.c_ref is not None  # set by Medium
    additive = (s.p is not None and s.p.mode == "additive") or any(
        u is not None and u.mode == "additive" for u in s.u
    )
    return FourierOps.build(
        g.shape,
        g.spacing,
        m.c_ref,
        g.dt,
        problem.dtype,
        alpha_power=m.alpha_power if m.absorption == "power_law" else None,
        source_filter=additive,
        unstagger=unstagger,
    )


def signal_rows(problem: Problem, n0: int, n1: int) -> dict:
    """Source signal values for steps ``n0 <= n < n1`` (host arrays, zero past a signal's end).

    Returns ``{"p": (n1-n0, Nsrc|1), "u": tuple per axis or None}``; the step multiplies
    nothing here: values are injected as given while ``n < length``.
    """
    s = problem.sources

    def rows(src: MaskSource | None) -> np.ndarray | None:
        if src is None:
            return None
        sig = np.asarray(src.signal)
        sig2 = sig[:, None] if sig.ndim == 1 else sig
        out = np.zeros((n1 - n0, sig2.shape[1]), dtype=problem.dtype)
        lo, hi = n0, min(n1, sig2.shape[0])
        if hi > lo:
            out[: hi - lo] = sig2[lo:hi]
        return out

    return {"p": rows(s.p), "u": tuple(rows(u) for u in s.u)}


def source_lengths(problem: Problem) -> dict:
    s = problem.sources
    return {
        "p": 0 if s.p is None else s.p.length,
        "u": tuple(0 if u is None else u.length for u in s.u),
        "tr": 0 if s.transducer is None else s.transducer.length,
    }


def pml_constants(problem: Problem, xp: Any = np) -> dict:
    """The PML multipliers, collocated (``"pml"``) and staggered (``"pml_sg"``): one
    broadcastable 1-D array per axis, in the problem's dtype (``xp``: ``np`` for the plan's
    device arrays, ``jax.numpy`` inside a traced run)."""
    g, m, pml = problem.grid, problem.medium, problem.pml
    assert pml is not None and m.c_ref is not None  # set when validated

    c_ref = m.c_ref

    def profiles(staggered: bool) -> tuple[Any, ...]:
        return tuple(
            xp.asarray(
                along(pml_profile(n, s, a, c_ref, d, g.dt, staggered), ax, g.ndim),
                problem.dtype,
            )
            for ax, (n, s, a, d) in enumerate(zip(g.shape, pml.size, pml.alpha, g.spacing))
        )

    return {"pml": profiles(False), "pml_sg": profiles(True)}


def traced_medium_constants(
    problem: Problem,
    c0: jax.typing.ArrayLike,
    rho0: jax.typing.ArrayLike,
    bona: jax.typing.ArrayLike | None = None,
    alpha_coeff: jax.typing.ArrayLike | None = None,
    derive_axes: tuple = (),
) -> dict:
    """:func:`medium_constants` from (possibly traced) medium values on the problem's grid, in
    JAX: the same keys from the same formulas, for runs that are differentiated.

    Args:
        problem: the static structure (grid, dt, PML, absorption mode, alpha_power, dtype).
        c0 [m/s], rho0 [kg/m^3], bona [-], alpha_coeff [dB/(MHz^y cm)]: scalars or grid-shaped
            arrays; ``bona`` / ``alpha_coeff`` are used only when the problem is nonlinear /
            absorbing.
        derive_axes: axes along which the step derives ``dt/rho0_sg`` from ``rho0`` itself
            (axes each shard holds whole; only for a density field).
    """
    m, dt = problem.medium, float(problem.grid.dt)
    dtype = jnp.dtype(problem.dtype)
    c0, rho0 = jnp.asarray(c0, dtype), jnp.asarray(rho0, dtype)
    field = rho0.ndim > 0
    dt_rho0_sg = tuple(
        None if field and a in derive_axes
        else dt / (staggered_mean(rho0, a) if field else rho0)
        for a in range(problem.grid.ndim)
    )  # fmt: skip
    values = {
        "c0": c0,
        "rho0": rho0,
        "bona": jnp.asarray(bona, dtype) if m.nonlinear else None,
        "alpha_coeff": jnp.asarray(alpha_coeff, dtype) if m.absorption != "lossless" else None,
    }

    def traced(fn: Callable[..., Any], *vals: Any, name: str) -> Any:
        return fn(*vals)

    return constant_dict(problem, traced, values, pml_constants(problem, jnp), dt_rho0_sg)
