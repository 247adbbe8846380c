"""Pencil slabs on FFTW (one fused pass along x per field, :func:`sonotile.fft.fftw.xpass`, and
the y / z shift vectors applied while ``irfft_join`` joins the pieces) against the same
distributed transform on XLA's FFT with the spectrum multiplied in XLA, and against the
single-device operators: every operator (grad, div, both fractional Laplacians, the source
filter) to float32 round-off, 2-D and 3-D, even and uneven blocks, padded spectra.

One subprocess with 8 virtual CPU devices (JAX fixes the device count when it starts).
"""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices
from require import require_fftw

from sonotile.fft import fftw

SCRIPT = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from operator_case import apply, problem
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.mesh import field_spec, make_mesh, shard_map
from sonotile.parallel.pencil import PencilOps, pencil_constants
from sonotile.solver.operators import FourierOps

assert len(jax.devices()) == 8


def distributed(prob, blocks, xs, fused):
    d, m = len(blocks.shape), len(blocks.mesh_shape)
    arrays, specs, meta = pencil_constants(prob, blocks, False, fftw_transforms=fused)
    assert meta.fft == ("fftw" if fused else "xla"), meta
    spec = field_spec(d, m)
    out = ((spec,) * d, (spec,) * d, spec, spec, spec)
    body = lambda x, a: apply(PencilOps(*a, meta=meta), x)
    f = jax.jit(shard_map(body, make_mesh(blocks.mesh_shape), ((spec,) * d, specs), out))
    calls = f.lower(xs, arrays).as_text().count("sonotile_fftw_xpass")
    return [blocks.to_true(np.asarray(y)) for y in jax.tree_util.tree_leaves(f(xs, arrays))], calls


def compare(shape, mesh_shape):
    d = len(shape)
    blocks = Blocks(shape, mesh_shape)
    prob = problem(shape)
    rng = np.random.default_rng(sum(shape))
    xs = tuple(jnp.asarray(rng.standard_normal(blocks.padded_shape), jnp.float32)
               for _ in range(d))
    fused, calls = distributed(prob, blocks, xs, True)
    xla, xla_calls = distributed(prob, blocks, xs, False)
    g = prob.grid
    single = FourierOps.build(g.shape, g.spacing, 1500.0, g.dt, alpha_power=1.5,
                              source_filter=True, fft="xla")
    true = tuple(jnp.asarray(blocks.to_true(np.asarray(x))) for x in xs)
    ref = [np.asarray(y) for y in jax.tree_util.tree_leaves(apply(single, true))]
    err = lambda a, b: float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
    return {"vs_xla": [err(a, b) for a, b in zip(fused, xla)],
            "vs_single": [err(a, b) for a, b in zip(fused, ref)],
            "xpass": calls, "xpass_xla": xla_calls}


def updates(shape, mesh_shape):
    # split-field updates applied as irfft_join makes each plane (grad_update, div_update)
    # against the same updates after PencilOps.grad / div: a field coefficient along x (the
    # split axis: a stored dt / rho0_sg), k-Wave's staggered mean along the whole axes, a
    # number along the last
    from jax.sharding import PartitionSpec as P
    from sonotile.solver.operators import SplitUpdate, div_update, fuses_updates, grad_update

    d = len(shape)
    blocks = Blocks(shape, mesh_shape)
    arrays, specs, meta = pencil_constants(problem(shape), blocks, False)
    spec = field_spec(d, 1)
    rng = np.random.default_rng(11 + sum(shape))
    full = blocks.padded_shape
    rand = lambda s, lo=None: jnp.asarray(rng.standard_normal(s) if lo is None
                                          else lo + 0.5 * rng.random(s), jnp.float32)
    fields = tuple(rand(full) for _ in range(2 * d))  # p, d old fields, u[1:]
    G = rand(full, 1.0)
    ms = tuple(rand(tuple(n if b == a else 1 for b, n in enumerate(full)), 0.6) for a in range(d))
    m_specs = (spec,) + (P(),) * (d - 1)  # x's profile is split with the blocks
    kinds = ["field"] + ["staggered"] * (d - 2) + ["scalar"]

    def body(fs, G, ms, arrays):
        ops = PencilOps(*arrays, meta=meta)
        p, olds, u = fs[0], fs[1:d + 1], (fs[0],) + fs[d + 1:]
        ups = [SplitUpdate(olds[a], ms[a], a, 0.37, None if k == "scalar" else G,
                           staggered=k == "staggered") for a, k in enumerate(kinds)]
        assert fuses_updates(ops, p)

        def coef(a):
            if kinds[a] == "scalar":
                return 0.37
            if kinds[a] == "field":
                return 0.37 * G
            nxt = jnp.concatenate([jax.lax.slice_in_dim(G, 1, G.shape[a], axis=a),
                                   jax.lax.slice_in_dim(G, G.shape[a] - 1, G.shape[a], axis=a)], a)
            return 0.37 / (0.5 * (G + nxt))

        def by_hand(ds):
            return tuple(m * (m * o - coef(a) * g) for a, (o, m, g) in enumerate(zip(olds, ms, ds)))

        return ((grad_update(ops, p, ups), div_update(ops, u, ups)),
                (by_hand(ops.grad(p)), by_hand(ops.div(u))))

    f = jax.jit(shard_map(body, make_mesh(mesh_shape), ((spec,) * (2 * d), spec, m_specs, specs),
                          (((spec,) * d, (spec,) * d),) * 2))
    text = f.lower(fields, G, ms, arrays).compile().as_text()
    fused, sep = f(fields, G, ms, arrays)
    leaves = lambda t: [blocks.to_true(np.asarray(y)) for y in jax.tree_util.tree_leaves(t)]
    errs = [float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
            for a, b in zip(leaves(fused), leaves(sep))]
    joins = [ln for ln in text.splitlines() if "sonotile_fftw_irfft_join" in ln]
    return {"errors": errs, "epilogues": sum("epi = 0" not in ln for ln in joins)}


out = {}
for shape, mesh_shape in [((32, 24, 20), (4,)), ((45, 21, 10), (3,)), ((32, 40), (2,)),
                          ((45, 53), (8,))]:
    out[f"updates_{'x'.join(map(str, shape))}_on_{mesh_shape[0]}"] = updates(shape, mesh_shape)
for shape, mesh_shape in [((32, 24, 20), (4,)), ((46, 37, 29), (4,)), ((45, 21, 10), (3,)),
                          ((32, 40), (2,)), ((45, 53), (8,)), ((97, 53), (4,))]:
    out[f"{'x'.join(map(str, shape))}_on_{mesh_shape[0]}"] = compare(shape, mesh_shape)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    return run_on_cpu_devices(SCRIPT, 8)


def test_fused_slab_equals_xla_slab_and_single_device(results):
    """Every operator of every case (even: 32x24x20 on 4, 32x40 on 2; uneven blocks or padded
    spectra: the rest) to float32 round-off, through xpass (the XLA path without it)."""
    cases = {k: v for k, v in results.items() if not k.startswith("updates_")}
    assert len(cases) == 6
    for name, r in cases.items():
        assert r["xpass"] > 0 and r["xpass_xla"] == 0, (name, r)
        assert max(r["vs_xla"]) < 1e-5, (name, r["vs_xla"])
        assert max(r["vs_single"]) < 1e-5, (name, r["vs_single"])


def test_updates_inside_the_joins_equal_the_separate_update(results):
    """``grad_update`` / ``div_update`` on slabs: each component's split-field update (a field
    coefficient along the split axis, the staggered mean along whole axes, a number) applied as
    ``irfft_join`` makes each plane equals the update after ``grad`` / ``div``, even and uneven
    blocks, 2-D and 3-D; every component's join carries its update (2 d of them)."""
    ups = {k: v for k, v in results.items() if k.startswith("updates_")}
    assert len(ups) == 4
    for name, r in ups.items():
        d = name.split("_")[1].count("x") + 1
        assert r["epilogues"] == 2 * d, (name, r)
        assert max(r["errors"]) < 2e-6, (name, r["errors"])
