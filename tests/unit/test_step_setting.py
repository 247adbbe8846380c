"""The stacked step in the program users run (``SONOTILE_STEP``, :mod:`sonotile.solver.stepping`):
``simulate`` and ``sonotile-kwave`` with ``stacked`` forced on the CPU (its transforms on
``jnp.fft``) give the plain step's results to float32 round-off; a problem it cannot take is
refused, naming the setting, before any step; ``auto`` keeps the plain step on a CPU."""

from __future__ import annotations

import dataclasses
import json

import h5py
import jax
import numpy as np
import pytest
from paths import REFERENCE

import sonotile as st
from sonotile.base import config
from sonotile.bench.inprocess import bench_problem
from sonotile.kwave.compare import tolerances
from sonotile.model.problem import MaskSource, Sources
from sonotile.parallel.decomposition import Decomposition
from sonotile.physics.acoustic.stacked_step import StackedLoop
from sonotile.solver import runner, stepping

N, NT = 24, 40
#: float32 round-off of sums taken in another order, relative to each quantity's peak
TOL = 2e-5
#: on k-Wave's reference inputs, at least this many times k-Wave's own run-to-run spread of each
#: dataset (``case.json``): two float32 programs whose FFT plans each move their output by that
#: much differ by up to twice it (the velocity-source case's ux and uy series: 2.0-2.3e-5, so
#: the plain step alone lands either side of TOL with the plans a process has made before)
SPREADS = 2.0
#: the same for a final field that is a small residue of the wave (3d_het_absorb15...: 1.1e-4,
#: as far as the plain step on FFTW lands from the plain step on XLA's FFT, 1.3e-4)
FINAL_TOL = 3e-4


@pytest.fixture
def step_setting():
    """``set(choice)`` installs ``Settings.step``; ``chosen`` lists what the engines picked."""
    saved = config.current()
    chosen: list = []
    real = stepping.choose

    def spy(*args, **kwargs):
        chosen.append(real(*args, **kwargs))
        return chosen[-1]

    stepping_choose = pytest.MonkeyPatch()
    stepping_choose.setattr(stepping, "choose", spy)

    class Setting:
        def set(self, choice: str) -> None:
            config.configure(saved, step=choice)

    s = Setting()
    s.chosen = chosen  # type: ignore[attr-defined]
    yield s
    stepping_choose.undo()
    config.configure(saved)


def _medium(absorbing: bool) -> st.KWaveMedium:
    if not absorbing:
        return st.KWaveMedium(1500.0, 1000.0)
    x = np.linspace(0, 1, N)[:, None, None] * np.ones((N, N, N))
    return st.KWaveMedium(1500.0 + 100 * x, 1000.0 + 200 * x, alpha_coeff=0.75, alpha_power=1.5,
                          BonA=6.0)  # fmt: skip


def _source(kind: str) -> st.KSource:
    if kind == "p0":
        ax = np.arange(N) - N / 2
        r2 = ax[:, None, None] ** 2 + ax[None, :, None] ** 2 + ax[None, None, :] ** 2
        return st.KSource(p0=1e5 * np.exp(-r2 / 6))
    mask = np.zeros((N, N, N), bool)
    mask[9, 11, 12] = True
    t = np.arange(NT)
    return st.KSource(p=1e5 * np.sin(0.4 * t) * (t < 25), p_mask=mask, p_mode="additive")


def _simulate(kind: str, absorbing: bool) -> dict[str, np.ndarray]:
    mask = np.zeros((N, N, N), bool)
    mask[14, 6:18, 10] = True
    res = st.simulate(
        st.KWaveGrid((N, N, N), 1e-4, dt=2e-8, nt=NT), _medium(absorbing), _source(kind),
        st.KSensor(mask=mask, record=("p", "u", "p_max_all", "p_final", "u_final")),
        pml_size=4, progress=False, dtype="float32",
    )  # fmt: skip
    return {k: np.asarray(v) for k, v in res.data.items()}


@pytest.mark.parametrize("absorbing", [False, True], ids=["lossless", "absorbing"])
@pytest.mark.parametrize("kind", ["p0", "point"])
def test_simulate_stacked_equals_plain(step_setting, kind, absorbing):
    """Time series of p and u at 12 points, the whole-grid maximum and the final fields."""
    step_setting.set("plain")
    ref = _simulate(kind, absorbing)
    step_setting.set("stacked")
    got = _simulate(kind, absorbing)
    plain, stacked = step_setting.chosen
    assert plain is None and type(stacked).__name__ == "StackedLoop"
    assert stacked.phys.absorption == ("power_law" if absorbing else "lossless")
    assert set(got) == set(ref) >= {"p", "ux", "uz", "p_max_all", "p_final", "uy_final"}
    for name, a in ref.items():
        peak = np.abs(a).max()
        assert peak > 0, name
        assert np.abs(got[name] - a).max() <= TOL * peak, name


def test_simulate_many_vmapped_stacked_equals_plain(step_setting, monkeypatch):
    """``simulate_many(vectorize="vmap")``: two runs (media and k-space filtered velocity
    sources of their own) as one vectorised program take the stacked step, each equal to the
    plain step's run."""
    mask = np.zeros((N, N, N), bool)
    mask[9, 11, 12] = True
    t = np.arange(NT)
    sources = [st.KSource(ux=a * np.sin(w * t) * (t < 25), u_mask=mask, u_mode="additive")
               for a, w in ((0.1, 0.4), (0.05, 0.3))]  # fmt: skip
    sensor = st.KSensor(mask=np.roll(mask, 3, axis=0), record=("p", "u", "p_max_all"))
    grid = st.KWaveGrid((N, N, N), 1e-4, dt=2e-8, nt=NT)
    x = np.linspace(0, 1, N)[:, None, None] * np.ones((N, N, N))
    media = [_medium(True), st.KWaveMedium(1500.0 - 80 * x, 1000.0 - 90 * x, alpha_coeff=0.5,
                                           alpha_power=1.5, BonA=6.0)]  # fmt: skip
    stacked_chunks = []
    real = runner.run_stacked_chunk
    monkeypatch.setattr(runner, "run_stacked_chunk",
                        lambda *a: stacked_chunks.append(1) or real(*a))  # fmt: skip
    runs = {}
    for choice in ("plain", "stacked"):
        step_setting.set(choice)
        runs[choice] = st.simulate_many(grid, media, sources, sensor, vectorize="vmap",
                                        pml_size=4, dtype="float32")  # fmt: skip
    assert step_setting.chosen[0] is None
    assert type(step_setting.chosen[-1]).__name__ == "StackedLoop" and stacked_chunks
    for ref, got in zip(runs["plain"], runs["stacked"], strict=True):
        for name in ("p", "ux", "p_max_all"):
            a = np.asarray(ref.data[name])
            peak = np.abs(a).max()
            assert peak > 0, name
            assert np.abs(np.asarray(got.data[name]) - a).max() <= TOL * peak, name


def test_auto_keeps_the_plain_step_on_a_cpu(step_setting):
    step_setting.set("auto")
    engine = runner.single_engine(bench_problem("lossless", 12, 4))
    assert step_setting.chosen == [None] and "stacked" not in engine.describe
    step_setting.set("stacked")
    engine = runner.single_engine(bench_problem("lossless", 12, 4))
    assert engine.describe.endswith(", stacked step")


def _velocity_source(problem):
    src = MaskSource(np.array([[5, 6, 7]]), np.ones(4, np.float32), "additive_no_correction")
    return dataclasses.replace(problem, sources=Sources(u=(src, None, None)))


def test_auto_on_a_gpu_takes_the_stacked_step_on_the_cufft_calls(monkeypatch):
    """``auto`` on a GPU (the platform's name faked): the plain step on XLA's FFT, the stacked
    step where the operators' FFT is the cuFFT calls (named, as a resolved run records it),
    for a velocity source as for a pressure source."""
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    auto, forced = config.Settings(step="auto"), config.Settings(step="stacked")
    cp = runner.compile_problem(bench_problem("lossless", 12, 4))
    assert stepping.choose(cp.phys, cp.ops, auto) is None  # XLA's FFT: not measured
    assert stepping.choose(cp.phys, cp.ops, forced) == StackedLoop(cp.phys, "xla")
    on_cufft = dataclasses.replace(cp.ops, fft="cufft")
    assert stepping.choose(cp.phys, on_cufft, auto) == StackedLoop(cp.phys, "cufft")
    assert stepping.choose(cp.phys, cp.ops, config.Settings(step="plain")) is None
    vel = runner.compile_problem(_velocity_source(bench_problem("lossless", 12, 4)))
    vel_cufft = dataclasses.replace(vel.ops, fft="cufft")
    assert stepping.choose(vel.phys, vel_cufft, auto) == StackedLoop(vel.phys, "cufft")


def _axisymmetric_run() -> None:
    grid = st.KWaveGrid((32, 16), 1e-4, dt=2e-8, nt=8)
    p0 = np.zeros((32, 16))
    p0[14:18, :3] = 1e5
    st.simulate(grid, st.KWaveMedium(1500.0, 1000.0), st.KSource(p0=p0),
                st.KSensor(mask=p0 > 0), pml_size=4, axisymmetric=True, quiet=True)  # fmt: skip


def test_an_axisymmetric_run_is_refused_before_any_step(step_setting, monkeypatch):
    """``stacked`` forced on a problem it cannot take (the radial transforms of an axisymmetric
    grid): ValueError naming the setting and why, raised while the engine is made (no step
    traced)."""
    traced = []
    monkeypatch.setattr(runner, "scan_body", lambda *a, **k: traced.append(1))
    step_setting.set("stacked")
    with pytest.raises(ValueError, match="SONOTILE_STEP=stacked: .*radial transforms"):
        _axisymmetric_run()
    assert traced == []


def test_a_decomposed_run_refuses_the_stacked_step(step_setting):
    from sonotile.parallel.engine import decomposed_engine

    step_setting.set("stacked")
    with pytest.raises(ValueError, match="SONOTILE_STEP=stacked: .*one device, not in a pencil"):
        decomposed_engine(bench_problem("lossless", 12, 4), Decomposition.PENCIL, (1,))


def _kwave(case: str, out, extra: tuple[str, ...] = ()) -> int:
    from sonotile.kwave.cli import main as kwave_main

    folder = REFERENCE / case
    flags = json.loads((folder / "case.json").read_text())["flags"]
    return kwave_main(["-i", str(folder / "input.h5"), "-o", str(out), *flags, *extra])


def _datasets(path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}

    def take(name: str, obj: object) -> None:
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f":
            out[name] = np.asarray(obj)

    with h5py.File(path, "r") as f:
        f.visititems(take)
    return out


@pytest.mark.parametrize("case", [
    "3d_het_absorb15_nonlin_hetbona_p0_index",  # initial value, heterogeneous, absorbing
    "3d_homog_nonlin_psrc_addnocorr_single_cuboid_s40",  # a point pressure source, lossless
    "2d_het_nonlin_psrc_additive_many_index",  # k-space filtered sources, a signal per point
    "3d_homog_absorb11_usrc_xyz_addnocorr_many_index",  # velocity sources on ux, uy and uz
    "2d_homog_absorb11_usrc_xy_additive_index",  # velocity sources, k-space filtered
])  # fmt: skip
def test_sonotile_kwave_stacked_equals_plain(step_setting, tmp_path, case):
    """Every dataset of k-Wave reference inputs' outputs; the stacked run's provenance says
    which step ran."""
    step_setting.set("plain")
    assert _kwave(case, tmp_path / "plain.h5") == 0
    step_setting.set("stacked")
    assert _kwave(case, tmp_path / "stacked.h5") == 0
    ref, got = _datasets(tmp_path / "plain.h5"), _datasets(tmp_path / "stacked.h5")
    assert {"p", "p/1"} & set(ref) and set(got) == set(ref)
    _, spread = tolerances(json.loads((REFERENCE / case / "case.json").read_text()))
    for name, a in ref.items():
        peak = np.abs(a).max()
        if peak == 0:
            continue
        tol = FINAL_TOL if name.endswith("_final") else TOL
        tol = max(tol, SPREADS * spread.get(name.split("/")[0], 0.0))
        assert np.abs(got[name] - a).max() <= tol * peak, name
    with h5py.File(tmp_path / "stacked.h5", "r") as f:
        assert f.attrs["sonotile_decomposition"].decode().endswith(", stacked step")


def test_sonotile_kwave_refuses_an_axisymmetric_input(step_setting, tmp_path, capsys):
    step_setting.set("stacked")
    out = tmp_path / "out.h5"
    assert _kwave("2d_axisym_homog_lossless_p0_index", out) == 1
    err = capsys.readouterr().err
    assert "sonotile-kwave: error: SONOTILE_STEP=stacked" in err and "radial transforms" in err
    assert not out.exists()
