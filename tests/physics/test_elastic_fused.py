"""The 3-D float32 elastic step with its updates inside FFTW's single-axis calls (one device,
FFTW): the same fields as the step on XLA's FFT with the updates in JAX, to float32 round-off,
for a heterogeneous solid with a fluid region, the PML, Kelvin-Voigt absorption or none, the
p0 start and velocity and stress sources."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from require import require_fftw

from sonotile.fft import fftw
from sonotile.physics.elastic import ElasticMedium, build
from sonotile.physics.elastic import model as em
from sonotile.physics.elastic.interface import ElasticModel
from sonotile.physics.elastic.sources import SourceSignals
from sonotile.spectral.operators import FourierOps, fuses_axis_updates

SHAPE, DX, NT = (20, 18, 16), 1e-4, 40


def case(absorbing: bool):
    rng = np.random.default_rng(5)
    cp = 2400 + 400 * rng.random(SHAPE)
    cs = 1100 + 200 * rng.random(SHAPE)
    cs[:, :6] = 0.0  # a fluid region
    rho = 1200 + 600 * rng.random(SHAPE)
    kv = {"alpha_coeff_compression": 1.0, "alpha_coeff_shear": 3.0} if absorbing else {}
    medium = ElasticMedium(cp, cs, rho, SHAPE, **kv)
    dt = 0.2 * DX / cp.max()
    t = np.arange(NT) * dt
    sig = np.sin(2 * np.pi * 1e6 * t)[None]
    pts = np.array([[10, 9, 8], [11, 9, 8]])
    u = SourceSignals(pts, (sig * 1e-3, None, -sig * 5e-4), "additive")
    s = SourceSignals(pts + 2, (None, None, None, sig * 1e3, None, None), "dirichlet")
    p0 = np.zeros(SHAPE)
    p0[6:9, 6:9, 6:9] = 1e3
    return build(medium, (DX,) * 3, dt, NT, p0=p0, u=u, s=s, pml_size=(4, 4, 4))


def run(r, ops, c):
    state = em.zero_state(SHAPE, jnp.float32)
    body = lambda st, x: (em.step(st, x, c, ops, r.statics), None)  # noqa: E731
    return jax.jit(lambda st: jax.lax.scan(body, st, r.xs)[0])(state)


@pytest.mark.parametrize("absorbing", [True, False])
def test_updates_in_fftw_calls_equal_xla(absorbing):
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    r = case(absorbing)
    assert fuses_axis_updates(r.ops, jnp.zeros(SHAPE, jnp.float32))  # the path under test
    c = ElasticModel.of(r).constants(r, (0, 1, 2))
    xla_ops = FourierOps.build(SHAPE, (DX,) * 3, r.medium.c_max, r.dt, "float32", fft="xla")
    fused, ref = run(r, r.ops, c), run(r, xla_ops, c)
    for name, a, b in zip(["u"] * 9 + ["s"] * 15, jax.tree.leaves(fused), jax.tree.leaves(ref)):
        scale = float(jnp.max(jnp.abs(b)))
        assert scale > 0 and float(jnp.max(jnp.abs(a - b))) <= 5e-6 * scale, name


def test_float32_run_through_the_time_loop_equals_float64():
    """``pstd_elastic_3d`` in float32 (the run's constants stored for the in-call updates, the
    common time loop, sensors) against the same run in float64 (XLA's FFT, updates in JAX)."""
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    import sonotile as st

    rng = np.random.default_rng(7)
    cp = 2400 + 400 * rng.random(SHAPE)
    cs = np.where(np.arange(SHAPE[1])[None, :, None] < 6, 0.0, 1200.0) * np.ones(SHAPE)
    rho = 1200 + 600 * rng.random(SHAPE)
    grid = st.KWaveGrid(SHAPE, DX, dt=0.2 * DX / cp.max(), nt=60)
    medium = st.KWaveElasticMedium(cp, cs, rho, alpha_coeff_compression=1.0,
                                   alpha_coeff_shear=3.0)  # fmt: skip
    p0 = np.zeros(SHAPE)
    p0[8:12, 7:11, 6:10] = 1e3
    mask = np.zeros(SHAPE, bool)
    mask[4:16:3, 12, 8] = True
    sensor = st.KSensor(mask=mask, record=("p", "u", "s_final"))
    out = {}
    for dtype in ("float32", "float64"):
        with jax.enable_x64(dtype == "float64"):
            out[dtype] = st.pstd_elastic_3d(grid, medium, st.ElasticSource(p0=p0), sensor,
                                            pml_size=4, dtype=dtype)  # fmt: skip
    for q in ("p", "ux", "uy", "uz", "sxy_final", "syy_final"):
        a, b = np.asarray(out["float32"][q]), np.asarray(out["float64"][q])
        assert np.max(np.abs(a - b)) <= 5e-6 * np.max(np.abs(b)), q
