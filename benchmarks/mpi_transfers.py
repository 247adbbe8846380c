"""What moving one transpose's or one halo's bytes between 2 MPI ranks costs, three ways.

Per call, median of ``--repeats`` timed loops (ms), for pieces of ``--mb`` MB (the
all-to-all's buffer is two pieces)::

    mpirun -n 2 --bind-to core .venv/bin/python benchmarks/mpi_transfers.py
    OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun -n 2 --bind-to core \\
        .venv/bin/python benchmarks/mpi_transfers.py        # Open MPI without CMA

* ``mpi_alltoall``: ``MPI_Alltoall`` from mpi4py (Open MPI also copies the piece a rank keeps);
* ``mpi_sendrecv_half``: a ``sendrecv`` of the partner's piece alone;
* ``mpi4jax_alltoall``: ``mpi4jax.alltoall`` inside a compiled loop (what the pencil step
  calls), less the same loop without it.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def median_ms(fn, comm, calls: int, repeats: int) -> float:
    fn()  # warm up (and compile)
    ts = []
    for _ in range(repeats):
        comm.Barrier()
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) / calls)
    return float(np.median(ts)) * 1e3


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=4.26, help="piece size [MB] (128^3 spectrum / 2)")
    ap.add_argument("--repeats", type=int, default=15)
    a = ap.parse_args(argv)
    from sonotile.base import runtime

    runtime.configure_threads(1)
    import jax
    import jax.numpy as jnp
    import mpi4jax
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() != 2:
        raise SystemExit("mpi_transfers: run on 2 ranks (mpirun -n 2)")
    me, other = comm.Get_rank(), 1 - comm.Get_rank()
    n = int(a.mb * 1e6 / 8)  # complex64 per piece
    rng = np.random.default_rng(me)
    host = [rng.random(4 * n).astype(np.float32) for _ in range(6)]  # 2 pieces, re + im
    got = [np.empty_like(h) for h in host]
    half = slice(2 * n * other, 2 * n * (other + 1))

    def alltoall() -> None:
        for h, g in zip(host, got):
            comm.Alltoall(h, g)

    def sendrecv_half() -> None:
        for h, g in zip(host, got):
            comm.Sendrecv(h[half], other, 0, g[half], other, 0)

    x = jnp.asarray(host[0].view(np.complex64).reshape(2, n))

    def loop(with_mpi: bool):
        def body(i, y):
            for _ in range(6):
                y = (mpi4jax.alltoall(y, comm=comm) if with_mpi else y) * 1.0000001
            return y

        f = jax.jit(lambda y: jax.lax.fori_loop(0, 10, body, y))
        return lambda: jax.block_until_ready(f(x))

    rows = {
        "mpi_alltoall": median_ms(alltoall, comm, 6, a.repeats),
        "mpi_sendrecv_half": median_ms(sendrecv_half, comm, 6, a.repeats),
        "mpi4jax_alltoall": median_ms(loop(True), comm, 60, a.repeats)
        - median_ms(loop(False), comm, 60, a.repeats),
    }
    if me == 0:
        print(f"pieces of {a.mb} MB:", {k: round(v, 3) for k, v in rows.items()}, "ms per call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
