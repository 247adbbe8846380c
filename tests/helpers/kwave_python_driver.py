"""Run inside .venv-kwave-python (k-wave-python's own environment, not sonotile's): a small
2-D and a small 3-D simulation through k-wave-python's C++ pipeline (kspaceFirstOrder2DC /
kspaceFirstOrder3DC), whose "binary" is sonotile-kwave (see scripts/kwave_python_env.sh).

Usage: python kwave_python_driver.py <2d|3d> <workdir>. Writes <workdir>/result.npz with the
sensor data k-wave-python returned; keeps k-wave-python's input/output files in <workdir>.
"""

import sys
from pathlib import Path

import numpy as np
from kwave.data import Vector
from kwave.kgrid import kWaveGrid
from kwave.kmedium import kWaveMedium
from kwave.ksensor import kSensor
from kwave.ksource import kSource
from kwave.kspaceFirstOrder2D import kspaceFirstOrder2DC
from kwave.kspaceFirstOrder3D import kspaceFirstOrder3DC
from kwave.kspaceFirstOrderAS import kspaceFirstOrderASC
from kwave.options.simulation_execution_options import SimulationExecutionOptions
from kwave.options.simulation_options import SimulationOptions, SimulationType
from kwave.utils.kwave_array import kWaveArray
from kwave.utils.mapgen import make_ball, make_disc
from kwave.utils.signals import create_cw_signals, tone_burst


def options(work: Path, name: str, **kw):
    sim = SimulationOptions(
        pml_inside=False,
        pml_size=10,
        **kw,
        data_path=str(work),
        input_filename=f"{name}_input.h5",
        output_filename=f"{name}_output.h5",
        save_to_disk=True,
    )
    ex = SimulationExecutionOptions(
        is_gpu_simulation=False, num_threads=1, delete_data=False, show_sim_log=False
    )
    return sim, ex


def case_2d(work: Path) -> dict:
    """Homogeneous lossless medium, initial-pressure disc, 8 point sensors on a line."""
    n, dx = 44, 1e-4
    kgrid = kWaveGrid(Vector([n, n]), Vector([dx, dx]))
    medium = kWaveMedium(sound_speed=1500.0, density=1000.0)
    kgrid.makeTime(medium.sound_speed, cfl=0.3, t_end=4e-6)
    source = kSource()
    source.p0 = 2.0 * make_disc(Vector([n, n]), Vector([n // 2, n // 2]), 4).astype(float)
    mask = np.zeros((n, n), bool)
    mask[n // 2, 4 : n - 4 : 5] = True
    sensor = kSensor(mask)
    sensor.record = ["p", "p_max", "p_final"]
    sim, ex = options(work, "k2d")
    data = kspaceFirstOrder2DC(kgrid, source, sensor, medium, sim, ex)
    return {
        "p": data["p"],
        "p_max": data["p_max"],
        "p_final": data["p_final"],
        "dt": kgrid.dt,
        "Nt": kgrid.Nt,
        "c0": 1500.0,
        "dx": dx,
    }


def case_3d(work: Path) -> dict:
    """Absorbing nonlinear medium with a density step, time-varying pressure source (ball),
    sensors on a line, recording p, p_rms and u_non_staggered."""
    n, dx = 22, 2e-4
    kgrid = kWaveGrid(Vector([n, n, n]), Vector([dx, dx, dx]))
    rho = 1000.0 * np.ones((n, n, n))
    rho[:, :, n // 2 + 4 :] = 1200.0
    medium = kWaveMedium(
        sound_speed=1500.0, density=rho, alpha_coeff=0.75, alpha_power=1.5, BonA=6.0
    )
    kgrid.makeTime(medium.sound_speed, cfl=0.3, t_end=3e-6)
    source = kSource()
    source.p_mask = make_ball(Vector([n, n, n]), Vector([n // 2, n // 2, 6]), 2)
    source.p = 1e5 * tone_burst(1 / kgrid.dt, 1.5e6, 2)
    mask = np.zeros((n, n, n), bool)
    mask[n // 2, n // 2, 8 : n - 2 : 3] = True
    sensor = kSensor(mask)
    sensor.record = ["p", "p_rms", "u_non_staggered"]
    sim, ex = options(work, "k3d")
    data = kspaceFirstOrder3DC(kgrid, source, sensor, medium, sim, ex)
    return {
        "p": data["p"],
        "p_rms": data["p_rms"],
        "uz_non_staggered": data["uz_non_staggered"],
        "dt": kgrid.dt,
        "Nt": kgrid.Nt,
    }


def case_as(work: Path) -> dict:
    """k-wave-python's example at_circular_piston_AS, smaller: a CW piston (a line element across
    the axis in kWaveArray(axisymmetric=True)) through kspaceFirstOrderASC; p over the grid for
    the last period."""
    c0, f0, diam, ppw, cfl = 1500.0, 1e6, 6e-3, 3, 0.1
    dx = c0 / (ppw * f0)
    nx, ny = 40, 12
    kgrid = kWaveGrid(Vector([nx, ny]), Vector([dx, dx]))
    ppp = round(ppw / cfl)
    dt = 1.0 / (ppp * f0)
    nt = round(((nx * dx) * 1.2 / c0 + 6 / f0) / dt)
    kgrid.setTime(nt, dt)
    sig = create_cw_signals(np.squeeze(kgrid.t_array), f0, np.array([1e6]), np.array([0.0]))
    karray = kWaveArray(axisymmetric=True, bli_tolerance=0.05, upsampling_rate=10,
                        single_precision=True)  # fmt: skip
    x0 = kgrid.x_vec[0].item()
    karray.add_line_element([x0, -diam / 2.0], [x0, diam / 2.0])
    source = kSource()
    source.p_mask = karray.get_array_binary_mask(kgrid)
    source.p = karray.get_distributed_source_signal(kgrid, sig)
    sensor = kSensor(np.ones((nx, ny), dtype=bool))
    sensor.record = ["p"]
    sensor.record_start_index = nt - ppp + 1
    sim, ex = options(work, "kas", simulation_type=SimulationType.AXISYMMETRIC)
    data = kspaceFirstOrderASC(medium=kWaveMedium(sound_speed=c0, density=1000.0), kgrid=kgrid,
                               source=source, sensor=sensor, simulation_options=sim,
                               execution_options=ex)  # fmt: skip
    return {"p": data["p"], "dt": dt, "Nt": nt, "dx": dx, "f0": f0, "diam": diam, "c0": c0,
            "Nx": nx, "Ny": ny}  # fmt: skip


if __name__ == "__main__":
    which, work = sys.argv[1], Path(sys.argv[2])
    result = {"2d": case_2d, "3d": case_3d, "as": case_as}[which](work)
    np.savez(work / "result.npz", **{k: np.asarray(v) for k, v in result.items()})
    print("ok", {k: np.shape(v) for k, v in result.items()})
