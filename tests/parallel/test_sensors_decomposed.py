"""Cartesian sensors and CW recording through the decompositions, against the single device.

The sensor points sit on the blocks' corners, so each BLI stencil is gathered from several
devices' blocks (per-shard gather + psum, then the same weighted sum on every shard). Runs in a
subprocess with 4 CPU devices (JAX fixes the device count at import).
"""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

SCRIPT = r"""
import json
import jax
import numpy as np
from sonotile.api import KSensor, KSource, KWaveGrid, KWaveMedium, Options, build_problem
from sonotile.parallel import run_decomposed
from sonotile.solver.runner import run

assert len(jax.devices()) == 4, jax.devices()
n, f0, c = 64, 1e6, 1500.0
dx = c / f0 / 8
g = KWaveGrid((n, n), dx)
g.dt, g.nt = 0.2 * dx / c, 300
mask = np.zeros((n, n), bool)
mask[20, 40] = True
src = KSource(p_mask=mask, p=np.sin(2 * np.pi * f0 * g.t) * np.minimum(1, g.t * f0 / 4))
# points around the block corner (32, 32) and on the x boundary, in metres from the centre
pts = np.array([[-0.4, 0.3], [0.45, -0.35], [-0.1, 9.6], [-16.5, 0.2]]).T * dx
sensor = KSensor(mask=pts, record=("p", "p_max", "p_rms", "u", "p_cw", "p_cw_all"),
                 cw_frequency=f0, cw_periods=3, bli_tolerance=0.01)
prob, _ = build_problem(g, KWaveMedium(sound_speed=c, density=1000.0), src, sensor)

# 3-D: a Gaussian p0 read at points around the corner of a 2x2 mesh's blocks
g3 = KWaveGrid((32, 32, 32), 1e-4)
g3.dt, g3.nt = 2e-8, 40
x = (np.arange(32) - 16) * 1e-4
r2 = sum((a - 3e-4) ** 2 for a in np.meshgrid(x, x, x, indexing="ij"))
src3 = KSource(p0=np.exp(-r2 / (2 * (2.5e-4) ** 2)))
pts3 = np.array([[-0.4, 0.3, 1.7], [0.45, -0.35, -2.2]]).T * 1e-4
sensor3 = KSensor(mask=pts3, record=("p", "p_max", "u"), bli_tolerance=0.01)
prob3, _ = build_problem(g3, KWaveMedium(sound_speed=c, density=1000.0), src3, sensor3,
                         Options(pml_size=6))


def errors(res, ref):
    out = {}
    for part in (0, 1):
        for k, v in ref[part].items():
            v, w = np.asarray(v, np.float64), np.asarray(res[part][k], np.float64)
            if k.startswith("p_cw_phase"):  # as the complex amplitude A exp(i phase)
                a0 = np.asarray(ref[1][k.replace("phase", "amp")], np.float64)
                a1 = np.asarray(res[1][k.replace("phase", "amp")], np.float64)
                diff = np.abs(a1 * np.exp(1j * w) - a0 * np.exp(1j * v))
                out[k] = float(diff.max() / a0.max())
            else:
                out[k] = float(np.abs(w - v).max() / np.abs(v).max())
    return out


out = {}
for p, cases in [(prob, [("pencil_4", "pencil", (4,)), ("lfb_2x2", "lfb", (2, 2))]),
                 (prob3, [("pencil_3d_2x2", "pencil", (2, 2)), ("lfb_3d_2x2", "lfb", (2, 2))])]:
    ref = run(p)
    for name, dec, mesh in cases:
        out[name] = errors(run_decomposed(p, dec, mesh, overlap=16), ref)
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results():
    return run_on_cpu_devices(SCRIPT, 4)


@pytest.mark.parametrize("name", ["pencil_4", "pencil_3d_2x2"])
def test_pencil_cartesian_and_cw_equal_single(results, name):
    err = results[name]
    # 2-D: p, ux, uy, p_max, p_rms, p_cw_amp/phase and their _all; 3-D: p, ux, uy, uz, p_max
    assert len(err) == (9 if name == "pencil_4" else 5), err
    assert max(err.values()) <= 1e-5, err


@pytest.mark.parametrize("name", ["lfb_2x2", "lfb_3d_2x2"])
def test_lfb_cartesian_and_cw_within_its_error(results, name):
    # overlap 16, bell width 0.5: LFB's documented error (docs/decomposition.md) is 1e-3
    err = results[name]
    assert max(err.values()) <= 1e-3, err
