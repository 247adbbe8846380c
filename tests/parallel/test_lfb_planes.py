"""LFB "planes first" (blocks split along x only: plane transforms before the overlap exchange,
:func:`sonotile.fft.fftw.xpass`) against the padded 3-D transforms it replaces: the same padded
spectrum, so every operator agrees to float32 round-off — grad, div, both fractional Laplacians
and the source filter, 2-D and 3-D, even and uneven blocks, overlaps wider than a block.

One subprocess with 8 virtual CPU devices (JAX fixes the device count when it starts).
"""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices
from require import require_fftw

from sonotile.fft import fftw

SCRIPT = r"""
import dataclasses, json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import PartitionSpec as P
from operator_case import apply, problem
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.lfb import LfbOps, lfb_constants
from sonotile.parallel.mesh import field_spec, make_mesh, shard_map

assert len(jax.devices()) == 8


def operators(planes, meta, mesh, spec, d):
    m = dataclasses.replace(meta, planes=planes)

    def body(xs, arrays):
        return apply(LfbOps(*arrays, meta=m), xs)

    return body, ((spec,) * d, (spec,) * d, spec, spec, spec)


def compare(shape, mesh_shape, overlap):
    d = len(shape)
    blocks = Blocks(shape, mesh_shape)
    inner, bells, unshift, meta = lfb_constants(problem(shape), blocks, overlap, 0.5, False)
    assert inner.fft.startswith("fftw"), inner.fft
    arrays = (inner, bells, unshift)
    specs = jax.tree_util.tree_map(lambda _: P(), arrays)
    mesh = make_mesh(mesh_shape)
    spec = field_spec(d, len(mesh_shape))
    rng = np.random.default_rng(sum(shape))
    xs = tuple(jnp.asarray(rng.standard_normal(blocks.padded_shape), jnp.float32)
               for _ in range(d))
    got, calls = {}, {}
    for planes in (True, False):
        body, out = operators(planes, meta, mesh, spec, d)
        f = jax.jit(shard_map(body, mesh, ((spec,) * d, specs), out))
        calls[planes] = f.lower(xs, arrays).as_text().count("sonotile_fftw_xpass")
        got[planes] = jax.tree_util.tree_leaves(f(xs, arrays))
    errs = [float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
            for a, b in zip(got[True], got[False])]
    return {"errors": errs, "xpass_new": calls[True], "xpass_old": calls[False]}


out = {}
for shape, mesh_shape, overlap in [((64, 24, 20), (2,), 16), ((53, 45, 12), (3, 1, 1), 8),
                                   ((53, 45), (2,), 16), ((53, 45), (3, 1), 16),
                                   ((20, 45), (4,), 8), ((53, 45), (8,), 8),
                                   ((45, 21, 10), (4,), 16)]:
    name = f"{'x'.join(map(str, shape))}_on_{'x'.join(map(str, mesh_shape))}_ov{overlap}"
    out[name] = compare(shape, mesh_shape, overlap)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    return run_on_cpu_devices(SCRIPT, 8)


def test_planes_first_equals_padded_transforms(results):
    """Every operator of every case to float32 round-off, through the new call (and the old
    path without it)."""
    assert len(results) == 7
    for name, r in results.items():
        assert r["xpass_new"] > 0 and r["xpass_old"] == 0, (name, r)
        assert max(r["errors"]) < 1e-5, (name, r["errors"])
