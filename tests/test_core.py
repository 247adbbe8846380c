"""Core runner properties: chunking does not change results, precision agreement, 1-D to 3-D,
the demo command end to end at a small size."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from sonotile.grid import Grid, make_time
from sonotile.problem import MaskSource, Medium, Problem, Sensor, Sources
from sonotile.runner import run


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


def test_chunking_does_not_change_results():
    p = small_problem()
    raw1, fin1 = run(p, chunk=7, progress=False)
    raw2, fin2 = run(p, progress=False)
    for k in raw1:
        np.testing.assert_array_equal(raw1[k], raw2[k])
    for k in fin1:
        np.testing.assert_array_equal(fin1[k], fin2[k])


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
        pmax = f["p_max_all"][()]
        assert pmax.shape == (32, 25, 25)
        assert np.isfinite(pmax).all() and pmax.max() > 1e5
    assert (tmp_path / "demo.png").stat().st_size > 10_000
