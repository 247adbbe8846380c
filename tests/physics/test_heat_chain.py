"""The acoustic-to-thermal chain: a CW run of a focused arc in soft tissue, saved, then heated
from the file (Python call and ``sonotile heat``): the focal rise follows the absorbed power."""

from __future__ import annotations

import math
import os

import h5py
import numpy as np
import pytest

import sonotile as st
from sonotile.api.heating.sonication import heat_from_result, source_from_result
from sonotile.commands.cli import main
from sonotile.physics.heat import acoustic_heat_source

F0, C0, RHO, ALPHA, Y = 1e6, 1510.0, 1020.0, 0.75, 1.5  # k-Wave's heating example
N, DX = 64, 0.25e-3


@pytest.fixture(scope="module")
def cw_result(tmp_path_factory: pytest.TempPathFactory) -> str:
    grid = st.KWaveGrid((N, N), DX)
    grid.dt = 0.3 * DX / C0
    grid.nt = round(2.2 * math.hypot(N, N) * DX / C0 / grid.dt)
    med = st.KWaveMedium(sound_speed=C0, density=RHO, alpha_coeff=ALPHA, alpha_power=Y)
    arc = st.make_arc((N, N), (1, N // 2), 30, 45, (N // 2, N // 2))  # grid points
    src = st.KSource(p_mask=arc, p=st.create_cw_signals(grid.t, F0, np.array([0.5e6]),
                                                        np.array([0.0]))[0])  # fmt: skip
    sensor = st.KSensor(record=("p_cw_all",), cw_frequency=F0, cw_periods=3,
                        mask=np.ones((N, N), bool))  # fmt: skip
    path = str(tmp_path_factory.mktemp("chain") / "cw.h5")
    st.simulate(grid, med, src, sensor, pml_inside=False, quiet=True).save(path)
    return path


def test_focal_rise_is_absorbed_power_times_time(cw_result: str) -> None:
    """A short sonication raises the focus by Q t / (rho C), with Q = alpha p^2 / (rho c)
    worked out here from the stored pressure amplitude (0.75 dB/cm at 1 MHz = 8.635 Np/m)."""
    p = st.load_results(cw_result)["p_cw_amp_all"]
    focus = np.unravel_index(np.argmax(p), p.shape)
    alpha = 0.75 * 100 / (20 / math.log(10))  # dB/cm -> Np/m
    q_focus = alpha * p[focus] ** 2 / (RHO * C0)
    run = heat_from_result(cw_result, duration=0.02, dt=0.002)
    rise = run.data["T"][focus] - 37.0
    want = q_focus * 0.02 / (RHO * 3600.0)
    assert abs(focus[0] - N // 2) < 6 and abs(focus[1] - N // 2) <= 1  # the arc's focus
    assert 0.97 * want < rise < want  # diffusion takes a little away (D t / w^2 ~ 1 %)
    assert tuple(run.data["focus"]) == focus


def test_coarser_thermal_grid_keeps_the_power(cw_result: str) -> None:
    Q, spacing, _ = source_from_result(cw_result)
    Q2, spacing2, _ = source_from_result(cw_result, coarsen=2)
    assert spacing2 == (2 * DX, 2 * DX) and Q2.shape == (N // 2, N // 2)
    assert Q2.sum() * 4 * DX * DX == pytest.approx(Q.sum() * DX * DX, rel=1e-12)


def test_heat_command_writes_temperature_dose_and_lesion(cw_result: str, tmp_path) -> None:
    out = str(tmp_path / "heat.h5")
    args = ["heat", cw_result, "--duration", "4", "--on", "2", "--dt", "0.05", "-o", out]
    assert main(args) == 0
    with h5py.File(out) as f:
        h = f["heat"]
        units = {k: h[k].attrs["units"] for k in h}
        assert units["T"] == "degC" and units["cem43"] == "min" and units["Q"] == "W/m^3"
        T_heated, T_end, T_focus = h["T_heated"][()], h["T"][()], h["T_focus"][()]
        focus = tuple(h["focus"][()])
        assert h["T_max"][()][focus] == pytest.approx(T_focus.max(), rel=1e-12)
        assert h["lesion_map"].dtype == bool and h.attrs["on"] == pytest.approx(2.0)
    assert T_heated.max() > T_end.max() > 37.0  # it cooled after the source went off
    assert int(np.argmax(T_focus)) == 39  # the last step with the source on
    assert main(["heat", cw_result, "--duration", "1", "--quantity", "p_max_all"]) == 2
    png = tmp_path / "heat.png"
    assert main(["plot", out, "--out", str(png)]) == 0  # temperature, dose, focal history
    pngs = [png, tmp_path / "heat_2.png", tmp_path / "heat_3.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" and p.stat().st_size > 10_000 for p in pngs)


def _heat_file(path: str) -> dict:
    with h5py.File(path) as f:
        return {k: f["heat"][k][()] for k in f["heat"]}


def test_heat_command_stopped_and_resumed_equals_one_piece(cw_result: str, tmp_path,
                                                            capsys) -> None:  # fmt: skip
    """``--checkpoint``: a run stopped twice (once while heating, once while cooling, the
    temperature at the end of the heating kept), each time rerun with the same command, writes
    the same file bit for bit as the run in one piece, and removes its state; a state of other
    inputs is refused naming them; a file that is not a state is never written over."""
    base = ["heat", cw_result, "--duration", "4", "--on", "2", "--dt", "0.05",
            "--perfusion", "0.01"]  # fmt: skip
    whole, out, ck = (str(tmp_path / n) for n in ("whole.h5", "out.h5", "state.npz"))
    assert main([*base, "-o", whole]) == 0
    cmd = [*base, "-o", out, "--checkpoint", ck]
    for step in (25, 50):  # 40 steps heat, 40 cool
        assert main([*cmd, "--checkpoint_steps", "25"]) == 0
        assert f"after step {step} of 80" in capsys.readouterr().out
        assert os.path.exists(ck) and not os.path.exists(out)
    assert main(cmd) == 0 and not os.path.exists(ck)
    one, resumed = _heat_file(whole), _heat_file(out)
    assert set(one) == set(resumed)
    for k, v in one.items():
        assert np.array_equal(resumed[k], v), k
    assert main([*cmd, "--checkpoint_steps", "10"]) == 0
    capsys.readouterr()
    for change, name in ((["--on", "1"], "schedule"), (["--conductivity", "0.6"], "medium"),
                         (["--duration", "3"], "time axis"),
                         (["--float32"], "grid")):  # fmt: skip
        assert main([*cmd, *change]) == 2
        assert f"saved by a run with another {name}" in capsys.readouterr().err
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    never = str(tmp_path / "never.h5")
    assert main([*base, "-o", never, "--checkpoint", str(other)]) == 2
    assert "not a sonotile run state" in capsys.readouterr().err
    assert other.read_text() == "mine" and not os.path.exists(never)
    assert main([*base, "-o", never, "--checkpoint_steps", "3"]) == 2
    assert "need --checkpoint" in capsys.readouterr().err


def test_heat_command_on_a_pencil_mesh_equals_one_device(cw_result: str, tmp_path) -> None:
    """``--decomposition pencil`` runs the same steps through the mesh engine (here a mesh of
    the one device there is: its transposes and sharded operators, the same numbers)."""
    outs = []
    for extra in ([], ["--decomposition", "pencil", "--mesh", "1"]):
        out = str(tmp_path / f"heat{len(extra)}.h5")
        assert main(["heat", cw_result, "--duration", "0.5", "--dt", "0.05", "-o", out,
                     *extra]) == 0  # fmt: skip
        with h5py.File(out) as f:
            outs.append({k: f["heat"][k][()] for k in ("T", "T_max", "cem43", "T_focus")})
    for k, v in outs[0].items():
        assert np.allclose(outs[1][k], v, rtol=1e-13, atol=0), k
    assert outs[0]["T_max"].max() > 37.0


@pytest.mark.slow
def test_gradient_through_acoustics_and_heat(jax_float64: None) -> None:
    """d(focal temperature rise)/d(source amplitude, absorption) through a differentiable CW
    acoustic run (make_simulator, the steady-state amplitude p_cw_amp_all over the last
    periods), Q = alpha p^2 / (rho c) and the heat model, against central differences
    (float64)."""
    import jax
    import jax.numpy as jnp

    from sonotile.api.heating.bioheat import bioheat

    n, dx = 32, 0.3e-3
    grid = st.KWaveGrid((n, n), dx)
    grid.dt = 0.3 * dx / C0
    grid.nt = round(1.6 * n * dx / C0 / grid.dt)
    src_mask = np.zeros((n, n), bool)
    src_mask[3, n // 2 - 5 : n // 2 + 6] = True
    signal = st.create_cw_signals(grid.t, F0, np.array([1e5]), np.array([0.0]))[0]
    sim = st.make_simulator(
        grid, st.KWaveMedium(sound_speed=C0, density=RHO, alpha_coeff=ALPHA, alpha_power=Y),
        st.KSource(p_mask=src_mask, p=signal),
        st.KSensor(mask=np.ones((n, n), bool), record=("p_cw_all",), cw_frequency=F0,
                   cw_periods=3),  # the steady part: the amplitude over the last 3 periods
        dtype="float64", pml_inside=False,
    )  # fmt: skip
    medium = {"density": RHO, "specific_heat": 3600.0, "thermal_conductivity": 0.5}
    focus = (n // 2, n // 2)

    def rise(params: dict) -> jax.Array:
        p = sim({"p": params["amp"] * jnp.asarray(signal), "alpha_coeff": params["alpha"]})
        Q = acoustic_heat_source(p["p_cw_amp_all"], params["alpha"], Y, F0, RHO, C0)
        return bioheat(grid, medium, {"T0": 37.0, "Q": Q}, 20, 0.01).T[focus] - 37.0

    x0 = {"amp": jnp.asarray(1.0), "alpha": jnp.asarray(ALPHA)}
    g = jax.grad(rise)(x0)
    for name, h in (("amp", 1e-3), ("alpha", 1e-3)):
        up, down = dict(x0), dict(x0)
        up[name], down[name] = x0[name] + h, x0[name] - h
        fd = (float(rise(up)) - float(rise(down))) / (2 * h)
        assert float(g[name]) == pytest.approx(fd, rel=1e-5), name
    assert float(g["amp"]) == pytest.approx(2 * float(rise(x0)), rel=1e-9)  # rise ~ amp^2


def test_heat_command_in_an_insulated_box(cw_result: str, tmp_path) -> None:
    """``--boundary insulating``: the heat content (trapezoid sum, the faces on the edge
    points) at the end of the heating is what the source put in, to round-off."""
    out = str(tmp_path / "box.h5")
    args = ["heat", cw_result, "--duration", "0.5", "--on", "0.3", "--dt", "0.05",
            "--boundary", "insulating", "-o", out]  # fmt: skip
    assert main(args) == 0
    with h5py.File(out) as f:
        Q, T_heated = f["heat"]["Q"][()], f["heat"]["T_heated"][()]
    w = np.ones(Q.shape)
    w[[0, -1], :] *= 0.5
    w[:, [0, -1]] *= 0.5
    put_in = 6 * 0.05 * np.sum(w * Q) / (RHO * 3600.0)
    assert np.sum(w * (T_heated - 37.0)) == pytest.approx(put_in, rel=1e-12)
