"""MPI as the transport between processes: halos and transposes inside the compiled step.

Each process runs the decomposition's step as a program of its one device, and the step's
collectives (:mod:`.collectives`) become MPI point-to-point and all-to-all calls compiled into
it by mpi4jax. On one machine Open MPI moves them through shared memory; across nodes through
the interconnect. Measured here (``benchmarks/parallel/collectives.py``) a halo
``sendrecv`` costs 6-8x less than the same ``ppermute`` through gloo, whose every message
crosses the TCP loopback and XLA's rendezvous.

JAX's distributed runtime still joins the processes (one mesh over all devices, the global
arrays the writers and checkpoints take shard by shard); only the step's own communication
moves to MPI. The processes must be MPI ranks (``mpirun``, ``srun --mpi=pmix``), one device
each (on a GPU the messages pass through host memory: :mod:`.staged`); :func:`unavailable`
says why not when they are not.

mpi4jax compiles the communicators' handles (Open MPI: addresses) into the program, so they are
part of the persistent compilation cache's key; the communicators are created in one fixed
order when the transport is made, so a cached step is only ever reused with the same ones.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from sonotile.base import config
from sonotile.base.processes import allgather
from sonotile.parallel import staged
from sonotile.parallel.distributed import detect

if TYPE_CHECKING:
    from jax.sharding import Mesh

#: ``--transport`` / ``Settings.transport`` values
TRANSPORTS = config.TRANSPORTS


def unavailable(mesh: Mesh) -> str | None:
    """Why the MPI transport cannot carry ``mesh``'s collectives in this job, or None."""
    if jax.process_count() == 1:
        return "one process (the devices of one process talk without MPI)"
    if len(jax.local_devices()) != 1:
        return f"{len(jax.local_devices())} devices in this process (MPI needs one per process)"
    job = detect()
    if job is None or job["launcher"] not in ("mpirun", "srun"):
        launcher = "an unknown launcher" if job is None else job["launcher"]
        return f"processes started by {launcher}, not MPI ranks: start the job with mpirun or srun"
    try:
        from mpi4py import MPI

        if not stages_through_host():  # on a CPU, mpi4jax's calls join the compiled step
            import mpi4jax  # noqa: F401
    except ImportError as e:
        name = e.name or "mpi4py"
        return f"{name} is not installed ({e}); scripts/setup.sh installs it where MPI is"
    size = MPI.COMM_WORLD.Get_size()
    if size != jax.process_count():
        return (
            f"{jax.process_count()} JAX processes but {size} MPI rank(s): start the job with "
            "mpirun or srun --mpi=pmix, not sonotile launch"
        )
    del mesh
    return None


def stages_through_host() -> bool:
    """Whether this process's messages pass through host memory (:mod:`.staged`): where its
    device is not a CPU, whose arrays neither sonotile's MPI calls nor an mpi4jax built
    without CUDA can send."""
    return jax.local_devices()[0].platform != "cpu"


def shares_a_device() -> bool:
    """Whether another process of the job drives this process's device (two processes on one
    GPU, which NCCL refuses): every process's host name and local device compared (a
    collective: every process calls it)."""
    d = jax.local_devices()[0]
    mine = f"{socket.gethostname()}/{d.platform}/{d.local_hardware_id}"
    return allgather(mine).count(mine) > 1


def choose(asked: str | None, mesh: Mesh) -> str:
    """``"mpi"`` or ``"xla"``: what the user asked for (argument, else ``Settings.transport``:
    ``auto``, unless ``SONOTILE_TRANSPORT`` says otherwise). ``auto`` takes MPI wherever it can
    carry the mesh, except between GPUs of their own, where NCCL moves the messages from device
    to device and MPI would stage them through the host; processes sharing a GPU take MPI."""
    asked = asked or config.current().transport
    if asked not in TRANSPORTS:
        raise ValueError(f"transport = {asked!r}: expected one of {TRANSPORTS}")
    if asked == "xla":
        return "xla"
    why = unavailable(mesh)
    if why is None and asked == "auto" and stages_through_host() and not shares_a_device():
        return "xla"
    if why is None:
        return "mpi"
    if asked == "mpi":
        raise ValueError(f"transport 'mpi' cannot be used: {why}")
    return "xla"


class MpiTransport:
    """The collectives of one process's shard of ``mesh`` as MPI calls (see the module doc).

    Mesh coordinates map to MPI ranks through the devices' processes (``process_index`` of the
    device at each coordinate; the MPI rank of each JAX process is exchanged once).
    """

    def __init__(self, mesh: Mesh, staged: bool | None = None) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        by_process = self.comm.allgather(jax.process_index())  # MPI rank -> JAX process
        rank_of = {p: r for r, p in enumerate(by_process)}
        self.names: tuple[str, ...] = tuple(mesh.axis_names)
        self.shape: tuple[int, ...] = tuple(int(s) for s in mesh.devices.shape)
        self.ranks = np.vectorize(lambda d: rank_of[d.process_index])(mesh.devices)
        me = self.comm.Get_rank()
        where = np.argwhere(self.ranks == me)
        if where.shape[0] != 1:
            raise ValueError(f"MPI rank {me} holds {where.shape[0]} devices of the mesh, not 1")
        self.coords: tuple[int, ...] = tuple(int(c) for c in where[0])
        # one communicator per axis, created now in the same order on every process (creation
        # is collective: the order in which a program is traced must not decide it)
        self._axis_comms: dict[str, Any] = {}
        for name in self.names:
            self._sub(name)
        # the halo exchanges' own (sonotile_mpi_halos: messages tagged per call, never mixed
        # with mpi4jax's, whose sendrecv receives any tag; the transposes use the axes' own)
        self._halo_comm = self.comm.Dup()
        from sonotile.parallel import mpi_ffi

        #: whether the messages pass through host memory (:func:`stages_through_host`; the
        #: same on every rank of a job: one kind of device)
        self.staged = stages_through_host() if staged is None else staged
        # sonotile's own MPI calls (mpi_ffi; host buffers only), decided by all ranks together:
        # a rank whose build failed while another's worked would send its halos one by one to
        # a partner waiting for them in one call
        mine = 0 if self.staged else int(mpi_ffi.available())
        self.own_calls = bool(self.comm.allreduce(mine, op=MPI.MIN))
        #: ``(kind, bytes)`` of every collective traced so far (the exchange benchmark's list)
        self.traced: list[tuple[str, int]] = []

    def _axis(self, name: str) -> int:
        return self.names.index(name)

    def _rank_at(self, a: int, c: int) -> int:
        coords = list(self.coords)
        coords[a] = c
        return int(self.ranks[tuple(coords)])

    def axis_size(self, name: str) -> int:
        return self.shape[self._axis(name)]

    def axis_index(self, name: str) -> jax.Array:
        return jnp.int32(self.coords[self._axis(name)])

    def ppermute(self, x: jax.Array, name: str, perm: Sequence[tuple[int, int]]) -> jax.Array:
        """Send ``x`` to this shard's destination in ``perm``, receive from its source (a
        ``sendrecv``; ``perm`` must be a permutation of the axis)."""
        a = self._axis(name)
        me = self.coords[a]
        dest = [j for i, j in perm if i == me]
        src = [i for i, j in perm if j == me]
        if len(dest) != 1 or len(src) != 1:
            raise ValueError(f"ppermute over {name!r}: {list(perm)} is not a permutation")
        if dest[0] == me and src[0] == me:
            return x
        self.traced.append(("collective-permute", x.size * x.dtype.itemsize))
        if self.staged:
            return staged.sendrecv(x, self._halo_comm, self._rank_at(a, src[0]),
                                   self._rank_at(a, dest[0]))  # fmt: skip
        import mpi4jax

        return mpi4jax.sendrecv(
            x, x, source=self._rank_at(a, src[0]), dest=self._rank_at(a, dest[0]), comm=self.comm
        )

    def halos(
        self,
        xs: Sequence[jax.Array],
        name: str,
        width: int,
        ends: Sequence[int] | None,
        axis: int = 0,
    ) -> list[tuple[jax.Array, jax.Array]] | None:
        """:func:`sonotile.parallel.collectives.halos` as one MPI call for the group
        (:mod:`.mpi_ffi`; staged: one host call, :func:`.staged.halos`), or None when that is
        unavailable or a neighbour's block is thinner than ``width`` (the halo then spans
        several blocks: ``ppermute`` hop by hop)."""
        from mpi4py import MPI

        from sonotile.parallel import mpi_ffi

        a = self._axis(name)
        n, me = self.shape[a], self.coords[a]
        real = [xs[0].shape[axis]] * n if ends is None else [int(e) for e in ends]
        if n == 1 or min(real) < width or not (self.own_calls or self.staged):
            return None
        for x in xs:
            halo = width * x.size // x.shape[axis] * x.dtype.itemsize
            self.traced += [("collective-permute", halo)] * 2
        left, right = self._rank_at(a, (me - 1) % n), self._rank_at(a, (me + 1) % n)
        if self.staged:
            return staged.halos(xs, self._halo_comm, left, right, width, real[me], axis)
        return mpi_ffi.halos(xs, MPI._handleof(self._halo_comm), left, right, width, real[me], axis)

    def kept_piece(self, name: str) -> int | None:
        """This rank's coordinate along ``name`` when :meth:`transpose_kept` can carry the
        axis's all-to-alls (the MPI extension built on every rank), else None."""
        n = self.axis_size(name)
        return self.coords[self._axis(name)] if n > 1 and self.own_calls else None

    def transpose_kept(
        self, pairs: Sequence[tuple[jax.Array, jax.Array]], name: str
    ) -> list[jax.Array]:  # fmt: skip
        """:func:`sonotile.parallel.collectives.transpose_kept` as one MPI call
        (:func:`sonotile.parallel.mpi_ffi.transpose`)."""
        from mpi4py import MPI

        from sonotile.parallel import mpi_ffi

        for _, others in pairs:
            self.traced.append(("all-to-all", others.size * others.dtype.itemsize))  # sent
        me = self.coords[self._axis(name)]
        return mpi_ffi.transpose(pairs, MPI._handleof(self._sub(name)), me)

    def all_to_all(self, x: jax.Array, name: str, split_axis: int, concat_axis: int) -> jax.Array:
        """``lax.all_to_all(tiled=True)``: piece ``k`` of ``split_axis`` goes to shard ``k``,
        the pieces received are joined along ``concat_axis`` in shard order."""
        n = self.axis_size(name)
        if n == 1:
            return x
        self.traced.append(("all-to-all", x.size * x.dtype.itemsize * (n - 1) // n))  # sent
        pieces = pieces_first(x, n, split_axis)
        if self.staged:
            got = staged.alltoall(pieces, self._sub(name))
        else:
            import mpi4jax

            got = mpi4jax.alltoall(pieces, comm=self._sub(name))
        return joined(got, concat_axis)

    def _sub(self, name: str) -> Any:
        """The communicator of the shards along ``name`` that share this shard's other
        coordinates, ranked by coordinate (created once, collectively)."""
        if name not in self._axis_comms:
            a = self._axis(name)
            others = [c for b, c in enumerate(self.coords) if b != a]
            color = int(np.ravel_multi_index(others, [s for b, s in enumerate(self.shape)
                                                      if b != a])) if others else 0  # fmt: skip
            self._axis_comms[name] = self.comm.Split(color, self.coords[a])
        return self._axis_comms[name]


def pieces_first(x: jax.Array, n: int, axis: int) -> jax.Array:
    """``x`` cut into ``n`` equal pieces along ``axis``, stacked first: a reshape (no copy)
    when ``axis`` is 0, else one transpose."""
    s = x.shape
    return jnp.moveaxis(x.reshape((*s[:axis], n, s[axis] // n, *s[axis + 1 :])), axis, 0)


def joined(pieces: jax.Array, axis: int) -> jax.Array:
    """Pieces stacked first (``(n, *piece)``) concatenated in order along the piece's ``axis``:
    a reshape (no copy) when ``axis`` is 0, else one transpose."""
    n, s = pieces.shape[0], pieces.shape[1:]
    moved = jnp.moveaxis(pieces, 0, axis)
    return moved.reshape((*s[:axis], n * s[axis], *s[axis + 1 :]))
