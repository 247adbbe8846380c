"""The elastic simulator's backward pass with its states on a tape (host memory or disk).

The taped gradient must equal the gradient kept on the device (the same arithmetic, recomputed)
for both speeds, the density, the absorption, the initial pressure and a velocity signal,
whatever the chunk length (a step count that is not a multiple of it included); the forward
records must be untouched; the tape must hold the whole state (every split velocity and stress
field, and the running sensor statistics the loop carries); a disk tape must write only into
its folder and remove a folder it made.
"""

from __future__ import annotations

import gc
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sonotile as st
from sonotile.model.problem import ProblemError

N, DX, NT = 20, 1e-4, 30
#: 2-D elastic state: ux, uy split along x and y (4), sxx, syy along x and y (4), sxy (2)
FIELDS_2D = 10


@pytest.fixture(autouse=True, scope="module")
def _float64(jax_float64):
    """64-bit JAX types for these tests only."""


@pytest.fixture(scope="module")
def case(_float64):
    rng = np.random.default_rng(0)
    cp = 2500 + 200 * rng.random((N, N))
    cs = 1000 + 200 * rng.random((N, N))
    cs[:, :5] = 0.0  # a fluid strip
    rho = 1800 + 100 * rng.random((N, N))
    medium = st.KWaveElasticMedium(cp, cs, rho, 2.0, 4.0)  # Kelvin-Voigt absorption
    x, y = np.meshgrid(*(np.arange(N) - N // 2,) * 2, indexing="ij")
    p0 = 1e3 * np.exp(-((x + 3) ** 2 + y**2) / 4.0)
    u_mask = np.zeros((N, N), bool)
    u_mask[12, 8:11] = True
    t = np.arange(NT) * 0.2 * DX / 2700
    source = st.ElasticSource(p0=p0, ux=1e-3 * np.sin(2 * np.pi * 1.5e6 * t) * np.hanning(NT),
                              u_mask=u_mask)  # fmt: skip
    sensor = st.KSensor(points=np.array([[4, 4], [15, 7], [10, 16]]),
                        record=("p", "u", "s", "p_max"))  # fmt: skip
    grid = st.KWaveGrid((N, N), DX, dt=0.2 * DX / 2700, nt=NT)
    return grid, medium, source, sensor


def _sim(case, **kw):
    return st.make_simulator(*case, pml_size=4, dtype="float64", **kw)


def _grad(sim):
    def loss(p):
        o = sim(p)
        return (jnp.sum(o["p"] ** 2) + 1e12 * jnp.sum(o["uy"] ** 2) + jnp.sum(o["sxy"] ** 2)
                + jnp.sum(o["p_max"] ** 2))  # fmt: skip

    return jax.jit(jax.grad(loss))(sim.params)


@pytest.fixture(scope="module")
def reference(case):
    return _grad(_sim(case, chunk=6))


@pytest.mark.parametrize("where,chunk", [("host", "auto"), ("host", 4), ("disk", 7)])
def test_taped_gradient_equals_device_gradient(case, reference, where, chunk):
    g = _grad(_sim(case, chunk=chunk, tape=where))
    assert set(g) == set(reference) == {
        "sound_speed_compression", "sound_speed_shear", "density", "alpha_coeff_compression",
        "alpha_coeff_shear", "p0", "ux"}  # fmt: skip
    for k in reference:
        scale = jnp.max(jnp.abs(reference[k]))
        assert scale > 0, k
        assert jnp.max(jnp.abs(g[k] - reference[k])) <= 1e-10 * scale, k


def test_taped_forward_is_unchanged(case):
    a, b = _sim(case)(), _sim(case, tape="host")()
    assert set(a) == set(b)
    for k in a:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def test_host_tape_holds_the_whole_state(case):
    tape = st.Tape("host")
    sim = _sim(case, chunk=3, tape=tape)
    assert sim.tape is tape
    _grad(sim)
    # 30 steps in chunks of 3: 10 states, each the 10 split fields and the running p_max
    assert sorted(tape._mem) == [(0, j) for j in range(10)]
    for arrays in tape._mem.values():
        assert [a.shape for a in arrays].count((N, N)) == FIELDS_2D
        assert len(arrays) == FIELDS_2D + 1 and (3,) in [a.shape for a in arrays]
    assert tape.bytes_stored == 10 * (FIELDS_2D * N * N + 3) * 8
    _grad(sim)  # a second gradient overwrites the same keys: nothing accumulates
    assert tape.bytes_stored == 10 * (FIELDS_2D * N * N + 3) * 8


def test_disk_tape_writes_only_into_its_folder(case, tmp_path):
    folder = tmp_path / "tape"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep")
    tape = st.Tape("disk", directory=str(folder))
    _grad(_sim(case, chunk=8, tape=tape))
    names = sorted(os.listdir(folder))
    assert (folder / "mine.txt").read_text() == "keep"
    # 30 steps: the first 30 % 8 = 6 untaped, then 3 chunks of 8 stored, 11 arrays each
    assert len([n for n in names if n.startswith("state-")]) == 3 * (FIELDS_2D + 1)
    assert len(names) == 3 * (FIELDS_2D + 1) + 1
    tape.close()
    assert folder.is_dir()  # a folder the user gave is not removed


def test_disk_tape_removes_the_folder_it_made(case):
    sim = _sim(case, chunk=10, tape="disk")
    folder = sim.tape.directory
    _grad(sim)
    assert len(os.listdir(folder)) == 3 * (FIELDS_2D + 1)
    del sim  # the simulator goes: its tape's folder with it
    gc.collect()
    assert not os.path.exists(folder)


def test_forward_mode_through_a_tape_is_an_error(case):
    sim = _sim(case, tape="host")
    p = sim.params
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jvp(lambda c: sim({**p, "density": c})["p"], (p["density"],),
                (jnp.ones_like(p["density"]),))  # fmt: skip


def test_bad_tape_and_remat_step_are_refused(case):
    with pytest.raises(ValueError, match="tape"):
        _sim(case, tape="gpu")
    with pytest.raises(ProblemError, match="remat_step: not available for the elastic"):
        _sim(case, tape="host", remat_step=True)
