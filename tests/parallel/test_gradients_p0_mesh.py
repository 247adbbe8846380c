"""A smoothed p0 (k-Wave's Blackman window, whole-grid FFTs made before the run) through
:func:`sonotile.make_simulator` on a 2 x 2 mesh of a 3-D grid: the gradient with respect to p0
equals the single-device one (pencil to round-off, lfb within its overlap error).

XLA:CPU refused those FFTs once the partitioner split them like the run's 2 x 2 blocks (a
``fft_thunk`` layout check); they are now held whole on every device. One subprocess with
``XLA_FLAGS=--xla_force_host_platform_device_count=4``, printing JSON the tests check.
"""

from __future__ import annotations

import json
import os

import pytest
from devices import run_python

SCRIPT = r"""
import json
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import sonotile as st

assert len(jax.devices()) == 4, jax.devices()
n = (16, 12, 10)
kgrid = st.KWaveGrid(n, (1e-4,) * 3)
kgrid.make_time(1500.0, t_end=40 * 2e-8)
c = 1500.0 + 60.0 * np.random.default_rng(0).random(n)
medium = st.KWaveMedium(sound_speed=c, density=1000.0)
p0 = np.zeros(n)
p0[7:10, 5:7, 4:6] = 1.0
mask = np.zeros(n, bool)
mask[3, 3, 3] = mask[12, 9, 7] = True
case = (kgrid, medium, st.KSource(p0=p0), st.KSensor(mask=mask))
out, ref = {}, None
for dec in ("single", "pencil", "lfb"):
    sim = st.make_simulator(*case, pml_size=3, dtype="float64", decomposition=dec,
                            mesh=(2, 2), overlap=4)
    g = jax.grad(lambda p: jnp.sum(sim(p)["p"] ** 2))(sim.params)["p0"]
    ref = g if ref is None else ref
    out[dec] = float(jnp.max(jnp.abs(g - ref)) / jnp.max(jnp.abs(ref)))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def errors():
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    r = run_python(["-c", SCRIPT], env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_smoothed_p0_gradient_on_a_2x2_pencil_mesh_equals_one_device(errors):
    assert errors["pencil"] <= 1e-10, errors


def test_smoothed_p0_gradient_on_2x2_lfb_blocks_is_within_the_overlap_error(errors):
    assert 0 < errors["lfb"] <= 3e-2, errors
