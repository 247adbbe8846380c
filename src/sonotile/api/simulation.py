"""The Python API a k-Wave user finds natural: grid, medium, source, sensor -> ``simulate``.

It does what k-Wave's MATLAB/Python front end does before its solver runs (scaling source terms
to density/velocity units, densities on the staggered grids, default time step and PML, PML
outside the grid when asked, intensity post-processing) and then runs the very same core that
``sonotile-kwave`` runs.

Conventions: arrays are indexed ``(x, y, z)``; SI units throughout; masks are boolean arrays of
the grid shape; source points and sensor points are ordered as k-Wave orders them (MATLAB
column-major ``find`` order: x fastest).

Example::

    grid = KWaveGrid((128, 128), (1e-4, 1e-4))
    medium = KWaveMedium(sound_speed=1500.0, density=1000.0)
    source = KSource(p0=disc)
    sensor = KSensor(mask=ring, record=("p", "p_max"))
    res = simulate(grid, medium, source, sensor)
    res["p"]  # (n_sensors, n_steps) [Pa]
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import warnings
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from sonotile.api import inputs as user_input
from sonotile.api.options import RunOptions
from sonotile.api.problem import build_problem, fourier_shift
from sonotile.api.results import Quantity, Results
from sonotile.api.types import (
    ElasticSource,
    KSensor,
    KSource,
    KWaveElasticMedium,
    KWaveGrid,
    KWaveMedium,
    OptionArgs,
    Options,
    model_of,
)
from sonotile.model.grid import AXES
from sonotile.model.problem import Problem, ProblemError
from sonotile.parallel.decomposition import Decomposition
from sonotile.physics.acoustic import checks

if TYPE_CHECKING:
    import jax
    from typing_extensions import Unpack

    from sonotile.api.heating.checkpoint import Checkpoint


def simulate(
    kgrid: KWaveGrid,
    medium: KWaveMedium | KWaveElasticMedium,
    source: KSource | ElasticSource,
    sensor: KSensor,
    *,
    options: Options | None = None,
    run: RunOptions | None = None,
    decomposition: Decomposition | str = Decomposition.SINGLE,
    mesh: tuple[int, ...] | None = None,
    overlap: int | None = None,
    accuracy: float = 1e-3,
    progress: bool | None = None,
    quiet: bool = False,
    device: jax.Device | None = None,
    devices: Sequence[jax.Device] | None = None,
    checkpoint: Checkpoint | None = None,
    **option_args: Unpack[OptionArgs],
) -> Results:
    """Run a simulation (k-Wave's ``kspaceFirstOrder1D/2D/3D``) on the default device.

    Args:
        kgrid, medium, source, sensor: the k-Wave-style description.
        options: how the input becomes a problem (:class:`~sonotile.api.Options`: PML size,
            alpha and placement, dtype, smoothing); its fields may also be given as keyword
            arguments (``pml_size=10, dtype="float64"``), which override ``options``.
        run: how the run runs (:class:`~sonotile.api.RunOptions`); its fields below may also
            be given as keyword arguments, which override ``run``'s.
        decomposition: ``"single"`` (one device), ``"pencil"`` (distributed FFT, exact),
            ``"lfb"`` (local Fourier basis, nearest-neighbour exchange) or ``"auto"`` (chosen
            from grid, devices and ``accuracy``); see ``docs/decomposition.md``.
        mesh: devices per split axis, e.g. ``(2, 4)`` (default: all devices on x).
        overlap: LFB overlap [points] (default: auto's pick, else 16).
        accuracy: relative accuracy target for ``decomposition="auto"``.
        progress: print progress (default: when stderr is a terminal).
        quiet: do not print warnings or the memory estimate (the warnings are still in the
            result's ``warnings``).
        device: the one device to run on (a ``jax.Device``; default: JAX's default device).
        devices: the devices of a decomposition (default: all).
        checkpoint: an elastic run's state file and when to stop
            (:class:`~sonotile.api.heating.Checkpoint`: ``path``, ``interval`` [s], ``steps``):
            the run saves its state there and raises :class:`~sonotile.api.heating.RunStopped`
            when it stops; the same call goes on from the file (``docs/elastic.md``). Acoustic
            runs save theirs through ``sonotile-kwave`` (``docs/kwave.md``).

    An elastic medium (:class:`~sonotile.api.types.KWaveElasticMedium`, or a medium with
    ``sound_speed_compression`` / ``sound_speed_shear``) runs the elastic model, as k-Wave's
    ``pstdElastic2D/3D`` (``docs/elastic.md``): sources ``p0``, ``u_mask`` / ``ux``...,
    ``s_mask`` / ``sxx``... (:class:`~sonotile.api.types.ElasticSource`), records as there.

    Returns:
        :class:`Results`.
    """
    from sonotile.base import runtime

    runtime.prepare()  # XLA flags (if JAX has not started), allocator, compilation cache
    how = RunOptions.of(run, decomposition=decomposition, mesh=mesh, overlap=overlap,
                        accuracy=accuracy, progress=progress, quiet=quiet,
                        checkpoint=checkpoint)  # fmt: skip
    how.refuse(("chunk", "remat_step", "tape"), "an option of make_simulator's backward pass "
               "(simulate keeps none)")  # fmt: skip
    options = Options.of(options, option_args, "simulate")
    runs: dict[str, Callable[..., Results]] = {"acoustic": _acoustic, "elastic": _elastic}
    return runs[model_of(medium)](kgrid, medium, source, sensor, options, how, device, devices)


def _elastic(
    kgrid: KWaveGrid, medium: KWaveElasticMedium, source: ElasticSource, sensor: KSensor,
    options: Options, how: RunOptions, device: jax.Device | None,
    devices: Sequence[jax.Device] | None,
) -> Results:  # fmt: skip
    """:func:`simulate` of an elastic medium (:func:`sonotile.api.elastic.simulate_elastic`)."""
    import jax

    from sonotile.api.elastic.pstd import simulate_elastic

    devs = devices if devices is not None else ([device] if device is not None else None)
    ctx = jax.default_device(device) if device is not None else contextlib.nullcontext()
    with ctx:
        return simulate_elastic(kgrid, medium, source, sensor, options, how, devs)


def _acoustic(
    kgrid: KWaveGrid, medium: KWaveMedium, source: KSource, sensor: KSensor, options: Options,
    how: RunOptions, device: jax.Device | None, devices: Sequence[jax.Device] | None,
) -> Results:  # fmt: skip
    """:func:`simulate` of an acoustic medium."""
    _no_checkpoint(how.checkpoint)
    problem, mapping = build_problem(kgrid, medium, source, sensor, options)
    notes = checks.stability_warnings(problem) + checks.resolution_warnings(problem)
    notes += checks.input_warnings(problem) + user_input.record_warnings(tuple(sensor.record))
    notes += user_input.absorption_warnings(medium, options.axisymmetric)
    notes += size_warnings(problem, kgrid, options)
    for w in [] if how.quiet else notes:  # quiet: kept in the result's ``warnings`` only
        warnings.warn(w, stacklevel=3)  # the user's call of simulate
    if not how.quiet and (how.progress or (how.progress is None and sys.stderr.isatty())):
        mb = checks.memory_estimate(problem) / 2**20
        print(
            f"sonotile: grid {problem.grid.shape}, {problem.grid.nt} steps, about {mb:.0f} MB",
            file=sys.stderr,
        )
    raw, final = _run(problem, how, device, devices, options.check_finite)
    data = shape_results(problem, raw, final, mapping["crop"])
    t = np.arange(problem.sensor.start, problem.grid.nt) * problem.grid.dt  # recorded steps
    opts = dataclasses.asdict(options)
    inputs = (kgrid, medium, source, sensor)
    return Results(data, problem.grid, t, mapping["points"], notes, inputs, opts)


def _no_checkpoint(checkpoint: Checkpoint | None) -> None:
    """An acoustic run's ``checkpoint``, refused by name (``simulate`` saves elastic runs)."""
    if checkpoint is not None:
        raise ProblemError(
            "checkpoint: simulate saves and resumes elastic runs (medium with "
            "sound_speed_compression); an acoustic run saves its state through sonotile-kwave's "
            "checkpoint options (docs/kwave.md)"
        )


def size_warnings(problem: Problem, kgrid: KWaveGrid, options: Options) -> list[str]:
    """:func:`~sonotile.physics.acoustic.checks.size_warnings` in the API's names: the sizes
    of ``kgrid.shape`` that give fast totals with the PML, and ``pml_size="auto"``."""
    nd = problem.grid.ndim
    names = [f"kgrid.shape[{a}]" for a in range(nd)]
    added = [n - u for n, u in zip(problem.grid.shape, kgrid.shape)]
    advice = ""
    if options.pml_inside:
        advice = (
            "; or pml_inside=False with pml_size='auto' (a PML around the grid that makes them)"
        )
    elif options.pml_size != "auto":
        advice = "; or pml_size='auto' (PML thicknesses that make each total such a size)"
    return checks.size_warnings(problem.grid.shape, names, added, advice)


def _run(
    problem: Problem,
    how: RunOptions,
    device: jax.Device | None,
    devices: Sequence[jax.Device] | None,
    check_finite: bool = True,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Run on the device(s) asked for; float64 runs switch JAX's 64-bit mode on for the run."""
    import jax

    from sonotile.parallel.engine import engine_for
    from sonotile.solver import runner

    x64: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if problem.dtype == "float64" and not jax.enable_x64.value:
        x64 = jax.enable_x64(True)
    with x64:
        decomposition = how.decomposition
        if decomposition == Decomposition.SINGLE and devices is not None and len(devices) > 1:
            raise ValueError(
                f"devices: {len(devices)} devices for decomposition 'single'; choose "
                "pencil, lfb or auto, or pass device="
            )
        one = device if device is not None else (devices[0] if devices else None)
        on = jax.default_device(one) if one is not None else contextlib.nullcontext()
        with on:  # one device: the one asked for (default: JAX's default device)
            engine, reason = engine_for(
                problem, decomposition, how.mesh, how.overlap, how.bell_width, how.accuracy,
                devices,
            )  # fmt: skip
            if not how.quiet and decomposition != Decomposition.SINGLE:
                print(f"sonotile: running {engine.describe} ({reason})", file=sys.stderr)
            return runner.run_engine(engine, progress=how.progress, check_finite=check_finite)


def shape_results(
    problem: Problem,
    raw: dict[str, Any],
    final: dict[str, Any],
    crop: tuple[slice, ...],
    xp: ModuleType = np,
) -> dict[str, Quantity]:
    """The runner's raw series and final quantities in the user's layout (see :class:`Results`),
    whole fields cropped to the user's grid; ``xp``: numpy (host arrays) or jax.numpy (a traced
    run's values, which keep their dtype)."""
    sensor = problem.sensor
    nd = problem.grid.ndim
    shapes = None
    if sensor.cuboids is not None:
        shapes = [tuple(int(h - lo + 1) for lo, h in zip(c[0], c[1])) for c in sensor.cuboids]
        splits = np.cumsum([int(np.prod(s)) for s in shapes])[:-1]

    def series(v: Any) -> Quantity:  # (Ts, Ns) -> (Ns, Ts) or per-cuboid (Cx, Cy, Cz, Ts)
        if shapes is None:
            return np.ascontiguousarray(v.T) if xp is np else v.T
        return [
            xp.moveaxis(b.reshape((v.shape[0],) + s), 0, -1)
            for b, s in zip(xp.split(v, splits, axis=1), shapes)
        ]

    def stat(v: Any) -> Quantity:
        if shapes is None:
            return v
        return [b.reshape(s) for b, s in zip(xp.split(v, splits), shapes)]

    out: dict[str, Quantity] = {}
    rec = set(sensor.record)
    for name, v in raw.items():
        base = (
            "u_non_staggered" if name.endswith("_non_staggered") else ("p" if name == "p" else "u")
        )
        if base in rec:
            out[name] = series(v)
    for name, v in final.items():
        out[name] = v[crop] if (name.endswith("_all") or name.endswith("_final")) else stat(v)
    if {"I", "I_avg"} & rec:
        p = raw["p"].T
        for a in range(nd):
            u = fourier_shift(raw[f"u{AXES[a]}_non_staggered"].T, 0.5, xp)
            inten = p * (u if xp is np else u.astype(p.dtype))
            if "I" in rec:
                out[f"I{AXES[a]}"] = series(inten.T)
            if "I_avg" in rec:
                out[f"I{AXES[a]}_avg"] = stat(inten.mean(axis=-1))
    return out
