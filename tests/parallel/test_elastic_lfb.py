"""The elastic model on local Fourier bases (``decomposition="lfb"``) against the single-device
run (8 virtual CPU devices, a subprocess each, float64). The blocks' single-axis derivatives
against the one-device operator: exact along an axis that is not split or that the blocks and
their overlaps cover whole, within the overlap's error along a split one. Whole runs (slow): a
heterogeneous solid with a fluid layer, Kelvin-Voigt absorption, an initial pressure and a
velocity source whose points lie on several blocks; where every split axis is whole the runs
agree to round-off, with real overlaps (2-D on 8 slabs and on 2x4 blocks, 3-D on 2x2x2 blocks)
within LFB's overlap error; and ``st.simulate`` with its ``overlap`` option."""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

COMMON = r"""
import json
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import sonotile as st

assert len(jax.devices()) == 8, jax.devices()
rng = np.random.default_rng(1)
dx = 1e-4


def smooth_field(shape, lo, span):
    # a field varying over several points, lo..lo + span
    k = [np.fft.fftfreq(n) for n in shape]
    kk = sum(np.meshgrid(*[q ** 2 for q in k], indexing="ij"))
    f = np.real(np.fft.ifftn(np.fft.fftn(rng.random(shape)) * np.exp(-kk * 400)))
    return lo + span * (f - f.min()) / (f.max() - f.min())
"""

OPS = (
    COMMON
    + r"""
from jax.sharding import NamedSharding, PartitionSpec as P
from sonotile.parallel.blocks import Blocks
from sonotile.parallel.lfb import LfbOps, lfb_constants
from sonotile.parallel.mesh import field_spec, global_array, make_mesh, shard_map
from sonotile.physics.elastic import ElasticMedium, build

shape = (64, 64)
erun = build(ElasticMedium(2500.0, 1200.0, 1800.0, shape), (dx,) * 2, 1e-8, 4,
             pml_size=(2, 2), dtype="float64")
f = smooth_field(shape, -1.0, 2.0)
which = [(0, 1), (1, -1), (0, -1), (1, 1)]
want = [np.asarray(v) for v in erun.ops.diffs(jax.numpy.asarray(f), which)]
out = {}
for mesh, ov in (((8,), 16), ((2, 4), 8), ((2, 4), 24)):
    blocks = Blocks(shape, mesh)
    inner, bells, unshift, meta = lfb_constants(erun, blocks, ov, 0.5, False)
    arrs = (inner, bells, unshift)
    spec, m = field_spec(2, len(mesh)), make_mesh(mesh)
    specs = jax.tree_util.tree_map(lambda _: P(), arrs)
    fn = shard_map(lambda g, a: tuple(LfbOps(a[0], a[1], a[2], meta=meta).diffs(g, which)), m,
                   (spec, specs), tuple(spec for _ in which))
    got = jax.jit(fn)(global_array(f, NamedSharding(m, spec), blocks=blocks), arrs)
    got = [blocks.to_true(np.asarray(g)) for g in got]
    out["x".join(map(str, mesh)) + f"_{ov}"] = [
        float(np.abs(g - w).max() / np.abs(w).max()) for g, w in zip(got, want)]
print("RESULT" + json.dumps(out))
"""
)

RUNS = (
    COMMON
    + r"""
def case(shape, nt):
    cp, cs, rho = (smooth_field(shape, v, w) for v, w in ((2400, 400), (1000, 300), (1700, 300)))
    cs[..., : shape[-1] // 4] = 0.0  # a fluid layer
    medium = st.KWaveElasticMedium(cp, cs, rho, alpha_coeff_compression=1.0,
                                   alpha_coeff_shear=2.0)
    x = np.meshgrid(*[np.arange(n) - n // 2 for n in shape], indexing="ij")
    p0 = 1e3 * np.exp(-sum(c ** 2 for c in x) / 6.0)
    u_mask = np.zeros(shape, bool)
    u_mask[(slice(4, shape[0] - 4, 9),) + tuple(n // 3 for n in shape[1:])] = True
    dt = 0.2 * dx / 2800
    t = np.arange(nt) * dt
    source = st.ElasticSource(p0=p0, ux=1e-3 * np.sin(2 * np.pi * 1e6 * t), u_mask=u_mask)
    sens = np.zeros(shape, bool)
    sens[(slice(2, None, 7),) + (slice(1, None, 5),) * (len(shape) - 1)] = True
    record = ("p", "u", "s", "p_max", "u_rms", "p_final", "u_final", "s_final")
    grid = st.KWaveGrid(shape, dx, dt=dt, nt=nt)
    fn = st.pstd_elastic_2d if len(shape) == 2 else st.pstd_elastic_3d

    def run(**kw):
        return fn(grid, medium, source, st.KSensor(mask=sens, record=record), pml_size=4,
                  dtype="float64", **kw)

    return run


def errors(ref, res):
    assert set(res) == set(ref), set(res) ^ set(ref)
    return {k: float(np.abs(res[k] - v).max() / np.abs(v).max()) for k, v in ref.items()}


out = {}
run2 = case((72, 48), 60)
ref2 = run2()
out["peak"] = float(np.abs(ref2["p"]).max())
out["whole"] = errors(ref2, run2(decomposition="lfb", mesh_shape=(2,), overlap=36))
out["lfb_8"] = errors(ref2, run2(decomposition="lfb", mesh_shape=(8,), overlap=16))
out["lfb_2x4"] = errors(ref2, run2(decomposition="lfb", mesh_shape=(2, 4), overlap=16))
run3 = case((40, 40, 36), 30)
out["lfb_2x2x2"] = errors(run3(), run3(decomposition="lfb", mesh_shape=(2, 2, 2), overlap=8))

# st.simulate with the elastic medium on LFB blocks (its overlap option)
medium = st.KWaveElasticMedium(smooth_field((72, 48), 2400, 400), 900.0, 1800.0)
p0 = np.zeros((72, 48))
p0[30:40, 20:28] = 1e3
sens = np.zeros((72, 48), bool)
sens[::9, 24] = True  # through the source: the wave reaches them
grid = st.KWaveGrid((72, 48), dx, dt=0.2 * dx / 2800, nt=40)
args = (grid, medium, st.ElasticSource(p0=p0), st.KSensor(mask=sens, record=("p", "s")))
r1 = st.simulate(*args, pml_size=4, dtype="float64", quiet=True)
r8 = st.simulate(*args, pml_size=4, dtype="float64", quiet=True, decomposition="lfb",
                 mesh=(2, 4), overlap=16)
out["simulate"] = max(float(np.abs(r8[k] - r1[k]).max() / np.abs(r1[k]).max()) for k in r1.keys())
print("RESULT" + json.dumps(out))
"""
)


def test_lfb_single_axis_derivatives() -> None:
    d = run_on_cpu_devices(OPS, 8)
    # 8 slabs (overlap 16): exact along the unsplit axis, the overlap's error along the split one
    assert max(d["8_16"][1], d["8_16"][3]) <= 1e-12, d
    assert max(d["8_16"][0], d["8_16"][2]) <= 1e-3, d
    assert max(d["2x4_8"]) <= 1e-2, d  # overlap 8 on both axes: measured 6.4e-3
    # blocks of 32x16 of a 64x64 grid at overlap 24 reach both axes whole: exact
    assert max(d["2x4_24"]) <= 1e-12, d


@pytest.fixture(scope="module")
def runs() -> dict:
    return run_on_cpu_devices(RUNS, 8)


@pytest.mark.slow
def test_lfb_with_whole_axes_equals_single_device(runs: dict) -> None:
    assert runs["peak"] > 1.0  # a wave reached the sensors
    assert max(runs["whole"].values()) <= 1e-10, runs["whole"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "tol"),
    # every record of the run, relative to its largest value; measured 1.6e-3, 1.7e-3 (overlap
    # 16) and 9.6e-3 (overlap 8: 2 blocks of 20 on a 40-point axis are whole from 10 on)
    [("lfb_8", 3e-3), ("lfb_2x4", 3e-3), ("lfb_2x2x2", 2e-2)],
)
def test_lfb_elastic_within_overlap_error(runs: dict, name: str, tol: float) -> None:
    assert max(runs[name].values()) <= tol, runs[name]


@pytest.mark.slow
def test_simulate_elastic_on_lfb(runs: dict) -> None:
    assert runs["simulate"] <= 1e-3, runs["simulate"]


AUTO = r"""
import json
from sonotile.parallel import auto
from sonotile.parallel.engine import engine_for
from sonotile.physics.elastic import ElasticMedium, build

shape = (512, 256)
erun = build(ElasticMedium(2500.0, 1200.0, 1800.0, shape), (1e-4,) * 2, 1e-8, 4)
acoustic = auto(shape, 2, 1e-2)
_, reason = engine_for(erun, "auto", accuracy=1e-2)
print("RESULT" + json.dumps({"acoustic": acoustic["decomposition"], "reason": reason}))
"""


def test_auto_keeps_the_elastic_model_on_pencils() -> None:
    """Where ``auto`` picks LFB for the acoustic model, it runs the elastic model on pencils:
    its overlap table holds for the acoustic model's error, three times smaller."""
    got = run_on_cpu_devices(AUTO, 2)
    assert got["acoustic"] == "lfb"
    assert got["reason"].endswith("the elastic model splits as pencils")
