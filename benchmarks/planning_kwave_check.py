"""The synthetic-head plan run by k-Wave's C++ solver and by sonotile on the same input file.

The problem of ``planning_phantom.py`` (the phantom at 1 mm, Aubry 2003 mapping, a 64 mm bowl
focused 30 mm above the head's centre, CW at ``--f0``) is built through the Python API, exported
as a k-Wave input file (``sonotile.kwave.writer.write_input``) and run by both programs with the
same flags (``--p_max`` over the last 4 periods, ``-s`` the first recorded step). Reported:
each program's focal pressure (the maximum from 30 mm before the target on), its position, the
relative difference of the focal pressures, the distance between the two foci and the relative
L2 difference of the whole ``p_max`` fields.

Run (k-Wave's ``kspaceFirstOrder-OMP`` 1.3 built from its public source)::

    PYTHONPATH=src .venv/bin/python benchmarks/planning_kwave_check.py \
        --kwave_binary PATH --medium skull
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

import sonotile as st
import sonotile.planning as sp
from sonotile.api.problem import build_problem
from sonotile.api.types import Options
from sonotile.kwave.writer import write_input

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from planning_phantom import bowl_source, focus  # noqa: E402


def problem_file(path: str, f0: float, ppw: float, medium_name: str) -> tuple:
    """Write the plan's k-Wave input file; the beam grid, the target and the first recorded
    step (1-based, k-Wave's ``-s``)."""
    ct = sp.head_phantom((160, 196, 170), 1.0, seed=0)
    maps = sp.tissue_properties(ct.hu, "aubry2003", frequency=f0)
    target = np.array([0.0, 10.0, 30.0])
    entry = target + 70 * np.array([0.2, 0.1, 1.0]) / np.linalg.norm([0.2, 0.1, 1.0])
    pose = sp.Pose.from_target_entry(target, entry, focal_length_mm=64.0)
    grid = sp.beam_grid(pose, target, f0, points_per_wavelength=ppw)
    if medium_name == "water":
        medium = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    else:
        medium = sp.kwave_medium(sp.resample_maps(maps, ct, grid))
    dx = grid.spacing_mm * 1e-3
    kgrid = st.KWaveGrid(grid.shape, dx)
    kgrid.dt = 0.3 * dx / float(np.max(medium.sound_speed))
    kgrid.nt = int(160e-6 / kgrid.dt)
    start = kgrid.nt - int(4 / f0 / kgrid.dt)
    # cuboid: the whole interior, recorded as one block (k-Wave's p_max over a cuboid)
    sensor = st.KSensor(mask=np.ones(grid.shape, bool), record=("p_max",), record_start_index=start)
    options = Options(**grid.options())
    problem, _ = build_problem(kgrid, medium, bowl_source(kgrid, grid, pose, target, f0),
                               sensor, options)  # fmt: skip
    write_input(path, problem, description="synthetic-head plan")
    return grid, start


def run(cmd: list[str]) -> float:
    """Run a solver to completion [s of wall time]; fail loudly."""
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kwave_binary", required=True)
    ap.add_argument("--f0", type=float, default=250e3)
    ap.add_argument("--ppw", type=float, default=4.0)
    ap.add_argument("--medium", choices=("skull", "water"), default="skull")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "plan.h5")
        grid, start = problem_file(inp, args.f0, args.ppw, args.medium)
        print(f"{args.medium}: grid {grid.shape} (+PML {grid.total_shape}), start step {start}")
        flags = ["-i", inp, "--p_max", "-s", str(start), "-t", str(args.threads)]
        fields = {}
        for name, exe in (("k-Wave", [args.kwave_binary]), ("sonotile", ["sonotile-kwave"])):
            out = os.path.join(tmp, f"{name}.h5")
            secs = run([*exe, *flags, "-o", out])
            with h5py.File(out, "r") as f:
                fields[name] = np.asarray(f["p_max"], np.float64).reshape(grid.shape, order="F")
            i = focus(fields[name], grid)
            print(f"{name}: focal p {fields[name][i] / 1e3:.2f} kPa at index {i}, "
                  f"{grid.world(i).round(2)} mm, {secs:.1f} s")  # fmt: skip
    kw, so = fields["k-Wave"], fields["sonotile"]
    ik, is_ = focus(kw, grid), focus(so, grid)
    print(f"focal pressure sonotile / k-Wave - 1: {so[is_] / kw[ik] - 1:+.2e}")
    print(f"focus distance: {np.linalg.norm(grid.world(ik) - grid.world(is_)):.2f} mm")
    print(f"p_max relative L2 difference: {np.linalg.norm(so - kw) / np.linalg.norm(kw):.2e}")


if __name__ == "__main__":
    main()
