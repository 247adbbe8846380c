"""k-Wave's pseudospectral elastic model (``pstdElastic2D`` / ``pstdElastic3D``), one step.

Isotropic linear elasticity, first order in velocity ``u`` [m/s] and stress ``sigma`` [Pa]:

    rho du_i/dt = sum_a d sigma_ia / dx_a
    d sigma_ij/dt = lambda delta_ij div u + mu (du_i/dx_j + du_j/dx_i)
                    + chi delta_ij d(div u)/dt + eta d(du_i/dx_j + du_j/dx_i)/dt

with ``mu = rho c_s^2``, ``lambda = rho c_p^2 - 2 mu`` and k-Wave's Kelvin-Voigt viscosities
``eta = 2 rho c_s^3 a_s``, ``chi = 2 rho c_p^3 a_p - 2 eta`` (``a`` in Np/((rad/s)^2 m)).
Staggered grids as k-Wave's: ``u_i`` at ``x_i + d_i/2``, normal stresses on the grid points,
``sigma_ij`` (i != j) at ``x_i + d_i/2, x_j + d_j/2``; density averaged onto each velocity grid,
``mu`` and ``eta`` harmonically onto each shear-stress grid. Spatial derivatives are Fourier
collocation along one axis (``ops.diffs``, no k-space correction); time stepping is leapfrog
(velocity, then stress). Every field is split per axis (k-Wave's split-field PML): the split
``a`` of a field is damped by the PML along ``a`` and by the multi-axial PML (``mpml``, 0.1 x
the absorption) along the other axes. ``p = -trace(sigma) / ndim``.

On one device with FFTW (3-D, float32) each split is updated inside the single-axis FFTW call
that makes its derivative (:func:`velocity_in_call`, :func:`stress_in_call`): one transform
along the axis and back per derivative, no derivative written to memory, the PML factors made
from their 1-D profiles there; elsewhere the derivatives come from ``ops.diffs`` and the
updates are done in JAX (:func:`update_velocity`, :func:`update_stress`), as with the
slip-aware fluid-solid interface (``Statics.slip``: the shear terms taken from fields continued
across each fluid-solid face, :mod:`sonotile.physics.elastic.slip`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.model.grid import AXES, along
from sonotile.model.problem import pml_profile
from sonotile.model.staggering import staggered_mean
from sonotile.model.units import db2neper
from sonotile.physics.elastic.slip import continued, folded, pairs
from sonotile.spectral.operators import axis_update, fuses_axis_updates

#: A stress component ``(i, j)``, i <= j.
Component = tuple[int, int]


class AxisDiffOps(Protocol):
    """What the elastic step asks of its operators (:meth:`FourierOps.diffs
    <sonotile.spectral.operators.FourierOps.diffs>`)."""

    def diffs(self, f: jax.Array, which: Sequence[tuple[int, int]]) -> list[jax.Array]: ...

    def diffs_many(
        self, fs: Sequence[jax.Array], which: Sequence[tuple[int, int]]
    ) -> list[list[jax.Array]]: ...  # fmt: skip

    def keep_together(self, fs: Sequence[jax.Array]) -> list[jax.Array]: ...


class State(NamedTuple):
    """The elastic state: ``u_split[i][a]`` split ``a`` of the velocity along axis ``i`` [m/s];
    ``s_split[k][b]`` split ``split_axes(components(ndim)[k])[b]`` of stress component ``k``
    [Pa]. Sensors read ``p`` and ``u`` (per axis, staggered) as from the acoustic state."""

    u_split: tuple
    s_split: tuple

    @property
    def p(self) -> jax.Array:
        """Pressure [Pa] (:func:`pressure`)."""
        return pressure(self)

    @property
    def u(self) -> tuple[jax.Array, ...]:
        """Particle velocity per axis on its staggered grid [m/s] (the splits summed)."""
        return tuple(total(ui) for ui in self.u_split)

    @property
    def s(self) -> tuple[jax.Array, ...]:
        """Stress components in :func:`components` order [Pa] (the splits summed)."""
        return tuple(total(sk) for sk in self.s_split)

    def fields(self) -> dict[str, jax.Array]:
        """What sensors read: ``p`` [Pa], ``ux``... [m/s] (staggered), ``sxx``... [Pa]."""
        nd = len(self.u_split)
        out = {"p": self.p, **{f"u{AXES[a]}": ua for a, ua in enumerate(self.u)}}
        return out | dict(zip(component_names(nd), self.s))


@dataclass(frozen=True)
class Statics:
    """Static switches of the step (hashable; they select code paths at trace time).

    Attributes:
        ndim: 2 or 3.
        kelvin_voigt: absorption on.
        u_modes: per axis ``"additive"``, ``"dirichlet"`` or None (no velocity source).
        s_modes: per stress component (order of :func:`components`) a mode or None.
        p0: initial pressure given (k-Wave's two-step stress start).
        slip: the slip-aware fluid-solid interface (:mod:`sonotile.physics.elastic.slip`;
            its constants in ``c``); False: k-Wave's scheme.
    """

    ndim: int
    kelvin_voigt: bool = False
    u_modes: tuple[str | None, ...] = ()
    s_modes: tuple[str | None, ...] = ()
    p0: bool = False
    slip: bool = False


def components(ndim: int) -> tuple[Component, ...]:
    """Stress components in k-Wave's order: xx, yy[, zz], xy[, xz, yz]."""
    normal = tuple((i, i) for i in range(ndim))
    return normal + tuple((i, j) for i in range(ndim) for j in range(i + 1, ndim))


def component_names(ndim: int) -> list[str]:
    """``["sxx", "syy", "sxy"]`` in 2-D, ``[..., "szz", "sxy", "sxz", "syz"]`` in 3-D."""
    return [f"s{AXES[i]}{AXES[j]}" for i, j in components(ndim)]


def split_axes(comp: Component, ndim: int) -> tuple[int, ...]:
    """Axes a stress component is split along: all for a normal stress, ``(i, j)`` for
    ``sigma_ij``."""
    i, j = comp
    return tuple(range(ndim)) if i == j else (i, j)


def zero_state(shape: tuple[int, ...], dtype: Any) -> State:
    """All fields zero (every run starts here; ``p0`` enters through the first two steps)."""
    nd = len(shape)

    def z() -> jax.Array:
        return jnp.zeros(shape, dtype)

    u = tuple(tuple(z() for _ in range(nd)) for _ in range(nd))
    s = tuple(tuple(z() for _ in split_axes(k, nd)) for k in components(nd))
    return State(u, s)


def total(parts: Sequence[jax.Array]) -> jax.Array:
    """A field from its splits."""
    return sum(parts[1:], parts[0])


def pressure(state: State) -> jax.Array:
    """``p = -(sigma_xx + sigma_yy [+ sigma_zz]) / ndim`` [Pa] (k-Wave's pressure of a solid)."""
    nd = len(state.u_split)
    return -total([total(state.s_split[k]) for k in range(nd)]) / nd


def _next(f: jax.Array, axis: int) -> jax.Array:
    """``f`` at the next point along ``axis``, the last plane repeated."""
    n = f.shape[axis]
    return jnp.concatenate(
        [jax.lax.slice_in_dim(f, 1, n, axis=axis), jax.lax.slice_in_dim(f, n - 1, n, axis=axis)],
        axis=axis,
    )


def staggered_harmonic(m: jax.Array, i: int, j: int) -> jax.Array:
    """k-Wave's ``1 / interp(1/m)`` at ``(x_i + d_i/2, x_j + d_j/2)``: the harmonic mean of the
    four neighbours, 0 where one of them is 0 (a fluid), ``m`` itself on the last planes."""
    if m.ndim == 0:
        return m
    zero = m <= 0
    inv = jnp.where(zero, 0.0, 1.0 / jnp.where(zero, 1.0, m))
    s = inv + _next(inv, i) + _next(inv, j) + _next(_next(inv, j), i)
    z = zero | _next(zero, i) | _next(zero, j) | _next(_next(zero, j), i)
    h = jnp.where(z, 0.0, 4.0 / jnp.where(z, 1.0, s))
    last_i = jax.lax.broadcasted_iota(jnp.int32, m.shape, i) == m.shape[i] - 1
    last_j = jax.lax.broadcasted_iota(jnp.int32, m.shape, j) == m.shape[j] - 1
    return jnp.where(last_i | last_j, m, h)


def pml_constants(
    shape: tuple[int, ...],
    spacing: Sequence[float],
    dt: float,
    c_ref: float,
    pml_size: Sequence[int],
    pml_alpha: Sequence[float],
    mpml_ratio: float,
    dtype: Any,
) -> dict:
    """``{"pml": ..., "mpml": ...}``: per axis ``(regular, staggered)`` profiles, broadcastable
    1-D arrays; ``mpml`` with ``mpml_ratio`` times the absorption (k-Wave's multi-axial PML)."""
    nd = len(shape)

    def prof(a: int, ratio: float, sg: bool) -> jax.Array:
        p = pml_profile(shape[a], pml_size[a], ratio * pml_alpha[a], c_ref, spacing[a], dt, sg)
        return jnp.asarray(along(p, a, nd), dtype)

    return {
        "pml": tuple((prof(a, 1.0, False), prof(a, 1.0, True)) for a in range(nd)),
        "mpml": tuple((prof(a, mpml_ratio, False), prof(a, mpml_ratio, True)) for a in range(nd)),
    }


def medium_constants(m: Mapping[str, Any], ndim: int, dt: float, dtype: Any) -> dict:
    """The step's stored material fields from the medium's values (numbers or arrays, numpy or
    traced JAX: differentiable with respect to speeds and density).

    ``m``: ``sound_speed_compression`` [m/s], ``sound_speed_shear`` [m/s], ``density``
    [kg/m^3], optionally ``alpha_coeff_compression`` / ``alpha_coeff_shear``
    [dB/(MHz^2 cm)]. Returns ``rho`` [kg/m^3], ``dt_lam = dt lambda`` and ``dt_mu = dt mu``
    [Pa s], with absorption ``kv_lam = chi`` and ``kv_mu = eta`` [Pa s]; the step derives the
    rest (:func:`derived_constants`), so that a heterogeneous medium stores 3 fields (5 with
    absorption).
    """

    def arr(key: str) -> jax.Array:
        return jnp.asarray(m[key], dtype)

    cp, cs, rho = arr("sound_speed_compression"), arr("sound_speed_shear"), arr("density")
    mu = cs * cs * rho
    c: dict = {
        "dt": jnp.asarray(dt, dtype),
        "rho": rho,
        "dt_lam": dt * (cp * cp * rho - 2 * mu),
        "dt_mu": dt * mu,
    }
    if m.get("alpha_coeff_compression") is not None:
        eta = 2 * rho * cs**3 * db2neper(arr("alpha_coeff_shear"), 2.0)
        c["kv_lam"] = 2 * rho * cp**3 * db2neper(arr("alpha_coeff_compression"), 2.0) - 2 * eta
        c["kv_mu"] = eta
    return c


def derived_constants(c: dict, ndim: int) -> dict:
    """What the step reads, from :func:`medium_constants`' fields: ``dt_rho_sg`` (per axis
    ``dt / rho`` on the velocity grid [s m^3/kg]), ``dt_l2m = dt (lambda + 2 mu)`` [Pa s], per
    shear component ``dt_mu_sg`` (``dt mu`` on its grid); with absorption ``kv_l2m = chi +
    2 eta`` and ``kv_mu_sg`` (eta on each shear grid) [Pa s]."""
    return velocity_constants(c, ndim) | stress_constants(c, ndim)


def velocity_constants(c: dict, ndim: int) -> dict:
    """``dt_rho_sg`` of :func:`derived_constants`."""
    return {"dt_rho_sg": tuple(c["dt"] / staggered_mean(c["rho"], a) for a in range(ndim))}


def stress_constants(c: dict, ndim: int) -> dict:
    """:func:`derived_constants` but ``dt_rho_sg``."""
    shear = components(ndim)[ndim:]
    d = {
        "dt_l2m": c["dt_lam"] + 2 * c["dt_mu"],
        "dt_mu_sg": tuple(staggered_harmonic(c["dt_mu"], i, j) for i, j in shear),
    }
    if "kv_mu" in c:
        d["kv_l2m"] = c["kv_lam"] + 2 * c["kv_mu"]
        d["kv_mu_sg"] = tuple(staggered_harmonic(c["kv_mu"], i, j) for i, j in shear)
    return d


def stored_constants(c: dict, ndim: int) -> dict:
    """The constants ``c`` with :func:`stress_constants` made once, in place of the fields
    they come from (``dt_mu``, ``kv_mu``; ``dt_lam``, ``kv_lam`` and ``rho`` stay): where the
    step's updates run inside the FFTW calls, which read their coefficients from memory,
    storing them costs less memory than making them in every step (grid-sized temporaries)
    and no time. The calls average the density onto the velocity grids themselves."""
    out = c | stress_constants(c, ndim)
    return {k: v for k, v in out.items() if k not in ("dt_mu", "kv_mu")}


#: Constants the step derives grid-sized values from (tied to the step, see :func:`step`).
TIED = ("pml", "mpml", "rho", "dt_lam", "dt_mu", "kv_lam", "kv_mu")


def constants(
    m: Mapping[str, Any],
    shape: tuple[int, ...],
    spacing: Sequence[float],
    dt: float,
    pml_size: Sequence[int],
    pml_alpha: Sequence[float],
    dtype: Any = "float32",
    c_ref: float | None = None,
    mpml_ratio: float = 0.1,
) -> dict:
    """Everything the step reads except sources: :func:`medium_constants` and
    :func:`pml_constants` (``c_ref``: PML reference speed, default max c_p, k-Wave's)."""
    if c_ref is None:  # give it when the speeds are traced (gradients)
        c_ref = float(np.max(np.asarray(m["sound_speed_compression"])))
    c = medium_constants(m, len(shape), dt, dtype)
    c.update(pml_constants(shape, spacing, dt, c_ref, pml_size, pml_alpha, mpml_ratio, dtype))
    return c


def pml_factor(c: dict, stagger: tuple[int, ...], a: int, ndim: int) -> jax.Array:
    """The damping of split ``a`` of a field staggered along the axes ``stagger``: the PML along
    ``a`` times the multi-axial PML along the other axes, each on the field's grid."""
    m = c["pml"][a][int(a in stagger)]
    for b in range(ndim):
        if b != a:
            m = m * c["mpml"][b][int(b in stagger)]
    return m


def inject(f: jax.Array, index: Any, values: jax.Array, mode: str, on: jax.Array) -> jax.Array:
    """One mask source into one field: ``dirichlet`` sets, ``additive`` adds (k-Wave's elastic
    sources have no k-space filter); ``on``: this step is within the signal."""
    if mode == "dirichlet":
        cur = f[index]
        return f.at[index].set(jnp.where(on, jnp.broadcast_to(values, cur.shape), cur))
    return f.at[index].add(jnp.where(on, values, 0).astype(f.dtype))


def stress_targets(comp: Component) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The derivatives a stress component gives (``(axis, shift)``) and the velocity split each
    drives (``(velocity component, split axis)``): ``sigma_ii`` along ``i`` (+d/2) into
    ``u_i`` split ``i``; ``sigma_ij`` along ``i`` (-d/2) into ``u_j`` split ``i`` and along ``j``
    into ``u_i`` split ``j``."""
    i, j = comp
    if i == j:
        return [(i, +1)], [(i, i)]
    return [(i, -1), (j, -1)], [(j, i), (i, j)]


def update_velocity(
    state: State, x: dict, c: dict, ops: AxisDiffOps, st: Statics
) -> tuple[tuple, list[jax.Array] | None]:
    """Split velocity update with PML from the stress divergence, then the velocity sources
    (into split ``i`` of ``u_i``, as k-Wave). Each stress derivative is used as it is made
    (few grid-sized temporaries). Also returns, with absorption, ``dt`` times the acceleration
    per component (from the old stress, as k-Wave) for the Kelvin-Voigt terms."""
    nd = st.ndim
    u: list[list[Any]] = [[None] * nd for _ in range(nd)]
    acc: list[Any] = [None] * nd
    # the normal stresses summed together, before any is differentiated: a split of sigma_xx
    # is overwritten in the stress update after u_y or u_z is made, which would otherwise not
    # depend on reading the old sigma_xx, and XLA kept a copy of each such split (6 fields)
    sums = [total(sk) for sk in state.s_split]
    sums[:nd] = ops.keep_together(sums[:nd])
    for k, comp in enumerate(components(nd)):
        which, targets = stress_targets(comp)
        slip = st.slip and comp[0] != comp[1]
        ds = slip_stress_diffs(sums[k], k, c, ops, nd) if slip else ops.diffs(sums[k], which)
        for (i, a), d in zip(targets, ds):
            m = pml_factor(c, (i,), a, nd)
            u[i][a] = m * (m * state.u_split[i][a] + c["dt_rho_sg"][i] * d)
            if st.kelvin_voigt:
                acc[i] = d if acc[i] is None else acc[i] + d
    for i, mode in enumerate(st.u_modes):
        if mode is not None:
            u[i][i] = inject(u[i][i], c["u_index"], x["u"][i], mode, x["u_on"][i])
    dt_acc = [acc[i] * c["dt_rho_sg"][i] for i in range(nd)] if st.kelvin_voigt else None
    return tuple(tuple(ui) for ui in u), dt_acc


def velocity_targets(j: int, a: int, nd: int) -> list[tuple[int, int]]:
    """The stress splits ``(component index, split index)`` driven by ``d u_j / dx_a``: split
    ``a`` of every normal stress when ``a == j``, else split ``a`` of ``sigma_ja``."""
    comps = components(nd)
    if a == j:
        return [(k, a) for k in range(nd)]
    k = comps.index((min(a, j), max(a, j)))
    return [(k, split_axes(comps[k], nd).index(a))]


def stress_rate(k: int, a: int, d: jax.Array, dv: jax.Array | None, c: dict, nd: int) -> jax.Array:
    """``dt`` times the rate of split ``a`` of stress component ``k`` from the one velocity
    derivative ``d`` it takes (and ``dv``, the same derivative of ``dt`` times the acceleration,
    for the Kelvin-Voigt term)."""
    i, j = components(nd)[k]
    if i == j:
        rate = (c["dt_l2m"] if a == i else c["dt_lam"]) * d
        if dv is not None:
            rate = rate + (c["kv_l2m"] if a == i else c["kv_lam"]) * dv
        return rate
    rate = c["dt_mu_sg"][k - nd] * d
    if dv is not None:
        rate = rate + c["kv_mu_sg"][k - nd] * dv
    return rate


def slip_stress_diffs(f: jax.Array, k: int, c: dict, ops: AxisDiffOps, nd: int) -> list[jax.Array]:
    """The derivatives of shear component ``k`` (``f``: its sum) in :func:`stress_targets`'
    order with the slip-aware interface: ``d sigma_ij / dx_i`` into ``u_j``, ``d sigma_ij /
    dx_j`` into ``u_i``, each folded by the transpose of the continuation of that velocity
    component along that axis (:func:`sonotile.physics.elastic.slip.folded`)."""
    i, j = components(nd)[k]
    ds = ops.diffs(f, [(i, -1), (j, -1)])
    return [folded(d, c["slip_solid_u"][b], c["slip_u"][pairs(nd).index((b, a))])
            for d, (a, b) in zip(ds, ((i, j), (j, i)))]  # fmt: skip


def slip_velocity_diffs(
    f: jax.Array, j: int, c: dict, ops: AxisDiffOps, nd: int
) -> list[jax.Array]:
    """The derivatives of velocity component ``j`` (or of ``dt`` times its acceleration,
    ``f``) along each axis as :func:`update_stress` takes them, with the slip-aware interface:
    along ``a != j`` (the shear strains) of ``f`` continued from the solid into the fluid along
    ``a`` (:mod:`sonotile.physics.elastic.slip`)."""
    out = []
    for a in range(nd):
        g = (
            f
            if a == j
            else continued(f, c["slip_solid_u"][j], c["slip_u"][pairs(nd).index((j, a))])
        )
        out.append(ops.diffs(g, [(a, -1 if a == j else +1)])[0])
    return out


def update_stress(
    state: State, u: tuple, dt_acc: list[jax.Array] | None, x: dict, c: dict,
    ops: AxisDiffOps, st: Statics,
) -> tuple:  # fmt: skip
    """Split stress update with PML from the velocity gradient (and the Kelvin-Voigt terms),
    each derivative used as it is made; then the p0 start and the stress sources."""
    nd = st.ndim
    comps = components(nd)
    s: list[list[Any]] = [[None] * len(split_axes(k, nd)) for k in comps]
    for j in range(nd):
        which = [(a, -1 if a == j else +1) for a in range(nd)]
        dv: list[Any] = [None] * nd
        if st.slip:
            du = slip_velocity_diffs(total(u[j]), j, c, ops, nd)
            if dt_acc is not None:
                dv = slip_velocity_diffs(dt_acc[j], j, c, ops, nd)
        elif dt_acc is not None:  # both fields' derivatives in one call
            du, dv = ops.diffs_many([total(u[j]), dt_acc[j]], which)
        else:
            du = ops.diffs(total(u[j]), which)
        for a in range(nd):
            for k, b in velocity_targets(j, a, nd):
                stagger = () if comps[k][0] == comps[k][1] else comps[k]
                m = pml_factor(c, stagger, a, nd)
                s[k][b] = m * (m * state.s_split[k][b] + stress_rate(k, a, du[a], dv[a], c, nd))
    return stress_sources(s, x, c, st)


def stress_sources(
    s: list[list[Any]], x: dict, c: dict, st: Statics, p0: bool = True
) -> tuple:  # fmt: skip
    """The p0 start (steps 0 and 1; ``p0`` False: made already) and the stress sources, into
    the updated splits ``s``."""
    for k, comp in enumerate(components(st.ndim)):
        mode = st.s_modes[k] if st.s_modes else None
        for b in range(len(s[k])):
            if p0 and st.p0 and comp[0] == comp[1]:
                s[k][b] = s[k][b] + jnp.where(x["n"] < 2, c["p0_split"], 0).astype(s[k][b].dtype)
            if mode is not None:
                s[k][b] = inject(s[k][b], c["s_index"], x["s"][k], mode, x["s_on"][k])
    return tuple(tuple(sk) for sk in s)


def pml_vectors(c: dict, stagger: tuple[int, ...], a: int, ndim: int) -> list[jax.Array]:
    """:func:`pml_factor`'s vectors, one per axis: the PML along ``a``, the multi-axial PML
    along the others, each on the field's grid."""
    return [c["pml" if b == a else "mpml"][b][int(b in stagger)] for b in range(ndim)]


def velocity_in_call(
    state: State, x: dict, c: dict, ops: Any, st: Statics
) -> tuple[tuple, list[jax.Array] | None]:  # fmt: skip
    """:func:`update_velocity` with each split updated inside the derivative's backend call
    (:func:`sonotile.spectral.operators.axis_update`): no derivative in memory; with
    absorption ``dt`` times the acceleration summed there too."""
    nd = st.ndim
    u = [list(ui) for ui in state.u_split]
    acc: list[Any] = [None] * nd
    for k, comp in enumerate(components(nd)):
        which, targets = stress_targets(comp)
        sk = total(state.s_split[k])
        for (a, shift), (i, _) in zip(which, targets):
            coef = [(0, c["dt_rho_sg"][i] if "dt_rho_sg" in c else ("mean", c["rho"], i, c["dt"]))]
            tg: list[tuple] = [(u[i][a], pml_vectors(c, (i,), a, nd), coef)]
            if st.kelvin_voigt:
                tg.append((acc[i], None, coef))
            got = axis_update(ops, [sk], a, shift, tg)
            u[i][a] = got[0]
            if st.kelvin_voigt:
                acc[i] = got[1]
    for i, mode in enumerate(st.u_modes):
        if mode is not None:
            u[i][i] = inject(u[i][i], c["u_index"], x["u"][i], mode, x["u_on"][i])
    return tuple(tuple(ui) for ui in u), (acc if st.kelvin_voigt else None)


def stress_coefficients(k: int, a: int, c: dict, nd: int, kv: bool) -> list[tuple[int, Any]]:
    """:func:`stress_rate`'s terms ``(source, coefficient)``: source 0 the velocity, 1 ``dt``
    times the acceleration (Kelvin-Voigt)."""
    i, j = components(nd)[k]
    if i == j:
        terms = [(0, c["dt_l2m"] if a == i else c["dt_lam"])]
        return terms + ([(1, c["kv_l2m"] if a == i else c["kv_lam"])] if kv else [])
    terms = [(0, c["dt_mu_sg"][k - nd])]
    return terms + ([(1, c["kv_mu_sg"][k - nd])] if kv else [])


def stress_in_call(
    state: State, u: tuple, dt_acc: list[jax.Array] | None, x: dict, c: dict, ops: Any,
    st: Statics,
) -> list[list[Any]]:  # fmt: skip
    """The split stress update of :func:`update_stress` with each split updated inside the
    velocity derivative's backend call, the p0 start too (its sources: :func:`stress_sources`
    after)."""
    nd = st.ndim
    comps = components(nd)
    p0 = (c["p0_split"], (x["n"] < 2).astype(state.s_split[0][0].dtype)) if st.p0 else None
    s = [list(sk) for sk in state.s_split]
    # each call waits for every velocity split, so for every sum of the old stress: no old
    # split is overwritten while a sum may still read it (else XLA copies it first)
    made = [f for ui in u for f in ui]
    for j in range(nd):
        srcs = [total(u[j])] + ([dt_acc[j]] if dt_acc is not None else [])
        for a in range(nd):
            tg = []
            for k, b in velocity_targets(j, a, nd):
                stagger = () if comps[k][0] == comps[k][1] else comps[k]
                terms = stress_coefficients(k, a, c, nd, dt_acc is not None)
                post = (p0,) if p0 is not None and not stagger else ()
                tg.append((s[k][b], pml_vectors(c, stagger, a, nd), terms, *post))
            got = axis_update(ops, srcs, a, -1 if a == j else +1, tg, after=made)
            for (k, b), new in zip(velocity_targets(j, a, nd), got):
                s[k][b] = new
    return s


def step(state: State, x: dict, c: dict, ops: AxisDiffOps, st: Statics) -> State:
    """Advance ``state`` by one step ``n = x["n"]`` (k-Wave's ``t_index = n + 1``).

    ``x``: ``n``; per axis ``u`` (velocity source values at ``c["u_index"]``, scaled as
    :func:`sonotile.physics.elastic.sources.scale_signals` makes them) and ``u_on``; per stress
    component ``s`` and ``s_on``. ``c``: :func:`constants` plus the source indices and, for a
    p0 start, ``p0_split = -p0 / (2 ndim)`` (added to every normal-stress split in steps 0 and
    1: k-Wave's ``source.p0`` for its elastic codes).
    """
    # the constants tied to this step's state: otherwise XLA hoists what the step derives from
    # them (the PML products, one per field split, 18 in 3-D; the staggered densities and
    # moduli) out of the time loop and keeps those grid-sized fields in memory
    tied = {k: c[k] for k in TIED if k in c}
    tied, first = jax.lax.optimization_barrier((tied, state.u_split[0][0]))
    c = {**c, **tied}
    # derived here unless the constants hold them (made whole-grid for a decomposed run)
    if "dt_l2m" not in c:
        c.update(stress_constants(c, st.ndim))
    state = State(((first, *state.u_split[0][1:]), *state.u_split[1:]), state.s_split)
    fused = fuses_axis_updates(ops, first) and not st.slip
    if "dt_rho_sg" not in c and not (fused and jnp.ndim(c["rho"])):
        c.update(velocity_constants(c, st.ndim))
    if fused:
        u, dt_acc = velocity_in_call(state, x, c, ops, st)
        s = stress_in_call(state, u, dt_acc, x, c, ops, st)
        return State(u, stress_sources(s, x, c, st, p0=False))
    u, dt_acc = update_velocity(state, x, c, ops, st)
    return State(u, update_stress(state, u, dt_acc, x, c, ops, st))


def split_field(
    u: Sequence[jax.Array], c: dict, ops: Any
) -> tuple[list[jax.Array], list[jax.Array]]:  # fmt: skip
    """k-Wave's ``u_split_field``: the velocity moved to the grid points (``-d_i/2`` along its
    own axis) and split into its compressional (curl-free, ``k k.U / |k|^2``) and shear
    (divergence-free) parts [m/s]. ``c["split_k"]``, ``c["split_shift"]``:
    :func:`split_constants`; ``ops``: the transforms (:meth:`FourierOps.spectrum
    <sonotile.spectral.operators.FourierOps.spectrum>`, ``field``, ``axis_vector``: one
    device or this shard of a pencil mesh)."""
    nd = len(u)
    k = [ops.axis_vector(c["split_k"][a], a) for a in range(nd)]
    U = [ops.spectrum(ui) * ops.axis_vector(c["split_shift"][a], a) for a, ui in enumerate(u)]
    k2 = total([ka * ka for ka in k])
    inv_k2 = jnp.where(k2 > 0, 1 / jnp.where(k2 > 0, k2, 1), 0)  # 0 at k = 0
    D = total([ka * Ua for ka, Ua in zip(k, U)]) * inv_k2
    up = [ops.field(ka * D, ua) for ka, ua in zip(k, u)]
    us = [ops.field(Ua, ua) - p for Ua, ua, p in zip(U, u, up)]
    return up, us


def split_constants(shape: tuple[int, ...], spacing: Sequence[float], dtype: Any) -> dict:
    """Per axis the wavenumbers ``split_k`` [rad/m] and the half-cell shift ``split_shift``
    (``exp(-i k d / 2)``) of the ``rfftn`` half spectrum along that axis (1-D vectors: whole on
    every shard of a mesh), for :func:`split_field`."""
    ks = [2 * np.pi * np.fft.fftfreq(n, d) for n, d in zip(shape[:-1], spacing[:-1])]
    ks.append(2 * np.pi * np.fft.rfftfreq(shape[-1], spacing[-1]))
    cdtype = jnp.complex64 if jnp.dtype(dtype) == jnp.float32 else jnp.complex128
    shifts = [np.exp(-0.5j * k * d) for k, d in zip(ks, spacing)]
    return {
        "split_k": tuple(jnp.asarray(k, dtype) for k in ks),
        "split_shift": tuple(jnp.asarray(s, cdtype) for s in shifts),
    }
