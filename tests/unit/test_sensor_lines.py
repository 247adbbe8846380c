"""Non-staggered velocity read from the lines through the sensor points
(:func:`sonotile.solver.sensors.line_samples`) equals the whole-grid shift then a gather, on 1-D,
2-D and 3-D grids of even and odd sizes, for sensors by index (edges, repeated lines), by
position (interpolation stencils) and cuboids; the whole-grid path stays where lines would cover
too much of the grid; gradients through the line path equal those through the whole-grid path.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sonotile.model.grid import AXES
from sonotile.model.problem import Sensor
from sonotile.physics.acoustic.step import State
from sonotile.solver import sensors as sens
from sonotile.spectral.operators import FourierOps

SHAPES = [(45,), (32, 53), (53, 32, 45)]
NON_STAGGERED = ("u_non_staggered", "p")


def _state(shape: tuple[int, ...], seed: int = 0) -> State:
    keys = jax.random.split(jax.random.PRNGKey(seed), 2 * len(shape) + 1)
    d = len(shape)
    return State(
        jax.random.normal(keys[0], shape),
        tuple(jax.random.normal(keys[1 + a], shape) for a in range(d)),
        tuple(jax.random.normal(keys[1 + d + a], shape) for a in range(d)),
    )


def _both(sensor: Sensor, shape: tuple[int, ...]) -> tuple[sens.SensorLayout, dict, dict]:
    """The layout and the samples of the line path and of the whole-grid path."""
    layout = sens.layout_of(sensor, shape)
    whole = dataclasses.replace(layout, lines=())
    ops = FourierOps.build(shape, (1e-4,) * len(shape), 1500.0, 1e-8, unstagger=True, fft="xla")
    state = _state(shape)
    index = tuple(jnp.asarray(layout.points[:, a]) for a in range(len(shape)))
    got = sens.sample(state, ops, layout, index)[1]
    ref = sens.sample(state, ops, whole, index)[1]
    return layout, got, ref


def _assert_close(got: dict, ref: dict, names: list[str]) -> None:
    for f in names:
        scale = float(jnp.max(jnp.abs(ref[f])))
        assert scale > 0.1, f
        err = float(jnp.max(jnp.abs(got[f] - ref[f])))
        assert err <= 1e-6 * scale, (f, err, scale)


def _index_points(shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(3)
    pts = np.stack([rng.integers(0, n, 14) for n in shape], axis=1)
    pts[0] = 0  # the grid's corners
    pts[1] = np.array(shape) - 1
    pts[2] = pts[3]  # a repeated point
    pts[5, 1:] = pts[4, 1:]  # the same line along x, other positions on it
    pts[6, :-1] = pts[7, :-1]  # the same line along the last axis
    return pts


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_index_sensor_lines_match_whole_grid(shape, monkeypatch):
    monkeypatch.setattr(sens, "LINE_SHARE", 1.0)  # a 1-D grid's one line is the whole grid
    sensor = Sensor(index=_index_points(shape), record=NON_STAGGERED)
    layout, got, ref = _both(sensor, shape)
    names = [f"u{AXES[a]}_non_staggered" for a in range(len(shape))]
    assert [f for f, _ in layout.lines] == names
    assert not layout.needs_unstagger
    _assert_close(got, ref, names)
    assert np.array_equal(np.asarray(got["p"]), np.asarray(ref["p"]))


@pytest.mark.parametrize("shape", SHAPES[1:], ids=lambda s: "x".join(map(str, s)))
def test_positions_sensor_lines_match_whole_grid(shape, monkeypatch):
    monkeypatch.setattr(sens, "LINE_SHARE", 1.0)  # small grids: the stencils' lines are many
    rng = np.random.default_rng(5)
    pos = np.stack([rng.uniform(2.0, n - 3.0, 5) for n in shape], axis=1)
    pos[1] = np.round(pos[1])  # one point on the grid
    for interp in ("linear", "bli"):
        # staggered u too: its stencils (half a cell off) join the gathered point list
        sensor = Sensor(positions=pos, record=NON_STAGGERED + ("u",), interpolation=interp)
        layout, got, ref = _both(sensor, shape)
        names = [f"u{AXES[a]}_non_staggered" for a in range(len(shape))]
        assert [f for f, _ in layout.lines] == names
        if interp == "linear":  # each component's lines: through its own stencil points
            assert all(ln.rows is not None and ln.rows.size < layout.n_points
                       for _, ln in layout.lines)  # fmt: skip
        _assert_close(got, ref, names)


def test_cuboid_sensors_match_whole_grid():
    shape = (32, 45, 53)
    boxes = np.array([[[0, 3, 50], [2, 6, 52]], [[31, 44, 0], [31, 44, 4]]])
    layout, got, ref = _both(Sensor(cuboids=boxes, record=NON_STAGGERED), shape)
    assert len(layout.lines) == 3
    _assert_close(got, ref, ["ux_non_staggered", "uy_non_staggered", "uz_non_staggered"])


def test_full_plane_keeps_whole_grid_where_lines_cover_it():
    """A plane ``x = 7``: the lines along x through it are the whole grid (whole-grid shift);
    along y and z they are one plane (lines)."""
    shape = (32, 45, 53)
    plane = np.array([[[7, 0, 0], [7, 44, 52]]])
    layout, got, ref = _both(Sensor(cuboids=plane, record=NON_STAGGERED), shape)
    assert [f for f, _ in layout.lines] == ["uy_non_staggered", "uz_non_staggered"]
    assert layout.needs_unstagger
    _assert_close(got, ref, ["ux_non_staggered", "uy_non_staggered", "uz_non_staggered"])


def test_layouts_with_other_lines_do_not_compile_alike():
    """The line indices are constants of the traced program: they are part of the key."""
    a = sens.layout_of(Sensor(index=np.array([[1, 2], [3, 4]]), record=NON_STAGGERED), (16, 16))
    b = sens.layout_of(Sensor(index=np.array([[1, 2], [3, 5]]), record=NON_STAGGERED), (16, 16))
    assert a.lines and b.lines
    assert a != b


def test_gradient_through_lines_equals_whole_grid(jax_float64, monkeypatch):
    """``jax.grad`` of a simulation recording ``u_non_staggered`` at a few points: the line
    path's gradient equals the whole-grid path's (float64)."""
    from grad_case import make_case

    import sonotile as st

    grid, medium, source, _ = make_case(24, 20)
    mask = np.zeros(grid.shape, bool)
    mask[5, 7] = mask[18, 7] = mask[11, 20] = True
    sensor = st.KSensor(mask=mask, record=("p", "u_non_staggered"))

    def grads() -> tuple[dict, dict]:
        sim = st.make_simulator(grid, medium, source, sensor, pml_size=4, dtype="float64")
        w = jnp.linspace(-1.0, 1.0, sim()["ux_non_staggered"].size).reshape(
            sim()["ux_non_staggered"].shape
        )

        def loss(p: dict) -> jax.Array:
            out = sim(p)
            return jnp.sum(w * out["ux_non_staggered"]) + jnp.sum(w * out["uy_non_staggered"])

        return len(sim.static.layout.lines), jax.grad(loss)(sim.params)

    lines, g_lines = grads()
    monkeypatch.setattr(sens, "LINE_SHARE", 0.0)
    whole, g_whole = grads()
    assert lines == 2 and whole == 0
    for k in g_lines:
        scale = float(jnp.max(jnp.abs(g_whole[k])))
        assert scale > 0, k
        assert float(jnp.max(jnp.abs(g_lines[k] - g_whole[k]))) <= 1e-10 * scale, k
