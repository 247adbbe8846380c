"""One leg of a k-Wave-compatible run: read, validate, compile, step, write, checkpoint."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Literal

import h5py
import jax
import numpy as np

from sonotile.base import config, files, interrupt, runtime
from sonotile.base.files import check_input_path, file_digest, hdf5_cleanup_errors
from sonotile.base.processes import agree_any, barrier
from sonotile.base.runtime import install_stop_handlers, restore_handlers
from sonotile.base.version import __version__
from sonotile.kwave.checkpoint import Fingerprint, load_checkpoint, save_checkpoint
from sonotile.kwave.output import OutputFile
from sonotile.kwave.provenance import provenance
from sonotile.kwave.reader import KwaveFileError, read_input
from sonotile.parallel.decomposition import AUTO, SINGLE, Decomposition
from sonotile.physics.acoustic import checks, release_host_medium
from sonotile.solver import runner as rn
from sonotile.solver import sensors as sens
from sonotile.solver.finite import NonFiniteError, all_finite

if TYPE_CHECKING:
    from sonotile.kwave.reader import KwaveInput
    from sonotile.model.problem import Problem


#: How a k-Wave user gets fast sizes from k-Wave's MATLAB front end (the input file's grid
#: includes the PML).
KWAVE_SIZE_ADVICE = " (k-Wave: 'PMLSize', 'auto' with 'PMLInside', false makes them)"


def make_engine(problem: Problem, args: argparse.Namespace, device: jax.Device | None) -> rn.Engine:
    """The engine for ``--decomposition`` / ``--mesh`` / ``--overlap`` (single by default)."""
    if jax.process_count() > 1 and (args.decomposition == SINGLE or device is not None):
        raise ValueError(
            f"{jax.process_count()} processes: use --decomposition pencil, lfb or auto (and no "
            "-g) so that the grid is split over the devices of all of them"
        )
    if args.decomposition == SINGLE or device is not None:
        if args.decomposition not in (SINGLE, AUTO):
            raise ValueError(
                f"-g selects one device; it cannot be used with --decomposition "
                f"{args.decomposition}"
            )
        return rn.single_engine(problem)
    from sonotile.parallel.engine import engine_for

    engine, reason = engine_for(
        problem, Decomposition.parse(args.decomposition), args.mesh, args.overlap, args.bell_width,
        args.accuracy,
        transport=args.transport,
    )  # fmt: skip
    if (args.decomposition == AUTO or args.verbose) and jax.process_index() == 0:
        print(f"sonotile-kwave: running {engine.describe} ({reason})", file=sys.stderr)
    return engine


def _select_device(index: int | None) -> jax.Device | None:
    if index is None:
        return None
    devs = jax.devices()
    if index >= len(devs):
        raise ValueError(f"-g {index}: only {len(devs)} device(s) available ({devs})")
    return devs[index]


def check_distinct(args: argparse.Namespace) -> None:
    """Refuse an output or checkpoint path that is the input file (or each other)."""
    files.check_distinct(
        [("-i", args.input), ("-o", args.output), ("--checkpoint_file", args.checkpoint_file)]
    )


def run_kwave(args: argparse.Namespace) -> int:
    """Run one leg; returns the exit status.

    SIGTERM/SIGINT are caught for the whole leg (a Python exception raised by a signal inside
    JAX's or HDF5's C++ code would abort the process): with ``--checkpoint_file`` the run writes
    a checkpoint after the current chunk of steps and exits 0; without, it stops at the next
    point where it can (between reading, compiling and the steps, within the 20 ms poll of a
    running chunk, before the output is put in place) with
    :class:`~sonotile.base.interrupt.Interrupted`, leaving no output. A second signal aborts at
    once.
    """
    flag: dict[str, Any] = {"stop": False}  # a signal sets "stop" (bool) and "signal" (int)
    previous = install_stop_handlers(flag)
    try:
        with hdf5_cleanup_errors():
            return _run_kwave(args, flag)
    finally:
        restore_handlers(previous)


def _run_kwave(args: argparse.Namespace, flag: dict[str, Any]) -> int:
    t0 = time.perf_counter()
    check_distinct(args)
    check_input_path(args.input, "-i input file")
    files.check_output_path(args.output, "output file")
    if args.checkpoint_file:
        files.check_output_path(args.checkpoint_file, "checkpoint file")
    device = _select_device(args.device)
    n_dev = 1 if args.decomposition == "single" or device is not None else jax.device_count()
    dtype = "float64" if args.float64 else "float32"
    problem, meta = read_input(
        args.input,
        nt_override=args.benchmark,
        start=args.start,
        record=args.record,
        dtype=dtype,
        lazy=jax.process_count() > 1,  # each process reads only its hyperslabs of the fields
        size_check=lambda shape, nt: check_size(shape, dtype, n_dev, device),
    )
    stopped(args, flag, "while reading the input")
    if args.float64:
        jax.config.update("jax_enable_x64", True)
    rn.check_memory(problem, n_dev, device)  # before anything sized by the grid is made
    _warn(args, problem)
    fp = fingerprint(args, problem)
    t_load = time.perf_counter()
    ckpt = args.checkpoint_file
    resume = bool(ckpt) and os.path.exists(ckpt)
    ctx = jax.default_device(device) if device is not None else _null()
    with ctx:
        engine = make_engine(problem, args, device)
        stopped(args, flag, "while preparing the run")
        size = check_disk(args, engine.layout, problem.grid.nt, math.prod(problem.grid.shape))
        hint = checks.instability_hint(problem)
        if engine.describe.startswith("single"):  # medium constants are on the device now
            release_host_medium(problem)
        rs = None
        if resume:
            check_input_path(ckpt, "--checkpoint_file")
            rs = load_checkpoint(ckpt, engine, meta, args.output, fp)
            check_output_covers(args.output, rs.next_step)
        prov = provenance(getattr(args, "argv", []), fp.input_sha256, dtype, engine.describe)
        out = OutputFile(
            args.output, meta, engine.layout, problem.grid.nt, args.compression, resume=resume,
            provenance=prov, hint=hint, reserve=size,
        )  # fmt: skip
        try:
            status = _leg(args, engine, meta, out, rs, (t0, t_load), fp, flag)
        except BaseException:
            out.abort()
            raise
    return status


def stopped(args: argparse.Namespace, flag: dict[str, Any], where: str) -> None:
    """End a leg without ``--checkpoint_file`` that a signal asked to stop (with one, the
    leg checkpoints after its next chunk)."""
    if flag["stop"] and not args.checkpoint_file:
        raise interrupt.Interrupted(
            flag["signal"], f"{where}, without --checkpoint_file: no output written"
        )


def _warn(args: argparse.Namespace, problem: Problem) -> None:
    """Stability and resolution warnings (and the memory estimate with ``--verbose``)."""
    if jax.process_index() > 0:  # several processes: process 0 speaks for the job
        return
    notes = checks.stability_warnings(problem) + checks.resolution_warnings(problem)
    notes += checks.size_warnings(problem.grid.shape, advice=KWAVE_SIZE_ADVICE)
    for note in notes:
        print(f"sonotile-kwave: warning: {note}", file=sys.stderr)
    if args.verbose:
        mb = checks.memory_estimate(problem) / 2**20
        print(f"sonotile-kwave: estimated device memory {mb:.0f} MB", file=sys.stderr)
        print(f"sonotile-kwave: host allocator: {runtime.hugepages_state()}", file=sys.stderr)


def check_size(
    shape: tuple[int, ...], dtype: str, n_devices: int, device: jax.Device | None
) -> None:
    """The memory check on the header alone, before any grid-sized array exists: the state
    (``p``, ``rho`` and ``u`` per axis) must fit in the memory available (Python integers)."""
    points = math.prod(shape)
    need = points * np.dtype(dtype).itemsize * (1 + 2 * len(shape))
    dev = device or jax.devices()[0]
    per_device = need if dev.platform == "cpu" else -(-need // max(n_devices, 1))
    have, what = rn.available_memory(device)
    if have is not None and per_device > have:
        raise MemoryError(
            f"grid {tuple(shape)} needs about {per_device / 2**20:.6g} MB or more (the state "
            f"of its {points} points alone), more than the {have / 2**20:.6g} MB of {what}: "
            "use a smaller grid or more devices (--decomposition)"
        )


def check_disk(args: argparse.Namespace, layout: Any, nt: int, points: int) -> int:
    """The bytes the output may take (``-c 0``: known in advance: the sampled series, the
    whole fields and HDF5's chunk index; 0 with ``-c``), refused when its filesystem has less
    free (the earlier output, if any, stays until the new one is complete)."""
    if args.compression or jax.process_index() > 0:
        return 0
    rows = max(nt - layout.start, 0)
    fields = len(layout.whole) + len(layout.final)
    chunks = rows * len(layout.raw) * max(len(layout.cuboid_shapes), 1)
    need = 4 * (rows * layout.n_points * len(layout.raw) + points * fields) + 64 * chunks
    need += files.MARGIN
    folder = os.path.dirname(os.path.abspath(args.output)) or "."
    free = shutil.disk_usage(folder).free
    if need > free:
        raise OSError(
            f"output file '{args.output}': the sampled series and fields need "
            f"{need / 2**20:.6g} MB, more than the {free / 2**20:.6g} MB free in '{folder}': "
            "free space, sample fewer steps (-s) or points, or compress (-c)"
        )
    return need


def fingerprint(args: argparse.Namespace, problem: Problem) -> Fingerprint:
    """The input's datasets (SHA-256) and the settings a checkpoint must match to resume."""
    try:
        with h5py.File(args.input, "r") as f:
            digest = file_digest(f)
    except (OSError, KeyError, RuntimeError) as e:  # a dataset the run itself did not read
        why = str(e).strip("'\"").splitlines()[0] if str(e) else type(e).__name__
        raise KwaveFileError(
            f"{args.input}: a dataset cannot be read to compute the input's checksum ({why})"
        ) from None
    settings = {
        "Nt": problem.grid.nt, "start": args.start, "record": sorted(args.record),
        "precision": "float64" if args.float64 else "float32",
    }  # fmt: skip
    return Fingerprint(digest, settings)


def check_output_covers(path: str, t_index: int) -> None:
    """The partial output must hold the steps before the checkpoint (it is written first)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: output file to resume from is missing")
    try:
        with h5py.File(path, "r") as f:
            done = int(f["t_index"][()].reshape(-1)[0]) if "t_index" in f else -1
    except OSError as e:
        raise OSError(f"{path}: output file to resume from cannot be opened ({e})") from None
    if done < t_index:
        raise ValueError(
            f"{path}: output holds {done} steps, fewer than the checkpoint's {t_index}: it is "
            "not the output of this checkpointed run"
        )


class _null:
    def __enter__(self) -> _null:
        return self

    def __exit__(self, *a: object) -> Literal[False]:
        return False


class LegControl:
    """What the loop of one leg asks between and during chunks: stop (a signal, or the
    checkpoint interval; all processes together), abort at once (a signal without a checkpoint
    file), and progress (``-r`` lines or a bar, process 0 only)."""

    def __init__(
        self, args: argparse.Namespace, nt: int, cells: int, first: int, t0: float,
        flag: dict[str, Any],
    ) -> None:  # fmt: skip
        self.args, self.nt, self.t0, self.flag = args, nt, t0, flag
        self.checkpointing = bool(args.checkpoint_file)
        self.done = first
        self.report = rn.Progress(
            nt, cells, enabled=jax.process_index() == 0, stream=sys.stdout,
            every_pct=args.progress,
        )  # fmt: skip

    def interrupted(self, where: str) -> interrupt.Interrupted:
        return interrupt.Interrupted(
            self.flag.get("signal", signal.SIGINT),
            f"{where}/{self.nt}, without --checkpoint_file: no output written",
        )

    def should_stop(self) -> bool:
        a = self.args
        timer = bool(
            self.checkpointing
            and a.checkpoint_interval
            and time.perf_counter() - self.t0 > a.checkpoint_interval
        )
        return agree_any(self.flag["stop"] or timer)  # any process's signal or timer

    def should_abort(self) -> bool:
        if self.flag["stop"] and not self.checkpointing:
            raise self.interrupted(f"after step {self.done}")
        return False

    def progress(self, n: int) -> None:
        self.done = n
        self.report(n)


def _step(
    args: argparse.Namespace, engine: rn.Engine, out: OutputFile, rs: rn.RunState, stop: int,
    ctl: LegControl,
) -> rn.RunState:  # fmt: skip
    """The steps of one leg up to ``stop``; a leg stopped early without a checkpoint fails."""
    nt = engine.problem.grid.nt
    # chunks end on the -r steps while those are far apart in time (progress lines on time); a
    # leg that checkpoints after a set time runs chunks no longer than that time
    interval = args.checkpoint_interval if ctl.checkpointing else None
    sizer = rn.make_sizer(engine, seconds=interval, pace=max(1, nt * args.progress // 100))
    rs = rn.advance(engine, rs, stop, out, sizer, ctl.progress, ctl.should_stop, ctl.should_abort,
                    check_finite=False, check_growth=config.current().growth_check,
                    )  # fmt: skip  # its own checks: samples, fields, state; energy growth
    if rs.next_step < nt and not ctl.checkpointing:
        raise ctl.interrupted(f"at step {rs.next_step}")
    return rs


def _leg(
    args: argparse.Namespace, engine: rn.Engine, meta: KwaveInput, out: OutputFile,
    rs: rn.RunState | None, times: tuple[float, float], fp: Fingerprint, flag: dict[str, Any],
) -> int:  # fmt: skip
    problem = engine.problem
    nt = problem.grid.nt
    t0, t_load = times
    leg_first = 0 if rs is None else rs.next_step  # k-Wave counts step 0 (p0) in a leg
    if rs is None:
        rs, raw0 = engine.start()
        rn.emit_step0(raw0, engine.layout.start, out)
    if args.copy_sensor_mask:
        out.copy_sensor_mask()
    t_pre = time.perf_counter()
    stop = nt
    if args.checkpoint_timesteps:
        stop = min(nt, leg_first + args.checkpoint_timesteps)
    leader = jax.process_index() == 0
    if args.verbose and leader:
        print(
            f"sonotile-kwave v{__version__}: {args.input} -> {args.output}, grid "
            f"{problem.grid.shape}, Nt {nt}, on {engine.describe}, recording "
            f"{engine.layout.raw + tuple(engine.layout.final)}"
        )
    stopped(args, flag, "before the first step")
    ctl = LegControl(args, nt, problem.grid.size, rs.next_step, t0, flag)
    rs = _step(args, engine, out, rs, stop, ctl)
    check_state(rs, out.hint)
    t_sim = time.perf_counter()
    if rs.next_step < nt:
        fields = dict(rs.carry[1])  # whole fields go shard by shard
    else:
        fields = sens.finish(rs.carry[1], rs.carry[0], engine.layout, nt, gather=False)
    out.write_fields(fields, engine.blocks, step=rs.next_step)
    t_post = time.perf_counter()
    # the output goes into place before the checkpoint (once that is complete): a kill
    # between the two leaves an output ahead of the checkpoint, and the resumed leg rewrites
    # those steps identically
    timings = {
        "total": t_post - t0, "data_loading_phase": t_load - t0,
        "pre-processing_phase": t_pre - t_load, "simulation_phase": t_sim - t_pre,
        "post-processing_phase": t_post - t_sim,
    }  # fmt: skip
    stopped(args, flag, f"after step {rs.next_step}/{nt}")  # (a run of one chunk)
    out.finish_leg(rs.next_step, timings, first=leg_first, commit=rs.next_step >= nt)
    _after_leg(args, engine, rs, meta, fp, out)
    barrier("sonotile-leg-done")  # the output is in place before any process reports success
    if args.verbose and leader:
        print(f"done in {t_post - t0:.2f}s", file=sys.stderr)
    return 0


def check_state(rs: rn.RunState, hint: str) -> None:
    """The pressure field at the end of a leg must be finite (a NaN anywhere reaches every
    point within a step through the FFTs; a blow-up on the last steps shows only here)."""
    p = rs.carry[0].p
    if not all_finite(p):
        raise NonFiniteError(
            f"p: NaN or Inf in the pressure field after time step {rs.next_step}; {hint}; no "
            "output written"
        )


def _after_leg(
    args: argparse.Namespace, engine: rn.Engine, rs: rn.RunState, meta: KwaveInput,
    fp: Fingerprint, out: OutputFile,
) -> None:  # fmt: skip
    """Checkpoint a leg that stopped early (the output is renamed into place once the
    checkpoint is complete, just before it); remove the checkpoint once the output of the
    whole run is in place (fsynced and renamed)."""
    nt = engine.problem.grid.nt
    leader = jax.process_index() == 0
    if rs.next_step < nt:
        save_checkpoint(
            args.checkpoint_file, engine, rs, meta, fp, out.hint, output_path=out.tmp,
            before_rename=out.commit,
        )  # fmt: skip
        if leader:
            print(f"checkpoint written at step {rs.next_step}/{nt}: {args.checkpoint_file}")
    elif leader and args.checkpoint_file and os.path.exists(args.checkpoint_file):
        os.remove(args.checkpoint_file)
