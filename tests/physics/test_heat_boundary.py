"""k-Wave's insulating and conducting boundaries of the heat model (DCT-I / DST-I in place of
the FFT, homogeneous media): the transforms against their definitions, heat conserved by an
insulating grid, cosine and sine modes decaying at their exact rates, runs in pieces and
gradients, and the refusals in the user's names. Against k-Wave itself:
tests/physics/test_heat_kwave.py (cases F-I)."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import numpy as np
import pytest

import sonotile as st
from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.api.heating.sonication import Tissue, sonicate
from sonotile.fft import dtt
from sonotile.model.problem import ProblemError

pytestmark = pytest.mark.usefixtures("jax_float64")

D, DX = 1.4e-7, 1e-3
BLOOD = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5,
         "blood_density": 1060.0, "blood_specific_heat": 3617.0,
         "blood_perfusion_rate": 0.01, "blood_ambient_temperature": 37.0}  # fmt: skip


def matrix(n: int, kind: str) -> np.ndarray:
    """FFTW's REDFT00 (DCT-I) / RODFT00 (DST-I) by their defining sums."""
    k, j = np.arange(n)[:, None], np.arange(n)[None, :]
    if kind == "dst1":
        return 2 * np.sin(np.pi * (k + 1) * (j + 1) / (n + 1))
    c = 2 * np.cos(np.pi * k * j / (n - 1))
    c[:, 0], c[:, -1] = 1.0, (-1.0) ** np.arange(n)
    return c


@pytest.mark.parametrize("kind", ["dct1", "dst1"])
@pytest.mark.parametrize("shape", [(9,), (7, 5), (6, 5, 4)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transforms_are_their_definitions(kind: str, shape: tuple, dtype: str) -> None:
    x = np.random.default_rng(1).standard_normal(shape)
    ref = x
    for a, n in enumerate(shape):
        ref = np.moveaxis(np.tensordot(matrix(n, kind), np.moveaxis(ref, a, 0), axes=1), 0, a)
    got = dtt.forward(jax.numpy.asarray(x, dtype), kind)
    tol = 1e-5 if dtype == "float32" else 1e-13
    assert got.dtype == np.dtype(dtype)
    assert np.max(np.abs(np.asarray(got) - ref)) <= tol * np.max(np.abs(ref))
    back = np.asarray(dtt.inverse(got, kind))
    assert np.max(np.abs(back - x)) <= tol * np.max(np.abs(x))


def trapezoid(shape: tuple[int, ...]) -> np.ndarray:
    """The DCT-I's zero mode: edge points weighted 1/2 per axis (the faces lie on them)."""
    w = np.ones(shape)
    for a in range(len(shape)):
        idx = [slice(None)] * len(shape)
        for e in (0, -1):
            idx[a] = e
            w[tuple(idx)] *= 0.5
    return w


def test_insulating_grid_keeps_its_heat() -> None:
    """No flow through the faces: the heat content (trapezoid-weighted sum of T) changes only
    by what the source puts in, to round-off (the periodic grid would lose nothing either,
    but an insulating one also has no neighbour across the face to give it to)."""
    shape, dt, n = (30, 22), 2.0, 60
    rng = np.random.default_rng(0)
    T0 = 37 + 3 * rng.random(shape)
    x = np.meshgrid(*[np.arange(n) - 2.0 for n in shape], indexing="ij")
    Q = 1e6 * np.exp(-sum(v**2 for v in x) / 16.0)  # by a corner: heat reaches the faces
    medium = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5,
              "boundary_condition": "insulating"}  # fmt: skip
    r = st.bioheat(SimpleNamespace(shape=shape, spacing=DX), medium, {"T0": T0, "Q": Q}, n, dt)
    w = trapezoid(shape)
    gained = np.sum(w * (np.asarray(r.T) - T0))
    put_in = n * dt * np.sum(w * Q) / (1050.0 * 3600.0)
    assert abs(gained - put_in) <= 1e-12 * put_in
    periodic = st.bioheat(
        SimpleNamespace(shape=shape, spacing=DX),
        {**medium, "boundary_condition": "periodic"},
        {"T0": T0, "Q": Q},
        n,
        dt,
    )
    assert np.max(np.abs(np.asarray(periodic.T) - np.asarray(r.T))) > 0.1  # the faces matter


def mode(shape: tuple[int, ...], m: tuple[int, ...], kind: str) -> tuple[np.ndarray, float]:
    """A DCT-I / DST-I eigenmode of the grid and its ``|k|^2`` [rad^2/m^2]."""
    f, k2 = np.ones(shape), 0.0
    for a, (n, mm) in enumerate(zip(shape, m)):
        i = np.arange(n).reshape([-1 if b == a else 1 for b in range(len(shape))])
        if kind == "dct1":
            f, k2 = f * np.cos(np.pi * mm * i / (n - 1)), k2 + (np.pi * mm / ((n - 1) * DX)) ** 2
        else:
            f = f * np.sin(np.pi * mm * (i + 1) / (n + 1))
            k2 += (np.pi * mm / ((n + 1) * DX)) ** 2
    return f, k2


@pytest.mark.parametrize("bc, kind", [("insulating", "dct1"), ("conducting", "dst1")])
@pytest.mark.parametrize("shape, m", [((48,), (5,)), ((30, 20), (3, 2)), ((12, 10, 8), (2, 1, 3))])
def test_modes_decay_at_their_exact_rates(bc: str, kind: str, shape: tuple, m: tuple) -> None:
    """``T = A f_m`` decays as ``exp(-D k^2 t)``, ``k = pi m / ((N - 1) dx)`` (insulating:
    cosines ``cos(pi m i / (N - 1))``) or ``k = pi m / ((N + 1) dx)`` (conducting: sines
    ``sin(pi m (i + 1) / (N + 1))``), for any step length."""
    f, k2 = mode(shape, m, kind)
    t, n = 400.0, 8
    medium = {"diffusion_coeff": D, "boundary_condition": bc}
    r = st.bioheat(SimpleNamespace(shape=shape, spacing=DX), medium, {"T0": 5 * f}, n, t / n)
    exact = 5 * f * np.exp(-D * k2 * t)
    assert np.exp(-D * k2 * t) < 0.9  # decayed measurably
    assert np.max(np.abs(np.asarray(r.T) - exact)) <= 1e-12 * 5


def test_conducting_perfused_medium_settles_to_its_steady_state() -> None:
    """With perfusion and a conducting boundary (0 degC one point outside the grid) a tissue
    at 37 degC settles to ``Ta (1 - cosh(x/L) / cosh(X/L))``, ``L = sqrt(D/P)``, ``X`` the
    distance to that point: within 0.2 % of Ta at 0.5 mm spacing (L = 3.6 mm), the error
    falling about as dx^2 (the odd extension's kink in the second derivative)."""
    d, p = 0.5 / (1050 * 3600), 1060 * 0.01 * 3617 / (1050 * 3600)
    errors = []
    for dx in (1e-3, 0.5e-3):
        medium = {**BLOOD, "boundary_condition": "conducting"}
        kd = st.KWaveDiffusion(SimpleNamespace(shape=(63,), spacing=dx), medium, {"T0": 37.0})
        kd.take_time_step(40, 50.0)  # 2000 s = 20 / P: the transient has gone
        x = (np.arange(63) - 31) * dx
        steady = 37.0 * (1 - np.cosh(x / np.sqrt(d / p)) / np.cosh(32 * dx / np.sqrt(d / p)))
        errors.append(np.max(np.abs(kd.T - steady)))
    assert errors[1] <= 0.002 * 37.0 and errors[1] <= 0.35 * errors[0]


def corner_source(shape: tuple[int, ...]) -> np.ndarray:
    """3e6 W/m^3 in a Gaussian near a corner (the faces matter)."""
    x = np.meshgrid(*[np.arange(n) - 4.0 for n in shape], indexing="ij")
    return 3e6 * np.exp(-sum(v**2 for v in x) / 9.0)


def test_in_pieces_with_sensors_and_float32() -> None:
    """Steps in two calls equal one call; the sensor reads the temperature; float32 stays
    near float64."""
    shape = (24, 18)
    g, Q = SimpleNamespace(shape=shape, spacing=DX), corner_source(shape)
    medium = {**BLOOD, "boundary_condition": "insulating"}
    mask = np.zeros(shape, bool)
    mask[4, 4] = mask[0, 17] = True
    one = st.KWaveDiffusion(g, medium, {"T0": 37.0, "Q": Q}, mask)
    one.take_time_step(30, 0.5)
    two = st.KWaveDiffusion(g, medium, {"T0": 37.0, "Q": Q})
    two.take_time_step(12, 0.5)
    two.take_time_step(18, 0.5)
    rise = one.T.max() - 37.0
    assert rise > 2.0
    assert one.sensor_data.shape == (2, 30)
    assert np.array_equal(one.sensor_data[:, -1], one.T[[4, 0], [4, 17]])
    assert np.max(np.abs(two.T - one.T)) <= 1e-12 * rise
    assert np.max(np.abs(two.cem43 - one.cem43)) <= 1e-12 * one.cem43.max()
    f32 = st.KWaveDiffusion(g, medium, {"T0": 37.0, "Q": Q}, dtype="float32")
    f32.take_time_step(30, 0.5)
    assert np.max(np.abs(f32.T - one.T)) <= 1e-5 * rise


def test_gradient_through_the_dct() -> None:
    """``jax.grad`` through the DCT-I path equals the (linear) response to the source."""
    shape = (24, 18)
    g, Q = SimpleNamespace(shape=shape, spacing=DX), corner_source(shape)
    medium = {**BLOOD, "boundary_condition": "insulating"}

    def focal(a: jax.Array) -> jax.Array:
        return st.bioheat(g, medium, {"T0": 37.0, "Q": a * Q}, 30, 0.5).T[4, 4]

    grad = float(jax.grad(focal)(1.0))
    assert grad > 1.0
    assert grad == pytest.approx(float(focal(1.0)) - float(focal(0.0)), rel=1e-10)


def test_checkpoint_names_the_boundary(tmp_path) -> None:
    """A state saved by an insulating run is refused by a periodic one (the medium differs)
    and resumed by the same run, bit for bit."""
    shape = (16, 12)
    q = np.zeros(shape)
    q[3:6, 2:5] = 5e6
    tissue = Tissue(3600.0, 0.5, boundary_condition="insulating")
    args = (q, (DX, DX), 1050.0, 2.0, 1.0, 0.1)
    whole = sonicate(*args, tissue=tissue)
    cp = Checkpoint(str(tmp_path / "s.npz"), steps=8)
    with pytest.raises(RunStopped):
        sonicate(*args, tissue=tissue, checkpoint=cp)
    with pytest.raises(ProblemError, match="another medium"):
        sonicate(*args, tissue=Tissue(3600.0, 0.5), checkpoint=Checkpoint(cp.path))
    resumed = sonicate(*args, tissue=tissue, checkpoint=Checkpoint(cp.path))
    for k, v in whole.data.items():
        assert np.array_equal(resumed.data[k], v), k


def test_refusals_in_the_users_names() -> None:
    g = SimpleNamespace(shape=(16, 12), spacing=DX)
    src = {"T0": 37.0}
    with pytest.raises(ProblemError, match=r"medium.boundary_condition: 'adiabatic' is none of"):
        st.KWaveDiffusion(g, {"diffusion_coeff": D, "boundary_condition": "adiabatic"}, src)
    hetero = {**BLOOD, "thermal_conductivity": 0.5 + 0.1 * np.eye(16, 12),
              "boundary_condition": "conducting"}  # fmt: skip
    with pytest.raises(ProblemError, match=r"'conducting' needs a homogeneous medium "
                       r"\(medium.thermal_conductivity vary\): as in k-Wave"):  # fmt: skip
        st.KWaveDiffusion(g, hetero, src)
    with pytest.raises(ProblemError, match="homogeneous"):
        st.bioheat(g, hetero, src, 3, 0.1)
    with pytest.raises(ProblemError, match="homogeneous"):
        sonicate(np.ones((16, 12)), (DX, DX), 1000 + np.eye(16, 12), 1.0, 0.5, 0.1,
                 tissue=Tissue(boundary_condition="insulating"))  # fmt: skip
    ins = {"diffusion_coeff": D, "boundary_condition": "insulating"}
    with pytest.raises(ProblemError, match="decomposition 'pencil' with medium.boundary_"):
        st.KWaveDiffusion(g, ins, src, decomposition="pencil")
    with pytest.raises(ProblemError, match="one device only"):
        st.bioheat(g, ins, src, 3, 0.1, decomposition="pencil")
    with pytest.raises(ProblemError, match="at least 2 points along every axis"):
        st.KWaveDiffusion(SimpleNamespace(shape=(16, 1), spacing=DX), ins, src)
