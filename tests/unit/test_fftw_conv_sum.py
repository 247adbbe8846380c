"""``fftw.conv_sum`` (the adjoint of the gradient in one call) against numpy in float64."""

import numpy as np
import pytest
from even_op import even_along_x, unread_rows_nan
from require import require_fftw

from sonotile.fft import fftw


@pytest.fixture(autouse=True)
def fftw_ok():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")


def _reference(xs, op, vecs, shape) -> np.ndarray:
    """``sum_j irfftn(rfftn(x_j) * op * vec_j)`` in float64 (numpy's C2R of each product)."""
    out = np.zeros(shape)
    axes = list(range(len(shape)))
    for x, v in zip(xs, vecs):
        F = np.fft.rfftn(x.astype(np.float64)) * op
        if v is not None:
            along = [1] * len(shape)
            along[v[0]] = -1
            F = F * v[1].astype(np.complex128).reshape(along)
        out += np.fft.irfftn(F, s=shape, axes=axes)
    return out


@pytest.mark.parametrize(
    "shape", [(16, 12, 10), (15, 9, 7), (45, 53, 20), (32, 45), (9, 8), (6, 64, 100)]
)
@pytest.mark.parametrize("which", ["all", "none", "x only", "planes only"])
def test_conv_sum_equals_numpy(shape, which, fftw_threads):
    import jax.numpy as jnp

    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in shape]
    half = (*shape[:-1], shape[-1] // 2 + 1)
    op = even_along_x(rng.standard_normal(half).astype(np.float32))
    vecs = []
    for a, n in enumerate(shape):
        m = n // 2 + 1 if a == len(shape) - 1 else n
        v = rng.standard_normal(m) + 1j * rng.standard_normal(m)
        vecs.append((a, v.astype(np.complex64)))
    pick = {"all": lambda a: True, "none": lambda a: False, "x only": lambda a: a == 0,
            "planes only": lambda a: a > 0}[which]  # fmt: skip
    sel = [v if pick(a) else None for a, v in enumerate(vecs)]
    got = np.asarray(
        fftw.conv_sum([jnp.asarray(x) for x in xs], jnp.asarray(unread_rows_nan(op)), sel)
    )
    ref = _reference(xs, op, sel, shape)
    assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) < 1e-6


def test_conv_sum_without_operator_is_the_plain_sum_of_shifts():
    import jax.numpy as jnp

    rng = np.random.default_rng(7)
    shape = (12, 10, 9)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    v = np.exp(-1j * np.pi * np.fft.fftfreq(12)).astype(np.complex64)  # half-cell shift along x
    got = np.asarray(fftw.conv_sum([jnp.asarray(x) for x in xs], None, [(0, v), None]))
    ref = _reference(xs, np.ones((12, 10, 5)), [(0, v), None], shape)
    assert np.max(np.abs(got - ref)) / np.max(np.abs(ref)) < 1e-6
