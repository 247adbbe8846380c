"""The heat model on a pencil mesh against the single-device run (virtual CPU devices, one
subprocess): heterogeneous conductivity with perfusion and a switched heat source in 3-D (slabs
and pencils), a homogeneous medium (the exact propagator) on uneven 2-D blocks; temperature at
sensor points every step and the final temperature, maximum and dose, float64; the same for
``KWaveDiffusion`` across two calls; gradients with respect to the heat source through the run
on the mesh against the one-device gradient and central differences."""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

SCRIPT = r"""
import json
from types import SimpleNamespace
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
from sonotile.api.heating.bioheat import KWaveDiffusion, engine_run
from sonotile.physics.heat import sonication
from sonotile.physics.heat.model import heat_problem

assert len(jax.devices()) == 4, jax.devices()
rng = np.random.default_rng(0)

def case(shape, heterogeneous):
    x = np.meshgrid(*[(np.arange(n) - n // 2) * 1e-3 for n in shape], indexing="ij")
    Q = 4e6 * np.exp(-sum(c ** 2 for c in x) / 3e-3 ** 2)
    medium = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5,
              "blood_density": 1060.0, "blood_specific_heat": 3617.0,
              "blood_perfusion_rate": 0.01, "blood_ambient_temperature": 37.0}
    if heterogeneous:
        medium["thermal_conductivity"] = 0.5 * (1 + 0.6 * rng.random(shape))
        medium["blood_perfusion_rate"] = 0.01 * (1 + rng.random(shape))
    idx = tuple(np.array([n // 2, 1, n - 2]) for n in shape)
    nt = 24
    return heat_problem(shape, (1e-3,) * len(shape), medium, {"T0": 37.0, "Q": Q}, nt, 0.2,
                        on=sonication(nt, 0.2, on=3.0), sensor=idx)

def errors(res, ref):
    out = {}
    for part in (0, 1):
        for k, v in ref[part].items():
            got = np.asarray(res[part][k])
            assert got.shape == v.shape, (k, got.shape, v.shape)
            rise = np.abs(v - 37.0).max() if k.startswith("T") else np.abs(v).max()
            out[k] = float(np.abs(got - v).max() / rise)
    return out

out = {}
for name, shape, het, mesh in [("3d_slabs", (16, 12, 10), True, (4,)),
                               ("3d_pencils", (16, 12, 10), True, (2, 2)),
                               ("2d_uneven_homogeneous", (18, 14), False, (4,))]:
    p = case(shape, het)
    ref = engine_run(p)
    res = engine_run(p, "pencil", mesh_shape=mesh)
    out[name] = errors(res, ref)
    out[name]["dose"] = float(ref[1]["cem43_final"].max())
# a run stopped on one device, saved, and taken to the end on slabs
import os, tempfile
from sonotile.parallel.engine import engine_for
from sonotile.solver import runner
from sonotile.solver import sensors as sens
from sonotile.solver.resume import load_state, save_state

p = case((16, 12, 10), True)
ref = engine_run(p)
one = engine_for(p)[0]
rs, _ = one.start()
rec = runner.ListRecorder()
rs = runner.advance(one, rs, 10, rec, chunk=5)
path = os.path.join(tempfile.mkdtemp(), "state.npz")
save_state(path, one, rs)
mesh_engine = engine_for(p, "pencil", mesh_shape=(4,))[0]
rs = runner.advance(mesh_engine, load_state(path, mesh_engine), p.nt, rec)
fin = mesh_engine.to_true(sens.finish(rs.carry[1], rs.carry[0], mesh_engine.layout, p.nt))
out["resumed_on_mesh"] = errors((rec.result(), fin), ref)

# KWaveDiffusion on a mesh: two calls (heating, then cooling) carry state, dose and maximum on
kd = {}
for dec, kw in (("single", {}), ("pencil", {"mesh_shape": (2, 2)})):
    p = case((16, 12, 10), True)
    medium = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5}
    grid = SimpleNamespace(shape=(16, 12, 10), spacing=1e-3)
    d = KWaveDiffusion(grid, medium, {"T0": 37.0, "Q": p.Q},
                       np.pad(np.ones((2, 2, 2)), ((7, 7), (5, 5), (4, 4))) > 0,
                       decomposition=dec, **kw)
    d.take_time_step(10, 0.2)
    d.Q = 0.0
    d.take_time_step(5, 0.2)
    kd[dec] = d
ref, got = kd["single"], kd["pencil"]
out["kwave_diffusion"] = max(float(np.abs(getattr(got, k) - getattr(ref, k)).max())
                             for k in ("T", "T_max", "cem43", "sensor_data"))
out["kwave_diffusion_rise"] = float(ref.T_max.max() - 37.0)
# gradients of sensor temperatures and dose with respect to the heat source, through the run
# on the mesh: against the one-device gradient and central differences
import jax.numpy as jnp
from sonotile.api.heating.bioheat import bioheat

p = case((16, 12, 8), True)
medium = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": p.co.p2,
          "perfusion_coeff": 0.01, "blood_ambient_temperature": 37.0}
mask = np.zeros((16, 12, 8), bool)
mask[8, 6, 4] = mask[2, 3, 1] = mask[13, 9, 6] = True
grid = SimpleNamespace(shape=(16, 12, 8), spacing=1e-3)

def loss(q, dec):
    r = bioheat(grid, medium, {"T0": 37.0, "Q": q}, 30, 0.25, sensor=mask, decomposition=dec)
    return jnp.sum((r.sensor_data - 37.0) ** 2) + 1e3 * jnp.sum(r.cem43)

q = jnp.asarray(p.Q)
g1 = jax.grad(loss)(q, "single")
g4 = jax.grad(loss)(q, "pencil")
d = rng.standard_normal(q.shape) * p.Q
h = 1e-4
fd = (float(loss(q + h * d, "pencil")) - float(loss(q - h * d, "pencil"))) / (2 * h)
out["grad"] = {"vs_single": float(jnp.abs(g4 - g1).max() / jnp.abs(g1).max()),
               "fd": abs(float(jnp.sum(g4 * d)) - fd) / abs(fd), "size": abs(fd)}
try:
    engine_run(case((16, 12), False), "lfb")
    out["lfb"] = "ran"
except ValueError as e:
    out["lfb"] = str(e)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    return run_on_cpu_devices(SCRIPT, 4)


@pytest.mark.parametrize("name", ["3d_slabs", "3d_pencils", "2d_uneven_homogeneous"])
def test_pencil_heat_equals_single_device(results: dict, name: str) -> None:
    errs = results[name]
    assert errs["dose"] > 0  # the source heated some points beyond 37 degC
    for k in ("T", "T_final", "T_max_final", "cem43_final"):
        assert errs[k] <= 1e-12, (k, errs)


def test_run_saved_on_one_device_goes_on_on_a_mesh(results: dict) -> None:
    errs = results["resumed_on_mesh"]
    for k in ("T", "T_final", "T_max_final", "cem43_final"):
        assert errs[k] <= 1e-12, (k, errs)


def test_kwave_diffusion_on_a_mesh(results: dict) -> None:
    assert results["kwave_diffusion_rise"] > 0.1
    assert results["kwave_diffusion"] <= 1e-12 * results["kwave_diffusion_rise"]


def test_gradient_through_the_mesh(results: dict) -> None:
    g = results["grad"]
    assert g["size"] > 0
    assert g["vs_single"] <= 1e-12, g
    assert g["fd"] <= 1e-6, g


def test_lfb_refuses_the_heat_model(results: dict) -> None:
    assert "pencil" in results["lfb"] and "heat model" in results["lfb"]
