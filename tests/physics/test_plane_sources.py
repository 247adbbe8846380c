"""Additive sources with a signal per point on one plane ``x = x0`` (a linear or matrix array
on a face of the grid): the filtered grid from the plane's own transform.

The grid of such a source is zero outside the plane, so its 3-D transform is the plane's 2-D
transform times ``exp(-i k_x x0)`` along x; the filter ``cos(c_ref |k| dt / 2)`` is even in
``k_x``, so transforming back along x gives a real kernel per plane, made once. The step then
does one plane transform forward and one per plane back instead of the 3-D pair
(``FourierOps.filter_plane_source``). The results must be those of filtering the grid.
"""

from __future__ import annotations

import re
from dataclasses import replace

import jax.numpy as jnp
import numpy as np
import pytest
from require import require_fftw

from sonotile.bench.inprocess import bench_problem
from sonotile.fft import fftw
from sonotile.model.problem import MaskSource, Problem
from sonotile.physics.acoustic import AcousticModel
from sonotile.physics.acoustic import constants as plan
from sonotile.solver import runner
from sonotile.spectral.operators import FourierOps


def need_fftw() -> None:
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")


def test_a_plane_is_found_only_for_additive_sources_with_signals_of_their_own():
    s = np.sin(np.arange(20) * 0.3)
    per_point = np.stack([s, 2 * s, 3 * s], axis=1)
    plane = np.array([[5, 1, 2], [5, 3, 2], [5, 7, 9]])
    assert plan.on_one_plane(MaskSource(plane, per_point, "additive"))
    assert plan.on_one_plane(MaskSource(plane[:, :2], per_point, "additive"))  # a row of 2-D
    # off the plane, another mode, or one shared signal (the filtered mask serves it)
    assert not plan.on_one_plane(MaskSource(plane + [[0, 0, 0], [1, 0, 0], [0, 0, 0]],
                                            per_point, "additive"))  # fmt: skip
    assert not plan.on_one_plane(MaskSource(plane, per_point, "additive_no_correction"))
    assert not plan.on_one_plane(MaskSource(plane, s, "additive"))
    assert not plan.on_one_plane(MaskSource(plane[:, :1], per_point, "additive"))  # 1-D
    assert not plan.on_one_plane(None)


@pytest.mark.parametrize("shape", [(24, 20, 16), (21, 18, 12), (30, 26)])
def test_plane_filter_is_the_source_filter(shape):
    need_fftw()
    ops = FourierOps.build(shape, (1e-4,) * len(shape), 1500.0, 2e-8, source_filter=True,
                           fft="fftw")  # fmt: skip
    like = jnp.zeros(shape, jnp.float32)
    assert ops.plane_sources(like)
    assert not ops.plane_sources(like.astype(jnp.float16))
    rng = np.random.default_rng(len(shape))
    for x0 in (0, 5, shape[0] - 1):
        values = rng.standard_normal(shape[1:]).astype(np.float32)
        values[rng.random(shape[1:]) < 0.5] = 0  # a sparse mask, as an array's elements
        grid = np.zeros(shape, np.float32)
        grid[x0] = values
        ref = np.asarray(ops.filter_source(jnp.asarray(grid)))
        got = np.asarray(ops.filter_plane_source(ops.plane_source_kernel(x0), jnp.asarray(values)))
        assert np.abs(ref).max() > 0.1
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err < 2e-6, (x0, err)


def with_plane_velocity(problem: Problem) -> Problem:
    """``problem`` plus an additive ux source on the plane x = 20, a signal per point."""
    n = problem.grid.shape[0]
    ys, zs = np.meshgrid(np.arange(n // 4, n // 2), np.arange(n // 3, n // 3 + 3), indexing="ij")
    index = np.stack([np.full(ys.size, 20), ys.ravel(), zs.ravel()], 1)
    t = np.arange(problem.grid.nt) * problem.grid.dt
    signal = 1e-4 * np.sin(2 * np.pi * 1e6 * t[:, None] + 0.3 * np.arange(ys.size)[None])
    ux = MaskSource(index, signal, "additive", "source.ux")
    return replace(problem, sources=replace(problem.sources, u=(ux, None, None)), extras={})


def conv_and_plane_calls(problem: Problem) -> tuple[int, int]:
    """FFTW operator calls and plane-source calls in the compiled chunk's loop."""
    eng = runner.single_engine(problem)
    text = eng.lower(eng.start()[0].carry, runner.step_inputs(problem, 0, 8)).compile().as_text()
    inner = "\n".join(c for c in re.split(r"\n(?=\S)", text) if not c.startswith("ENTRY"))
    count = inner.count
    return count('"sonotile_fftw_conv"'), count('"sonotile_fftw_plane_source"')


@pytest.mark.parametrize("case", ["array_lossless", "array_absorbing_nonlinear"])
def test_array_on_a_plane_gives_the_results_of_filtering_its_grid(case, monkeypatch):
    need_fftw()
    problem = with_plane_velocity(bench_problem(case, 32, 40))
    phys = AcousticModel.of(problem)
    assert phys.p_plane and phys.u_plane == (True, False, False)
    assert not phys.p_shared
    convs, planes = conv_and_plane_calls(problem)
    raw, final = runner.run(problem, chunk=16)
    monkeypatch.setattr(plan, "on_one_plane", lambda src: False)  # filter the grid
    assert not AcousticModel.of(problem).p_plane
    convs_ref, planes_ref = conv_and_plane_calls(problem)
    assert (convs, planes) == (convs_ref - 2, 2) and planes_ref == 0
    raw_ref, final_ref = runner.run(problem, chunk=16)
    for name, ref in {**raw_ref, **final_ref}.items():
        got = np.asarray({**raw, **final}[name])
        scale = np.abs(ref).max()
        assert scale > 0, name
        err = np.abs(got - np.asarray(ref)).max() / scale
        assert err < 1e-5, (name, err)
