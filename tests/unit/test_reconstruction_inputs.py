"""The reconstruction functions' input handling: layouts, k-Wave's spellings, JAX input
(jit, gradients), and clear errors before any work for input they cannot use."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st

DT, C, DY = 2e-8, 1500.0, 1e-4


def pulses(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Smooth, band-limited test data: random values low-passed along every axis."""
    a = np.random.default_rng(seed).standard_normal(shape)
    for ax, n in enumerate(shape):
        keep = (np.arange(n // 2 + 1) < max(n // 6, 2)).reshape((-1,) + (1,) * (a.ndim - ax - 1))
        a = np.fft.irfft(np.fft.rfft(a, axis=ax) * keep, n, axis=ax)
    return a


def test_layouts_and_kwave_spellings_agree() -> None:
    p = pulses((40, 16))
    ref = st.kspace_line_recon(p, DY, DT, C, interp="linear")
    np.testing.assert_array_equal(
        st.kspace_line_recon(p.T, DY, DT, C, data_order="yt", interp="*linear"), ref
    )
    assert not np.array_equal(st.kspace_line_recon(p, DY, DT, C), ref)  # nearest differs
    p3 = pulses((24, 8, 6))
    ref3 = st.kspace_plane_recon(p3, DY, DY, DT, C)
    np.testing.assert_array_equal(
        st.kspace_plane_recon(p3.transpose(1, 2, 0), DY, DY, DT, C, data_order="yzt"), ref3
    )
    pos = st.kspace_plane_recon(p3, DY, DY, DT, C, pos_cond=True)
    assert ref3.min() < 0 and np.array_equal(pos, np.maximum(ref3, 0))


def test_jax_input_gives_jax_output_with_gradients(jax_float64: None) -> None:
    import jax
    import jax.numpy as jnp

    p = pulses((30, 12), seed=1)
    ref = st.kspace_line_recon(p, DY, DT, C, interp="linear")
    got = jax.jit(lambda q: st.kspace_line_recon(q, DY, DT, C, interp="linear"))(jnp.asarray(p))
    assert isinstance(got, jax.Array)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=0, atol=1e-12 * np.abs(ref).max())

    def loss(q: np.ndarray) -> float:
        return float(np.sum(st.kspace_line_recon(q, DY, DT, C, interp="linear") ** 2))

    g = jax.grad(lambda q: jnp.sum(st.kspace_line_recon(q, DY, DT, C, interp="linear") ** 2))(
        jnp.asarray(p)
    )
    v = pulses(p.shape, seed=2)
    eps = 1e-4
    fd = (loss(p + eps * v) - loss(p - eps * v)) / (2 * eps)  # exact for a quadratic
    assert abs(float(jnp.vdot(g, v)) - fd) < 1e-8 * abs(fd)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: st.kspace_line_recon(p, DY, DT, C, data_order="yz"), "data_order = 'yz'"),
        (lambda p: st.kspace_line_recon(p[None], DY, DT, C), r"expected \(Nt, Ny\)"),
        (lambda p: st.kspace_line_recon(p, DY, DT, -C), "c = -1500.0"),
        (lambda p: st.kspace_line_recon(p, 0.0, DT, C), "dy = 0.0"),
        (lambda p: st.kspace_line_recon(p, DY, DT, C, interp="cubic"), "interp = 'cubic'"),
        (lambda p: st.kspace_line_recon(p * np.nan, DY, DT, C), "NaN"),
        (lambda p: st.kspace_plane_recon(p, DY, DY, DT, C), r"expected \(Nt, Ny, Nz\)"),
    ],
)
def test_recon_errors_name_the_input(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call(pulses((20, 8)))


def ring_case() -> tuple[st.KWaveGrid, st.KSensor, np.ndarray]:
    grid = st.KWaveGrid((32, 32), 1e-4, dt=2e-8, nt=50)
    mask = np.zeros((32, 32), bool)
    mask[[4, 27], 5:25] = True
    return grid, st.KSensor(mask=mask), np.zeros((int(mask.sum()), 50))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda g, s, d: (st.KWaveGrid((32, 32), 1e-4), s, d), "kgrid.dt and kgrid.nt"),
        (lambda g, s, d: (g, s, d[:, 5:]), r"record_start_index = 1"),
        (lambda g, s, d: (g, s, d.T), r"pass sensor_data.T"),
        (lambda g, s, d: (g, s, {"p_max": d}), "holds no 'p'"),
        (lambda g, s, d: (g, s, d + np.inf), "NaN or Inf"),
        (lambda g, s, d: (g, st.KSensor(corners=[((0, 0), (3, 3))]), d), "not cuboid corners"),
        (lambda g, s, d: (g, st.KSensor(mask=s.mask.T[:3]), d), "sensor.mask: shape"),
        (  # two Cartesian points 0.2 grid points apart share a grid point
            lambda g, s, d: (g, st.KSensor(mask=np.array([[0, 0.2e-5], [1e-4, 1e-4]])), d[:2]),
            "points 0 and 1",
        ),
        (lambda g, s, d: (g, st.KSensor(points=np.array([[1, 2], [1, 2]])), d[:2]), "same grid"),
    ],
)
def test_time_reversal_errors_before_any_run(change, message: str) -> None:
    grid, sensor, data = change(*ring_case())
    with pytest.raises(ValueError, match=message):
        st.time_reversal(grid, st.KWaveMedium(sound_speed=C), sensor, data)


def test_time_reversal_class_checks_its_factor_and_sensor() -> None:
    grid, sensor, _ = ring_case()
    medium = st.KWaveMedium(sound_speed=C)
    with pytest.raises(ValueError, match="compensation_factor"):
        st.TimeReversal(grid, medium, sensor, compensation_factor=0)
    with pytest.raises(ValueError, match="sensor.mask"):
        st.TimeReversal(grid, medium, st.KSensor())
