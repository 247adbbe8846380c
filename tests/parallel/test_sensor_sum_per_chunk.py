"""The sensors' sum over the mesh once per chunk instead of once per step.

Each shard records its own part of every sample (zeros where another shard holds the point)
and its own running statistics, and one sum after the chunk's last step makes them whole
(:meth:`sonotile.parallel.mesh.ShardIndex.settle`). Against the single device: an initial
pressure (the init program samples step 0 the same way), uneven blocks, points on block
boundaries and grid edges, a record start inside the second chunk (statistics still at their
initial values after the first), several chunks. Runs in a subprocess with 4 CPU devices.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from devices import run_on_cpu_devices

from sonotile.model.problem import Sensor
from sonotile.solver import sensors as sens

SCRIPT = r"""
import dataclasses, json
import jax
import numpy as np
from sonotile.bench.cases import heterogeneous_absorbing
from sonotile.model.problem import Sensor, Sources
from sonotile.parallel import run_decomposed
from sonotile.solver import sensors as sens
from sonotile.solver.runner import run

assert len(jax.devices()) == 4, jax.devices()
shape = (29, 26, 22)
pb = heterogeneous_absorbing(shape=shape, nt=40)
x = [np.arange(n) - n // 2 for n in shape]
r2 = sum(a**2 for a in np.meshgrid(*x, indexing="ij"))
p0 = (2e5 * np.exp(-r2 / 8.0)).astype(np.float32)
pb = dataclasses.replace(pb, sources=Sources(p0=p0, u=(None, None, None)))
pts = np.array([[0, 0, 0], [28, 25, 21], [14, 13, 11], [15, 13, 11], [7, 6, 20], [21, 19, 1]])
rec = ("p", "p_max", "p_min", "p_rms", "u", "p_final")
pb = dataclasses.replace(pb, sensor=Sensor(index=pts, record=rec, start=17))
layout = sens.layout_of(pb.sensor, shape)
assert sens.sums_deferrable(layout)


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


def every_step(*a):
    return False


raw0, fin0 = run(pb)
out = {}
for name, dec, mesh in [("pencil_4", "pencil", (4,)), ("pencil_2x2", "pencil", (2, 2)),
                        ("lfb_2x2", "lfb", (2, 2))]:
    raw, fin = run_decomposed(pb, dec, mesh, chunk=12)
    real, sens.sums_deferrable = sens.sums_deferrable, every_step  # the sum in every step
    try:
        raw1, fin1 = run_decomposed(pb, dec, mesh, chunk=12)
    finally:
        sens.sums_deferrable = real
    out[name] = {
        "single": {k: rel(v, raw0[k]) for k, v in raw.items()}
        | {k: rel(fin[k], v) for k, v in fin0.items()},
        "differ": sorted(k for k in raw1 if not np.array_equal(raw[k], raw1[k]))
        + sorted(k for k in fin1 if not np.array_equal(fin[k], fin1[k])),
        "keys": sorted(raw) + sorted(fin),
    }
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results():
    return run_on_cpu_devices(SCRIPT, 4)


@pytest.mark.parametrize("name", ["pencil_4", "pencil_2x2", "lfb_2x2"])
def test_samples_summed_per_chunk_equal_the_sum_per_step(results, name):
    got = results[name]
    want = {"p", "ux", "uy", "uz", "p_max", "p_min", "p_rms", "p_final"}
    assert want <= set(got["keys"]), got
    # exact: each sample has one owner, the others add zeros; statistics are the owner's
    assert got["differ"] == [], got
    if name.startswith("pencil"):  # and the same as one device, to round-off
        assert max(got["single"].values()) <= 2e-5, got


def test_statistics_of_interpolated_values_sum_every_step():
    """A statistic of values no single shard holds (off-grid points' interpolation) cannot be
    taken from the owning shard: those sensors keep the sum in every step."""
    sensor = Sensor(index=np.array([[3, 4], [9, 12]]), record=("p", "p_max", "u"))
    on_grid = sens.layout_of(sensor, (16, 16))
    assert on_grid.stats and sens.sums_deferrable(on_grid)
    off_grid = dataclasses.replace(on_grid, interp=object())
    assert not sens.sums_deferrable(off_grid)
    assert sens.sums_deferrable(dataclasses.replace(off_grid, stats=()))  # raw: linear
