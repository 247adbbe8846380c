"""Non-staggered velocity from the lines through the sensor points on the decompositions.

Each shard puts its segments of the lines in place and one sum over the mesh joins them
(:meth:`sonotile.parallel.mesh.ShardIndex.lines`). Pencil must equal the single device to
round-off; LFB's samples must be the exact (global) shift of LFB's own velocity, whatever the
overlap, equal to today's whole-field path, hence no further from the single device. Uneven
blocks (45 x 34 x 28 on 2 and 4 devices), points on the grid's edges, on both sides of a block
boundary and on shared lines. Runs in a subprocess with 4 CPU devices.
"""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

SCRIPT = r"""
import dataclasses, json
import jax
import numpy as np
from sonotile.bench.cases import heterogeneous_absorbing
from sonotile.parallel import run_decomposed
from sonotile.solver import sensors as sens
from sonotile.spectral.operators import FourierOps
from sonotile.solver.runner import run

assert len(jax.devices()) == 4, jax.devices()
shape = (45, 34, 28)
pb = heterogeneous_absorbing(shape=shape, nt=30)
pts = np.array([[0, 0, 0], [44, 33, 27], [22, 17, 14], [23, 17, 14], [11, 5, 27], [11, 5, 3],
                [30, 33, 0], [12, 20, 9], [34, 8, 20], [33, 8, 20]])
rec = ("p", "u_non_staggered", "u_final")
pb = dataclasses.replace(pb, sensor=dataclasses.replace(pb.sensor, index=pts, record=rec))
layout = sens.layout_of(pb.sensor, shape)
assert [f for f, _ in layout.lines] == [f"u{a}_non_staggered" for a in "xyz"]
assert not layout.needs_unstagger
ops = FourierOps.build(shape, pb.grid.spacing, 1500.0, pb.grid.dt, unstagger=True, fft="xla")
names = [f"u{a}_non_staggered" for a in "xyz"]


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / np.abs(b).max())


ref = run(pb)
out = {}
for name, dec, mesh in [("pencil_4", "pencil", (4,)), ("pencil_2x2", "pencil", (2, 2)),
                        ("lfb_4", "lfb", (4,)), ("lfb_2x2", "lfb", (2, 2))]:
    raw, final = run_decomposed(pb, dec, mesh, overlap=8)
    err = {f: rel(raw[f], ref[0][f]) for f in names}
    # the last sample against the whole-grid shift of the run's own final velocity
    own = {}
    for a, f in enumerate(names):
        u = jax.numpy.asarray(final[f"u{'xyz'[a]}_final"], jax.numpy.float32)
        shifted = np.asarray(ops.unstagger(u, a))[tuple(pts.T)]
        own[f] = rel(raw[f][-1], shifted)
    sens.LINE_SHARE = 0.0  # today's path: whole components shifted (all-to-all on split axes)
    assert not sens.layout_of(pb.sensor, shape).lines
    old = run_decomposed(pb, dec, mesh, overlap=8)[0]
    sens.LINE_SHARE = 0.125
    out[name] = {"single": err, "own": own,
                 "old_single": {f: rel(old[f], ref[0][f]) for f in names},
                 "old": {f: rel(raw[f], old[f]) for f in names}}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results():
    return run_on_cpu_devices(SCRIPT, 4)


@pytest.mark.parametrize("name", ["pencil_4", "pencil_2x2"])
def test_pencil_lines_equal_single_device(results, name):
    err = results[name]
    assert max(err["single"].values()) <= 1e-5, err
    assert max(err["own"].values()) <= 1e-5, err


@pytest.mark.parametrize("name", ["lfb_4", "lfb_2x2"])
def test_lfb_lines_are_the_exact_shift_of_its_velocity(results, name):
    err = results[name]
    assert max(err["own"].values()) <= 1e-5, err
    # the same samples as the whole-field shift (also exact: a transpose made the axis whole)
    assert max(err["old"].values()) <= 1e-5, err
    # so LFB's error against one device is its velocity's (overlap 8 on 11-23 point blocks)
    for f, e in err["single"].items():
        assert e <= err["old_single"][f] + 1e-5, (f, err)
    assert max(err["single"].values()) <= 0.1, err
