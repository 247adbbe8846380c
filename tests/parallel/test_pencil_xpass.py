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
from sonotile.spectral.operators import FourierOps

assert len(jax.devices()) == 8


def distributed(prob, blocks, xs, fused):
    d, m = len(blocks.shape), len(blocks.mesh_shape)
    arrays, specs, meta = pencil_constants(prob, blocks, False, slab_kernels=fused)
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


out = {}
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
    assert len(results) == 6
    for name, r in results.items():
        assert r["xpass"] > 0 and r["xpass_xla"] == 0, (name, r)
        assert max(r["vs_xla"]) < 1e-5, (name, r["vs_xla"])
        assert max(r["vs_single"]) < 1e-5, (name, r["vs_single"])
