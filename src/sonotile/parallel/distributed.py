"""Several processes, each driving its local devices: JAX's distributed runtime.

Call :func:`initialize` first, before any JAX computation (``sonotile-kwave`` does it itself)::

    import sonotile.parallel.distributed
    sonotile.parallel.distributed.initialize()      # no-op in a single process
    ...                                    # then build problems and run as usual

It recognises how the processes were started, from the environment (the ``SONOTILE_*``
variables through :class:`sonotile.base.config.Settings`):

* ``sonotile launch -n N -- <command>`` (one machine): ``SONOTILE_COORDINATOR``,
  ``SONOTILE_NUM_PROCESSES``, ``SONOTILE_PROCESS_ID`` and ``SONOTILE_LOCAL_DEVICE_IDS`` (the
  GPU(s) of this process; one per process by default);
* Open MPI's ``mpirun`` (``OMPI_COMM_WORLD_SIZE`` / ``_RANK``; the coordinator is found by
  JAX's Open MPI detection from ``OMPI_MCA_orte_hnp_uri``, Open MPI 4; Open MPI 5, whose
  ``mpirun`` names none, through MPI itself: rank 0 picks a free port and mpi4py broadcasts it,
  unless ``SONOTILE_COORDINATOR=<host of rank 0>:<port>`` is set);
* SLURM's ``srun`` (``SLURM_STEP_NUM_TASKS`` / ``SLURM_PROCID``, set by ``srun`` and not in a
  batch script itself; JAX's SLURM detection picks the first node of the job as coordinator).

On CPUs the step's collectives go through gloo; on GPUs through NCCL (one process per GPU is
what ``mpirun``/``srun`` give by default), or through MPI (:mod:`.mpi`). What the processes
exchange outside the step (barriers, small agreed values) goes through JAX's coordination
service (:mod:`sonotile.base.processes`). Nothing here is CPU specific.

Failure policy: a process that fails must not leave the others waiting in a collective. The
launchers kill the job when one process exits non-zero (``sonotile launch`` does; ``mpirun``
does; ``srun`` needs ``--kill-on-bad-exit=1``); :func:`fail_fast` exits at once without JAX's
shutdown barrier (also after an uncaught exception in a script), and the heartbeat timeout
(``SONOTILE_HEARTBEAT_TIMEOUT``, default 30 s) ends the survivors when no launcher does.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, TypedDict

from sonotile.base import config
from sonotile.base.config import ENV_COORDINATOR, ENV_NUM_PROCESSES
from sonotile.base.processes import barrier


class JobInfo(TypedDict):
    """A multi-process job as the environment describes it (:func:`detect`)."""

    launcher: str
    coordinator_address: str | None
    num_processes: int
    process_id: int


class _State(TypedDict):
    initialized: bool
    launcher: JobInfo | None


_state: _State = {"initialized": False, "launcher": None}


def detect(environ: Mapping[str, str] | None = None) -> JobInfo | None:
    """What the environment says about a multi-process job, or None for a single process.

    Returns ``{"launcher", "coordinator_address", "num_processes", "process_id"}`` (the address
    may be None when JAX's own cluster detection finds it). ``environ``: instead of the
    installed settings and ``os.environ``.
    """
    env = os.environ if environ is None else environ
    s = config.current() if environ is None else config.Settings.from_env(environ)
    addr = s.coordinator
    if s.num_processes is not None:
        n, rank = s.num_processes, s.process_id or 0
        if n > 1 and addr is None:
            raise RuntimeError(f"{ENV_NUM_PROCESSES}={n} but {ENV_COORDINATOR} is not set")
        launcher = "sonotile launch"
    elif "OMPI_COMM_WORLD_SIZE" in env:
        n, rank = int(env["OMPI_COMM_WORLD_SIZE"]), int(env["OMPI_COMM_WORLD_RANK"])
        launcher = "mpirun"
        ompi4 = "OMPI_MCA_orte_hnp_uri" in env
        if n > 1 and addr is None and not ompi4 and "PMIX_NAMESPACE" not in env:
            raise RuntimeError(
                "mpirun: cannot find the coordinator (neither Open MPI 4's OMPI_MCA_orte_hnp_uri "
                "nor Open MPI 5's PMIX_NAMESPACE); "
                f"set {ENV_COORDINATOR}=<host of rank 0>:<free port> for all ranks (mpirun -x)"
            )
    elif "SLURM_STEP_NUM_TASKS" in env and "SLURM_PROCID" in env:  # set by srun, not sbatch
        n, rank = int(env["SLURM_STEP_NUM_TASKS"]), int(env["SLURM_PROCID"])
        launcher = "srun"
    else:
        return None
    if n <= 1:
        return None
    if not 0 <= rank < n:
        raise RuntimeError(f"{launcher}: process id {rank} outside 0..{n - 1}")
    return {
        "launcher": launcher,
        "coordinator_address": addr,
        "num_processes": n,
        "process_id": rank,
    }


def initialize(heartbeat_timeout: int | None = None, verbose: bool = False) -> JobInfo | None:
    """Join the job's other processes (``jax.distributed.initialize``); no-op in one process.

    Must run before any JAX computation (before ``jax.devices()``, ``jnp`` arrays ...). Safe to
    call twice. Returns what :func:`detect` found (None for a single process).
    """
    if _state["initialized"]:
        return _state["launcher"]
    info = detect()
    _state["initialized"] = True
    if info is None:
        return None
    import jax

    # gloo for CPU collectives (the default in recent JAX; say so for older ones); GPUs use NCCL
    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except Exception:  # pragma: no cover - option missing in this JAX
        pass
    settings = config.current()
    hb = int(heartbeat_timeout or settings.heartbeat_timeout)
    kwargs: dict[str, Any] = dict(
        num_processes=info["num_processes"],
        process_id=info["process_id"],
        initialization_timeout=settings.init_timeout,
        heartbeat_timeout_seconds=hb,
        shutdown_timeout_seconds=max(hb, 30),
    )
    if info["coordinator_address"] is not None:
        kwargs["coordinator_address"] = info["coordinator_address"]
    elif info["launcher"] == "mpirun" and "OMPI_MCA_orte_hnp_uri" not in os.environ:
        kwargs["coordinator_address"] = _coordinator_from_mpi()
    if settings.local_device_ids:  # GPUs this process drives (no effect on CPUs)
        kwargs["local_device_ids"] = list(settings.local_device_ids)
    jax.distributed.initialize(**kwargs)
    _state["launcher"] = info
    _fail_fast_on_uncaught_exceptions()
    if verbose:
        print(
            f"sonotile: process {info['process_id']}/{info['num_processes']} "
            f"({info['launcher']}), {jax.local_device_count()} local of "
            f"{jax.device_count()} devices",
            file=sys.stderr,
        )
    return info


def _coordinator_from_mpi() -> str:
    """``host:port`` of the coordinator in a job of Open MPI 5's ``mpirun``: rank 0 picks a free
    port on its host (the loopback address when all ranks share one node), MPI tells the others."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(
            f"mpirun (Open MPI 5) names no coordinator and mpi4py is not installed ({e}); "
            f"set {ENV_COORDINATOR}=<host of rank 0>:<free port> for all ranks (mpirun -x)"
        ) from e
    comm = MPI.COMM_WORLD
    address = None
    if comm.Get_rank() == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        one_node = os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE") == str(comm.Get_size())
        address = f"{'127.0.0.1' if one_node else socket.gethostname()}:{port}"
    return str(comm.bcast(address, root=0))


def is_multiprocess() -> bool:
    """True when this process is one of several (after :func:`initialize`)."""
    return _state["launcher"] is not None


def _count() -> int:
    import jax

    return jax.process_count()


def in_turns(fn: Callable[[], object], name: str) -> None:
    """Call ``fn()`` on each process in turn, process 0 first (serialised file writes)."""
    import jax

    n = _count()
    if n == 1:
        fn()
        return
    me = jax.process_index()
    for r in range(n):
        if r == me:
            fn()
        barrier(f"{name}:{r}")


def _fail_fast_on_uncaught_exceptions() -> None:
    """An uncaught exception in a script: print it as usual, then :func:`fail_fast` (instead of
    waiting in JAX's shutdown barrier for processes stuck in a collective with this one)."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        previous(kind, value, tb)
        fail_fast(1)

    sys.excepthook = hook


def fail_fast(status: int) -> None:
    """End a failed process of a multi-process job now: flush, exit with ``status``, skip the
    shutdown barrier (the other processes are in a collective and will never reach it)."""
    if _state["launcher"] is not None and status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
