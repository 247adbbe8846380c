"""The heat model (Pennes bioheat, k-space corrected) against closed-form solutions: the
Green's function of a homogeneous perfused medium, the heat balance of a heterogeneous one, a
layered steady state, the Sapareto-Dewey dose, the small-time limit, and gradients."""

from __future__ import annotations

import dataclasses
import importlib
import math
import re
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import erf

from sonotile.api.heating.bioheat import KWaveDiffusion, bioheat
from sonotile.model.problem import ProblemError
from sonotile.physics.heat import acoustic_heat_source, bioheat_exact, sonication
from sonotile.physics.heat.medium import ThermalMedium, coefficients
from sonotile.physics.heat.step import build_ops, constants, initial_state, statics_of, step

pytestmark = pytest.mark.usefixtures("jax_float64")

RHO, C, K = 1079.0, 3540.0, 0.52  # liver-like tissue [kg/m^3], [J/(kg K)], [W/(m K)]
BLOOD = {"blood_density": 1060.0, "blood_specific_heat": 3617.0, "blood_ambient_temperature": 37.0}


def grid(shape: tuple[int, ...], dx: float = 1e-3) -> SimpleNamespace:
    return SimpleNamespace(shape=shape, spacing=dx)


def coords(shape: tuple[int, ...], dx: float = 1e-3) -> list[np.ndarray]:
    axes = [(np.arange(n) - n // 2) * dx for n in shape]
    return np.meshgrid(*axes, indexing="ij")


def gaussian(shape: tuple[int, ...], centre: tuple[float, ...], width: float) -> np.ndarray:
    r2 = sum((x - c) ** 2 for x, c in zip(coords(shape), centre))
    return np.exp(-r2 / width**2)


def tissue(perfusion: float = 0.0) -> dict:
    m = {"density": RHO, "specific_heat": C, "thermal_conductivity": K}
    if perfusion:
        m.update(BLOOD, blood_perfusion_rate=perfusion)
    return m


CASES = {  # shape, perfusion [1/s], source: (centre [m], width [m]) or None, dt [s], steps
    "1d-perfused-gaussian": ((128,), 0.01, ((4e-3,), 3e-3), 0.5, 40),
    "2d-perfused-offset": ((48, 40), 0.02, ((-5e-3, 3e-3), 2.5e-3), 1.0, 15),
    "2d-no-source": ((32, 32), 0.01, None, 2.0, 10),
    "3d-perfused-focus": ((24, 20, 16), 0.005, ((0.0, 0.0, 2e-3), 3e-3), 0.25, 12),
    "3d-no-perfusion": ((16, 16, 16), 0.0, ((0.0, 0.0, 0.0), 2e-3), 0.5, 20),
}


@pytest.mark.parametrize("case", CASES)
def test_homogeneous_matches_bioheat_exact(case: str) -> None:
    """Homogeneous, perfused: the k-space step is exact in time; every time agrees with the
    Green's function (k-Wave's bioheatExact) to <= 1e-4 relative (of the temperature rise)."""
    shape, perf, src, dt, steps = CASES[case]
    T0 = 37.0 + 2.0 * gaussian(shape, (2e-3,) * len(shape), 2.5e-3)
    Q = None if src is None else 2e5 * gaussian(shape, *src)
    kd = KWaveDiffusion(grid(shape), tissue(perf), {"T0": T0, "Q": Q})
    D = K / (RHO * C)
    P = BLOOD["blood_density"] * BLOOD["blood_specific_heat"] * perf / (RHO * C)
    S = 0 if Q is None else Q / (RHO * C)
    for n in range(1, 4):
        kd.take_time_step(steps, dt)
        exact = bioheat_exact(T0, S, (D, P, 37.0), 1e-3, n * steps * dt)
        rise = np.max(np.abs(exact - 37.0))
        assert np.max(np.abs(kd.T - exact)) / rise <= 1e-4, (case, n)


def test_heterogeneous_heat_balance() -> None:
    """Heterogeneous conductivity, rho C and perfusion, periodic domain (no outflow): heat in =
    stored + perfused, step by step, to round-off; without perfusion heat in is t sum(Q) dV."""
    shape, dx = (40, 36), 1e-3
    x, y = coords(shape)
    k = K * (1 + 0.6 * np.tanh(x / 3e-3))  # a smooth layer boundary
    rho = RHO * (1 + 0.1 * (y > 0))
    Q = 3e5 * gaussian(shape, (2e-3, -3e-3), 3e-3)
    for perf in (0.0, 0.02 * (1 + (x > 0))):
        med = {**tissue(), "thermal_conductivity": k, "density": rho}
        if np.any(perf):
            med.update(BLOOD, blood_perfusion_rate=perf)
        co = coefficients(ThermalMedium(**med), shape)
        st = statics_of(co, True)
        dt = 0.5
        ops = build_ops(co, shape, (dx, dx), dt, "float64", st, fft="xla")
        c = constants(co, Q, shape, dt, "float64", ops, st)
        s = initial_state(37.0, shape, "float64")
        rho_c = rho * C * dx * dx  # heat capacity per cell [J/K] (per m of depth)
        perfused = 0.0
        for _ in range(30):
            if np.any(perf):
                t_s = np.asarray(ops.smooth(s.T)) - np.asarray(c["ambient_s"])
                perfused += dt * np.sum(rho_c * np.asarray(c["perf"]) * t_s)
            s = step(s, {"on": 1.0}, c, ops, st)
        stored = np.sum(rho_c * (np.asarray(s.T) - 37.0))
        heat_in = np.sum(rho_c * np.asarray(c["q"])) * 30
        assert abs(heat_in - stored - perfused) <= 1e-12 * heat_in
        if not np.any(perf):
            assert abs(heat_in - 30 * dt * np.sum(Q) * dx * dx) <= 1e-12 * heat_in
        assert stored > 0.1 * heat_in  # heat was stored, not only conducted away


def layered_run(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A 1-D periodic two-layer slab (k = 0.5 | 0.2 W/(m K)) heated by a Gaussian line source
    in the first layer and cooled by a mirrored sink in the second, run to steady state;
    returns the temperature and its analytic profile (piecewise, from the flux, which splits
    evenly by symmetry; mean kept by conservation)."""
    length, q, sig, k1, k2 = 64e-3, 2e3, 2e-3, 0.5, 0.2
    dx = length / n
    x = np.arange(n) * dx

    def line(c: float) -> np.ndarray:
        s = (x - c + length / 2) % length - length / 2
        return q / (sig * math.sqrt(math.pi)) * np.exp(-((s / sig) ** 2))

    Q = line(length / 4) - line(3 * length / 4)
    k = np.where(x < length / 2, k1, k2)
    med = {"density": 1000.0, "specific_heat": 4000.0, "thermal_conductivity": k}
    res = bioheat(grid((n,), dx), med, {"T0": 37.0, "Q": Q}, 8000, 5.0)

    def G(s: np.ndarray) -> np.ndarray:  # integral of the erf flux profile
        return s * erf(s / sig) + sig / math.sqrt(math.pi) * (np.exp(-((s / sig) ** 2)) - 1)

    a2 = -(q / 2) * G(np.asarray(length / 4)) * (1 / k1 + 1 / k2)
    prof = np.where(
        x < length / 2,
        -(q / (2 * k1)) * G(x - length / 4),
        a2 + (q / (2 * k2)) * G(x - 3 * length / 4),
    )
    return np.asarray(res.T), prof + 37.0 - prof.mean()


def test_layered_steady_state() -> None:
    """Steady state through two layers: within 0.3 % of the temperature span inside the layers,
    2 % at the interfaces (a kink that a Fourier basis resolves to first order); the interior
    error falls with the grid spacing."""
    T, prof = layered_run(256)
    span = prof.max() - prof.min()
    x = np.arange(256) / 256
    inner = (np.abs(x - 0.25) < 0.125) | (np.abs(x - 0.75) < 0.125)
    err = np.abs(T - prof) / span
    assert err.max() < 0.02 and err[inner].max() < 3e-3
    T2, prof2 = layered_run(512)
    inner2 = np.repeat(inner, 2)
    assert (np.abs(T2 - prof2) / span)[inner2].max() < 0.7 * err[inner].max()


def sapareto_dewey(history: np.ndarray, dt: float) -> np.ndarray:
    """CEM43 [min] of temperature histories ``(n_points, n_steps)`` [degC], point by point."""
    out = np.zeros(history.shape[0])
    for i, series in enumerate(history):
        for T in series:
            if T >= 43:
                out[i] += dt / 60 * 0.5 ** (43 - T)
            elif T >= 37:
                out[i] += dt / 60 * 0.25 ** (43 - T)
    return out


def test_cem43_and_lesion_match_direct_sum() -> None:
    """The dose accumulated during a pulsed heating equals Sapareto-Dewey's sum over the
    recorded temperatures at every grid point; the lesion is where it reaches 240 min."""
    shape, dt = (40, 40), 0.1
    Q = 4e7 * gaussian(shape, (0.0, 0.0), 2e-3)
    kd = KWaveDiffusion(grid(shape), tissue(0.01), {"T0": 37.0, "Q": Q}, np.ones(shape, bool))
    on = sonication(300, dt, on=20.0, period=2.0, duty=0.75)
    kd.take_time_step(300, dt, on=on)
    kd.Q = None
    kd.take_time_step(100, dt)
    want = sapareto_dewey(kd.sensor_data, dt).reshape(shape, order="F")
    assert kd.T_max.max() > 55 and want.max() > 240 > np.median(want)
    assert np.allclose(kd.cem43, want, rtol=1e-12, atol=1e-15)
    assert np.array_equal(kd.lesion_map, want >= 240)
    assert kd.lesion_size == pytest.approx(np.sum(want >= 240) * 1e-6)
    assert np.allclose(kd.T_max, kd.sensor_data.max(axis=1).reshape(shape, order="F"))


def test_constant_temperature_dose() -> None:
    """k-Wave's dose check: held at 50 degC, the dose is t/60 0.5^-7 min; no lesion before
    240 min, all of the grid after."""
    t200 = 200 * 60 * 0.5**7
    for minutes, lesion in ((200, 0.0), (300, 64e-3)):
        kd = KWaveDiffusion(grid((64,)), tissue(), {"T0": 50.0})
        nt = round(minutes / 200 * t200 / 0.5)
        kd.take_time_step(nt, 0.5)
        assert kd.cem43[0] == pytest.approx(nt * 0.5 / 60 * 2.0**7, rel=1e-13)
        assert kd.lesion_size == pytest.approx(lesion)


def test_small_time_rise_is_q_t_over_rho_c() -> None:
    """Over a time short against diffusion across the heated spot, the focal rise is
    Q t / (rho C) (within the diffusion correction D t / w^2)."""
    shape, w, t = (32, 32, 32), 6e-3, 1.0
    Q0 = 1e6
    res = bioheat(grid(shape), tissue(), {"T0": 37.0, "Q": Q0 * gaussian(shape, (0.0,) * 3, w)},
                  10, t / 10)  # fmt: skip
    rise = float(res.T[16, 16, 16]) - 37.0
    want = Q0 * t / (RHO * C)
    assert abs(rise - want) / want < 6 * (K / (RHO * C)) * t / w**2
    assert rise < want  # diffusion only takes heat away from the peak


def test_gradient_matches_finite_differences() -> None:
    """d(focal dose)/d(source amplitude) and d(focal T)/d(pressure amplitude) through
    Q = alpha p^2/(rho c), by jax.grad, agree with central differences (float64)."""
    shape, dt, nt = (24, 24), 0.2, 40
    shape_q = gaussian(shape, (0.0, 0.0), 2e-3)
    on = sonication(nt, dt, on=6.0)

    def dose(a: jax.Array) -> jax.Array:
        r = bioheat(grid(shape), tissue(0.01), {"T0": 37.0, "Q": a * shape_q}, nt, dt, on=on)
        return r.cem43[12, 12]

    def focal_T(p: jax.Array) -> jax.Array:
        Q = acoustic_heat_source(p * jnp.asarray(shape_q), 0.75, 1.5, 1e6, 1020.0, 1510.0)
        return bioheat(grid(shape), tissue(), {"T0": 37.0, "Q": Q}, nt, dt).T[12, 12]

    for f, x0, h in ((dose, 4e7, 1e3), (focal_T, 2e6, 10.0)):
        g = float(jax.grad(f)(jnp.asarray(x0)))
        fd = (float(f(jnp.asarray(x0 + h))) - float(f(jnp.asarray(x0 - h)))) / (2 * h)
        assert g == pytest.approx(fd, rel=1e-6)
        assert abs(g) > 0


def test_float32_agrees_with_float64() -> None:
    """A float32 run (FFTW on the CPU where available) stays within 1e-5 K per K of rise."""
    shape = (32, 32, 16)
    Q = 3e5 * gaussian(shape, (0.0, 0.0, 0.0), 3e-3)
    k = K * (1 + 0.3 * (coords(shape)[0] > 0))
    ref = bioheat(grid(shape), {**tissue(0.01), "thermal_conductivity": k}, {"T0": 37.0, "Q": Q},
                  20, 0.5)  # fmt: skip
    single = bioheat(grid(shape), {**tissue(0.01), "thermal_conductivity": k},
                     {"T0": 37.0, "Q": Q}, 20, 0.5, dtype="float32", fft="auto")  # fmt: skip
    rise = float(jnp.max(ref.T)) - 37.0
    assert float(jnp.max(jnp.abs(single.T - ref.T))) < 1e-5 * 37.0 + 1e-5 * rise


@pytest.mark.parametrize("conduction", ["field", "scalar"])
def test_perfusion_smoothing_shares_the_conduction_transform(conduction: str) -> None:
    """With perfusion the step takes ``smooth(T)`` from the conduction term's forward transform
    of ``T``: equal to the separate operators (float64 on XLA; float32 on FFTW's second operator
    where available), and a 3-D float32 step makes one FFTW operator call for ``T`` (gradient
    and smoothing, or Laplacian and smoothing) where it made two."""
    shape = (16, 12, 10)
    k = K * (1 + 0.3 * (coords(shape)[0] > 0)) if conduction == "field" else K
    med = ThermalMedium(**{**tissue(0.01), "thermal_conductivity": k, "density":
                           RHO * (1 + 0.1 * (coords(shape)[1] > 0))})  # fmt: skip
    co = coefficients(med, shape)
    st = statics_of(co, True)
    assert st.conduction == conduction and not st.homogeneous
    T = 37.0 + gaussian(shape, (1e-3, 0.0, -1e-3), 3e-3) + 0.1 * np.cos(coords(shape)[2] * 900)
    for dtype, tol in (("float64", 1e-13), ("float32", 1e-6)):
        ops = build_ops(co, shape, (1e-3,) * 3, 0.5, dtype, st, fft="auto")
        f = jnp.asarray(T, dtype)
        if conduction == "field":
            grads, sm = ops.grad_smooth(f)
            pairs = [*zip(grads, ops.grad(f)), (sm, ops.smooth(f))]
        else:
            lap, sm = ops.laplacian_smooth(f)
            pairs = [(lap, ops.laplacian(f)), (sm, ops.smooth(f))]
        for got, ref in pairs:
            scale = float(jnp.max(jnp.abs(ref)))
            assert scale > 0 and float(jnp.max(jnp.abs(got - ref))) <= tol * scale
    if ops.fft != "fftw":
        return
    c = constants(co, 1e5 * gaussian(shape, (0.0,) * 3, 3e-3), shape, 0.5, "float32", ops, st)
    s0 = initial_state(37.0, shape, "float32")
    text = jax.jit(lambda s: step(s, {"on": 1.0}, c, ops, st)).lower(s0).compile().as_text()
    assert text.count('custom_call_target="sonotile_fftw_conv"') == 1


@pytest.mark.parametrize(
    ("medium", "source", "message"),
    [
        (
            {**tissue(), "thermal_conductivity": -0.1},
            {},
            "medium.thermal_conductivity: must be >= 0",
        ),
        ({**tissue(), "blood_perfusion_rate": 0.01}, {}, "without medium.blood_density"),
        ({**tissue(), "blood_ambient_temperature": 37.0}, {}, "without perfusion"),
        ({"diffusion_coeff": 1e-7}, {"Q": 1e5}, "source.Q given without medium.density"),
        ({"density": 1000.0, "specific_heat": 4000.0}, {}, "medium.thermal_conductivity missing"),
        ({**tissue(), "density": np.ones((3, 3))}, {}, "medium.density: shape (3, 3)"),
        (tissue(), {"T0": np.full((16, 16), np.nan)}, "source.T0: contains NaN"),
    ],
)
def test_bad_input_is_named(medium: dict, source: dict, message: str) -> None:
    with pytest.raises(ProblemError, match=re.escape(message)):
        bioheat(grid((16, 16)), medium, {"T0": 37.0, **source}, 1, 0.1)


def test_time_step_beyond_stability_limit_is_refused() -> None:
    """With the reference diffusivity below half the largest (k-Wave's 'min' rule) the scheme
    has a limit: a step beyond it is refused, one below it runs and stays bounded."""
    shape = (32, 32)
    k = K * (1 + 4 * (coords(shape)[0] > 0))
    med = {**tissue(), "thermal_conductivity": k, "diffusion_coeff_ref": "min"}
    kd = KWaveDiffusion(grid(shape), med, {"T0": 37.0 + gaussian(shape, (0.0, 0.0), 2e-3)})
    limit = kd.dt_limit
    assert 0 < limit < math.inf
    with pytest.raises(ProblemError, match="beyond the stability limit"):
        kd.take_time_step(10, 1.01 * limit)
    kd.take_time_step(200, 0.99 * limit)
    assert np.all(np.isfinite(kd.T)) and kd.T.max() <= 38.0 + 1e-9


def test_vmap_over_source_amplitudes_equals_separate_runs() -> None:
    """A batch of sonications (jax.vmap over the source amplitude) gives each run's dose."""
    shape = (24, 24)
    Q0 = 1e6 * gaussian(shape, (0.0, 0.0), 3e-3)

    def dose(a: jax.Array) -> jax.Array:
        return bioheat(grid(shape), tissue(), {"T0": 37.0, "Q": a * Q0}, 50, 0.1).cem43[12, 12]

    amps = jnp.array([1.0, 2.0, 3.0])
    batch = np.asarray(jax.vmap(dose)(amps))
    one_by_one = np.array([float(dose(a)) for a in amps])
    assert np.allclose(batch, one_by_one, rtol=1e-12) and np.all(np.diff(batch) > 0)


def test_batch_of_sources_and_schedules_equals_separate_runs() -> None:
    """``bioheat_batch``: three heat sources and three sonication schedules in one vectorised
    call give each run's temperature, dose, maximum and sensor samples; longer on-time, more
    dose; bad batches are refused before any step."""
    from sonotile.api.heating.bioheat import bioheat_batch

    shape, nt, dt = (24, 20), 40, 0.1
    Qs = np.stack([a * 2e6 * gaussian(shape, (c, 0.0), 3e-3)
                   for a, c in ((1.0, 0.0), (1.5, 2e-3), (0.7, -2e-3))])  # fmt: skip
    plans = ((1.0, None, 1.0), (2.0, 0.5, 0.5), (3.0, None, 1.0))  # on [s], period [s], duty
    ons = np.stack([sonication(nt, dt, on=t, period=p, duty=d) for t, p, d in plans])
    med, mask = tissue(0.01), np.zeros(shape)
    mask[12, 10] = mask[3, 4] = 1
    batch = bioheat_batch(grid(shape), med, {"T0": 37.0}, nt, dt, Q=Qs, on=ons, sensor=mask)
    assert batch.T.shape == (3, *shape) and batch.sensor_data.shape == (3, 2, nt)
    for b in range(3):
        one = bioheat(grid(shape), med, {"T0": 37.0, "Q": Qs[b]}, nt, dt, on=ons[b], sensor=mask)
        for name in ("T", "cem43", "T_max", "sensor_data"):
            got, want = np.asarray(getattr(batch, name))[b], np.asarray(getattr(one, name))
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)
    same_q = bioheat_batch(grid(shape), med, {"T0": 37.0, "Q": Qs[0]}, nt, dt, on=ons)
    assert np.all(np.diff(np.asarray(same_q.cem43)[:, 12, 10]) > 0)  # more on-time, more dose
    for kw, message in (({"Q": Qs, "on": ons[:2]}, "batch sizes"),
                        ({"Q": Qs[:, :5]}, "expected \\(B, 24, 20\\)"),
                        ({"on": ons[:, :7]}, "on: shape")):  # fmt: skip
        with pytest.raises(ProblemError, match=message):
            bioheat_batch(grid(shape), med, {"T0": 37.0, "Q": Qs[0]}, nt, dt, **kw)


def test_model_interface_runs_in_any_chunks() -> None:
    """Through the common time loop (an engine, chunks of steps), a run cut into chunks of 7
    steps, a run resumed half-way from its state (dose and maximum carried on), and the traced
    run of the functional form all equal each other; the model is hashable and joins with its
    equals."""
    from sonotile.api.heating.bioheat import engine_run, traced_problem
    from sonotile.parallel.engine import engine_for
    from sonotile.physics.heat.model import HeatModel, heat_problem
    from sonotile.solver import runner

    shape = (20, 18)
    k = K * (1 + 0.5 * (coords(shape)[0] > 0))
    Q = 2e6 * gaussian(shape, (0.0, 0.0), 3e-3)
    on = sonication(30, 0.1, on=2.0)
    medium = {**tissue(0.01), "thermal_conductivity": k}
    idx = (np.array([10, 3]), np.array([9, 4]))

    def problem(nt: int, on: np.ndarray, **start) -> object:
        return heat_problem(shape, (1e-3, 1e-3), medium, {"T0": start.pop("T0", 37.0), "Q": Q},
                            nt, 0.1, on=on, sensor=idx, **start)  # fmt: skip

    whole = problem(30, on)
    model = HeatModel.of(whole)
    assert hash(model) == hash(HeatModel.of(whole)) and model.joined([model]) == model
    raw, final = engine_run(whole)
    pieces = runner.run_engine(engine_for(whole)[0], chunk=7)
    _, half = engine_run(problem(13, on[:13]))
    raw2, resumed = engine_run(
        problem(
            17, on[13:], T0=half["T_final"], cem43_0=half["cem43_final"], T_max0=half["T_max_final"]
        )
    )
    traced_raw, state = traced_problem(whole)
    traced = {"T_final": state.T, "cem43_final": state.cem43, "T_max_final": state.T_max}
    for other in (pieces[1], resumed, traced):
        for name in ("T_final", "cem43_final", "T_max_final"):
            assert np.allclose(np.asarray(other[name]), final[name], rtol=1e-13, atol=0)
    assert raw["T"].shape == (30, 2)
    assert np.allclose(np.asarray(traced_raw["T"]), raw["T"], rtol=1e-13, atol=0)
    assert np.allclose(raw2["T"], raw["T"][13:], rtol=1e-13, atol=0)
    assert float(final["cem43_final"].max()) > 0 and model.memory_estimate(whole) > 0


def test_bioheat_calls_with_the_same_grid_reuse_the_compiled_run() -> None:
    """A second ``bioheat`` call on the same grid, medium kind and sensor (another source) takes
    the compiled one-device run of the first instead of tracing it again, and still gives its
    own answer: twice the source, twice the rise (linear, no perfusion)."""
    module = importlib.import_module("sonotile.api.heating.bioheat")

    shape = (16, 16)
    q = gaussian(shape, (0.0, 0.0), 2e-3)
    traces = []
    real = module.traced_runner

    def counting(*args, **kwargs):
        tr = real(*args, **kwargs)

        def run(*a):
            traces.append(1)  # runs in Python only while being traced
            return tr.run(*a)

        return dataclasses.replace(tr, run=run)

    module.traced_runner = counting
    try:
        rise = [bioheat(grid(shape), tissue(), {"T0": 37.0, "Q": a * 1e6 * q}, 20, 0.5).T - 37.0
                for a in (1.0, 2.0)]  # fmt: skip
    finally:
        module.traced_runner = real
    assert len(traces) == 1
    np.testing.assert_allclose(rise[1], 2 * rise[0], rtol=1e-10, atol=1e-12)
    assert rise[0].max() > 1e-3
