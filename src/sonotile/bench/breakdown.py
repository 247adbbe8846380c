"""Time per step of one process of a (possibly multi-process) run, and its parts.

:func:`measure` (called by each process of ``sonotile bench --scaling``,
:mod:`sonotile.bench.processes`) runs the heterogeneous absorbing nonlinear case
(:mod:`sonotile.bench.cases`) and returns, in ms per step:

* ``ms_per_step``: the compiled step (best of ``repeats`` chunks of ``steps`` steps);
* ``fft_ms``: the step's transforms alone: ``T`` real-to-complex plus inverse transforms of this
  process's block (padded for LFB) through the step's FFT backend (an upper bound: the step
  shares the pass along x among a gradient's components); for LFB planes first
  (:mod:`sonotile.parallel.lfb`) ``T / 2`` times the block's plane R2C and C2R and the padded
  box's pass along x;
* ``elementwise_ms``: the step with every collective replaced by a local copy of the same size
  (no communication, no waiting), less ``fft_ms``;
* ``exchange_ms``: the step's own collectives (kinds and sizes read from the compiled step) run
  back to back in one program, the processes in step: the transport's cost;
* ``waiting_ms``: the rest: processes waiting for each other (uneven work, a process
  descheduled by other load), not hidden by overlap.

The parts are capped so that they add up to the step (separately timed programs on a loaded
machine can exceed it; then ``exchange_ms`` can be 0): ``exchange_replay_ms`` is the replay's own
time, uncapped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from sonotile.parallel.decomposition import LFB, SINGLE, Decomposition

if TYPE_CHECKING:  # JAX and the solver are imported where used
    import jax

    from sonotile.model.problem import Problem
    from sonotile.solver.runner import Engine

PARTS = ("fft_ms", "elementwise_ms", "exchange_ms", "waiting_ms")


def _best(fn: Callable[[], object], repeats: int) -> float:
    import jax

    jax.block_until_ready(fn())  # compile, warm up
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best


def local_block(
    problem: Problem, decomposition: str, processes: int, overlap: int
) -> tuple[int, ...]:
    """Shape of the block one process transforms: axis 0 split ``processes`` ways (uneven
    blocks: the largest), padded by ``overlap`` on both sides for LFB."""
    shape = list(problem.grid.shape)
    if decomposition != SINGLE:
        shape[0] = -(-shape[0] // processes)
    if decomposition == LFB:
        shape[0] += 2 * overlap
    return tuple(shape)


def fft_seconds(shape: tuple[int, ...], transforms: int, repeats: int) -> float:
    """Seconds for ``transforms`` transforms (half forward, half inverse) of a float32 block,
    through FFTW's custom calls when the step uses them, else XLA's FFT."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from sonotile.fft import backend as fft_backend
    from sonotile.fft import fftw

    use_fftw = fft_backend.chooses("fftw", "float32")
    pairs = max(1, transforms // 2)

    def run(x: jax.Array) -> jax.Array:
        for _ in range(pairs):
            if use_fftw:
                x = fftw.c2r(fftw.r2c(x), x.shape)
            else:
                x = jnp.fft.irfftn(jnp.fft.rfftn(x), s=x.shape).astype(x.dtype)
        return x

    fn = jax.jit(run)
    x = jax.device_put(np.zeros(shape, np.float32), jax.local_devices()[0])
    return _best(lambda: fn(x), repeats)


def plane_fft_seconds(shape: tuple[int, ...], overlap: int, transforms: int, repeats: int) -> float:
    """Seconds for the transforms of ``transforms / 2`` operators of LFB planes first on a block
    of ``shape`` (float32, FFTW): the block's plane R2C and C2R, and the pass along x (with a
    real operator) of the box padded by ``overlap`` on both sides, assembled from the block's
    spectrum and two halos as the step does (:func:`sonotile.fft.fftw.xpass_halo`), timed as
    two chains."""
    import jax
    import numpy as np

    from sonotile.fft import fftw

    pairs = max(1, transforms // 2)
    axes = tuple(range(1, len(shape)))
    padded = (shape[0] + 2 * overlap, *shape[1:])
    half = (*shape[:-1], shape[-1] // 2 + 1)
    dev = jax.local_devices()[0]
    halo = jax.device_put(np.zeros((overlap, *half[1:]), np.complex64), dev)
    bell = jax.device_put(np.ones(padded[0], np.float32), dev)
    op = jax.device_put(np.ones((padded[0], *half[1:]), np.float32), dev)

    def planes(x: jax.Array) -> jax.Array:
        for _ in range(pairs):
            x = fftw.planes_c2r(fftw.rfft_axes(x, axes), x.shape)
        return x

    def along_x(q: jax.Array) -> jax.Array:
        for _ in range(pairs):
            (q,) = fftw.xpass_halo(q, (halo, halo), bell, shape[0], padded, op, inplace=True)
        return q

    x = jax.device_put(np.zeros(shape, np.float32), dev)
    q = jax.device_put(np.zeros(half, np.complex64), dev)
    f, g = jax.jit(planes), jax.jit(along_x)
    return _best(lambda: f(x), repeats) + _best(lambda: g(q), repeats)


def planes_first(decomposition: str, problem: Problem) -> bool:
    """True when this process's LFB operators take the planes-first way (1-D mesh here)."""
    from sonotile.fft import backend as fft_backend

    return (decomposition == LFB and problem.grid.ndim >= 2
            and fft_backend.chooses("fftw", problem.dtype))  # fmt: skip


def _back_to_back(
    ops: Sequence[tuple[str, int]], name: str, n: int
) -> tuple[int, Callable[[jax.Array], jax.Array]]:
    """``(buffer length, program)``: the collectives ``ops`` (``(kind, bytes)``) over mesh axis
    ``name`` of ``n`` shards, one after another on fresh float32 slices of one buffer, through
    :mod:`sonotile.parallel.collectives` (XLA's inside ``shard_map``, else the transport set)."""
    import jax.numpy as jnp

    from sonotile.parallel import collectives

    size = max(-(-b // (4 * n)) * n for _, b in ops)
    perm = [(i, (i + 1) % n) for i in range(n)]

    def run(buf: jax.Array) -> jax.Array:
        acc = jnp.zeros((), buf.dtype)
        for i, (op, nbytes) in enumerate(ops):
            v = buf[: max(-(-nbytes // (4 * n)) * n, n)] + i  # a fresh buffer per collective
            if op == "all-to-all":
                v = collectives.all_to_all(v.reshape(n, -1), name, 0, 0)
            else:
                v = collectives.ppermute(v, name, perm)
            acc = acc + v.reshape(-1)[0]
        return buf.at[0].add(acc)

    return size, run


def exchange_seconds(hlo: str, mesh_devices: Sequence[jax.Device], repeats: int) -> float:
    """Seconds for the compiled step's collectives (``scaling.collective_list``) run back to
    back on a 1-D mesh of ``mesh_devices``, as flat float32 buffers of the same sizes."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from sonotile.bench.scaling import collective_list
    from sonotile.parallel.mesh import shard_map

    ops = [(op, nbytes) for op, nbytes in collective_list(hlo) if op != "all-reduce"]
    n = len(mesh_devices)
    if not ops or n == 1:
        return 0.0
    mesh = Mesh(np.array(mesh_devices), ("x",))
    size, run = _back_to_back(ops, "x", n)
    fn = jax.jit(shard_map(run, mesh, (P("x"),), P("x")))
    sharding = NamedSharding(mesh, P("x"))
    x = jax.make_array_from_callback((n * size,), sharding, lambda i: np.zeros(size, np.float32))
    return _best(lambda: fn(x), repeats)


def mpi_exchange_seconds(transport: Any, ops: list[tuple[str, int]], repeats: int) -> float:
    """Seconds for the collectives ``ops`` (``(kind, bytes)``, as an MPI step traced them) run
    back to back through ``transport``, as flat float32 buffers of the same sizes."""
    import jax
    import jax.numpy as jnp

    from sonotile.parallel import collectives

    name = transport.names[0]
    n = transport.axis_size(name)
    if not ops or n == 1:
        return 0.0
    size, run = _back_to_back(ops, name, n)
    fn = jax.jit(run)
    x = jnp.zeros(size, jnp.float32)
    with collectives.using(transport):
        return _best(lambda: fn(x), repeats)


def measure(
    decomposition: str, shape: Sequence[int], steps: int, repeats: int, overlap: int
) -> dict[str, Any]:
    """This process's seconds per step and parts (see the module docstring)."""
    import jax

    from sonotile import parallel
    from sonotile.bench import scaling
    from sonotile.bench.cases import heterogeneous_absorbing
    from sonotile.solver import runner

    problem = heterogeneous_absorbing(shape[1], steps + 2, shape=tuple(shape))
    procs = jax.process_count()
    devs = list(jax.devices())

    def build(transport: str | None = None) -> Engine:
        if decomposition == SINGLE:
            return runner.single_engine(problem)
        return parallel.decomposed_engine(problem, Decomposition.parse(decomposition),
                                          (len(devs),), overlap, 0.5,
                                          transport=transport)  # fmt: skip

    engine = build()
    rs, _ = engine.start()
    xs1 = runner.step_inputs(problem, rs.next_step, rs.next_step + 1)
    hlo = engine.lower(rs.carry, xs1).compile().as_text()
    mpi = engine.transport is not None
    traced = list(engine.transport.traced) if mpi else []  # one step's MPI calls
    step = scaling.time_chunks(engine, problem, steps, repeats)
    local = step
    if decomposition != SINGLE:  # each process's shard with local copies for collectives
        local = scaling.time_chunks(build("local"), problem, steps, repeats)
    block = local_block(problem, decomposition, len(devs), overlap)
    if planes_first(decomposition, problem):
        interior = local_block(problem, decomposition, len(devs), 0)
        fft = plane_fft_seconds(interior, overlap, scaling.transforms_per_step(problem), repeats)
    else:
        fft = fft_seconds(block, scaling.transforms_per_step(problem), repeats)
    exchange = 0.0
    if decomposition != SINGLE:
        exchange = (mpi_exchange_seconds(engine.transport, traced, repeats) if mpi
                    else exchange_seconds(hlo, devs, repeats))  # fmt: skip
    ms = split(step, local, fft, exchange)
    if mpi:  # the step's MPI calls are custom calls: the transport counted their bytes
        mb = sum(b for _, b in traced) / 1e6
    else:
        sent = scaling.collective_bytes(hlo)
        mb = sum(v["bytes"] for k, v in sent.items() if k != "all-reduce") / 1e6
    return {k: 1e3 * v for k, v in ms.items()} | {"processes": procs, "block": list(block),
                                                  "mb_sent_per_step": mb,
                                                  "exchange_replay_ms": 1e3 * exchange,
                                                  "transport": "mpi" if mpi else "xla"}  # fmt: skip


def split(step: float, local: float, fft: float, exchange: float) -> dict[str, float]:
    """The parts of ``step``, each measured part capped so that the four add up to ``step``
    (separately timed programs on a loaded machine can exceed what the step itself took)."""
    local = min(local, step)
    fft = min(fft, local)
    exchange = min(exchange, step - local)
    return {"ms_per_step": step, "fft_ms": fft, "elementwise_ms": local - fft,
            "exchange_ms": exchange, "waiting_ms": step - local - exchange}  # fmt: skip
