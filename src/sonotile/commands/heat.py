"""``sonotile heat RESULT.h5``: temperature, thermal dose and lesion of a sonication from a CW
acoustic result (:func:`sonotile.api.heating.sonication.heat_from_result`).

With ``--checkpoint FILE`` a stopped run (a signal, ``--checkpoint_interval``,
``--checkpoint_steps``) saves its state and ends with status 0, as k-Wave's binaries do; the
same command goes on from the file and removes it when the run is complete."""

from __future__ import annotations

import argparse
import os
import sys

from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.api.heating.sonication import Tissue, heat_from_result
from sonotile.base.cliargs import Parser
from sonotile.model.problem import ProblemError
from sonotile.solver.finite import NonFiniteError


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="sonotile heat", description=__doc__.split("\n\n")[0])
    p.add_argument("result", help="sonotile result file (p_cw_amp_all or p_max_all)")
    p.add_argument("-o", "--output", help="output HDF5 (default RESULT-heat.h5)")
    p.add_argument("--duration", type=float, required=True, help="simulated time [s]")
    p.add_argument("--on", type=float, help="sonication time [s] (default: whole run)")
    p.add_argument("--dt", type=float, default=0.1, help="time step [s] (default 0.1)")
    p.add_argument("--period", type=float, help="pulse period [s] while on")
    p.add_argument("--duty", type=float, default=1.0, help="duty cycle while on (0-1)")
    p.add_argument("--T0", type=float, default=37.0, help="initial temperature [degC]")
    p.add_argument("--specific-heat", type=float, default=3600.0, help="[J/(kg K)]")
    p.add_argument("--conductivity", type=float, default=0.5, help="[W/(m K)]")
    p.add_argument("--perfusion", type=float, default=0.0, help="blood perfusion rate [1/s]")
    p.add_argument("--boundary", default="periodic", choices=("periodic", "insulating"),
                   help="the grid's faces: periodic (default) or insulating (no heat flows "
                        "out; a homogeneous medium only)")  # fmt: skip
    p.add_argument("--frequency", type=float, help="drive frequency [Hz] (default: stored)")
    p.add_argument("--coarsen", type=int, default=1, help="thermal grid = N acoustic points")
    p.add_argument("--quantity", default="auto", choices=("auto", "p_cw_amp_all", "p_max_all"))
    p.add_argument("--float32", action="store_true", help="single precision (default double)")
    p.add_argument(
        "--decomposition",
        default="single",
        choices=("single", "pencil"),
        help="run on one device or on a pencil mesh of all devices",
    )
    p.add_argument("--mesh", help="pencil mesh shape, e.g. 4 or 2x2 (default: all devices)")
    p.add_argument("--checkpoint", metavar="FILE",
                   help="save the run's state here when stopped (SIGINT/SIGTERM, or the limits "
                        "below); the same command with this file goes on from it")  # fmt: skip
    p.add_argument("--checkpoint_interval", type=float, metavar="S",
                   help="save and stop after S seconds of stepping")  # fmt: skip
    p.add_argument("--checkpoint_steps", type=int, metavar="N",
                   help="save and stop after N steps of this call")  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    """The ``sonotile heat`` command."""
    a = parser().parse_args(argv)
    tissue = Tissue(a.specific_heat, a.conductivity, perfusion_rate=a.perfusion,
                    boundary_condition=a.boundary)  # fmt: skip
    out = a.output or os.path.splitext(a.result)[0] + "-heat.h5"
    cp = None
    if a.checkpoint is not None:
        cp = Checkpoint(a.checkpoint, a.checkpoint_interval, a.checkpoint_steps)
    elif a.checkpoint_interval is not None or a.checkpoint_steps is not None:
        print("sonotile heat: error: --checkpoint_interval/--checkpoint_steps need --checkpoint",
              file=sys.stderr)  # fmt: skip
        return 2
    try:
        if cp is not None:
            cp.check((a.result, out))
        run = heat_from_result(
            a.result, a.duration, a.on, a.dt, tissue=tissue, T0=a.T0, period=a.period,
            duty=a.duty, coarsen=a.coarsen, frequency=a.frequency, quantity=a.quantity,
            dtype="float32" if a.float32 else "float64", decomposition=a.decomposition,
            mesh=None if a.mesh is None else tuple(int(v) for v in a.mesh.split("x")),
            progress=None, checkpoint=cp,
        )  # fmt: skip
    except RunStopped as e:
        print(f"sonotile heat: stopped: {e}")
        return 0
    except NonFiniteError as e:  # the run blew up: nothing is written
        print(f"sonotile heat: error: {e}", file=sys.stderr)
        return 1
    except (ProblemError, ValueError, OSError) as e:
        print(f"sonotile heat: error: {e}", file=sys.stderr)
        return 2
    run.save(out)
    d = run.data
    print(f"sonotile heat: {out}: peak {float(d['T_max'].max()):.2f} degC, focal rise "
          f"{float(d['T_heated'][tuple(d['focus'])] - a.T0):.3g} K at end of sonication, "
          f"max CEM43 {float(d['cem43'].max()):.3g} min, lesion {run.attrs['lesion_size']:.3g} "
          f"m^{len(run.spacing)}")  # fmt: skip
    return 0
