"""The elastic model's plane waves: compressional and shear modes oscillate at c_p k and c_s k
(leapfrog dispersion, no k-space correction), and decay at the Kelvin-Voigt rate."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sonotile.api.elastic import execute
from sonotile.physics.elastic import ElasticMedium, build, db2neper, zero_state
from sonotile.physics.elastic.model import State

CP, CS, RHO = 2000.0, 900.0, 1500.0
DX = 1e-4
N_WAVE = 32  # points along the wave axis (periodic: no PML)
MODE = 2  # wavelengths in the box: 16 points per wavelength


def _mode_run(ndim: int, wave: str, alpha: float | None, nt: int):
    with jax.enable_x64(True):
        return _mode_run64(ndim, wave, alpha, nt)


def _mode_run64(ndim: int, wave: str, alpha: float | None, nt: int):
    """A periodic box with one Fourier mode along the last axis: ``wave`` "p" (the velocity
    along the axis) or "s" (across it). Returns the mode's stress and velocity coefficients per
    step, the time step and the wavenumber."""
    shape = (4,) * (ndim - 1) + (N_WAVE,)
    ax = ndim - 1
    c = CP if wave == "p" else CS
    dt = 0.2 * DX / CP
    kw = {} if alpha is None else {"alpha_coeff_compression": alpha, "alpha_coeff_shear": alpha}
    medium = ElasticMedium(CP, CS, RHO, shape, **kw)
    line = np.zeros((N_WAVE, ndim), int)
    line[:, ax] = np.arange(N_WAVE)
    run = build(medium, (DX,) * ndim, dt, nt, sensor_points=line, record=("u", "s"),
                pml_size=(0,) * ndim, dtype="float64")  # fmt: skip
    k = 2 * np.pi * MODE / (N_WAVE * DX)
    x = np.arange(N_WAVE) * DX
    comp_axis = ax if wave == "p" else 0  # velocity component carrying the wave
    # u_i lives at x_i + d/2 along its own axis
    xs = x + (DX / 2 if comp_axis == ax else 0.0)
    prof = np.sin(k * xs).reshape((1,) * (ndim - 1) + (N_WAVE,))
    state = zero_state(shape, jnp.float64)
    u = [list(ui) for ui in state.u_split]
    u[comp_axis][ax] = jnp.asarray(np.broadcast_to(prof, shape) * 1e-3)
    state = State(tuple(tuple(ui) for ui in u), state.s_split)
    out = execute(run, state=state)
    names = "xyz"
    s_name = f"s{names[ax]}{names[ax]}" if wave == "p" else "sx" + names[ax]
    sig = np.asarray(out[s_name])  # (N, nt)
    vel = np.asarray(out[f"u{names[comp_axis]}"])
    xs_s = x if wave == "p" else x + DX / 2
    s_hat = (np.cos(k * xs_s) @ sig) * 2 / N_WAVE
    u_hat = (np.sin(k * xs) @ vel) * 2 / N_WAVE
    return s_hat, u_hat, dt, k, c


def _frequency(sig: np.ndarray, dt: float) -> float:
    """Angular frequency from the first and last zero crossings (linear interpolation)."""
    s = np.sign(sig)
    idx = np.nonzero(s[:-1] * s[1:] < 0)[0]
    t = [(i + sig[i] / (sig[i] - sig[i + 1])) * dt for i in idx]
    return np.pi * (len(t) - 1) / (t[-1] - t[0])


@pytest.mark.parametrize("ndim", [2, 3])
@pytest.mark.parametrize("wave", ["p", "s"])
def test_plane_waves_travel_at_their_speeds(ndim, wave):
    s_hat, _, dt, k, c = _mode_run(ndim, wave, None, 640)
    w = _frequency(s_hat, dt)
    speed = w / k
    leapfrog = 2 / (dt * k) * np.arcsin(c * k * dt / 2)  # the scheme's own phase speed
    assert abs(speed / c - 1) <= 1e-3
    assert abs(speed / leapfrog - 1) <= 2e-5


@pytest.mark.parametrize(("wave", "alpha"), [("p", 5.0), ("s", 25.0)])
def test_kelvin_voigt_decay(wave, alpha):
    # alpha [dB/(MHz^2 cm)]: the mode's energy falls to a few per cent over the run
    s_hat, u_hat, dt, k, c = _mode_run(2, wave, alpha, 1600)
    # mode energy (up to a constant): stress^2 + (rho c u)^2, decays as exp(-2 gamma t)
    energy = s_hat**2 + (RHO * c * u_hat) ** 2
    t = np.arange(len(energy)) * dt
    slope = np.polyfit(t, np.log(energy), 1)[0]
    gamma = -slope / 2
    theory = k**2 * c**3 * db2neper(alpha, 2.0)  # k^2 V / (2 rho), V = 2 rho c^3 a
    assert gamma > 0
    assert abs(gamma / theory - 1) <= 0.02
