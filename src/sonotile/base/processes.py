"""What the processes of a job exchange on the host, outside any device program: barriers,
and small values (a stop request, a chunk length, a file name's token) gathered from every
process.

Through JAX's coordination service (the ``jax.distributed`` client's barriers and key-value
store), not through a compiled collective: no collective of XLA's (gloo on CPUs, NCCL on GPUs)
takes part. Processes that share one GPU, which NCCL refuses, meet here as well, and no program
is compiled for a barrier. In a single process each is a no-op.

May import: nothing of sonotile's.
"""

from __future__ import annotations

from typing import Any


def _count() -> int:
    import jax

    return jax.process_count()


#: how long a process waits for the others at a barrier or exchange [ms] (a process that died
#: ends the wait sooner: the coordination service's heartbeat reports it)
WAIT_MS = 2**31 - 1

_rounds: dict[str, int] = {}


def _round(kind: str) -> int:
    """This process's count of ``kind`` exchanges so far: every process makes the same ones in
    the same order, so the count names the same exchange on each."""
    _rounds[kind] = _rounds.get(kind, -1) + 1
    return _rounds[kind]


def _client() -> Any:
    from jax._src import distributed as jd

    return jd.global_state.client


def barrier(name: str) -> None:
    """Wait until every process gets here (no-op in a single process). Through JAX's
    coordination service, not a device program: no collective of XLA's (gloo, NCCL) takes part,
    so processes sharing one GPU (which NCCL refuses) meet here as well."""
    if _count() > 1:
        _client().wait_at_barrier(f"sonotile/{name}/{_round('barrier/' + name)}", WAIT_MS)


def allgather(value: str) -> list[str]:
    """Every process's ``value``, in process order (``[value]`` in a single process). Through
    the coordination service's key-value store, like :func:`barrier`."""
    import jax

    n = _count()
    if n == 1:
        return [value]
    k, me, client = _round("allgather"), jax.process_index(), _client()
    client.key_value_set(f"sonotile/allgather/{k}/{me}", value)
    got = [client.blocking_key_value_get(f"sonotile/allgather/{k}/{p}", WAIT_MS) for p in range(n)]
    if k >= 2:  # every process has read round k - 2: each set round k - 1 after reading it
        client.key_value_delete(f"sonotile/allgather/{k - 2}/{me}")
    return got


def agree_any(flag: bool) -> bool:
    """True on every process when ``flag`` is true on any (e.g. a stop request)."""
    return any(v == "1" for v in allgather("1" if flag else "0"))


def agree_min(n: int) -> int:
    """The smallest ``n`` over the processes of a job (``n`` itself with one process)."""
    return min(int(v) for v in allgather(str(int(n))))
