"""One leg of a k-Wave-compatible run: read, validate, compile, step, write, checkpoint."""

from __future__ import annotations

import os
import sys
import time

import h5py
import jax
import jax.numpy as jnp
import numpy as np

from . import __version__, checks
from . import runner as rn
from . import sensors as sens
from .distributed import agree_any, barrier, in_turns
from .grid import AXES
from .kwave_cli import _check_writable, install_stop_handlers, restore_handlers
from .kwave_io import XyzView, read_input, to_xyz
from .kwave_output import OutputFile, _set_str, write_scalar, write_shards
from .step import State


def save_checkpoint(path: str, engine: rn.Engine, rs: rn.RunState, meta) -> None:
    """k-Wave checkpoint (FORMAT.md 4.4) plus sonotile's running statistics, atomically.

    Fields are written shard by shard: process 0 creates the file and writes its shards, then
    every other process in turn writes its own (no whole field is gathered anywhere). A
    checkpoint written by N processes holds the same datasets as a single-process one, so it
    resumes on any number of processes and devices.
    """
    state, agg = rs.carry
    tmp = path + ".sonotile-partial"
    nx, ny, nz = meta.shape_xyz
    du = engine.divergence(state.u)
    fields = {"p": state.p}
    for a in range(len(state.u)):
        fields[f"rho{AXES[a]}"] = state.rho[a]
        fields[f"u{AXES[a]}_sg{AXES[a]}"] = state.u[a]
        fields[f"du{AXES[a]}d{AXES[a]}"] = du[a]
    zyx = (nz, ny, nx)
    leader = jax.process_index() == 0
    if leader:
        with h5py.File(tmp, "w") as f:
            _set_str(f, "file_type", "checkpoint")
            _set_str(f, "created_by", f"sonotile v{__version__}")
            _set_str(f, "creation_date", time.strftime("%d/%m/%y, %H:%M:%S"))
            for k in ("file_description", "major_version", "minor_version"):
                _set_str(f, k, meta.header[k])
            write_scalar(f, "t_index", rs.next_step, np.uint64)
            for n, v in (("Nx", nx), ("Ny", ny), ("Nz", nz)):
                write_scalar(f, n, v, np.uint64)
            for name, v in fields.items():  # the run's precision (float64 with --float64)
                d = f.create_dataset(name, shape=zyx, dtype=np.dtype(v.dtype))
                d.attrs["data_type"], d.attrs["domain_type"] = (
                    np.bytes_(b"float"),
                    np.bytes_(b"real"),
                )
            g = f.create_group("sonotile_aggregates")
            for name, v in agg.items():
                g.create_dataset(name, shape=tuple(v.shape), dtype=np.dtype(v.dtype))
            g.attrs["dtype"] = engine.problem.dtype

    def mine():
        with h5py.File(tmp, "r+") as f:
            for name, v in fields.items():
                write_shards(f[name], v, zyx=True)
            for name, v in agg.items():
                write_shards(f["sonotile_aggregates"][name], v, zyx=False)

    in_turns(mine, "sonotile-checkpoint")
    if leader:
        os.replace(tmp, path)
    barrier("sonotile-checkpoint-done")


def load_checkpoint(
    path: str, engine: rn.Engine, meta, output_path: str | None = None
) -> rn.RunState:
    """State and running statistics from a checkpoint.

    sonotile's own checkpoints carry the running statistics (``sonotile_aggregates``, in the
    run's precision); a checkpoint written by k-Wave's binary does not, and then, as k-Wave
    does, they are reloaded from the partial output file ``output_path``.
    """
    dtype = jnp.dtype(engine.problem.dtype)
    with h5py.File(path, "r") as f:
        ftype = f.attrs.get("file_type", b"").decode() if "file_type" in f.attrs else ""
        if ftype != "checkpoint":
            raise ValueError(f"{path}: file_type '{ftype}', expected 'checkpoint'")
        dims = tuple(int(f[n][()].reshape(-1)[0]) for n in ("Nx", "Ny", "Nz"))
        if dims != tuple(meta.shape_xyz):
            raise ValueError(
                f"{path}: checkpoint grid {dims} does not match input {meta.shape_xyz}"
            )
        t_index = int(f["t_index"][()].reshape(-1)[0])
        nd = engine.problem.grid.ndim

        def field(name):  # read lazily: each process reads only its hyperslabs in place()
            if name not in f:
                raise ValueError(f"{path}: dataset '{name}' is missing")
            view = XyzView(f[name], dtype)
            if view.shape != tuple(engine.problem.grid.shape):
                raise ValueError(
                    f"{path}: dataset '{name}' holds {f[name].shape}, expected the grid"
                )
            return view

        state = State(
            field("p"),
            tuple(field(f"rho{AXES[a]}") for a in range(nd)),
            tuple(field(f"u{AXES[a]}_sg{AXES[a]}") for a in range(nd)),
        )
        agg0 = sens.init_aggregates(engine.layout, engine.problem.grid.shape, dtype)
        g = f.get("sonotile_aggregates")
        if g is not None:
            missing = [n for n in agg0 if n not in g]
            if missing:
                raise ValueError(
                    f"{path}: running statistic '{missing[0]}' is missing (the checkpoint "
                    "was written with other output flags)"
                )
            agg = {n: XyzView(g[n], dtype, stored_xyz=True) for n in agg0}
        else:
            agg = _aggregates_from_output(output_path, engine, agg0, dtype)
        if not 0 < t_index <= engine.problem.grid.nt:
            raise ValueError(f"{path}: t_index {t_index} outside 1..Nt = {engine.problem.grid.nt}")
        rs = rn.RunState(engine.place((state, agg)), t_index)
    # process 0 moves the output file aside next: the others must have read it first
    barrier("sonotile-checkpoint-loaded")
    return rs


def _aggregates_from_output(output_path, engine: rn.Engine, agg0: dict, dtype) -> dict:
    """Running max/min/sum of squares as a k-Wave checkpoint leg left them in the output."""
    if not agg0:
        return {}
    if output_path is None or not os.path.exists(output_path):
        raise ValueError(
            f"output file '{output_path}' to resume from is missing (it holds the running "
            "statistics of the checkpointed run)"
        )
    agg = {}
    with h5py.File(output_path, "r") as f:
        for name, v0 in agg0.items():
            if name not in f:
                raise ValueError(
                    f"{output_path}: dataset '{name}' to resume from is missing (the run was "
                    "started with other output flags)"
                )
            obj = f[name]
            if name.endswith("_all"):
                v = to_xyz(obj[()])
            elif isinstance(obj, h5py.Group):
                n = len(engine.layout.cuboid_shapes)
                v = np.concatenate([to_xyz(obj[str(i + 1)][()]).reshape(-1) for i in range(n)])
            else:
                v = np.asarray(obj[()]).reshape(-1)
            if v.shape != tuple(v0.shape):
                raise ValueError(
                    f"{output_path}: dataset '{name}' holds {v.shape}, expected {tuple(v0.shape)}"
                )
            agg[name] = np.asarray(v, dtype)
    return agg


def make_engine(problem, args, device) -> rn.Engine:
    """The engine for ``--decomposition`` / ``--mesh`` / ``--overlap`` (single by default)."""
    if jax.process_count() > 1 and (args.decomposition == "single" or device is not None):
        raise ValueError(
            f"{jax.process_count()} processes: use --decomposition pencil, lfb or auto (and no "
            "-g) so that the grid is split over the devices of all of them"
        )
    if args.decomposition == "single" or device is not None:
        if args.decomposition not in ("single", "auto"):
            raise ValueError(
                f"-g selects one device; it cannot be used with --decomposition "
                f"{args.decomposition}"
            )
        return rn.single_engine(problem)
    from .parallel import engine_for

    engine, reason = engine_for(
        problem, args.decomposition, args.mesh, args.overlap, args.bell_width, args.accuracy
    )
    if (args.decomposition == "auto" or args.verbose) and jax.process_index() == 0:
        print(f"sonotile-kwave: running {engine.describe} ({reason})", file=sys.stderr)
    return engine


def _select_device(index: int | None):
    if index is None:
        return None
    devs = jax.devices()
    if index >= len(devs):
        raise ValueError(f"-g {index}: only {len(devs)} device(s) available ({devs})")
    return devs[index]


def run_kwave(args) -> int:
    """Run one leg; returns the exit status.

    SIGTERM/SIGINT are caught for the whole leg: with ``--checkpoint_file`` the run writes a
    checkpoint after the current chunk of steps and exits 0; without, it stops, leaves no
    output and exits 1. A second signal aborts at once.
    """
    flag = {"stop": False}
    previous = install_stop_handlers(flag)
    try:
        return _run_kwave(args, flag)
    finally:
        restore_handlers(previous)


def _run_kwave(args, flag) -> int:
    t0 = time.perf_counter()
    verbose = args.verbose
    device = _select_device(args.device)
    _check_writable(args.output, "output file")
    if args.checkpoint_file:
        _check_writable(args.checkpoint_file, "checkpoint file")
    problem, meta = read_input(
        args.input,
        nt_override=args.benchmark,
        start=args.start,
        record=args.record,
        dtype="float64" if args.float64 else "float32",
        lazy=jax.process_count() > 1,  # each process reads only its hyperslabs of the fields
    )
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    quiet = jax.process_index() > 0  # several processes: process 0 speaks for the job
    for note in checks.stability_warnings(problem) + checks.resolution_warnings(problem):
        if not quiet:
            print(f"sonotile-kwave: warning: {note}", file=sys.stderr)
    if args.verbose and not quiet:
        mb = checks.memory_estimate(problem) / 2**20
        print(f"sonotile-kwave: estimated device memory {mb:.0f} MB", file=sys.stderr)
    t_load = time.perf_counter()
    ckpt = args.checkpoint_file
    resume = bool(ckpt) and os.path.exists(ckpt)
    ctx = jax.default_device(device) if device is not None else _null()
    with ctx:
        engine = make_engine(problem, args, device)
        if engine.describe.startswith("single"):  # medium constants are on the device now
            rn.planmod.release_host_medium(problem)
        if resume:
            rs = load_checkpoint(ckpt, engine, meta, args.output)
        out = OutputFile(
            args.output, meta, engine.layout, problem.grid.nt, args.compression, resume=resume
        )
        try:
            status = _leg(
                args, engine, meta, out, rs if resume else None, t0, t_load, verbose, flag
            )
        except BaseException:
            out.abort(keep=resume)
            raise
    return status


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _leg(args, engine, meta, out, rs, t0, t_load, verbose, flag) -> int:
    problem = engine.problem
    nt = problem.grid.nt
    leg_first = 0 if rs is None else rs.next_step  # k-Wave counts step 0 (p0) in a leg
    if rs is None:
        rs, raw0 = engine.start()
        rn.emit_step0(raw0, engine.layout.start, out)
    if args.copy_sensor_mask:
        out.copy_sensor_mask()
    t_pre = time.perf_counter()
    leg_start = time.perf_counter()
    stop = nt
    if args.checkpoint_timesteps:
        stop = min(nt, leg_first + args.checkpoint_timesteps)
    checkpointing = bool(args.checkpoint_file)

    def should_stop_here():
        if flag["stop"]:
            return True
        return bool(
            checkpointing
            and args.checkpoint_interval
            and time.perf_counter() - t0 > args.checkpoint_interval
        )

    def should_stop():  # several processes stop together (any one's signal or timer)
        return agree_any(should_stop_here())

    chunk = rn.default_chunk(problem, engine.layout)
    if checkpointing:
        chunk = min(chunk, 25)
    step_pct = max(1, int(nt * args.progress / 100))
    state = {"next": rs.next_step + step_pct}

    leader = jax.process_index() == 0

    def progress(n):
        if leader and (n >= state["next"] or n == nt):
            el = time.perf_counter() - leg_start
            print(f"  {100 * n / nt:5.1f}%  step {n}/{nt}  {el:8.2f}s", flush=True)
            state["next"] = n + step_pct

    if verbose and leader:
        print(
            f"sonotile-kwave v{__version__}: {args.input} -> {args.output}, grid "
            f"{problem.grid.shape}, Nt {nt}, on {engine.describe}, recording "
            f"{engine.layout.raw + tuple(engine.layout.final)}"
        )
    rs = rn.advance(engine, rs, stop, out, chunk=chunk, progress=progress, should_stop=should_stop)
    t_sim = time.perf_counter()
    if rs.next_step < nt:
        if not checkpointing:  # interrupted without a checkpoint file: a failed run
            raise InterruptedError(
                f"stopped by signal {flag.get('signal')} at step {rs.next_step}/{nt} without "
                "--checkpoint_file: no output written"
            )
        save_checkpoint(args.checkpoint_file, engine, rs, meta)
        agg = rs.carry[1]
        out.write_fields(dict(agg))  # whole fields go shard by shard
        if leader:
            print(f"checkpoint written at step {rs.next_step}/{nt}: {args.checkpoint_file}")
    else:
        final = sens.finish(rs.carry[1], rs.carry[0], engine.layout, nt, gather=False)
        out.write_fields(final)
    t_post = time.perf_counter()
    out.finish_leg(
        rs.next_step,
        {
            "total": t_post - t0,
            "data_loading_phase": t_load - t0,
            "pre-processing_phase": t_pre - t_load,
            "simulation_phase": t_sim - t_pre,
            "post-processing_phase": t_post - t_sim,
        },
    )
    barrier("sonotile-leg-done")  # the output is in place before any process reports success
    if leader and rs.next_step >= nt and checkpointing and os.path.exists(args.checkpoint_file):
        os.remove(args.checkpoint_file)
    if verbose and leader:
        print(f"done in {t_post - t0:.2f}s", file=sys.stderr)
    return 0
