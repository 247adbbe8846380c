"""``sonotile plan CT --target X Y Z --entry X Y Z --transducer SPEC``: a sonication plan from
a CT (NIfTI file or DICOM folder): the beam through the skull (aberration-corrected for an
array), the heating and the thermal dose, written as NIfTI volumes on the CT's grid,
``plan.json`` and a one-page report (:func:`sonotile.planning.plan`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from sonotile.base.cliargs import Parser, integer, number, utf8_path
from sonotile.model.problem import ProblemError

#: the numeric options: flag -> (default, help)
NUMBERS: dict[str, tuple[float | None, str]] = {
    "--frequency": (500e3, "drive frequency [Hz] (default 500e3)"),
    "--ppw": (6.0, "points per wavelength at 1500 m/s (default 6)"),
    "--pressure": (60e3, "drive amplitude per element [Pa] (default 60e3)"),
    "--focal_pressure": (None, "scale the drive to this focal peak [Pa]"),
    "--target_dose": (None, "scale the drive to this thermal dose at the target [CEM43 min]"),
    "--duration": (10.0, "sonication time [s] (default 10)"),
    "--cooling": (0.0, "time simulated after it [s]"),
    "--duty": (1.0, "duty cycle (0-1]"),
    "--period": (None, "pulse period [s] (default: the power time-averaged)"),
    "--dt": (0.1, "thermal time step [s]"),
    "--perfusion": (None, "blood perfusion rate [1/s] everywhere (default: per tissue, IT'IS)"),
    "--specific_heat": (None, "specific heat [J/(kg K)] everywhere (default: per tissue)"),
    "--conductivity": (None, "thermal conductivity [W/(m K)] everywhere (default: per tissue)"),
    "--margin": (5.0, "grid beside the aperture [mm]"),
    "--beyond": (20.0, "grid past the target [mm]"),
    "--refocus": (2, "re-aims of the corrected drive (default 2; 0: aimed at the target itself)"),
    "--hu_max": (
        None,
        "HU of zero porosity in the bone mappings (default: the 99.9th "
        "percentile of the skull's HU)",
    ),
}
#: PlanSettings' names of the numeric options, where they differ from the flag's
SETTING_NAMES = {"--ppw": "points_per_wavelength", "--pressure": "source_pressure",
                 "--dt": "heat_dt", "--margin": "margin_mm", "--beyond": "beyond_mm"}  # fmt: skip
#: the switches: flag -> help
SWITCHES = {
    "--force": "write into an existing output folder",
    "--no_correction": "drive an array geometrically (no aberration correction)",
    "--amplitudes": "weight the corrected drive by the recorded amplitudes",
    "--elastic": "also run the beam through an elastic skull and heat with that beam",
    "--kwave_input": "also write the beam's run as a k-Wave input file (kwave_input.h5)",
    "--clip_hu": "clip values outside -1100 .. 4000 HU into that range (default: refuse them)",
}


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="sonotile plan", description=__doc__.split("\n\n")[0])
    p.add_argument("ct", help="CT image: NIfTI file or a folder holding a DICOM series")
    xyz = ("X", "Y", "Z")
    p.add_argument(
        "--target",
        type=number(),
        nargs=3,
        required=True,
        metavar=xyz,
        help="target in scanner coordinates [mm, RAS]",
    )
    p.add_argument(
        "--entry",
        type=number(),
        nargs=3,
        required=True,
        metavar=xyz,
        help="a point on the beam before the target (e.g. on the scalp) [mm, RAS]",
    )
    p.add_argument(
        "--transducer",
        required=True,
        help="'bowl:R:D' or 'array:N:R:D:d' (mm), e.g. array:128:64:64:4",
    )
    p.add_argument(
        "-o", "--output", type=utf8_path, help="output folder (default: the CT's name + '-plan')"
    )
    p.add_argument(
        "--mapping",
        default="aubry2003",
        help="HU mapping: kwave, aubry2003 (default) or marsac2017",
    )
    for flag, (default, text) in NUMBERS.items():
        p.add_argument(flag, type=float, default=default, help=text)
    for flag, text in SWITCHES.items():
        p.add_argument(flag, action="store_true", help=text)
    p.add_argument(
        "--allow_target_in",
        nargs="+",
        default=[],
        choices=("water", "bone"),
        help="plan on a target in air/water around the head or in bone (default: the target "
        "must lie in soft tissue or brain)",
    )
    _run_arguments(p)
    _optimize_arguments(p)
    return p  # fmt: skip


def _optimize_arguments(p: argparse.ArgumentParser) -> None:
    """The options of the optimised drive (:class:`sonotile.planning.OptimizeSettings`)."""
    g = p.add_argument_group("optimised drive (--optimize)")
    g.add_argument("--optimize", action="store_true",
                   help="after the phase-conjugated plan, the drive with the least skull heating "
                   "at the same focal pressure; both plans are written side by side")  # fmt: skip
    add = g.add_argument
    add("--groups", type=integer(1, 4096), default=16,
        help="groups of neighbouring elements, one forward run each (default 16; the number "
        "of elements frees every element)")  # fmt: skip
    add("--max_element_pressure", type=number(above=0, hi=1e8), metavar="PA",
        help="largest drive amplitude of an element [Pa] (default: 2x the conjugated "
        "drive's)")  # fmt: skip
    add("--max_power", type=number(above=0, hi=1e5), metavar="W",
        help="largest acoustic power of the drive [W] (default: no limit)")  # fmt: skip
    add(
        "--focus_within",
        type=number(above=0, hi=20),
        default=1.0,
        metavar="MM",
        help="the focal peak within this distance of the target [mm] (default 1)",
    )
    add(
        "--volume_ratio",
        type=number(lo=1, hi=10),
        default=1.1,
        help="-6 dB volume at most this multiple of the conjugated plan's (default 1.1)",
    )
    add("--side_lobe", type=number(above=0, hi=1), default=0.5,
        help="pressure in the brain outside the focal region at most this fraction of the "
        "focal pressure (default 0.5)")  # fmt: skip
    add(
        "--also_target",
        type=number(),
        nargs=3,
        action="append",
        default=[],
        metavar=("X", "Y", "Z"),
        help="a further target at the same pressure [mm, RAS] (repeat for more)",
    )
    add(
        "--target_volume",
        type=number(above=0, hi=30),
        metavar="MM",
        help="a sphere of this radius about the target at uniform pressure [mm]",
    )
    add(
        "--uniformity",
        type=number(above=0, hi=1),
        default=0.1,
        help="with --target_volume: pressure within (1 +- this) x the goal (default 0.1)",
    )
    add(
        "--trade_off_points",
        type=integer(0, 100),
        default=9,
        help="focal pressures on the trade-off curve (default 9)",
    )


def _optimize(a: argparse.Namespace) -> Any:
    """The optimiser's settings from the options (None without --optimize)."""
    from sonotile.planning.optimize import OptimizeSettings

    if not a.optimize:
        return None
    return OptimizeSettings(
        groups=a.groups, max_amplitude=a.max_element_pressure, max_power=a.max_power,
        focus_mm=a.focus_within, volume_ratio=a.volume_ratio, side_lobe=a.side_lobe,
        targets=tuple(tuple(t) for t in a.also_target), volume_mm=a.target_volume,
        uniformity=a.uniformity, trade_off_points=a.trade_off_points,
    )  # fmt: skip


def _run_arguments(p: argparse.ArgumentParser) -> None:
    """The options of how the runs are spread over devices and how the heating stops."""
    p.add_argument(
        "--decomposition",
        default="single",
        choices=("single", "pencil", "lfb", "auto"),
        help="spread each acoustic run over the devices (the heating: a pencil mesh)",
    )
    p.add_argument("--mesh", help="devices per split axis, e.g. 4 or 2x2 (default: all on x)")
    p.add_argument(
        "--elastic_interface",
        default="kwave",
        choices=("kwave", "slip"),
        help="with --elastic: k-Wave's scheme at fluid-solid faces (default) or 'slip' "
        "(the water slips along the bone; one device)",
    )
    p.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="the plan stops when told (SIGINT/SIGTERM or the limits below), keeping each "
        "finished acoustic run in the folder FILE-runs (FILE without .npz) and the heating's "
        "state in FILE; the same command with this file goes on from there",
    )
    p.add_argument(
        "--checkpoint_interval",
        type=float,
        metavar="S",
        help="stop after the run that passes S seconds of stepping (acoustic runs and heating)",
    )
    p.add_argument(
        "--checkpoint_steps",
        type=int,
        metavar="N",
        help="save and stop the heating after N thermal steps",
    )


def _mesh(text: str | None) -> tuple[int, ...] | None:
    """``"2x2"`` -> ``(2, 2)``, or a :class:`ProblemError` naming ``--mesh``."""
    if text is None:
        return None
    try:
        return tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ProblemError(f"--mesh {text!r}: give devices per axis, e.g. 4 or 2x2") from None


def _run_options(a: argparse.Namespace, out: str) -> tuple[Any, Any]:
    """The acoustic runs' settings and the checkpoint from the options, checked (``out``: the
    output folder)."""
    from sonotile.api.heating.checkpoint import Checkpoint
    from sonotile.planning.acoustics import RunSettings, check_run
    from sonotile.planning.saved_runs import runs_folder

    run = RunSettings(decomposition=a.decomposition, mesh=_mesh(a.mesh),
                      elastic_interface=a.elastic_interface)  # fmt: skip
    check_run(run)
    if a.checkpoint_interval is not None and not 0 < a.checkpoint_interval < float("inf"):
        raise ProblemError(f"--checkpoint_interval must be a positive number of seconds, "
                           f"got {a.checkpoint_interval}")  # fmt: skip
    if a.checkpoint_steps is not None and a.checkpoint_steps < 1:
        raise ProblemError(f"--checkpoint_steps must be a whole number >= 1, "
                           f"got {a.checkpoint_steps}")  # fmt: skip
    if a.checkpoint is None:
        if a.checkpoint_interval is not None or a.checkpoint_steps is not None:
            raise ProblemError("--checkpoint_interval/--checkpoint_steps need --checkpoint")
        return run, None
    cp = Checkpoint(a.checkpoint, a.checkpoint_interval, a.checkpoint_steps)
    cp.check((a.ct,))
    if os.path.abspath(runs_folder(cp.path)) == os.path.abspath(out):
        raise ProblemError(f"--checkpoint {cp.path!r} keeps the finished runs in "
                           f"{runs_folder(cp.path)!r}, the output folder: give another "
                           "checkpoint file or -o")  # fmt: skip
    return run, cp


def _flags() -> dict[str, str]:
    """PlanSettings' names -> the flags that set them (for messages in the user's words)."""
    flags = {SETTING_NAMES.get(f, f[2:]): f for f in NUMBERS}
    return {**flags, "allow_target_in": "--allow_target_in"}


def _kwave_files(a: argparse.Namespace) -> tuple[str, ...]:
    """The k-Wave input files the command writes."""
    if not a.kwave_input:
        return ()
    return ("kwave_input.h5", "kwave_input_optimized.h5") if a.optimize else ("kwave_input.h5",)


def _write_kwave(result: Any, out: str, say: Any) -> list[str]:
    """The plan's run (and the optimised drive's) as k-Wave input files; their paths."""
    from sonotile.planning.export import write_kwave_input

    paths = []
    drives: list[tuple[str, Any]] = [("kwave_input.h5", None)]
    if result.optimized is not None:
        drives.append(("kwave_input_optimized.h5",
                       (result.optimized.amplitude, result.optimized.phase)))  # fmt: skip
    for name, drive in drives:
        paths.append(os.path.join(out, name))
        first_step = write_kwave_input(result, paths[-1], drive=drive)
        say(f"k-Wave input {paths[-1]}: run it with --p_max_all -s {first_step}")
    return paths


def _whole(v: float, flag: str) -> int:
    """``v`` as an int, or a :class:`ProblemError` naming ``flag``."""
    if not (float(v).is_integer() and v >= 0):
        raise ProblemError(f"{flag} {v:g}: give a whole number >= 0")
    return int(v)


def main(argv: list[str] | None = None) -> int:
    """The ``sonotile plan`` command."""
    from sonotile.api.heating.checkpoint import RunStopped
    from sonotile.base.files import OutputWriteError
    from sonotile.planning.chain import PlanSettings, plan
    from sonotile.planning.outputs import prepare_output, write_plan
    from sonotile.planning.saved_runs import PlanStopped

    a = parser().parse_args(argv)
    out = a.output or os.path.basename(os.path.normpath(a.ct)).split(".")[0] + "-plan"
    start = time.perf_counter()

    def say(msg: str) -> None:
        if msg.startswith("warning: "):
            print(f"sonotile plan: {msg}", file=sys.stderr, flush=True)
            return
        print(f"sonotile plan [{time.perf_counter() - start:6.1f} s] {msg}", flush=True)

    try:
        settings = PlanSettings(
            frequency=a.frequency, points_per_wavelength=a.ppw, mapping=a.mapping,
            source_pressure=a.pressure, focal_pressure=a.focal_pressure,
            target_dose=a.target_dose,
            correct=not a.no_correction, amplitudes=a.amplitudes,
            refocus=_whole(a.refocus, "--refocus"),
            elastic=a.elastic, duration=a.duration, cooling=a.cooling, duty=a.duty,
            period=a.period, heat_dt=a.dt, perfusion=a.perfusion,
            specific_heat=a.specific_heat, conductivity=a.conductivity, margin_mm=a.margin,
            beyond_mm=a.beyond, hu_max=a.hu_max, clip_hu=a.clip_hu,
            allow_target_in=tuple(a.allow_target_in),
        )  # fmt: skip
        settings.check(_flags())
        run, checkpoint = _run_options(a, out)
        optimize = _optimize(a)
        prepare_output(out, a.force, (a.ct,), _kwave_files(a))
        if not os.path.exists(a.ct):
            raise ProblemError(f"CT {a.ct!r}: no such file or folder")
        say(f"reading {a.ct}")
        result = plan(a.ct, a.target, a.entry, a.transducer, settings, run=run, progress=say,
                      checkpoint=checkpoint, optimize=optimize)  # fmt: skip
        paths = write_plan(result, out, force=a.force)
        if a.kwave_input:
            paths += _write_kwave(result, out, say)
    except RunStopped as e:
        say(f"{'plan' if isinstance(e, PlanStopped) else 'heating'} stopped: {e}")
        return 0
    except (ProblemError, OSError) as e:  # a failed write: 1; bad input: 2
        print(f"sonotile plan: error: {e}", file=sys.stderr)
        return 1 if isinstance(e, OutputWriteError) else 2
    f = result.summary["focus"]
    say(f"focus {f['peak_pa'] / 1e6:.3g} MPa, {f['error_mm']:.2f} mm from the target; "
        f"peak {result.summary['heat']['T_max_degC']:.2f} degC")  # fmt: skip
    o = result.summary.get("optimized")
    if o:
        rise, conj = o["heat"]["skull_rise_K"], o["conjugated"]["skull_rise_at_goal_K"]
        say(f"optimised drive: focus {o['focus']['peak_pa'] / 1e6:.3g} MPa, "
            f"{o['focus']['error_mm']:.2f} mm from the target; peak skull rise {rise:.2f} K "
            f"against {conj:.2f} K phase-conjugated "
            f"({100 * (o['skull_rise_reduction'] or 0):.0f} % lower)")  # fmt: skip
    say(f"wrote {len(paths)} files to {out}/")
    return 0
