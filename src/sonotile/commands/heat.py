"""``sonotile heat RESULT.h5``: temperature, thermal dose and lesion of a sonication from a CW
acoustic result (:func:`sonotile.api.heating.sonication.heat_from_result`).

With ``--checkpoint FILE`` a stopped run (a signal, ``--checkpoint_interval``,
``--checkpoint_steps``) saves its state and ends with status 0, as k-Wave's binaries do; the
same command goes on from the file and removes it when the run is complete."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.api.heating.sonication import Tissue, check_settings, heat_from_result
from sonotile.base import files
from sonotile.base.cliargs import Parser, integer, number, utf8_path
from sonotile.model.problem import ProblemError
from sonotile.solver.finite import NonFiniteError

#: the types of the numeric options: finite numbers > 0, >= 0, above absolute zero [degC]
POSITIVE, AT_LEAST_0, ABOVE_ABSOLUTE_ZERO = number(above=0.0), number(0.0), number(above=-273.15)


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="sonotile heat", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "result", type=utf8_path, help="sonotile result file (p_cw_amp_all or p_max_all)"
    )
    p.add_argument("-o", "--output", type=utf8_path, help="output HDF5 (default RESULT-heat.h5)")
    p.add_argument("--duration", type=POSITIVE, required=True, help="simulated time [s]")
    p.add_argument("--on", type=AT_LEAST_0, help="sonication time [s] (default: whole run)")
    p.add_argument("--dt", type=POSITIVE, default=0.1, help="time step [s] (default 0.1)")
    p.add_argument("--period", type=POSITIVE, help="pulse period [s] while on")
    p.add_argument("--duty", type=number(hi=1.0, above=0.0), default=1.0,
                   help="duty cycle while on, in (0, 1]")  # fmt: skip
    p.add_argument("--T0", type=ABOVE_ABSOLUTE_ZERO, default=37.0,
                   help="initial temperature [degC]")  # fmt: skip
    p.add_argument("--specific-heat", type=POSITIVE, default=3600.0, help="[J/(kg K)]")
    p.add_argument("--conductivity", type=POSITIVE, default=0.5, help="[W/(m K)]")
    p.add_argument("--perfusion", type=AT_LEAST_0, default=0.0,
                   help="blood perfusion rate [1/s]")  # fmt: skip
    p.add_argument("--boundary", default="periodic", choices=("periodic", "insulating"),
                   help="the grid's faces: periodic (default) or insulating (no heat flows "
                        "out; a homogeneous medium only)")  # fmt: skip
    p.add_argument("--frequency", type=POSITIVE, help="drive frequency [Hz] (default: stored)")
    p.add_argument("--coarsen", type=integer(1), default=1,
                   help="thermal grid = N acoustic points (a whole number >= 1)")  # fmt: skip
    p.add_argument("--quantity", default="auto", choices=("auto", "p_cw_amp_all", "p_max_all"))
    p.add_argument("--float32", action="store_true", help="single precision (default double)")
    p.add_argument(
        "--decomposition",
        default="single",
        choices=("single", "pencil"),
        help="run on one device or on a pencil mesh of all devices",
    )
    p.add_argument("--mesh", help="pencil mesh shape, e.g. 4 or 2x2 (default: all devices)")
    p.add_argument("--checkpoint", type=utf8_path, metavar="FILE",
                   help="save the run's state here when stopped (SIGINT/SIGTERM, or the limits "
                        "below); the same command with this file goes on from it")  # fmt: skip
    p.add_argument("--checkpoint_interval", type=POSITIVE, metavar="S",
                   help="save and stop after S seconds of stepping")  # fmt: skip
    p.add_argument("--checkpoint_steps", type=integer(1), metavar="N",
                   help="save and stop after N steps of this call")  # fmt: skip
    return p


def _mesh(text: str | None) -> tuple[int, ...] | None:
    """``--mesh 2x2`` as ``(2, 2)``; a ``ValueError`` naming the option otherwise."""
    if text is None:
        return None
    parts = text.split("x")
    if not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise ValueError(f"--mesh {text!r}: expected whole numbers >= 1 joined by 'x', e.g. 2x2")
    return tuple(int(v) for v in parts)


def _paths(a: argparse.Namespace) -> str:
    """The output path, after the result, output and checkpoint paths are checked (kinds,
    folders, none the same file as another): before any work."""
    out = a.output or os.path.splitext(a.result)[0] + "-heat.h5"
    files.check_input_path(a.result, "result file")
    files.check_output_path(out, "output file", [("the result file", a.result)])
    files.check_replaces(out, "output file", "HDF5")
    if a.checkpoint is not None:
        files.check_output_path(
            a.checkpoint, "checkpoint file", [("the result file", a.result), ("-o", out)]
        )
    return out


def _check_room(a: argparse.Namespace, out: str) -> None:
    """Refuse a run whose output (six fields of the thermal grid, the focal series) would not
    fit on the output's disk, before the run: a checkpointed run's state is removed when the
    run completes, so the write must not fail after it. A result without a readable grid is
    left to the run's own checks."""
    try:
        with files.open_hdf5(a.result, "result file") as f:
            shape = [int(n) for n in f["input/grid"].attrs["shape"]]
    except (OSError, KeyError, TypeError, ValueError):
        return
    points = int(np.prod([max(1, n // a.coarsen) for n in shape]))
    steps = round(a.duration / a.dt)
    files.check_room(out, points * (6 * 8 + 1) + steps * 16, f"output file '{out}'")


def _fail(message: object, status: int) -> int:
    print(f"sonotile heat: error: {message}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    """The ``sonotile heat`` command (0: done or stopped with a checkpoint; 1: the run or the
    write failed; 2: bad input)."""
    a = parser().parse_args(argv)
    tissue = Tissue(a.specific_heat, a.conductivity, perfusion_rate=a.perfusion,
                    boundary_condition=a.boundary)  # fmt: skip
    cp = None
    if a.checkpoint is not None:
        cp = Checkpoint(a.checkpoint, a.checkpoint_interval, a.checkpoint_steps)
    elif a.checkpoint_interval is not None or a.checkpoint_steps is not None:
        return _fail("--checkpoint_interval/--checkpoint_steps need --checkpoint", 2)
    try:
        mesh = _mesh(a.mesh)
        out = _paths(a)
        check_settings(a.duration, a.on, a.dt, a.period, a.duty, a.T0, tissue)
        _check_room(a, out)
        if cp is not None:
            cp.check((a.result, out))
        run = heat_from_result(
            a.result, a.duration, a.on, a.dt, tissue=tissue, T0=a.T0, period=a.period,
            duty=a.duty, coarsen=a.coarsen, frequency=a.frequency, quantity=a.quantity,
            dtype="float32" if a.float32 else "float64", decomposition=a.decomposition,
            mesh=mesh, progress=None, checkpoint=cp,
        )  # fmt: skip
    except RunStopped as e:
        print(f"sonotile heat: stopped: {e}")
        return 0
    except (NonFiniteError, files.OutputWriteError) as e:  # nothing is written
        return _fail(e, 1)
    except (ProblemError, ValueError, OSError) as e:
        return _fail(e, 2)
    try:
        run.save(out, inputs=[("the result file", a.result)])
    except (files.OutputWriteError, NonFiniteError, ValueError) as e:  # a full disk, NaN
        return _fail(e, 1)
    except OSError as e:  # the output path changed kind during the run
        return _fail(e, 2)
    d = run.data
    print(f"sonotile heat: {out}: peak {float(d['T_max'].max()):.2f} degC, focal rise "
          f"{float(d['T_heated'][tuple(d['focus'])] - a.T0):.3g} K at end of sonication, "
          f"max CEM43 {float(d['cem43'].max()):.3g} min, lesion {run.attrs['lesion_size']:.3g} "
          f"m^{len(run.spacing)}")  # fmt: skip
    return 0
