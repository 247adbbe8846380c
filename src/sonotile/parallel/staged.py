"""MPI messages of device arrays through host memory: the MPI transport (:mod:`.mpi`) on
GPUs.

On a GPU the step's arrays live in device memory. sonotile's own MPI calls (:mod:`.mpi_ffi`)
take host buffers, and mpi4jax sends device buffers only where it was built with CUDA. Here
each message is a :func:`jax.experimental.io_callback`: XLA copies the operand to the host,
mpi4py sends it and receives the partner's into a host array, and XLA copies that back. The
callbacks are *ordered*: every rank makes its MPI calls in program order, so that ranks cannot
meet in different calls and deadlock. Two processes sharing one GPU exchange their halos and
transposes this way, where NCCL refuses two ranks on one device.

The cost over a device-to-device transport is two copies over the host link per message and
a host round trip per call (each call waits for the step's work before it). The same calls run
on CPUs, where the tests hold them to the other transports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.experimental import io_callback


def sendrecv(x: jax.Array, comm: Any, source: int, dest: int) -> jax.Array:
    """Send ``x`` to rank ``dest`` of ``comm`` and receive an array of the same shape and dtype
    from rank ``source``."""

    def exchange(a: np.ndarray) -> np.ndarray:
        got = np.empty_like(a)
        comm.Sendrecv(np.ascontiguousarray(a), dest=dest, recvbuf=got, source=source, recvtag=0)
        return got

    return io_callback(exchange, jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)


def alltoall(pieces: jax.Array, comm: Any) -> jax.Array:
    """``MPI_Alltoall`` of ``pieces`` (one per rank of ``comm``, stacked first): piece ``k`` goes
    to rank ``k``; the result's piece ``k`` came from rank ``k``."""

    def exchange(a: np.ndarray) -> np.ndarray:
        got = np.empty_like(a)
        comm.Alltoall(np.ascontiguousarray(a), got)
        return got

    shape = jax.ShapeDtypeStruct(pieces.shape, pieces.dtype)
    return io_callback(exchange, shape, pieces, ordered=True)


def halos(
    xs: Sequence[jax.Array], comm: Any, left: int, right: int, width: int,
    end: int, axis: int,
) -> list[tuple[jax.Array, jax.Array]]:  # fmt: skip
    """``(left, right)`` halos of every block of ``xs`` along ``axis`` in one host call: the
    ``width`` planes before ``end`` (this block's real planes) go to rank ``right``, the first
    ``width`` to rank ``left``; the left halo is rank ``left``'s last real planes, the right
    halo rank ``right``'s first (:func:`sonotile.parallel.collectives.halos`)."""
    from mpi4py import MPI

    firsts = [lax.slice_in_dim(x, 0, width, axis=axis) for x in xs]
    lasts = [lax.slice_in_dim(x, end - width, end, axis=axis) for x in xs]
    n = len(xs)

    def exchange(*parts: np.ndarray) -> list[np.ndarray]:
        sent = [np.ascontiguousarray(p) for p in parts]  # alive until every message has gone
        got = [np.empty_like(p) for p in parts]
        requests = []
        for i in range(n):  # tag 2i: last planes going right; 2i + 1: first planes going left
            requests += [
                comm.Irecv(got[i], source=left, tag=2 * i),
                comm.Irecv(got[n + i], source=right, tag=2 * i + 1),
                comm.Isend(sent[n + i], dest=right, tag=2 * i),
                comm.Isend(sent[i], dest=left, tag=2 * i + 1),
            ]
        MPI.Request.Waitall(requests)
        return got

    shapes = [jax.ShapeDtypeStruct(p.shape, p.dtype) for p in (*lasts, *firsts)]
    got = io_callback(exchange, shapes, *firsts, *lasts, ordered=True)
    return [(got[i], got[n + i]) for i in range(n)]
