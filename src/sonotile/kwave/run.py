"""One leg of a k-Wave-compatible run: read, validate, compile, step, write, checkpoint."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Literal

import h5py
import jax

from sonotile.base import runtime
from sonotile.base.runtime import install_stop_handlers, restore_handlers
from sonotile.base.version import __version__
from sonotile.kwave.checkpoint import load_checkpoint, save_checkpoint
from sonotile.kwave.output import OutputFile
from sonotile.kwave.reader import read_input
from sonotile.parallel.decomposition import AUTO, SINGLE
from sonotile.parallel.distributed import agree_any, barrier
from sonotile.physics.acoustic import checks, release_host_medium
from sonotile.solver import runner as rn
from sonotile.solver import sensors as sens

if TYPE_CHECKING:
    from sonotile.kwave.reader import KwaveInput
    from sonotile.model.problem import Problem


#: How a k-Wave user gets fast sizes from k-Wave's MATLAB front end (the input file's grid
#: includes the PML).
KWAVE_SIZE_ADVICE = " (k-Wave: 'PMLSize', 'auto' with 'PMLInside', false makes them)"


def check_writable(path: str, what: str) -> None:
    """Refuse an output path whose folder is missing or not writable, or that is a folder."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(d):
        raise OSError(f"{what} '{path}': directory '{d}' does not exist")
    if not os.access(d, os.W_OK):
        raise OSError(f"{what} '{path}': directory '{d}' is not writable")
    if os.path.isdir(path):
        raise OSError(f"{what} '{path}': is a directory")


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
        problem, args.decomposition, args.mesh, args.overlap, args.bell_width, args.accuracy,
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


def same_file(a: str, b: str) -> bool:
    """Whether two paths name the same file (the same path, a symlink or a hard link to it)."""
    if os.path.abspath(a) == os.path.abspath(b) or os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_distinct(args: argparse.Namespace) -> None:
    """Refuse an output or checkpoint path that is the input file (or each other)."""
    named = [("-i", args.input), ("-o", args.output)]
    if args.checkpoint_file:
        named.append(("--checkpoint_file", args.checkpoint_file))
    for i, (fa, a) in enumerate(named):
        for fb, b in named[i + 1 :]:
            if same_file(a, b):
                raise ValueError(f"{fb} '{b}' is the same file as {fa} '{a}': give another path")


def run_kwave(args: argparse.Namespace) -> int:
    """Run one leg; returns the exit status.

    SIGTERM/SIGINT are caught for the whole leg: with ``--checkpoint_file`` the run writes a
    checkpoint after the current chunk of steps and exits 0; without, it stops at once (within
    the 20 ms poll of a running chunk), leaves no output and exits 1. A second signal aborts at
    once.
    """
    flag: dict[str, Any] = {"stop": False}  # a signal sets "stop" (bool) and "signal" (int)
    previous = install_stop_handlers(flag)
    try:
        return _run_kwave(args, flag)
    finally:
        restore_handlers(previous)


def _run_kwave(args: argparse.Namespace, flag: dict[str, Any]) -> int:
    t0 = time.perf_counter()
    verbose = args.verbose
    check_distinct(args)
    device = _select_device(args.device)
    check_writable(args.output, "output file")
    if args.checkpoint_file:
        check_writable(args.checkpoint_file, "checkpoint file")
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
    notes = checks.stability_warnings(problem) + checks.resolution_warnings(problem)
    notes += checks.size_warnings(problem.grid.shape, advice=KWAVE_SIZE_ADVICE)
    for note in notes:
        if not quiet:
            print(f"sonotile-kwave: warning: {note}", file=sys.stderr)
    if args.verbose and not quiet:
        mb = checks.memory_estimate(problem) / 2**20
        print(f"sonotile-kwave: estimated device memory {mb:.0f} MB", file=sys.stderr)
        print(f"sonotile-kwave: host allocator: {runtime.hugepages_state()}", file=sys.stderr)
    t_load = time.perf_counter()
    ckpt = args.checkpoint_file
    resume = bool(ckpt) and os.path.exists(ckpt)
    ctx = jax.default_device(device) if device is not None else _null()
    with ctx:
        n_dev = 1 if args.decomposition == SINGLE or device is not None else jax.device_count()
        rn.check_memory(problem, n_dev, device)  # before any work
        engine = make_engine(problem, args, device)
        if engine.describe.startswith("single"):  # medium constants are on the device now
            release_host_medium(problem)
        if resume:
            rs = load_checkpoint(ckpt, engine, meta, args.output)
            check_output_covers(args.output, rs.next_step)
        out = OutputFile(
            args.output, meta, engine.layout, problem.grid.nt, args.compression, resume=resume
        )
        try:
            status = _leg(
                args, engine, meta, out, rs if resume else None, t0, t_load, verbose, flag
            )
        except BaseException:
            out.abort()
            raise
    return status


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

    def interrupted(self, where: str) -> InterruptedError:
        return InterruptedError(
            f"stopped by signal {self.flag.get('signal')} {where}/{self.nt} without "
            "--checkpoint_file: no output written"
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
    # a chunk per -r at most (progress lines on its steps); a leg that checkpoints after a set
    # time runs chunks no longer than that time
    interval = args.checkpoint_interval if ctl.checkpointing else None
    sizer = rn.make_sizer(engine, limit=nt * args.progress // 100, seconds=interval)
    rs = rn.advance(engine, rs, stop, out, sizer, ctl.progress, ctl.should_stop, ctl.should_abort)
    if rs.next_step < nt and not ctl.checkpointing:
        raise ctl.interrupted(f"at step {rs.next_step}")
    return rs


def _leg(
    args: argparse.Namespace, engine: rn.Engine, meta: KwaveInput, out: OutputFile,
    rs: rn.RunState | None, t0: float, t_load: float, verbose: int, flag: dict[str, Any],
) -> int:  # fmt: skip
    problem = engine.problem
    nt = problem.grid.nt
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
    checkpointing = bool(args.checkpoint_file)
    leader = jax.process_index() == 0
    if verbose and leader:
        print(
            f"sonotile-kwave v{__version__}: {args.input} -> {args.output}, grid "
            f"{problem.grid.shape}, Nt {nt}, on {engine.describe}, recording "
            f"{engine.layout.raw + tuple(engine.layout.final)}"
        )
    ctl = LegControl(args, nt, problem.grid.size, rs.next_step, t0, flag)
    rs = _step(args, engine, out, rs, stop, ctl)
    t_sim = time.perf_counter()
    if rs.next_step < nt:
        out.write_fields(dict(rs.carry[1]), engine.blocks)  # whole fields go shard by shard
    else:
        final = sens.finish(rs.carry[1], rs.carry[0], engine.layout, nt, gather=False)
        out.write_fields(final, engine.blocks)
    t_post = time.perf_counter()
    # the output goes into place before the checkpoint: a kill between the two leaves an
    # output ahead of the checkpoint, and the resumed leg rewrites those steps identically
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
    if rs.next_step < nt:
        save_checkpoint(args.checkpoint_file, engine, rs, meta)
        if leader:
            print(f"checkpoint written at step {rs.next_step}/{nt}: {args.checkpoint_file}")
    if leader and rs.next_step >= nt and checkpointing and os.path.exists(args.checkpoint_file):
        os.remove(args.checkpoint_file)
    if verbose and leader:
        print(f"done in {t_post - t0:.2f}s", file=sys.stderr)
    return 0
