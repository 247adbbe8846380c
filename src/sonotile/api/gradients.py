"""Differentiable simulation: ``make_simulator(...)`` returns ``sim(params) -> sensor data``.

``params`` is a dict (a pytree) holding any of the medium properties ``sound_speed`` [m/s],
``density`` [kg/m^3], ``alpha_coeff`` [dB/(MHz^y cm)], ``BonA`` [-] (scalars or arrays of the
user's grid shape) and the source terms ``p0`` [Pa] (grid-shaped), ``p`` [Pa], ``ux``, ``uy``,
``uz`` [m/s] (signals in the layouts :class:`sonotile.api.KSource` takes); entries left out take
the values given to :func:`make_simulator`. The output is the dict :func:`sonotile.simulate`
returns (same names, shapes and units) as JAX arrays, so ``jax.grad``, ``jax.vjp``,
``jax.jvp``, ``jax.jit`` and ``jax.vmap`` apply to any function of it, on one device or on a
``pencil`` or ``lfb`` mesh, in float32 or float64.

Everything the plan derives from the medium and the sources (``c0^2``, ``dt/rho0`` on the
staggered grids, absorption, B/A, the scaling of source signals by the sound speed at the
source, k-Wave's smoothing of p0) is computed inside the traced function from ``params``. Fixed
when the simulator is made (not differentiated): the grid, the time step and step count, the
reference sound speed of the k-space correction and the PML (k-Wave's default: the maximum of
the given sound speed), which effects are on (absorption, nonlinearity, which sources), source
and sensor positions, and transducer sources.

Memory: the time loop runs in checkpointed chunks
(:func:`sonotile.solver.adjoint.checkpointed_scan`): the backward pass stores the state every
``chunk`` steps and recomputes one chunk at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike, DTypeLike

from sonotile.api.inputs import with_defaults
from sonotile.api.options import RunOptions
from sonotile.api.problem import build_problem
from sonotile.api.simulation import shape_results
from sonotile.api.types import (
    KSensor,
    KSource,
    KWaveGrid,
    KWaveMedium,
    OptionArgs,
    Options,
    model_of,
)
from sonotile.base import config
from sonotile.model.filters import smooth
from sonotile.model.grid import AXES
from sonotile.model.problem import Problem, ProblemError
from sonotile.parallel.decomposition import AUTO, PENCIL, SINGLE, Decomposition
from sonotile.parallel.traced import Run, axes_of, mesh_of, traced_runner
from sonotile.physics.acoustic import AcousticModel, State
from sonotile.physics.acoustic.constants import source_constants, traced_medium_constants
from sonotile.physics.acoustic.model import scan_inputs
from sonotile.physics.acoustic.sources import pressure_source_scale, velocity_source_scale
from sonotile.solver import adjoint, finite, runner, stepping
from sonotile.solver import sensors as sens
from sonotile.solver.tape import Tape, as_tape

if TYPE_CHECKING:
    from typing_extensions import Unpack

    # imported where used: a single-device simulator does not load them
    from sonotile.parallel.lfb import LfbOps
    from sonotile.parallel.mesh import ShardIndex
    from sonotile.parallel.pencil import PencilOps
    from sonotile.spectral.linear import AdjointOps

    #: The spectral operators of one device (:class:`AdjointOps`) or of one shard of a mesh.
    Ops = AdjointOps | LfbOps | PencilOps
    #: Sensor points: per axis indices on one device, or a shard's own points on a mesh.
    Index = tuple[jax.Array, ...] | ShardIndex

MEDIUM_KEYS = {"sound_speed": "sound_speed", "density": "density",
               "alpha_coeff": "alpha_coeff", "BonA": "BonA"}  # fmt: skip
SOURCE_KEYS = ("p0", "p", "ux", "uy", "uz")

#: An output of the simulator: an array, or per cuboid a list of arrays (cuboid sensors).
Quantity = jax.Array | list[jax.Array]


@dataclass(frozen=True)
class Static:
    """What :func:`make_simulator` fixes: the problem and how user input maps onto it."""

    problem: Problem
    layout: sens.SensorLayout
    phys: AcousticModel
    pad: tuple[tuple[int, int], ...]  # per axis (before, after) points of an outside PML
    crop: tuple[slice, ...]
    shape: tuple[int, ...]  # the user's grid shape
    sources: dict[str, Any]  # source index arrays and transducer constants (fixed)
    smooth_p0: bool
    chunk: int | None
    remat_step: bool
    tape: Tape | None = None
    #: mesh axis names the state is split over (keys of the tape's shards)
    axes: tuple[str, ...] = ()
    #: devices per split axis of the mesh (empty on one device)
    mesh: tuple[int, ...] = ()


def _padded(v: jax.Array, st: Static, mode: Literal["constant", "edge"]) -> jax.Array:
    if jnp.ndim(v) == 0 or not any(a or b for a, b in st.pad):
        return v
    return jnp.pad(v, st.pad, mode=mode)


def _at(c: jax.Array, index: tuple[jax.Array, ...]) -> jax.Array:
    """Values of a field at the source points ``(Nsrc,)``; a scalar as ``(1,)``."""
    return c[index] if jnp.ndim(c) > 0 else jnp.reshape(c, (1,))


def _rows(sig: ArrayLike, n_points: int, name: str, dtype: DTypeLike) -> jax.Array:
    """User signal ``(Nt,)`` / ``(Nsrc, Nt)`` -> solver rows ``(Nt, 1)`` / ``(Nt, Nsrc)``."""
    s = jnp.asarray(sig, dtype)
    if s.ndim == 2 and s.shape[0] == 1:
        s = s[0]
    if s.ndim == 1:
        return s[:, None]
    if s.ndim != 2 or s.shape[0] != n_points:
        raise ProblemError(f"params[{name!r}]: shape {s.shape}, expected (Nt,) or ({n_points}, Nt)")
    return s.T


def _scaled(rows: jax.Array, scale: jax.Array) -> jax.Array:
    """Rows ``(Nt, 1 | Nsrc)`` times the per-point scale ``(1 | Nsrc,)``."""
    return rows * scale[None, :]


def _step_rows(rows: jax.Array, n0: int, nt: int) -> jax.Array:
    """Signal rows for steps ``n0 <= n < nt`` (zero past the signal's end)."""
    length = rows.shape[0]
    if length < nt:
        rows = jnp.concatenate([rows, jnp.zeros((nt - length, rows.shape[1]), rows.dtype)])
    return rows[n0:nt]


def step_inputs(st: Static, params: Mapping[str, jax.Array], c0: jax.Array) -> dict[str, Any]:
    """The scan inputs (see :func:`sonotile.solver.runner.step_inputs`) from traced signals,
    scaled as k-Wave's ``scaleSourceTerms`` scales them with the (traced) sound speed."""
    pb = st.problem
    g, s, dtype = pb.grid, pb.sources, jnp.dtype(pb.dtype)
    d, dt, dx = g.ndim, g.dt, g.spacing
    n0 = 1 if st.phys.ivp else 0
    rows: dict[str, Any] = {"p": None}
    lens: dict[str, Any] = {"tr": 0 if s.transducer is None else s.transducer.length}
    if s.p is not None:
        idx = tuple(jnp.asarray(s.p.index[:, a]) for a in range(d))
        c = _at(c0, idx)
        scale = pressure_source_scale(c, d, dt, dx[0], s.p.mode)
        p = _scaled(_rows(params["p"], idx[0].shape[0], "p", dtype), scale)
        rows["p"], lens["p"] = _step_rows(p, n0, g.nt), p.shape[0]
    us: list[jax.Array | None] = []
    u_lens: list[int] = []
    for a, src in enumerate(s.u):
        if src is None:
            us.append(None)
            u_lens.append(0)
            continue
        idx = tuple(jnp.asarray(src.index[:, b]) for b in range(d))
        u = _rows(params[f"u{AXES[a]}"], idx[0].shape[0], f"u{AXES[a]}", dtype)
        if src.mode != "dirichlet":
            u = _scaled(u, velocity_source_scale(_at(c0, idx), dt, dx[a]))
        us.append(_step_rows(u, n0, g.nt))
        u_lens.append(u.shape[0])
    rows["u"], lens["u"] = tuple(us), tuple(u_lens)
    return scan_inputs(n0, g.nt, rows, lens, dtype, jnp)


def constants(
    st: Static, params: Mapping[str, jax.Array], derive_axes: tuple[int, ...]
) -> tuple[dict[str, Any], jax.Array]:
    """The step's constants from ``params`` (medium padded like the problem's) and ``c0``."""
    pb = st.problem

    def med(key: str) -> jax.Array:
        return _padded(jnp.asarray(params[key], pb.dtype), st, "edge")

    c0 = med("sound_speed")
    m = pb.medium
    c = traced_medium_constants(
        pb, c0, med("density"),
        bona=med("BonA") if m.nonlinear else None,
        alpha_coeff=med("alpha_coeff") if m.absorption != "lossless" else None,
        derive_axes=derive_axes,
    )  # fmt: skip
    c.update(st.sources)
    if st.phys.ivp:
        p0 = jnp.asarray(params["p0"], pb.dtype)
        if p0.shape != st.shape:
            raise ProblemError(f"params['p0']: shape {p0.shape}, expected the grid {st.shape}")
        if st.smooth_p0:
            p0 = smooth(p0, True, jnp)
            if st.mesh:  # its whole-grid FFTs run unsplit (XLA:CPU refused them split on 2x2)
                from sonotile.parallel.differentiable import replicated

                p0 = replicated(p0, st.mesh)
        c["p0"] = _padded(p0, st, "constant")
    return c, c0


def local_run(
    st: Static,
    c: dict[str, Any],
    index: Index,
    ops: Ops,
    xs: dict[str, Any],
    shape: tuple[int, ...],
) -> tuple[dict[str, jax.Array], dict[str, jax.Array], State]:
    """The time loop on one device or shard: ``(raw (Ts, Ns) per name, aggregates, state)``."""
    layout, phys, dtype = st.layout, st.phys, jnp.dtype(st.problem.dtype)
    agg = sens.init_aggregates(layout, shape, dtype)
    raw0 = {}
    if phys.ivp:
        state = phys.initial_state(c, ops)
        fields, samples = sens.sample(phys.observed(state, c), ops, layout, index)
        agg = sens.update(agg, fields, samples, 0 >= layout.start, layout)
        raw0 = {f: samples[f][None] for f in layout.raw}
    else:
        state = phys.zero_state(shape, dtype)
    # no phys.prepare here (the source patterns): the signals are parameters (per point, scaled
    # by the traced sound speed), so whether the points share one is not known when this is traced
    # the stacked step where Settings.step picks it: on one device, without a tape
    loop = None if st.mesh or st.tape is not None else stepping.choose(phys, ops)
    (state, agg), raw = runner.loop_scan(phys, layout, c, ops, index, (state, agg), xs, st.chunk,
                                         st.tape, st.axes, st.remat_step, loop)  # fmt: skip
    if raw0:
        raw = {k: jnp.concatenate([raw0[k], v]) for k, v in raw.items()}
    return {k: v[layout.start :] for k, v in raw.items()}, agg, state


def shaped_results(
    st: Static,
    raw: dict[str, jax.Array],
    agg: dict[str, jax.Array],
    state: tuple[jax.Array, tuple, tuple],
) -> dict[str, Quantity]:
    """:func:`sonotile.simulate`'s output layout (JAX arrays; see :class:`sonotile.api.Results`)."""
    layout = st.layout
    final = sens.finish(agg, State(*state), layout, st.problem.grid.nt, traced=True)
    if ("p", "cw_re") in layout.stats:
        assert layout.cw is not None  # layout_of sets it with the p_cw statistics
        re, im = agg["p_cw_re"], agg["p_cw_im"]
        final["p_cw_amp"], final["p_cw_phase"] = sens.cw_amp_phase(re, im, layout.cw, jnp)
    return cast("dict[str, Quantity]", shape_results(st.problem, raw, final, st.crop, jnp))


class Simulator:
    """``sim(params) -> dict`` of JAX arrays (see the module docstring); jit-compiled.

    Attributes:
        params: the default parameters (the values given to :func:`make_simulator`), a dict.
        problem: the solver-ready problem (grid, time step, PML, sources, sensor).
        t: time of each step [s], ``(nt,)``.
        sensor_points: ``(Ns, ndim)`` sensor grid indices (user grid), or None.
        describe: where it runs.
    """

    def __init__(
        self,
        st: Static,
        params: dict[str, jax.Array],
        run: Run,
        fixed: tuple,
        derive: tuple[int, ...],
        describe: str,
    ) -> None:
        self.static, self.params, self.describe = st, params, describe
        self.problem = st.problem
        self.t = np.arange(st.problem.grid.nt) * st.problem.grid.dt
        self.sensor_points: np.ndarray | None = None
        self._fixed = fixed
        self._fn = jax.jit(partial(_simulate, st, run, derive))

    def __call__(self, params: Mapping[str, ArrayLike] | None = None) -> dict[str, Quantity]:
        out = self._fn(with_defaults(self.params, params), self._fixed)
        finite.check_results(out, self.static.phys, self.static.problem)  # a plain call only
        return out


def _simulate(
    st: Static, run: Run, derive: tuple[int, ...], params: dict[str, jax.Array], fixed: tuple
) -> dict[str, Quantity]:
    c, c0 = constants(st, params, derive)
    xs = step_inputs(st, params, c0)
    raw, agg, state = run(c, xs, fixed)
    return shaped_results(st, raw, agg, state)


def default_params(
    medium: KWaveMedium, source: KSource, problem: Problem, dtype: DTypeLike
) -> dict[str, jax.Array]:
    """The parameters the simulation has, with the values given (user grid, user layouts)."""
    m = problem.medium
    out = {"sound_speed": medium.sound_speed, "density": medium.density}
    if m.absorption != "lossless":
        out["alpha_coeff"] = medium.alpha_coeff
    if m.nonlinear:
        out["BonA"] = medium.BonA
    for k in SOURCE_KEYS:
        if getattr(source, k) is not None:
            out[k] = getattr(source, k)
    return {k: jnp.asarray(np.asarray(v, np.float64), dtype) for k, v in out.items()}


def _begin(options: Options | None, given: Mapping[str, Any], how: RunOptions) -> Options:
    """The options of :func:`make_simulator`, its run options checked, JAX's runtime prepared."""
    if how.decomposition == AUTO:
        raise ValueError("decomposition = 'auto': make_simulator takes single, pencil or lfb")
    how.refuse(("checkpoint",), "simulate's option (a run saved and resumed); a differentiable "
               "run is not saved")  # fmt: skip
    from sonotile.base import runtime

    runtime.prepare()  # XLA flags (if JAX has not started), allocator, compilation cache
    return Options.of(options, given, "make_simulator")


def _elastic(
    kgrid: KWaveGrid, medium: Any, source: Any, sensor: KSensor, opts: Options, how: RunOptions
) -> Simulator:
    """The elastic simulator (:mod:`sonotile.api.elastic.simulator`), typed as the acoustic."""
    from sonotile.api.elastic.simulator import make_elastic_simulator

    sim = make_elastic_simulator(kgrid, medium, source, sensor, opts, how)
    return sim  # type: ignore[return-value]


def make_simulator(
    kgrid: KWaveGrid,
    medium: KWaveMedium,
    source: KSource,
    sensor: KSensor,
    *,
    options: Options | None = None,
    run: RunOptions | None = None,
    decomposition: Decomposition | str = SINGLE,
    mesh: tuple[int, ...] | None = None,
    overlap: int | None = None,
    bell_width: float = 0.5,
    chunk: int | Literal["auto"] | None = "auto",
    remat_step: bool = False,
    tape: Tape | str | None = None,
    **option_args: Unpack[OptionArgs],
) -> Simulator:
    """A differentiable simulation of k-Wave-style input (arguments as :func:`sonotile.simulate`).

    Args:
        run: how the run runs (:class:`~sonotile.api.RunOptions`); its fields below may also
            be given as keyword arguments, which override ``run``'s.
        decomposition: ``"single"``, ``"pencil"`` or ``"lfb"`` (``mesh``: devices per split
            axis, default all devices on x; ``overlap`` (default 16), ``bell_width``: LFB's).
        chunk: steps per checkpointed chunk of the time loop (``"auto"``: ``ceil(sqrt(nt))``;
            ``None``: no checkpointing, every step's intermediates kept for the backward pass).
        remat_step: also recompute each step in the backward pass (less memory, more time).
        tape: keep the states the backward pass needs off the device: ``"host"`` (host
            memory: off a GPU), ``"disk"`` (files in a temporary folder: off the process's
            memory) or a :class:`sonotile.Tape` (e.g. ``Tape("disk", directory=...)``). The
            state is then stored every ``chunk`` steps (``"auto"``: every step) and the
            backward pass recomputes one chunk at a time, keeping its steps' spectral results
            (FFT outputs; with ``remat_step`` nothing: each step rematerialised); only
            reverse mode (``jax.grad``, ``jax.vjp``) is defined. ``None``: states on the device.

    An elastic medium (``sound_speed_compression`` / ``sound_speed_shear``) gives an elastic
    simulator (:mod:`sonotile.api.elastic.simulator`: ``params`` by k-Wave's elastic names,
    the records of ``pstd_elastic_2d/3d``; single, pencil or lfb; ``tape`` as here, the
    elastic state's split fields on it).

    Returns:
        A :class:`Simulator`: ``sim(params)`` with ``params`` a dict of any of ``sound_speed``,
        ``density``, ``alpha_coeff``, ``BonA``, ``p0``, ``p``, ``ux``, ``uy``, ``uz`` present
        in the input; ``sim.params`` holds the given values.
    """
    how = RunOptions.of(run, decomposition=decomposition, mesh=mesh, overlap=overlap,
                        bell_width=bell_width, chunk=chunk, remat_step=remat_step,
                        tape=tape)  # fmt: skip
    opts = _begin(options, option_args, how)
    makes: dict[str, Callable[..., Simulator]] = {"acoustic": _acoustic, "elastic": _elastic}
    return makes[model_of(medium)](kgrid, medium, source, sensor, opts, how)  # by the medium


def _acoustic(
    kgrid: KWaveGrid, medium: KWaveMedium, source: KSource, sensor: KSensor, opts: Options,
    how: RunOptions,
) -> Simulator:  # fmt: skip
    """The acoustic simulator (:func:`make_simulator` of an acoustic medium)."""
    decomposition, chunk, remat_step = how.decomposition, how.chunk, how.remat_step
    if opts.smooth_c0 or opts.smooth_rho0 or opts.axisymmetric:
        raise ValueError("make_simulator: smooth_c0, smooth_rho0, axisymmetric: not differentiable")
    smooth_p0 = opts.smooth_p0  # applied to the (traced) p0 of each call, not to the input's
    problem, mapping = build_problem(kgrid, medium, source, sensor, replace(opts, smooth_p0=False))
    shape = tuple(kgrid.shape)
    full = problem.grid.shape
    start = [sl.start for sl in mapping["crop"]]
    pad = tuple((a, n - a - s) for a, n, s in zip(start, full, shape))
    srcc = source_constants(problem)
    srcc.pop("p0", None)
    nt, tape = problem.grid.nt, as_tape(how.tape)
    if chunk == "auto":
        chunk = 1 if tape is not None else adjoint.default_chunk(nt)
    st = Static(
        problem, sens.layout_of(problem.sensor, full, nt, problem.grid.dt),
        AcousticModel.of(problem),
        pad, mapping["crop"], shape, srcc, smooth_p0, chunk, remat_step, tape,
    )  # fmt: skip
    mesh_t = mesh_of(decomposition, how.mesh)
    if mesh_t:
        stepping.single_device_only("a decomposed differentiable run")
    if tape is not None and config.current().step == "stacked":
        raise ValueError("SONOTILE_STEP=stacked: a differentiable run with a tape takes the "
                         "model's step; use SONOTILE_STEP=plain or auto")  # fmt: skip
    st = replace(st, axes=axes_of(mesh_t), mesh=mesh_t)
    overlap = 16 if how.overlap is None else how.overlap
    tr = traced_runner(st.phys, problem, st.layout, decomposition, mesh_t, overlap, how.bell_width,
                       local=partial(local_run, st))  # fmt: skip
    nd = problem.grid.ndim
    derive = tuple(range(nd)) if decomposition == SINGLE else ()
    if decomposition == PENCIL:  # the axes a pencil shard holds whole
        derive = tuple(range(len(mesh_t), nd))
    sim = Simulator(
        st,
        default_params(medium, source, problem, opts.dtype),
        tr.run,
        tr.fixed,
        derive,
        tr.describe,
    )
    sim.sensor_points = mapping["points"]
    return sim


__all__ = ["Simulator", "make_simulator"]
