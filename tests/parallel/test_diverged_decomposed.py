"""An unstable run on a mesh of 2 virtual CPU devices stops with SimulationDiverged as on one
device: the acoustic model on pencils and on local Fourier bases, the elastic and heat models on
pencils (one subprocess)."""

from __future__ import annotations

from devices import run_on_cpu_devices

SCRIPT = r"""
import json, warnings
import jax
import numpy as np
import sonotile as st
from sonotile.api.heating.bioheat import KWaveDiffusion
from sonotile.solver.finite import SimulationDiverged

assert len(jax.devices()) == 2, jax.devices()
warnings.simplefilter("ignore")
N, DX = 48, 1e-4
x = np.arange(N)
blob = np.exp(-((x[:, None] - N / 2) ** 2 + (x[None, :] - N / 2) ** 2) / 9.0)
mask = np.zeros((N, N), bool)
mask[N // 2, ::4] = True

def caught(run):
    try:
        run()
    except SimulationDiverged as e:
        return {"model": e.model, "fields": list(e.fields), "first": e.first, "last": e.last,
                "sampled": e.sampled, "nt": e.nt, "message": str(e)}
    return None

def acoustic(dec):
    grid = st.KWaveGrid((N, N), DX, dt=3 * DX / 1500.0, nt=3000)
    medium = st.KWaveMedium(sound_speed=1500.0, density=1000.0, alpha_coeff=50.0,
                            alpha_power=2.0, alpha_mode="stokes")
    st.simulate(grid, medium, st.KSource(p0=1e3 * blob), st.KSensor(mask=mask, record=("p",)),
                pml_size=8, smooth_p0=False, quiet=True, decomposition=dec, mesh=(2,))

def elastic():
    cp, cs, rho = np.full((N, N), 1500.0), np.full((N, N), 700.0), np.full((N, N), 1000.0)
    st.pstd_elastic_2d(st.KWaveGrid((N, N), DX, dt=2 * DX / 1500.0, nt=600),
                       st.KWaveElasticMedium(cp, cs, rho), st.ElasticSource(p0=blob),
                       st.KSensor(mask=mask, record=("p",)), pml_size=8,
                       decomposition="pencil", mesh_shape=(2,))

def heat():
    q = np.zeros((N, N))
    q[N // 2, N // 2] = 1e46
    medium = {"density": 1000.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5}
    kd = KWaveDiffusion(st.KWaveGrid((N, N), 1e-3), medium, {"T0": 37.0, "Q": q},
                        dtype="float32", decomposition="pencil", mesh_shape=(2,))
    kd.take_time_step(20, 0.5)

out = {"pencil": caught(lambda: acoustic("pencil")), "lfb": caught(lambda: acoustic("lfb")),
       "elastic": caught(elastic), "heat": caught(heat)}
print("RESULT" + json.dumps(out))
"""


def test_unstable_runs_raise_on_a_mesh():
    res = run_on_cpu_devices(SCRIPT, 2)
    for dec in ("pencil", "lfb"):
        e = res[dec]
        assert e is not None, f"{dec}: no error"
        assert e["model"] == "acoustic model" and "p" in e["fields"]
        assert 1 <= e["first"] <= e["sampled"] <= e["last"] < e["nt"]
        assert "CFL number 3," in e["message"], e["message"]
    e = res["elastic"]
    assert e is not None and e["model"] == "elastic model" and e["last"] < e["nt"]
    assert "CFL number max(c_p) dt / dx = 2," in e["message"]
    e = res["heat"]
    assert e is not None and e["model"] == "heat model" and "T" in e["fields"]
    assert e["first"] == 1 and "source power Q" in e["message"]
