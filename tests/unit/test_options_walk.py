"""Every numeric option of every command, walked with hostile values (NaN, Inf, an overflowing
number, text, nothing, -1 and 0 where invalid, an integer beyond any count): each ends with a
non-zero status and one error line naming the option, no traceback, before any work (in-process: the
inputs named do not exist, so nothing could run). Bad ``SONOTILE_*`` values end every command the
same way, naming the variable."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from sonotile.base import cliargs, config
from sonotile.batch import cli as batch_cli
from sonotile.bench import inprocess, processes, report, scaling, whole
from sonotile.commands import cli as sonotile_cli
from sonotile.commands import demo, heat, plan, plot, validate
from sonotile.kwave import cli as kwave_cli
from sonotile.parallel import launch

#: command -> (its parser, the arguments it needs besides the option walked); inputs that do
#: not exist, so that a value let through could start nothing
COMMANDS: dict[str, tuple[Callable[[], argparse.ArgumentParser], list[str]]] = {
    "sonotile-kwave": (kwave_cli.parser, ["-i", "no-such-input.h5", "-o", "out.h5"]),
    "demo": (demo.parser, ["--out", "no-such-folder/demo"]),
    "batch": (batch_cli.parser, ["no-such-folder"]),
    "bench": (inprocess.parser, ["--cases", "no-such-case"]),
    "bench --scaling": (processes.parser, ["--decompositions", "no-such-decomposition"]),
    "bench --decompositions": (scaling.parser, ["--runs", "no-such-run"]),
    "bench --whole_run": (whole.parser, ["--kwave_binary", "/no/such/binary", "--cases", "x"]),
    "launch": (launch.parser, ["-n", "1", "--", "/no/such/command"]),
    "heat": (heat.parser, ["no-such-result.h5", "--duration", "1"]),
    "plan": (
        plan.parser,
        [
            "no-such-ct.nii",
            "--target",
            "0",
            "0",
            "0",
            "--entry",
            "0",
            "0",
            "9",
            "--transducer",
            "bowl:60:60",
        ],
    ),  # fmt: skip
    "plot": (plot.parser, ["no-such-file.h5"]),
    "validate": (validate.parser, ["no-such-folder"]),
}
#: options for which 0 is a meaningful value
ZERO_OK = {
    ("sonotile-kwave", "-g"), ("sonotile-kwave", "-c"), ("sonotile-kwave", "--verbose"),
    ("bench --scaling", "--strong"), ("heat", "--T0"), ("heat", "--perfusion"),
    ("plan", "--cooling"), ("plan", "--refocus"), ("plan", "--target"), ("plan", "--entry"),
    ("heat", "--on"), ("plan", "--perfusion"), ("plan", "--margin"), ("plan", "--beyond"),
    ("plan", "--also_target"), ("plan", "--trade_off_points"),
}  # fmt: skip
#: options for which a negative value is meaningful
NEGATIVE_OK = {("heat", "--T0"), ("plan", "--target"), ("plan", "--entry"),
               ("plan", "--also_target")}  # fmt: skip
_SIGNED = ("nan", "inf", "1e999")
_POSITIVE = (*_SIGNED, "-1", "0")


#: (command, option) -> the values ``sonotile heat`` and ``sonotile plan`` do not refuse yet
def _numeric(action: argparse.Action) -> bool:
    """Whether an option takes a number (not a name, a path or a switch)."""
    texts = (None, str, Path, cliargs.utf8_path, cliargs.writable_dir, report.json_file,
             report.png_file)  # fmt: skip
    return bool(action.option_strings) and action.type not in texts


def _counts(action: argparse.Action) -> bool:
    """Whether an option takes integers (a count, a size, an index)."""
    try:
        return isinstance(action.type("2"), int)
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False


def _cases() -> list:
    cases = []
    for command, (make, _) in COMMANDS.items():
        for action in make()._actions:
            if not _numeric(action):
                continue
            option = action.option_strings[-1] if command != "sonotile-kwave" else (
                action.option_strings[0])  # fmt: skip
            values = ["nan", "inf", "1e999", "banana", ""]
            values += ["1" + "0" * 30] if _counts(action) else []  # a count beyond any use
            values += [] if (command, option) in NEGATIVE_OK else ["-1"]
            values += [] if (command, option) in ZERO_OK else ["0"]
            for value in values:
                cases.append(pytest.param(command, option, value,
                                          id=f"{command}:{option}={value}"))  # fmt: skip
    return cases


def _run(command: str, argv: list[str]) -> int:
    try:
        if command == "sonotile-kwave":
            return kwave_cli.main(argv)
        return sonotile_cli.main([*command.split(), *argv])
    except SystemExit as e:  # argparse's exit
        return int(e.code or 0)


@pytest.mark.parametrize("command, option, value", _cases())
def test_hostile_value_is_refused_naming_the_option(command, option, value, capsys, tmp_path,
                                                    monkeypatch):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    make, needed = COMMANDS[command]
    nargs = next(a.nargs for a in make()._actions if option in a.option_strings)
    given = [value] + ["0"] * ((nargs if isinstance(nargs, int) else 1) - 1)
    argv = [*needed[: needed.index("--")], option, *given, *needed[needed.index("--") :]] if (
        "--" in needed) else [*needed, option, *given]  # fmt: skip
    status = _run(command, argv)
    out, err = capsys.readouterr()
    errors = [ln for ln in (out + err).splitlines() if "error" in ln]
    assert status != 0, (out, err)
    assert "Traceback" not in out + err
    assert errors and option in errors[-1], (out, err)


def test_every_command_is_walked():
    """The walk covers every command of ``sonotile`` (and ``sonotile-kwave``), and finds the
    numeric options of those that have any."""
    walked = {c.split()[0] for c in COMMANDS} - {"sonotile-kwave"} | {"kwave"}  # its parser
    assert walked == set(sonotile_cli.COMMANDS)
    options = {c: sum(map(_numeric, make()._actions)) for c, (make, _) in COMMANDS.items()}
    assert options["sonotile-kwave"] >= 12 and options["launch"] == 5 and options["demo"] == 1
    assert options["plot"] == options["validate"] == 0


@pytest.mark.parametrize("command", ["sonotile-kwave", *COMMANDS])
@pytest.mark.parametrize(
    "variable, value",
    [("SONOTILE_MEMORY_LIMIT", "banana"), ("SONOTILE_FFT", "banana"),
     ("SONOTILE_MEMORY_LIMIT", "-5"), ("SONOTILE_DETERMINISTIC", "banana")],
)  # fmt: skip
def test_bad_setting_ends_every_command_naming_it(command, variable, value, capsys, monkeypatch,
                                                  tmp_path):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(config, "_active", [])
    status = _run(command, COMMANDS.get(command, COMMANDS["sonotile-kwave"])[1])
    out, err = capsys.readouterr()
    assert status != 0 and "Traceback" not in out + err
    assert f"{variable}={value!r}: expected" in err


def test_bad_setting_stops_the_python_api_before_work(monkeypatch):
    import numpy as np

    import sonotile as st

    monkeypatch.setenv("SONOTILE_MEMORY_LIMIT", "-5")
    monkeypatch.setattr(config, "_active", [])
    grid = st.KWaveGrid((16, 16), spacing=1e-4, dt=2e-8, nt=4)
    mask = np.zeros(grid.shape, bool)
    mask[8, 8] = True
    src = st.KSource(p0=np.ones(grid.shape))
    with pytest.raises(config.SettingsError, match="SONOTILE_MEMORY_LIMIT='-5'"):
        st.simulate(grid, st.KWaveMedium(1500.0, 1000.0), src, st.KSensor(mask=mask))
