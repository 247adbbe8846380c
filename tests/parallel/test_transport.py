"""The transport pieces of a multi-process run: each local process on its own CPUs, the sensor
sum through point-to-point exchanges."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sonotile.base import runtime

SUM_SCRIPT = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from jax import lax
from jax.sharding import Mesh, PartitionSpec as P
from sonotile.parallel.collectives import sum_over
from sonotile.parallel.mesh import shard_map

out = {}
rng = np.random.default_rng(0)
for shape in ((2,), (3,), (4,), (5,), (8,), (2, 4), (3, 2)):
    names = tuple(f"m{i}" for i in range(len(shape)))
    n = int(np.prod(shape))
    mesh = Mesh(np.array(jax.devices()[:n]).reshape(shape), names)
    x = rng.standard_normal(shape + (7,)).astype(np.float32)
    owner = rng.integers(0, n, 7)  # one owner per sample: the others hold zeros
    one = np.where(np.arange(n).reshape(shape + (1,)) == owner, x, 0).astype(np.float32)
    spec = P(*names)

    def both(v):
        return sum_over(v, names), lax.psum(v, names)

    f = jax.jit(shard_map(both, mesh, (spec,), (spec, spec)))
    mine, ref = f(jnp.asarray(x))
    mine1, _ = f(jnp.asarray(one))
    total = one.sum(axis=tuple(range(len(shape))))
    out["x".join(map(str, shape))] = {
        "err": float(np.abs(np.asarray(mine) - np.asarray(ref)).max() / np.abs(ref).max()),
        "exact_one_owner": bool((np.asarray(mine1) == total).all()),
    }
print(json.dumps(out))
"""


def test_sum_over_equals_psum_on_every_mesh():
    """Butterfly (2, 4, 8) and ring (3, 5) sums, 1- and 2-D meshes, 8 virtual devices: equal to
    ``psum`` to float32 round-off, and bit-exact for samples with one owner (the sensors)."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    r = subprocess.run([sys.executable, "-c", SUM_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(res) == 7
    for mesh, v in res.items():
        assert v["err"] < 1e-6, (mesh, v)
        assert v["exact_one_owner"], mesh


def test_local_rank_from_each_launcher():
    assert runtime.local_rank({}) == 0
    assert runtime.local_rank({"SONOTILE_PROCESS_ID": "3"}) == 3
    assert runtime.local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "1"}) == 1
    assert runtime.local_rank({"SLURM_LOCALID": "2", "SLURM_PROCID": "9"}) == 2
    assert runtime.local_rank({"SONOTILE_LOCAL_RANK": "1", "SONOTILE_PROCESS_ID": "0"}) == 1


def test_cpu_slice_gives_local_processes_their_own_cpus():
    cpus = [0, 1, 2, 3]
    assert runtime.cpu_slice(cpus, 1, 0) == [0]
    assert runtime.cpu_slice(cpus, 1, 1) == [1]  # was [0]: two 1-thread processes shared a core
    assert runtime.cpu_slice(cpus, 2, 1) == [2, 3]
    assert runtime.cpu_slice(cpus, 1, 5) == [1]  # more processes than CPUs: wrap around
    assert runtime.cpu_slice([6], 1, 3) == [6]  # a launcher bound the process already
    assert runtime.cpu_slice(cpus, 8, 0) == cpus


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")
def test_launched_processes_run_on_different_cpus():
    # all CPUs allowed first: an in-process test run with -t 1 (test_kwave_cli) pins the test
    # process itself, and children inherit that
    code = ("import os; os.sched_setaffinity(0, range(os.cpu_count())); "
            "from sonotile.base import runtime; runtime.configure_threads(1); "
            "print('CPUS', sorted(os.sched_getaffinity(0)))")  # fmt: skip
    r = subprocess.run([sys.executable, "-m", "sonotile.parallel.launch", "-n", "2", "--",
                        sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    cpus = [line.split("CPUS", 1)[1] for line in r.stdout.splitlines() if "CPUS" in line]
    assert len(cpus) == 2 and cpus[0] != cpus[1], r.stdout


@pytest.mark.parametrize("shape", [(6, 4, 5), (4, 6, 3), (6, 5)])
def test_mpi_pieces_equal_split_and_concatenate(shape):
    """The MPI all-to-all's local reordering: pieces stacked first as ``jnp.split`` cuts them,
    joined back as ``jnp.concatenate`` does (reshapes where the axis is 0)."""
    import jax.numpy as jnp
    import numpy as np

    from sonotile.parallel.mpi import joined, pieces_first

    x = jnp.asarray(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
    for axis in range(len(shape)):
        for n in (1, 2, 3):
            if shape[axis] % n:
                continue
            p = pieces_first(x, n, axis)
            assert np.array_equal(p, jnp.stack(jnp.split(x, n, axis=axis)))
            for c in range(len(shape)):
                assert np.array_equal(joined(p, c), jnp.concatenate(list(p), axis=c))
