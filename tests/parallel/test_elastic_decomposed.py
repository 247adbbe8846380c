"""The elastic model on a pencil mesh against the single-device run (virtual CPU devices, one
subprocess): a 3-D heterogeneous solid with a fluid layer and Kelvin-Voigt absorption, an
initial pressure and an additive velocity source whose points lie on several shards, on slabs
(uneven blocks) and pencils; series, statistics and whole fields agree to round-off (float64). The
single-axis derivatives of :class:`~sonotile.parallel.pencil.PencilOps` are checked against
the one-device operator on their own too, and gradients with respect to both speeds and the
density through a run on the mesh against the one-device gradient and central differences."""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

SCRIPT = r"""
import json
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import sonotile as st

assert len(jax.devices()) == 4, jax.devices()
shape, dx = (18, 14, 12), 1e-4  # 18 points on 4 slabs: uneven blocks
rng = np.random.default_rng(0)
cp = 2500 + 300 * rng.random(shape)
cs = 1200 + 200 * rng.random(shape)
cs[:, :, :4] = 0.0  # a fluid layer
rho = 1800 + 200 * rng.random(shape)
medium = st.KWaveElasticMedium(cp, cs, rho, alpha_coeff_compression=1.0, alpha_coeff_shear=2.0)
x = np.meshgrid(*[np.arange(n) - n // 2 for n in shape], indexing="ij")
p0 = 1e3 * np.exp(-sum(c ** 2 for c in x) / 4.0)
u_mask = np.zeros(shape, bool)
u_mask[3:13:3, 8, 6] = True  # points on every slab
nt = 40
dt = 0.2 * dx / 2800
t = np.arange(nt) * dt
source = st.ElasticSource(p0=p0, uy=1e-3 * np.sin(2 * np.pi * 2e6 * t), u_mask=u_mask)
sens = np.zeros(shape, bool)
sens[1:15:4, 2:14:5, 1:11:3] = True
record = ("p", "u", "s", "u_non_staggered", "p_max", "u_rms", "p_final", "u_final", "s_final",
          "p_max_all")
grid = st.KWaveGrid(shape, dx, dt=dt, nt=nt)

def run(**kw):
    return st.pstd_elastic_3d(grid, medium, source, st.KSensor(mask=sens, record=record),
                              pml_size=3, dtype="float64", **kw)

ref = run()
out = {}
for name, mesh in (("slabs", (4,)), ("pencils", (2, 2))):
    res = run(decomposition="pencil", mesh_shape=mesh)
    assert set(res) == set(ref), (set(res) ^ set(ref))
    out[name] = {k: float(np.abs(res[k] - v).max() / np.abs(v).max()) for k, v in ref.items()}
out["peak"] = float(np.abs(ref["p"]).max())

# the operator alone: PencilOps.diffs against FourierOps.diffs on a random field
from jax.sharding import NamedSharding
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.mesh import field_spec, global_array, make_mesh, shard_map
from sonotile.parallel.pencil import pencil_operators
from sonotile.physics.elastic import ElasticMedium, build

erun = build(ElasticMedium(2500.0, 1200.0, 1800.0, (18, 16, 12)), (dx,) * 3, dt, 4,
             pml_size=(2, 2, 2), dtype="float64")
f = rng.standard_normal((18, 16, 12))
which = [(0, 1), (1, -1), (2, 1), (0, -1), (1, 1)]
want = [np.asarray(v) for v in erun.ops.diffs(jax.numpy.asarray(f), which)]
errs = []
for mesh in ((4,), (2, 2)):  # 18 points on 4 devices: uneven blocks
    blocks = Blocks((18, 16, 12), mesh)
    arrays, specs, make_ops = pencil_operators(erun, blocks, False, slab_kernels=False)
    spec, m = field_spec(3, len(mesh)), make_mesh(mesh)
    fn = shard_map(lambda g, a: tuple(make_ops(a).diffs(g, which)), m, (spec, specs),
                   tuple(spec for _ in which))
    ops_arrays = jax.tree_util.tree_map(
        lambda s, a: None if a is None else jax.device_put(a, NamedSharding(m, s)), specs, arrays,
        is_leaf=lambda v: v is None or isinstance(v, jax.sharding.PartitionSpec))
    got = jax.jit(fn)(global_array(f, NamedSharding(m, spec), blocks=blocks), ops_arrays)
    got = [blocks.to_true(np.asarray(g)) for g in got]
    errs.append(max(float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want)))
out["diffs"] = errs

# gradients through the run on the mesh (2-D, 4 slabs) with respect to the speeds and density
import jax.numpy as jnp
from sonotile.api.elastic import execute

n2 = (32, 24)
cp2, cs2, rho2 = (v + w * rng.random(n2) for v, w in ((2500, 200), (1000, 200), (1800, 100)))
cs2[:, :6] = 0.0
x2 = np.meshgrid(*[np.arange(n) - n // 2 for n in n2], indexing="ij")
p02 = np.exp(-(x2[0] ** 2 + (x2[1] - 2) ** 2) / 4.0)
run2 = build(ElasticMedium(cp2, cs2, rho2, n2, 2.0, 4.0), (dx, dx), 0.2 * dx / 2700, 24,
             p0=p02, sensor_points=np.array([[4, 4], [25, 7], [14, 16]]),
             record=("p", "u", "s"), pml_size=(4, 4), dtype="float64")
values = {"sound_speed_compression": cp2, "sound_speed_shear": cs2, "density": rho2}

def loss(v, dec):
    o = execute(run2, v, chunk=8, decomposition=dec)
    return jnp.sum(o["p"] ** 2) + 1e12 * jnp.sum(o["ux"] ** 2) + jnp.sum(o["sxy"] ** 2)

base = {k: jnp.asarray(v) for k, v in values.items()}
g1 = jax.grad(loss)(base, "single")
g4 = jax.grad(loss)(base, "pencil")
grad = {}
for name in values:
    d = rng.standard_normal(n2)
    if name == "sound_speed_shear":
        d[:, :6] = 0.0
    h = 1e-5 * float(np.abs(values[name]).max())
    f = [float(loss({**base, name: base[name] + s * h * d}, "pencil")) for s in (1, -1)]
    fd = (f[0] - f[1]) / (2 * h)
    grad[name] = {"vs_single": float(jnp.abs(g4[name] - g1[name]).max()
                                     / jnp.abs(g1[name]).max()),
                  "fd": abs(float(jnp.sum(g4[name] * d)) - fd) / abs(fd)}
out["grad"] = grad

# st.simulate and st.make_simulator with the elastic medium on a mesh
s_sens = st.KSensor(mask=sens, record=("p", "s"))
r1 = st.simulate(grid, medium, source, s_sens, pml_size=3, dtype="float64", quiet=True)
r4 = st.simulate(grid, medium, source, s_sens, pml_size=3, dtype="float64", quiet=True,
                 decomposition="pencil", mesh=(2, 2))
out["simulate"] = max(float(np.abs(r4[k] - r1[k]).max() / np.abs(r1[k]).max()) for k in r1.keys())
u2 = np.zeros(n2, bool)
u2[10, 5:20:4] = True
src2 = st.ElasticSource(ux=1e-3 * np.sin(0.5 * np.arange(24)), u_mask=u2)
sen2 = st.KSensor(points=np.array([[4, 4], [25, 7], [14, 16]]), record=("p", "s"))
g2 = st.KWaveGrid(n2, dx, dt=0.2 * dx / 2700, nt=24)
m2 = st.KWaveElasticMedium(cp2, cs2, rho2, 2.0, 4.0)
sims = {d: st.make_simulator(g2, m2, src2, sen2, pml_size=4, dtype="float64", decomposition=d,
                             mesh=(4,) if d == "pencil" else None) for d in ("single", "pencil")}

def sim_loss(p, d):
    o = sims[d](p)
    return jnp.sum(o["p"] ** 2) + jnp.sum(o["sxy"] ** 2)

pb = {k: sims["single"].params[k] for k in ("sound_speed_compression", "ux")}
ga = {d: jax.grad(sim_loss)(pb, d) for d in sims}
out["simgrad"] = {k: float(jnp.abs(ga["pencil"][k] - ga["single"][k]).max()
                           / jnp.abs(ga["single"][k]).max()) for k in pb}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    return run_on_cpu_devices(SCRIPT, 4)


@pytest.mark.parametrize("name", ["slabs", "pencils"])
def test_pencil_elastic_equals_single_device(results: dict, name: str) -> None:
    assert results["peak"] > 1.0  # a wave reached the sensors
    worst = max(results[name].values())
    assert worst <= 1e-10, results[name]


def test_pencil_single_axis_derivatives(results: dict) -> None:
    assert max(results["diffs"]) <= 1e-12, results["diffs"]


@pytest.mark.parametrize("name", ["sound_speed_compression", "sound_speed_shear", "density"])
def test_gradient_through_the_mesh(results: dict, name: str) -> None:
    g = results["grad"][name]
    assert g["vs_single"] <= 1e-10, g
    assert g["fd"] <= 1e-6, g


def test_simulate_and_simulator_on_the_mesh(results: dict) -> None:
    assert results["simulate"] <= 1e-10, results["simulate"]
    assert max(results["simgrad"].values()) <= 1e-10, results["simgrad"]
