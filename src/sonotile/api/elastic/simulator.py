"""A differentiable elastic simulation: ``make_simulator`` with an elastic medium.

``sim(params)`` runs the elastic model (:func:`sonotile.api.elastic.execute`, the common scan
body) with ``params`` a dict of any of ``sound_speed_compression``, ``sound_speed_shear`` [m/s],
``density`` [kg/m^3], ``alpha_coeff_compression`` / ``alpha_coeff_shear`` [dB/(MHz^2 cm)]
(when the medium absorbs), and the sources given: ``p0`` [Pa] (grid-shaped; k-Wave's smoothing
applied in the traced function), ``ux``... [m/s], ``sxx``... [Pa] (signals in the layouts
:class:`sonotile.ElasticSource` takes). It returns the records of ``pstd_elastic_2d/3d`` as JAX
arrays: ``jax.grad`` with respect to any parameter, on one device, a ``pencil`` mesh or LFB
blocks (``lfb``: the derivatives along a split axis within LFB's overlap error). With
``tape="host"`` / ``"disk"`` the backward pass takes the states it needs (every split velocity
and stress field) from host memory or files instead of the device
(:func:`sonotile.solver.adjoint.taped_scan`).

Fixed when the simulator is made: the grid, time step and step count, the PML (its reference
speed is the largest compressional speed given), which sources and absorption exist, source and
sensor points and the source modes. The source signals are scaled by the compressional speed at
their points inside the traced function, as k-Wave scales them.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.api.elastic.pstd import check_options, check_single, execute, prepare, x64
from sonotile.api.inputs import with_defaults
from sonotile.api.options import RunOptions
from sonotile.api.types import KSensor, KWaveGrid, Options
from sonotile.model.filters import smooth
from sonotile.model.grid import AXES
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import LFB, PENCIL, SINGLE
from sonotile.physics.elastic.model import component_names
from sonotile.physics.elastic.problem import MEDIUM_KEYS, ElasticRun, check_interface
from sonotile.solver.tape import Tape, as_tape


def signal_names(run: ElasticRun) -> dict[str, tuple[str | None, ...]]:
    """Per source kind (``u``, ``s``) the user's signal name of each slot (None: absent)."""
    st, nd = run.statics, run.statics.ndim
    u = tuple(f"u{AXES[a]}" if m is not None else None for a, m in enumerate(st.u_modes))
    s = tuple(n if m is not None else None for n, m in zip(component_names(nd), st.s_modes))
    return {"u": u, "s": s}


def _scale(run: ElasticRun, kind: str, slot: int, cp: jax.Array) -> jax.Array:
    """k-Wave's scale of one source signal (:func:`sonotile.physics.elastic.sources.
    scale_signals`) with a traced compressional speed: ``(N|1, 1)``."""
    nd = run.statics.ndim
    modes = run.statics.u_modes if kind == "u" else run.statics.s_modes
    at = cp[run.fixed[f"{kind}_index"]][:, None] if jnp.ndim(cp) else jnp.reshape(cp, (1, 1))
    if modes[slot] == "dirichlet":
        return jnp.ones_like(at) if kind == "u" else jnp.ones_like(at) / nd
    d = run.spacing[slot] if kind == "u" else nd * run.spacing[0]
    return 2 * run.dt * at / d


def traced_inputs(run: ElasticRun, params: Mapping[str, Any], cp: jax.Array) -> dict[str, Any]:
    """The run's per-step source inputs from (traced) signals ``params`` in the user's
    layouts (a labelled mask's rows given to its points), scaled by the (traced) compressional
    speed ``cp`` [m/s] at the source points."""
    xs = dict(run.xs)
    dtype = jnp.dtype(run.dtype)
    for kind, names in signal_names(run).items():
        if kind not in xs:
            continue
        vals: list[jax.Array | None] = []
        for slot, name in enumerate(names):
            if name is None:
                vals.append(None)
                continue
            sig = jnp.asarray(params[name], dtype)
            sig = sig[None, :] if sig.ndim == 1 else sig
            if kind in run.source_rows:  # labelled mask: one row per label, to the points
                sig = sig[jnp.asarray(run.source_rows[kind])]
            rows = (sig * _scale(run, kind, slot, cp).astype(dtype)).T  # (Nt_src, N|1)
            if rows.shape[0] < run.nt:
                rows = jnp.concatenate([rows, jnp.zeros((run.nt - rows.shape[0],
                                                         rows.shape[1]), dtype)])  # fmt: skip
            vals.append(rows[: run.nt])
        xs[kind] = tuple(vals)
    return xs


def _simulate(
    run: ElasticRun, smooth_p0: bool, chunk: int, where: RunOptions, tape: Tape | None,
    params: dict[str, jax.Array],
) -> dict[str, jax.Array]:  # fmt: skip
    """The traced run of ``params`` where ``where`` puts it (decomposition, mesh, LFB's)."""
    values = {k: params[k] for k in MEDIUM_KEYS if k in params}
    extra = {}
    if "p0" in params:
        p0 = smooth(params["p0"], True, jnp) if smooth_p0 else params["p0"]
        if smooth_p0 and where.decomposition != SINGLE:
            from sonotile.parallel.differentiable import replicated

            p0 = replicated(p0, where.mesh or (len(jax.devices()),))
        extra["p0_split"] = -p0 / (2 * run.statics.ndim)
    xs = traced_inputs(run, params, params["sound_speed_compression"])
    overlap = 16 if where.overlap is None else where.overlap
    return execute(run, values, chunk, decomposition=where.decomposition, mesh=where.mesh, xs=xs,
                   extra=extra, overlap=overlap, bell_width=where.bell_width,
                   tape=tape)  # fmt: skip


class ElasticSimulator:
    """``sim(params) -> dict`` of JAX arrays (module docstring); jit-compiled.

    Attributes:
        params: the default parameters (the values given to ``make_simulator``), a dict.
        run: the built elastic run (grid, time step, PML, sources, sensor).
        t: time of each recorded step [s]. sensor_points: ``(N, ndim)`` grid indices (continuous
        coordinates for Cartesian points) or None (none, or cuboids).
        describe: where it runs. tape: where the backward pass keeps its states (None: device).
        chunk: steps per checkpointed chunk (with a tape: between stored states).
    """

    def __init__(self, run: ElasticRun, params: dict[str, jax.Array], smooth_p0: bool,
                 chunk: int, where: RunOptions, tape: Tape | None = None) -> None:  # fmt: skip
        self.run, self.params, self.tape, self.chunk = run, params, tape, chunk
        self.t = np.arange(run.recording.start, run.nt) * run.dt
        self.sensor_points = None if run.cuboids else run.sensor_points
        dec = where.decomposition
        self.describe = "single device" if dec == "single" else f"{dec} mesh"
        self._fn = jax.jit(partial(_simulate, run, smooth_p0, chunk, where, tape))

    def __call__(self, params: Mapping[str, Any] | None = None) -> dict[str, jax.Array]:
        with x64(self.run.dtype):
            return self._fn(with_defaults(self.params, params))


def _defaults(run: ElasticRun, medium: Any, source: Any) -> dict[str, Any]:
    """The parameters the run has, with the values given (user layouts)."""
    out = {k: getattr(medium, k) for k in MEDIUM_KEYS[:3]}
    if run.statics.kelvin_voigt:
        out |= {k: getattr(medium, k) for k in MEDIUM_KEYS[3:]}
    if run.statics.p0:
        out["p0"] = source.p0
    for names in signal_names(run).values():
        out |= {n: getattr(source, n) for n in names if n is not None}
    return {k: jnp.asarray(np.asarray(v, np.float64), run.dtype) for k, v in out.items()}


def make_elastic_simulator(
    kgrid: KWaveGrid,
    medium: Any,
    source: Any,
    sensor: KSensor,
    options: Options,
    how: RunOptions,
) -> ElasticSimulator:
    """:func:`sonotile.make_simulator` with an elastic medium (module docstring); ``how``: its
    run options (``decomposition`` single, pencil or lfb; ``mesh``; LFB's ``overlap`` and
    ``bell_width``; ``chunk``; ``tape`` as the acoustic simulator's: the state, every split
    field, stored every ``chunk`` steps, ``"auto"`` or None: every step; ``remat_step``
    refused by name)."""
    if how.remat_step:
        raise ProblemError("remat_step: not available for the elastic simulator")
    decomposition, chunk = how.decomposition, how.chunk
    if decomposition not in (SINGLE, PENCIL, LFB):
        raise ProblemError(f"decomposition = {str(decomposition)!r}: the elastic simulator runs "
                           "'single', 'pencil' or 'lfb'")  # fmt: skip
    check_options(medium, options)
    tape = as_tape(how.tape)  # a bad one refused before the run is built
    check_interface(options.elastic_interface, "elastic_interface")
    check_single(options.elastic_interface == "slip", decomposition, "elastic_interface")
    run = prepare(kgrid, medium, source, sensor, options.pml_size, options.pml_alpha,
                  dtype=options.dtype, smooth_p0=False,
                  interface=options.elastic_interface)  # fmt: skip
    if tape is not None:  # as the acoustic simulator: every step stored unless told otherwise
        step_chunk = 1 if chunk is None or chunk == "auto" else int(chunk)
    else:
        step_chunk = run.nt if chunk is None else int(chunk) if chunk != "auto" else 0
        step_chunk = step_chunk or int(np.ceil(np.sqrt(run.nt)))
    with x64(run.dtype):
        params = _defaults(run, medium, source)
    return ElasticSimulator(run, params, options.smooth_p0, step_chunk, how, tape)
