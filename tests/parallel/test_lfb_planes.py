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


def updates(shape, mesh_shape, overlap, field_axes):
    # split-field updates inside the plane transforms back (grad_update, div_update) against
    # the same updates after LfbOps.grad / div; the coefficient a field on `field_axes`
    from sonotile.spectral.operators import SplitUpdate, div_update, fuses_updates, grad_update

    d = len(shape)
    blocks = Blocks(shape, mesh_shape)
    inner, bells, unshift, meta = lfb_constants(problem(shape), blocks, overlap, 0.5, False)
    arrays = (inner, bells, unshift)
    specs = jax.tree_util.tree_map(lambda _: P(), arrays)
    mesh = make_mesh(mesh_shape)
    spec = field_spec(d, len(mesh_shape))
    rng = np.random.default_rng(7 + sum(shape))
    full = blocks.padded_shape

    def rand(shape, lo=None):
        r = rng.random(shape) if lo is not None else rng.standard_normal(shape)
        return jnp.asarray(r if lo is None else lo + 0.5 * r, jnp.float32)

    fields = tuple(rand(full) for _ in range(2 * d))  # p, then d old fields, then u[1:]
    G = rand(full, 1.0)
    ms = tuple(rand(tuple(n if b == a else 1 for b, n in enumerate(full)), 0.6)
               for a in range(d))  # a PML-like profile along each axis
    m_specs = (spec,) + (P(),) * (d - 1)  # x's profile is split with the blocks

    def body(fs, G, ms, arrays):
        ops = LfbOps(*arrays, meta=meta)
        p, olds, u = fs[0], fs[1:d + 1], (fs[0],) + fs[d + 1:]
        ups = [SplitUpdate(olds[a], ms[a], a, 0.37, G if a in field_axes else None)
               for a in range(d)]
        assert fuses_updates(ops, p)

        def by_hand(ds):
            return tuple(m * (m * o - 0.37 * (G if a in field_axes else 1.0) * g)
                         for a, (o, m, g) in enumerate(zip(olds, ms, ds)))

        return ((grad_update(ops, p, ups), div_update(ops, u, ups)),
                (by_hand(ops.grad(p)), by_hand(ops.div(u))))

    f = jax.jit(shard_map(body, mesh, ((spec,) * (2 * d), spec, m_specs, specs),
                          (((spec,) * d, (spec,) * d),) * 2))
    text = f.lower(fields, G, ms, arrays).as_text()
    fused, sep = f(fields, G, ms, arrays)
    errs = [float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b)))
            for a, b in zip(jax.tree_util.tree_leaves(fused), jax.tree_util.tree_leaves(sep))]
    return {"errors": errs, "epilogues": text.count("epi = 1") + text.count("epi = 2")}


out = {}
for shape, mesh_shape, overlap, field_axes in [((64, 24, 20), (2,), 16, (1,)),
                                               ((53, 45, 12), (3, 1, 1), 8, (0, 2)),
                                               ((53, 45), (2,), 16, (0,)),
                                               ((20, 45), (4,), 8, (1,))]:
    name = f"updates_{'x'.join(map(str, shape))}_on_{'x'.join(map(str, mesh_shape))}"
    out[name] = updates(shape, mesh_shape, overlap, field_axes)
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
    ops = {k: v for k, v in results.items() if not k.startswith("updates_")}
    assert len(ops) == 7
    for name, r in ops.items():
        assert r["xpass_new"] > 0 and r["xpass_old"] == 0, (name, r)
        assert max(r["errors"]) < 1e-5, (name, r["errors"])


def test_updates_inside_the_plane_transforms_equal_the_separate_update(results):
    """``grad_update`` / ``div_update`` on LFB blocks split along x (the planes-first way):
    each component's split-field update done as its planes are transformed back equals the
    update applied after ``grad`` / ``div``, for scalar and field coefficients on every axis
    (x's update: the derivative the pass along x applied), even and uneven blocks."""
    ups = {k: v for k, v in results.items() if k.startswith("updates_")}
    assert len(ups) == 4
    for name, r in ups.items():
        assert r["epilogues"] > 0, (name, r)  # the updates really are inside the calls
        assert max(r["errors"]) < 1e-5, (name, r["errors"])
