"""``sonotile-kwave``: a drop-in for k-Wave's ``kspaceFirstOrder-OMP`` / ``-CUDA`` binaries.

Same flags, same defaults (no output flag means ``--p_raw``), same exit codes (0 on success and
after a checkpoint, 1 on error; stopped by a signal without a checkpoint file: 128 + the signal,
130 for Ctrl-C), same files (see ``docs/kwave-format.md``). Every numeric flag and every
``SONOTILE_*`` variable is checked before any work. JAX is imported
only after the command line is parsed so that ``-t`` and ``-g`` can configure it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import NoReturn

from sonotile.base import config, interrupt
from sonotile.base.cliargs import (
    Parser,
    closest,
    integer,
    number,
    positive,
    positive_int,
    utf8_path,
)
from sonotile.base.runtime import configure_cpu_devices, configure_threads, cpus_restored
from sonotile.base.version import __version__
from sonotile.parallel.decomposition import NAMES

OUTPUT_FLAGS = {
    "p_raw": "p", "p_rms": "p_rms", "p_max": "p_max", "p_min": "p_min",
    "p_max_all": "p_max_all", "p_min_all": "p_min_all", "p_final": "p_final",
    "u_raw": "u", "u_non_staggered_raw": "u_non_staggered", "u_rms": "u_rms",
    "u_max": "u_max", "u_min": "u_min", "u_max_all": "u_max_all", "u_min_all": "u_min_all",
    "u_final": "u_final",
}  # fmt: skip

USAGE = """usage: sonotile-kwave -i <input.h5> -o <output.h5> [options]

k-Wave (kspaceFirstOrder-OMP 1.3 / -CUDA) compatible solver, sonotile v{v}.

mandatory:
  -i <file>                  input file (k-Wave format 1.0, 1.1, 1.2)
  -o <file>                  output file
options:
  -t <n>                     number of CPU threads (default: all; 1 for grids of at most
                             32768 points)
  -g <id>                    device index (as kspaceFirstOrder-CUDA)
  -r <1..100>                progress print interval in % (default 5)
  -c <0..9>                  deflate level of output datasets (default 0)
  -s <n>                     1-based time step at which sampling starts (default 1)
  --benchmark <n>            run n time steps instead of Nt
  --copy_sensor_mask         copy the sensor mask into the output file
  --checkpoint_file <file>   checkpoint file (enables checkpoint-restart)
  --checkpoint_interval <s>  checkpoint after this many seconds of this leg
  --checkpoint_timesteps <n> checkpoint after this many steps of this leg
  --verbose <0..2>           log level
  --version                  print version and exit
  -h, --help                 print this help and exit
outputs (default --p_raw):
  -p, --p_raw  --p_rms  --p_max  --p_min  --p_max_all  --p_min_all  --p_final
  -u, --u_raw  --u_non_staggered_raw  --u_rms  --u_max  --u_min  --u_max_all  --u_min_all
  --u_final
sonotile extras:
  --float64                  compute in double precision
  --decomposition <d>        auto | single | pencil | lfb (default single)
  --mesh <AxBxC>             devices per split axis, e.g. 8, 2x4, 2x2x2 (default: all on x)
  --overlap <n>              lfb overlap in points, 2..32 (default: auto's pick, else 16)
  --bell_width <w>           lfb bell transition as a fraction of the overlap (default 0.5)
  --accuracy <e>             accuracy target for --decomposition auto (default 1e-3)
  --cpu_devices <n>          split the CPU into n virtual devices (testing decompositions)
  --transport <t>            auto | mpi | xla: what carries halos and transposes between
                             processes (default auto: MPI under mpirun/srun with one CPU device
                             per process, else XLA's gloo/NCCL)
  --deterministic            bit-identical outputs run after run: fixed FFT backend (an error
                             if FFTW is unavailable), FFTW plans by estimate, no wisdom
                             (also SONOTILE_DETERMINISTIC=1)
several processes (sonotile launch -n N -- sonotile-kwave ..., mpirun, srun): detected from the
environment; every process runs the same command line, process 0 writes the files.
"""


class UsageError(Exception):
    pass


class _Parser(Parser):
    """The shared flag spelling (``--cpu-devices`` read as ``--cpu_devices``); errors raise
    :class:`UsageError` (k-Wave prints its usage and exits 1)."""

    def error(self, message: str) -> NoReturn:
        unknown = message.split("unrecognized arguments: ")
        if len(unknown) == 2:
            word = unknown[1].split()[0]
            message = f"unknown option {word}{closest(word, self.flags())}"
        raise UsageError(message)


def _mesh(s: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(v) for v in s.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{s}' is not a mesh like 8, 2x4 or 2x2x2") from None
    if not 1 <= len(shape) <= 3 or min(shape) < 1 or max(shape) > 4096:
        raise argparse.ArgumentTypeError(f"'{s}': 1 to 3 sizes of 1..4096, e.g. 2x4")
    return shape


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sonotile-kwave", add_help=False)
    p.add_argument("-i", dest="input", type=utf8_path)
    p.add_argument("-o", dest="output", type=utf8_path)
    p.add_argument("-t", dest="threads", type=positive_int)
    p.add_argument("-g", dest="device", type=integer(0))
    p.add_argument("-r", dest="progress", type=integer(1, 100), default=5)
    p.add_argument("-c", dest="compression", type=integer(0, 9), default=0)
    p.add_argument("-s", dest="start", type=positive_int, default=1)
    p.add_argument("--benchmark", type=positive_int)
    p.add_argument("--copy_sensor_mask", action="store_true")
    p.add_argument("--checkpoint_file", type=utf8_path)
    p.add_argument("--checkpoint_interval", type=positive)
    p.add_argument("--checkpoint_timesteps", type=positive_int)
    p.add_argument("--verbose", type=integer(0, 2), default=0)
    p.add_argument("--version", action="store_true")
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--float64", action="store_true")
    p.add_argument("--decomposition", choices=NAMES, default="single")
    p.add_argument("--mesh", type=_mesh)
    p.add_argument("--overlap", type=integer(2, 32))
    p.add_argument("--bell_width", type=number(above=0, hi=1), default=0.5)
    p.add_argument("--accuracy", type=number(above=0, hi=1), default=1e-3)
    p.add_argument("--cpu_devices", type=integer(1, 4096))
    p.add_argument("--transport", choices=("auto", "mpi", "xla"), default=None)
    p.add_argument("--deterministic", action="store_true")
    for flag in OUTPUT_FLAGS:
        names = [f"--{flag}"]
        if flag == "p_raw":
            names.insert(0, "-p")
        if flag == "u_raw":
            names.insert(0, "-u")
        p.add_argument(*names, dest=flag, action="store_true")
    return p


def parse(argv: list[str]) -> argparse.Namespace:
    a = parser().parse_args(argv)
    if a.help or a.version:
        return a
    if not a.input:
        raise UsageError("input file (-i) is mandatory")
    if not a.output:
        raise UsageError("output file (-o) is mandatory")
    for name in ("input", "output", "checkpoint_file"):
        v = getattr(a, name)
        if v is not None and v.startswith("-"):
            raise UsageError(f"file name '{v}' for {name} must not start with '-'")
    if (a.checkpoint_interval or a.checkpoint_timesteps) and not a.checkpoint_file:
        raise UsageError("--checkpoint_interval/--checkpoint_timesteps need --checkpoint_file")
    a.record = tuple(q for f, q in OUTPUT_FLAGS.items() if getattr(a, f)) or ("p",)
    a.argv = list(argv)  # the command line, for the output's provenance
    return a


def main(argv: list[str] | None = None) -> int:
    """The command (``argv``: its arguments, default this process's); the exit status. Ctrl-C
    or SIGTERM at any moment: one line, status 128 + the signal (130 for Ctrl-C)."""
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt as e:
        return interrupt.report("sonotile-kwave", e, "no output written")


def _main(argv: list[str]) -> int:
    try:
        args = parse(argv)
    except UsageError as e:
        print(USAGE.format(v=__version__), file=sys.stderr)
        print(f"sonotile-kwave: error: {e}", file=sys.stderr)
        return 1
    if args.help:
        print(USAGE.format(v=__version__))
        return 0
    if args.version:
        print(f"sonotile v{__version__} (kspaceFirstOrder-OMP v1.3 compatible command line)")
        return 0
    try:
        config.current()  # the SONOTILE_* variables, checked before any work
    except config.SettingsError as e:
        print(f"sonotile-kwave: error: {e}", file=sys.stderr)
        return 1
    with cpus_restored(), _run_settings(args):  # -t narrows this thread's CPUs for the run only
        small = args.threads in (None, 1) and one_thread(args)  # one thread, not pinned
        configure_threads(1 if small else args.threads, pin=not small)
        try:
            configure_cpu_devices(args.cpu_devices)
        except ValueError as e:
            print(f"sonotile-kwave: error: {e}", file=sys.stderr)
            return 1
        from sonotile.parallel import distributed

        status = _run(args)
        distributed.fail_fast(status)  # several processes: the others must not wait for it
        return status


@contextlib.contextmanager
def _run_settings(args: argparse.Namespace) -> Iterator[None]:
    """The settings the command line changes (``--deterministic``, the threads), for the run
    only."""
    before = config.current()
    if args.deterministic:
        config.configure(deterministic=True)
    try:
        yield
    finally:
        config.configure(before)


def _run(args: argparse.Namespace) -> int:
    try:
        from sonotile.parallel import distributed

        # several processes (sonotile launch, mpirun, srun): join them before JAX starts
        distributed.initialize(verbose=args.verbose >= 1)
    except Exception as e:
        print(f"sonotile-kwave: error: distributed initialisation failed: {e}", file=sys.stderr)
        return 1
    try:
        from sonotile.kwave.run import run_kwave

        return run_kwave(args)
    except (OSError, ValueError, KeyError, MemoryError, ArithmeticError) as e:
        print(f"sonotile-kwave: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:
        return interrupt.report("sonotile-kwave", e, "no output written")
    except Exception as e:  # anything unexpected: still one line and exit 1 (k-Wave style)
        if args.verbose >= 2:
            import traceback

            traceback.print_exc()
        print(f"sonotile-kwave: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


#: grids with fewer points [points] run without starting again for huge pages: XLA's per-call
#: temporaries (8-20 B per point) are then a few MiB at most, and the second interpreter start
#: (~0.1 s of a small run on the 2-core EPYC, docs/performance.md) costs more than the page
#: faults it saves
HUGEPAGES_MIN_POINTS = 64**3
#: an input file at least this large [bytes] is taken to hold a grid worth huge pages (its
#: header is not read before the start again: that would import h5py twice)
HUGEPAGES_MIN_FILE = 2**20


#: a grid with at most this many points [points] runs on one CPU thread when ``-t`` is not
#: given (a single process on a CPU): its steps are too short for the threads to share (XLA's
#: and FFTW's; docs/performance.md, Small runs)
ONE_THREAD_MAX_POINTS = 2**15


def input_points(path: str) -> int | None:
    """The grid points ``Nx Ny Nz`` of a k-Wave input file's header, None when it cannot be
    read or is no regular file (a FIFO would block; the run reports either, before any work)."""
    if not os.path.isfile(path):
        return None
    try:
        import h5py

        with h5py.File(path, "r") as f:
            points = 1
            for name in ("Nx", "Ny", "Nz"):
                points *= int(f[name][()].reshape(-1)[0])
    except Exception:
        return None
    return points


def one_thread(args: argparse.Namespace) -> bool:
    """Whether a run without ``-t`` (or with ``-t 1``) should use one CPU thread without pinning
    the process to a CPU: a grid of at most :data:`ONE_THREAD_MAX_POINTS` points (its steps use
    one thread either way), run in one process on the CPU (no ``-g``, no ``--cpu_devices``, no
    decomposition, no GPU plugin installed). Not pinned, independent runs side by side (a
    sweep of ``-t 1`` runs, as k-wave-python starts them) spread over the cores instead of all
    sharing the first."""
    if args.device is not None or args.cpu_devices or args.decomposition != "single":
        return False
    from sonotile.parallel import distributed

    try:
        several = distributed.detect() is not None
    except RuntimeError:  # a job described wrongly: the run reports it
        several = True
    if several or accelerator_installed():
        return False
    points = input_points(args.input)
    return points is not None and points <= ONE_THREAD_MAX_POINTS


def accelerator_installed() -> bool:
    """Whether JAX may find a GPU or TPU here: a JAX plugin is installed and ``JAX_PLATFORMS``
    does not say ``cpu`` alone (looked up without importing JAX)."""
    import importlib.util

    if os.environ.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        return False
    return any(
        importlib.util.find_spec(name) is not None
        for name in ("jax_plugins", "jax_cuda12_plugin", "jax_cuda13_plugin", "libtpu")
    )


def wants_hugepages(argv: list[str]) -> bool:
    """Whether this command line should run with huge pages for malloc
    (:func:`sonotile.base.runtime.restart_with_hugepages`): a run whose input grid (``Nx Ny
    Nz``) has :data:`HUGEPAGES_MIN_POINTS` points or more, or whose input file has
    :data:`HUGEPAGES_MIN_FILE` bytes or more. Not for ``--help``, ``--version``, usage errors
    or an input that cannot be read (those end at once)."""
    try:
        args = parse(argv)
    except UsageError:
        return False
    if args.help or args.version:
        return False
    try:
        if os.path.getsize(args.input) >= HUGEPAGES_MIN_FILE:
            return True
    except OSError:  # the run reports it, before any work
        return False
    points = input_points(args.input)
    return points is not None and points >= HUGEPAGES_MIN_POINTS


def now() -> float:
    return time.perf_counter()


def entry() -> NoReturn:
    """The ``sonotile-kwave`` program: :func:`main`, then the exit. A process that ran alone
    ends at once (``os._exit``) once its streams are flushed: the output file is written,
    closed and in place, and the interpreter's teardown of JAX and XLA would add 0.06-0.15 s
    to every run. A process of a multi-process job
    exits normally (JAX's shutdown barrier keeps the others in step). It first starts itself
    again with huge pages for malloc when it can and the run is large enough to gain
    (:func:`runtime.restart_with_hugepages`, :func:`wants_hugepages`)."""
    interrupt.install()  # a signal: its line and the exit, at once (the run flags, then stops)
    from sonotile.base import runtime

    if wants_hugepages(sys.argv[1:]):
        runtime.restart_with_hugepages()
    status = main()
    # not imported (--help, --version, a usage error): one process, and importing it would
    # import JAX (0.7 s) just to say so
    distributed = sys.modules.get("sonotile.parallel.distributed")
    if distributed is not None and distributed.is_multiprocess():
        sys.exit(status)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    entry()
