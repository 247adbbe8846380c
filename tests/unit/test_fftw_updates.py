"""Split-field updates inside the FFTW operator calls (``epilogues`` of ``fftw.conv`` and
``fftw.planes_c2r``; ``operators.grad_update`` / ``div_update`` / ``div_and_update``): the
same values as the derivative followed by ``m (m old - coef d)`` in numpy, for every
coefficient kind and axis, each written over its old field (a time loop carrying the fields
copies none of them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from require import require_fftw

from sonotile.fft import fftw, fftw_ops
from sonotile.spectral.operators import (
    FourierOps,
    SplitUpdate,
    div_and_update,
    div_update,
    divergence_density,
    fuses_updates,
    fuses_updates_apart,
    grad_update,
)


@pytest.fixture(autouse=True)
def fftw_ok():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")


def staggered_mean_np(r: np.ndarray, axis: int) -> np.ndarray:
    """k-Wave's staggered mean: with the next point along ``axis``, the last point itself."""
    nxt = np.concatenate([np.take(r, range(1, r.shape[axis]), axis), np.take(r, [-1], axis)], axis)
    return 0.5 * (r + nxt)


def expected(d: np.ndarray, up: dict, axis: int) -> np.ndarray:
    shape = [1] * d.ndim
    shape[axis] = -1
    m = np.reshape(up["m"], shape).astype(np.float64)
    if up["kind"] == "scalar":
        coef = up["scale"]
    elif up["kind"] == "field":
        coef = up["scale"] * up["field"].astype(np.float64)
    else:
        coef = up["scale"] / staggered_mean_np(up["field"].astype(np.float64), axis)
    return m * (m * up["old"] - coef * d)


def make_update(kind: str, shape: tuple, axis: int, rng) -> dict:
    n = shape[axis]
    m = np.ones(n, np.float32)
    m[:3] = [0.7, 0.8, 0.9]  # a PML profile's ends
    m[-2:] = [0.85, 0.75]
    up = {
        "kind": kind,
        "old": rng.standard_normal(shape).astype(np.float32),
        "m": m,
        "scale": 0.37,
        "field": None,
    }
    if kind != "scalar":
        up["field"] = (1.0 + 0.5 * rng.random(shape)).astype(np.float32)
    return up


def as_split(up: dict, axis: int) -> SplitUpdate:
    field = None if up["field"] is None else jnp.asarray(up["field"])
    return SplitUpdate(
        jnp.asarray(up["old"]),
        jnp.asarray(up["m"]),
        axis,
        up["scale"],
        field,
        staggered=up["kind"] == "staggered",
    )


@pytest.mark.parametrize("shape", [(24, 20, 16), (18, 22)])
@pytest.mark.parametrize("kind", ["scalar", "field", "staggered"])
def test_grad_and_div_updates_equal_the_separate_update(shape, kind):
    rng = np.random.default_rng(3)
    ops = FourierOps.build(shape, (1e-4,) * len(shape), 1500.0, 2e-8, fft="fftw")
    assert ops.fft == "fftw" and fuses_updates(ops, jnp.zeros(shape, jnp.float32))
    p = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    ups = [make_update(kind, shape, a, rng) for a in range(len(shape))]
    splits = [as_split(up, a) for a, up in enumerate(ups)]
    assert_updated(grad_update(ops, p, splits), ops.grad(p), ups)
    u = [jnp.asarray(rng.standard_normal(shape).astype(np.float32)) for _ in shape]
    assert_updated(div_update(ops, u, splits), ops.div(u), ups)
    assert fuses_updates_apart(ops, u[0])
    du, updated = div_and_update(ops, u, splits)
    assert_updated(updated, ops.div(u), ups)
    for a, (got, ref) in enumerate(zip(du, ops.div(u))):  # the derivatives themselves, kept
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref), err_msg=str(a))


@pytest.mark.parametrize("shape", [(24, 20, 16), (18, 22)])
@pytest.mark.parametrize("kind", ["scalar", "field", "nonlinear"])
@pytest.mark.parametrize("rho0_grid", [False, True])
@pytest.mark.parametrize("with_src", [False, True])
def test_divergence_density_is_the_update_and_its_two_sums(shape, kind, rho0_grid, with_src):
    """One call: each density's update from its derivative, ``rho0 * sum_a d_a`` and the sum of
    the updated densities (what the absorbing equation of state reads), as numpy makes them
    from the separate divergence; ``nonlinear``: the coefficient ``s (2 sum_a old_a + rho0)``
    made in the call from the old densities; ``with_src``: a source grid added to each
    update before the sum."""
    rng = np.random.default_rng(4)
    ops = FourierOps.build(shape, (1e-4,) * len(shape), 1500.0, 2e-8, fft="fftw")
    u = [jnp.asarray(rng.standard_normal(shape).astype(np.float32)) for _ in shape]
    assert fuses_updates_apart(ops, u[0])
    rho0 = (1.0 + 0.5 * rng.random(shape)).astype(np.float32) if rho0_grid else np.float32(1.2)
    ups = [make_update("scalar", shape, a, rng) for a in range(len(shape))]
    G = None  # one field for all components
    if kind == "field":
        G = jnp.asarray((1.0 + 0.5 * rng.random(shape)).astype(np.float32))
    factor = np.asarray(G) if G is not None else None
    if kind == "nonlinear":
        factor = 2.0 * sum(up["old"].astype(np.float64) for up in ups) + rho0
    for up in ups:  # the reference: a field update by the factor
        up.update(kind="scalar" if factor is None else "field", field=factor)
    splits = [SplitUpdate(jnp.asarray(up["old"]), jnp.asarray(up["m"]), a, 0.37, G)
              for a, up in enumerate(ups)]  # fmt: skip
    src = rng.standard_normal(shape).astype(np.float32) if with_src else None
    got = divergence_density(ops, u, splits, jnp.asarray(rho0), kind == "nonlinear",
                             None if src is None else jnp.asarray(src))  # fmt: skip
    div_u, rho_sum, updated = got
    derivs = [np.asarray(d, np.float64) for d in ops.div(u)]
    refs = [expected(d, up, a) + (0 if src is None else src.astype(np.float64))
            for a, (d, up) in enumerate(zip(derivs, ups))]  # fmt: skip
    for a, (out, ref) in enumerate(zip(updated, refs)):
        err = np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max()
        assert err < 2e-6, (a, err)
    for out, ref in ((rho_sum, sum(refs)), (div_u, np.float64(rho0) * sum(derivs))):
        err = np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max()
        assert err < 4e-6, err


def assert_updated(got, derivs, ups) -> None:
    """Each component of ``got`` is its update applied to the matching derivative."""
    for a, (d, up) in enumerate(zip(derivs, ups)):
        ref = expected(np.asarray(d, np.float64), up, a)
        err = np.abs(np.asarray(got[a]) - ref).max() / np.abs(ref).max()
        assert err < 2e-6, (a, err)


def test_staggered_mean_uses_the_next_point_and_the_last_point_itself():
    """A field varying along one axis only: the mean's last plane / row / column is G itself,
    which a wrong neighbour (or wrap-around) would change by a factor of ~2 there."""
    shape = (12, 10, 8)
    ops = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
    p = jnp.asarray(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    grad = [np.asarray(g, np.float64) for g in ops.grad(p)]
    for a in range(3):
        ramp = np.arange(1, shape[a] + 1, dtype=np.float32) ** 2
        G = np.broadcast_to(np.reshape(ramp, [-1 if k == a else 1 for k in range(3)]), shape)
        up = {"kind": "staggered", "old": np.zeros(shape, np.float32),
              "m": np.ones(shape[a], np.float32), "scale": 1.0, "field": G.copy()}  # fmt: skip
        ups = [as_split(up, a) if k == a else as_split(make_update("scalar", shape, k,
               np.random.default_rng(k)), k) for k in range(3)]  # fmt: skip
        got = np.asarray(grad_update(ops, p, ups)[a], np.float64)
        np.testing.assert_allclose(
            got, expected(grad[a], up, a), rtol=2e-6, atol=1e-6 * np.abs(got).max()
        )


def test_in_place_update_leaves_an_old_field_still_needed_intact():
    """planes_c2r writes the y and z components over their old fields: when the program still
    needs an old field after the update, XLA must keep a copy."""
    shape = (16, 12, 10)
    rng = np.random.default_rng(5)
    ops = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
    p = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    olds = [jnp.asarray(rng.standard_normal(shape).astype(np.float32)) for _ in range(3)]
    m = [jnp.ones(n, jnp.float32) for n in shape]

    @jax.jit
    def f(p, olds):
        new = grad_update(ops, p, [SplitUpdate(o, m[a], a, 0.5) for a, o in enumerate(olds)])
        return new, olds[1] + olds[2]  # the old fields read after their update

    new, total = f(p, olds)
    np.testing.assert_array_equal(np.asarray(total), np.asarray(olds[1] + olds[2]))
    grad = ops.grad(p)
    for a in range(3):
        ref = np.asarray(olds[a], np.float64) - 0.5 * np.asarray(grad[a], np.float64)
        np.testing.assert_allclose(np.asarray(new[a]), ref, rtol=1e-5, atol=1e-5)


def test_updates_are_not_fused_for_distributed_or_separate_operators():
    shape = (16, 12, 10)
    like = jnp.zeros(shape, jnp.float32)
    ops = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
    assert fuses_updates(ops, like)
    from dataclasses import replace

    assert not fuses_updates(replace(ops, fft="fftw-separate-updates"), like)
    assert not fuses_updates(replace(ops, fft="xla"), like)
    assert not fuses_updates(
        ops, like.astype(jnp.float64) if jax.config.x64_enabled else like[0, 0]
    )


def test_conv_update_apart_keeps_the_derivative():
    """``fftw_ops.conv(..., apart=[True])``: the output stays the operator's result (the same
    values as without an epilogue) and the update is a result of its own."""
    shape = (16, 12, 10)
    rng = np.random.default_rng(11)
    ops = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
    f = jnp.asarray(rng.standard_normal(shape).astype(np.float32))
    up = make_update("field", shape, 1, rng)
    out = [(0, 1, ops.shift_neg[1])]
    (plain,) = fftw_ops.conv([f], ops.kappa, out)
    d, updated = fftw_ops.conv([f], ops.kappa, out, [as_split(up, 1).epilogue()], apart=[True])
    np.testing.assert_array_equal(np.asarray(d), np.asarray(plain))
    ref = expected(np.asarray(d, np.float64), up, 1)
    assert np.abs(np.asarray(updated) - ref).max() < 2e-6 * np.abs(ref).max()


def test_updates_in_a_time_loop_copy_no_field():
    """Velocity and density updates carried by a time loop (donated to it) are made over their
    old fields: the compiled loop holds no copy of a grid; reading an old field after its
    update makes XLA keep one (the count can see copies)."""
    shape = (16, 12, 10)
    rng = np.random.default_rng(7)
    ops = FourierOps.build(shape, (1e-4,) * 3, 1500.0, 2e-8, fft="fftw")
    fields = [jnp.asarray(rng.standard_normal(shape).astype(np.float32)) for _ in range(7)]
    m = [jnp.ones(n, jnp.float32) for n in shape]

    def run(read_old: bool) -> int:
        def body(_, s):
            p, u, rho = s[0], s[1:4], s[4:7]
            u2 = grad_update(ops, p, [SplitUpdate(x, m[a], a, 0.5) for a, x in enumerate(u)])
            rho2 = div_update(ops, u2, [SplitUpdate(x, m[a], a, 0.3) for a, x in enumerate(rho)])
            p2 = sum(rho2) + (sum(u) + sum(rho) if read_old else 0)
            return (p2, *u2, *rho2)

        loop = jax.jit(lambda s: jax.lax.fori_loop(0, 3, body, s), donate_argnums=0)
        hlo = loop.lower(tuple(fields)).compile().as_text()
        return hlo.count(f"f32[{','.join(map(str, shape))}]{{2,1,0}} copy(")

    assert run(read_old=False) == 0
    assert run(read_old=True) > 0
