"""Core runner properties: chunking does not change results, precision agreement, 1-D to 3-D,
the demo command end to end at a small size."""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

from sonotile.model.grid import Grid, make_time
from sonotile.model.problem import MaskSource, Medium, Problem, Sensor, Sources
from sonotile.solver.runner import run


def small_problem(shape=(40, 36, 32), nt=60, dtype="float32") -> Problem:
    """Heterogeneous, absorbing, nonlinear, with a p0 and an additive pressure source."""
    rng = np.random.default_rng(3)
    g = Grid(shape, (1e-4,) * len(shape), 1.5e-8, nt)
    c0 = 1500 + 40 * rng.random(shape)
    x = np.stack(np.meshgrid(*(np.arange(n) - n // 2 for n in shape), indexing="ij"))
    p0 = 1e5 * np.exp(-(x**2).sum(0) / 6.0)
    m = Medium(
        c0,
        1000 + 50 * rng.random(shape),
        g,
        bona=6.0,
        alpha_coeff=0.8,
        alpha_power=1.5,
        absorption="power_law",
    )
    src = MaskSource(
        np.array([[5] + [s // 2 for s in shape[1:]]]),
        1e-3 * np.sin(np.arange(40) * 0.3),
        "additive",
    )
    sens = Sensor(
        index=np.array([[n // 2 + k for n in shape] for k in (3, 6, 9)]),
        record=("p", "p_max", "p_rms", "u", "p_final", "u_max_all"),
    )
    return Problem(g, m, Sources(p0=p0, p=src), sens, dtype=dtype)


@pytest.mark.usefixtures("no_program_cache")  # counts jit's programs (tests/unit/test_programs.py)
def test_chunking_does_not_change_results():
    """Chunks of 7 steps (the last one 4: padded rows in the same compiled program) give the
    results of one chunk bit for bit, and of the plain scan the chunks replaced."""
    from sonotile.solver import runner as rn

    p = small_problem()
    rn.run_chunk.clear_cache()
    raw1, fin1 = run(p, chunk=7, progress=False)
    assert rn.run_chunk._cache_size() == 1  # 60 = 1 (p0) + 8 x 7 + 3: the 3 reuse the program
    raw2, fin2 = run(p, progress=False)
    for k in raw1:
        np.testing.assert_array_equal(raw1[k], raw2[k])
    for k in fin1:
        np.testing.assert_array_equal(fin1[k], fin2[k])
    engine = rn.single_engine(p)
    rs, _ = engine.start()
    carry, raw3 = engine.chunk(rs.carry, rn.step_inputs(p, rs.next_step, p.grid.nt))  # lax.scan
    np.testing.assert_array_equal(raw1["p"][1:], np.asarray(raw3["p"]))
    np.testing.assert_array_equal(fin1["p_final"], np.asarray(carry[0].p))
    # sized by time: a first chunk (1 step, from the assumed rate) shorter than the floor (8,
    # the timed length here) runs in the program of the chunks after it: one program
    rn.run_chunk.clear_cache()
    sizer = rn.ChunkSizer(cells=p.grid.size, limit=1000, seconds=1e-6, least=8)
    assert (sizer.length, sizer.rows) == (1, 8)
    rec = rn.ListRecorder()
    rs, _ = engine.start()
    rs = rn.advance(engine, rs, p.grid.nt, rec, chunk=sizer)
    assert sizer.length == 8 and rn.run_chunk._cache_size() == 1
    np.testing.assert_array_equal(raw1["p"][1:], rec.result()["p"])
    np.testing.assert_array_equal(fin1["p_final"], np.asarray(rs.carry[0].p))


@pytest.mark.parametrize("shape", [(128,), (64, 48), (32, 28, 24)])
def test_float32_agrees_with_float64(shape):
    import jax

    jax.config.update("jax_enable_x64", True)
    try:
        r32, _ = run(small_problem(shape, nt=50), progress=False)
        r64, _ = run(small_problem(shape, nt=50, dtype="float64"), progress=False)
    finally:
        jax.config.update("jax_enable_x64", False)
    err = np.abs(r32["p"] - r64["p"]).max() / np.abs(r64["p"]).max()
    assert np.isfinite(err) and err < 1e-5
    assert r64["p"].dtype == np.float64 and r32["p"].dtype == np.float32


def test_make_time_matches_kwave_defaults():
    dt, nt = make_time((100, 80), (1e-4, 1e-4), 1600.0, 1400.0)
    assert dt == pytest.approx(0.3 * 1e-4 / 1600)
    t_end = np.hypot(100e-4, 80e-4) / 1400
    assert nt == int(np.floor(t_end / dt)) + 1


def test_demo_end_to_end(tmp_path):
    from sonotile.cli import main

    assert main(["demo", "--size", "32", "--out", str(tmp_path)]) == 0
    with h5py.File(tmp_path / "results.h5") as f:
        pmax = f["results/p_max_all"][()]
        assert f["results/p_max_all"].attrs["units"] == "Pa"
        assert f["input/medium/sound_speed"].shape == (32, 25, 25)  # the input, for a re-run
        assert pmax.shape == (32, 25, 25)
        assert np.isfinite(pmax).all() and pmax.max() > 1e5
    assert (tmp_path / "demo.png").stat().st_size > 10_000


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("chunk", [None, 1, 3])
def test_staggered_density_detection(chunk, order):
    """dt/rho0_sg is derived in the step only when the staggered densities are k-Wave's
    interpolation of rho0; any other values are kept as given. Checked in one slab (the
    default at this size), plane by plane, and in slabs of 3 planes (a change on a slab's
    first plane, whose neighbour along x lies in the previous slab); C-ordered fields and
    Fortran-ordered ones (a k-Wave file's, read as views: checked along their memory order)."""
    from sonotile.model.problem import staggered_density
    from sonotile.physics.acoustic.constants import staggered_is_interpolated

    rho0 = (1000 + 200 * np.random.default_rng(0).random((40, 9, 7))).astype(np.float32)
    sg = staggered_density(rho0, 3)
    if order == "F":
        rho0, sg = np.asfortranarray(rho0), tuple(np.asfortranarray(s) for s in sg)
    assert staggered_is_interpolated(rho0, sg, np.float32, chunk)
    for ax in range(3):
        for where in [(-1, -1, -1), (3, 4, 2)]:  # the last plane of each axis keeps rho0
            bad = [s.copy() for s in sg]
            bad[ax][where] *= 1 + 1e-4
            assert not staggered_is_interpolated(rho0, tuple(bad), np.float32, chunk)
    assert not staggered_is_interpolated(rho0, (rho0, rho0, rho0), np.float32, chunk)
    assert not staggered_is_interpolated(1000.0, (1000.0,) * 3, np.float32, chunk)


def test_derived_constants_match_stored(monkeypatch):
    """The step's on-the-fly dt/rho0_sg gives the stored constants' result, and its eta
    (from tau and c0^2) is k-Wave's ``2 a0 c0^y tan(pi y/2)``."""
    import sonotile.physics.acoustic.constants as planmod

    problem = small_problem(shape=(30, 26, 24), nt=40)
    c = planmod.medium_constants(problem, derive_axes=(0, 1, 2))
    assert c["dt_rho0_sg"] == (None, None, None) and "eta" not in c
    part = planmod.medium_constants(problem, derive_axes=(1, 2))["dt_rho0_sg"]
    assert part[0] is not None and part[1:] == (None, None)
    _, eta = planmod.absorption_factors(problem.medium.c0, problem.medium.alpha_coeff, 1.5)
    mine = c["eta_per_c0_tau"] * np.sqrt(np.asarray(c["c2"], np.float64)) * np.asarray(c["tau"])
    assert np.abs(mine - eta).max() <= 1e-6 * np.abs(eta).max()
    derived = run(problem, progress=False)

    orig = planmod.medium_constants
    monkeypatch.setattr(planmod, "medium_constants", lambda p, derive_axes=(): orig(p))
    kept = run(problem, progress=False)
    for i, name in ((0, "p"), (1, "p_final")):
        a, b = np.asarray(derived[i][name]), np.asarray(kept[i][name])
        assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max(), name
        assert np.abs(b).max() > 0


def test_xla_scheduler_flag(monkeypatch):
    """Entry points turn XLA:CPU's concurrency-optimised scheduler off unless the user's
    XLA_FLAGS already decide it (or the settings say not to); importing sonotile does not."""
    import subprocess
    import sys

    from sonotile.base import config
    from sonotile.base.runtime import SCHEDULER_FLAG, set_xla_flags

    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    code = "import os, sonotile; print(os.environ['XLA_FLAGS'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "--xla_force_host_platform_device_count=2"  # import: untouched

    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    set_xla_flags()
    assert f"{SCHEDULER_FLAG}=false" in os.environ["XLA_FLAGS"]
    assert "--xla_force_host_platform_device_count=2" in os.environ["XLA_FLAGS"]
    monkeypatch.setenv("XLA_FLAGS", f"{SCHEDULER_FLAG}=true")
    set_xla_flags()
    assert os.environ["XLA_FLAGS"] == f"{SCHEDULER_FLAG}=true"
    monkeypatch.setenv("XLA_FLAGS", "")
    saved = config.current()
    try:
        config.configure(xla_scheduler_off=False)
        set_xla_flags()
        assert SCHEDULER_FLAG not in os.environ["XLA_FLAGS"]
    finally:
        config.configure(saved)
