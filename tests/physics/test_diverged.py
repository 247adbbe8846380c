"""A run whose state becomes NaN or Inf stops at the first chunk of steps where it does and
raises SimulationDiverged naming the model, the fields, the time steps and the likely cause;
check_finite=False runs on."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import sonotile as st
from sonotile.api import Options, build_problem
from sonotile.api.heating.bioheat import KWaveDiffusion, bioheat
from sonotile.physics.acoustic import checks
from sonotile.solver import runner
from sonotile.solver.finite import NonFiniteError, SimulationDiverged

N, DX, C = 64, 1e-4, 1500.0
MEDIUM = st.KWaveMedium(sound_speed=C, density=1000.0, alpha_coeff=50.0, alpha_power=2.0,
                        alpha_mode="stokes")  # fmt: skip


def acoustic(dt: float, nt: int) -> tuple:
    x = np.arange(N)
    src = st.KSource(p0=1e3 * np.exp(-(((x - N / 2) / 3) ** 2)))  # [Pa]
    sensor = st.KSensor(mask=np.ones(N, bool), record=("p", "p_final"))
    return st.KWaveGrid((N,), DX, dt=dt, nt=nt), MEDIUM, src, sensor


def simulate(dt: float, nt: int, **kw: object) -> st.Results:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the stability warning (tested elsewhere)
        return st.simulate(*acoustic(dt, nt), smooth_p0=False, pml_size=10, quiet=True, **kw)


def test_unstable_acoustic_run_raises_with_steps_and_cfl():
    dt, nt = 3 * DX / C, 4000  # CFL 3: far beyond the stability limit
    with pytest.raises(SimulationDiverged) as e:
        simulate(dt, nt)
    err = e.value
    assert isinstance(err, NonFiniteError) and isinstance(err, FloatingPointError)
    assert err.model == "acoustic model" and "p" in err.fields
    assert 1 <= err.first <= err.sampled <= err.last < nt  # stopped before the end
    msg = str(err)
    assert msg.startswith("acoustic model: NaN or Inf in p")
    assert f"time steps {err.first}-{err.last} of {nt}" in msg
    assert f"at time step {err.sampled}" in msg
    assert "CFL number 3," in msg and "stable up to" in msg and "check_finite=False" in msg
    back = pickle.loads(pickle.dumps(err))  # e.g. from a worker process
    assert str(back) == msg and (back.first, back.last, back.sampled) == (
        err.first, err.last, err.sampled)  # fmt: skip


def test_step_range_is_the_chunk_where_it_went_non_finite():
    grid, medium, src, sensor = acoustic(3 * DX / C, 400)
    problem, _ = build_problem(grid, medium, src, sensor, Options(pml_size=10, smooth_p0=False))
    with pytest.raises(SimulationDiverged) as e:
        runner.run(problem, chunk=8)
    err = e.value
    # k-Wave's numbering: p0 is time step 1, the first chunk holds time steps 2-9
    assert err.last - err.first == 7 and (err.first - 2) % 8 == 0
    assert err.first <= err.sampled <= err.last
    # the chunks before were finite: a run of the time steps before it ends finite
    problem, _ = build_problem(
        *acoustic(3 * DX / C, err.first - 1), Options(pml_size=10, smooth_p0=False)
    )
    _, final = runner.run(problem, chunk=8)
    assert np.all(np.isfinite(final["p_final"]))


def test_check_finite_false_runs_on():
    res = simulate(3 * DX / C, 400, check_finite=False)
    assert not np.all(np.isfinite(res["p_final"]))


def test_stable_run_is_unaffected():
    grid, medium, src, sensor = acoustic(0.2 * DX / C, 200)
    problem, _ = build_problem(grid, medium, src, sensor, Options(pml_size=10))
    assert 0.2 * DX / C < checks.stability_limit(problem)
    res = simulate(0.2 * DX / C, 200)
    assert np.all(np.isfinite(res["p"])) and np.abs(res["p_final"]).max() < 1e3


def test_elastic_unstable_step_raises():
    n = 48
    cp, cs, rho = np.full((n, n), 1500.0), np.full((n, n), 700.0), np.full((n, n), 1000.0)
    x = np.arange(n)
    p0 = np.exp(-(((x[:, None] - n / 2) ** 2 + (x[None, :] - n / 2) ** 2) / 9.0))
    dt, nt = 2.0 * DX / 1500.0, 600  # CFL 2
    with pytest.raises(SimulationDiverged) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st.pstd_elastic_2d(
            st.KWaveGrid((n, n), DX, dt=dt, nt=nt), st.KWaveElasticMedium(cp, cs, rho),
            st.ElasticSource(p0=p0), st.KSensor(mask=np.ones((n, n), bool), record=("p",)),
            pml_size=8,
        )  # fmt: skip
    err = e.value
    assert err.model == "elastic model" and err.last < nt
    assert str(err).startswith("elastic model: NaN or Inf in ")
    assert "CFL number max(c_p) dt / dx = 2," in str(err)


def overflowing_heat() -> tuple:
    """A source power float32 cannot hold: ``dt q / (rho C)`` ~ 1e39 K in one step."""
    shape = (24, 24)
    medium = {"density": 1000.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5}
    q = np.zeros(shape)
    q[12, 12] = 1e46  # [W/m^3]
    return st.KWaveGrid(shape, 1e-3), medium, {"T0": 37.0, "Q": q}


def test_heat_overflow_raises():
    """The heat scheme refuses a dt beyond its stability limit before the run (ProblemError);
    what is left to blow up is an overflow."""
    grid, medium, source = overflowing_heat()
    kd = KWaveDiffusion(grid, medium, source, dtype="float32")
    with pytest.raises(SimulationDiverged) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's overflow in the cast to float32
        kd.take_time_step(20, 0.5)
    err = e.value
    assert err.model == "heat model" and "T" in err.fields and err.first == 1
    assert str(err).startswith("heat model: NaN or Inf in T")
    assert "stability limit: no limit" in str(err) and "source power Q" in str(err)


def test_traced_heat_run_is_checked_at_its_end():
    grid, medium, source = overflowing_heat()
    with pytest.raises(SimulationDiverged, match=r"time steps 1-20 of 20") as e:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bioheat(grid, medium, source, 20, 0.5, dtype="float32")
    assert e.value.model == "heat model"


@pytest.mark.parametrize("vectorize", ["loop", "vmap"])
def test_simulate_many_names_the_run_that_diverged(vectorize):
    from sonotile.api.batches import simulate_many

    grid, _, src, sensor = acoustic(3 * DX / C, 400)
    fast = st.KWaveMedium(sound_speed=C, density=1000.0)  # c_ref = max c0: always stable
    slow_ref = st.KWaveMedium(sound_speed=C, density=1000.0, sound_speed_ref=0.5 * C)
    with pytest.raises(SimulationDiverged) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        simulate_many(grid, [fast, slow_ref], src, sensor, vectorize=vectorize, pml_size=10,
                      smooth_p0=False)  # fmt: skip
    assert str(e.value).startswith("simulate_many run 1: acoustic model: NaN or Inf in p")
    assert e.value.last < 400


def test_demo_and_heat_commands_exit_non_zero_with_the_message(monkeypatch, tmp_path, capsys):
    from sonotile.commands import demo, heat
    from sonotile.commands.cli import main

    monkeypatch.setattr(demo, "setup", lambda size: acoustic(3 * DX / C, 400))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the stability warnings
        assert main(["demo", "--size", "32", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "sonotile demo: error: acoustic model: NaN or Inf in p" in err and "CFL number 3," in err
    assert not (tmp_path / "results.h5").exists()

    def overflowing(*args: object, **kw: object) -> None:
        kd = KWaveDiffusion(*overflowing_heat(), dtype="float32")
        kd.take_time_step(20, 0.5)

    monkeypatch.setattr(heat, "heat_from_result", overflowing)
    (tmp_path / "any.h5").write_bytes(b"")  # the command checks the path before the run
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = main(["heat", str(tmp_path / "any.h5"), "--duration", "10"])
    assert status == 1
    assert "sonotile heat: error: heat model: NaN or Inf in T" in capsys.readouterr().err


def test_make_simulator_call_is_checked_outside_a_trace():
    import jax

    grid, medium, src, sensor = acoustic(3 * DX / C, 400)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = st.make_simulator(grid, medium, src, sensor, pml_size=10, smooth_p0=False)
    with pytest.raises(
        SimulationDiverged, match=r"^acoustic model: NaN or Inf in p.*CFL number 3,"
    ):
        sim()
    traced = jax.jit(lambda p: sim(p)["p_final"])(sim.params)  # inside a trace: not checked
    assert not np.all(np.isfinite(traced))
