"""What a batch runs: a list of k-Wave runs (input, output, ``sonotile-kwave`` flags).

A batch specification is either

* a folder: every ``*.h5`` file directly inside it that is a k-Wave *input* file (root
  attribute ``file_type`` = ``input``) becomes a run whose output is ``<out>/<stem>.h5``
  (default ``<out>`` = ``<folder>/out``), or
* a JSON or TOML file (``.json``, ``.toml``) holding either a list of runs or a table
  ``{"defaults": {...}, "runs": [...]}``; each run is ``{"input": PATH, "output": PATH,
  "flags": [...], "name": ...}`` (``output`` default ``<out>/<stem>.h5``, ``flags`` default
  ``defaults.flags``, ``name`` default the input's stem). Relative paths are relative to the
  specification file.

The whole specification is checked before anything runs: missing inputs, an output equal to an
input, two runs writing one file, and flags ``sonotile-kwave`` would refuse are errors naming
the run. Input files are not opened here: a broken input fails its own run only.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Flags a batch sets itself (per worker): a run may not set them.
RESERVED_FLAGS = ("-i", "-o", "-t", "-g", "--cpu_devices")


class SpecError(ValueError):
    """The batch specification cannot be run; nothing has been started."""


@dataclass(frozen=True)
class Run:
    """One simulation of a batch.

    Attributes:
        name: unique label (the input's stem unless given).
        input: k-Wave input file.
        output: where ``sonotile-kwave`` writes its output file.
        flags: further ``sonotile-kwave`` flags (e.g. ``("--p_max", "-s", "20")``).
    """

    name: str
    input: str
    output: str
    flags: tuple[str, ...] = field(default_factory=tuple)

    def argv(self) -> list[str]:
        """The ``sonotile-kwave`` command line of this run (without threads or devices)."""
        return ["-i", self.input, "-o", self.output, *self.flags]


def is_kwave_input(path: Path) -> bool:
    """Whether ``path`` is meant as a k-Wave input: not a readable HDF5 file whose root attribute
    ``file_type`` says something else (an output or checkpoint file). A file that cannot be read
    counts as an input, so that its run reports why."""
    import h5py

    try:
        with h5py.File(path, "r") as f:
            v = f.attrs.get("file_type")
    except OSError:
        return True
    if v is None:
        return True
    if hasattr(v, "reshape"):
        v = v.reshape(-1)[0] if v.size else b""
    return (v.decode() if isinstance(v, bytes) else str(v)) == "input"


def from_folder(folder: Path, out: Path | None, flags: tuple[str, ...]) -> list[Run]:
    """One run per k-Wave input file directly in ``folder`` (sorted by name)."""
    out = out or folder / "out"
    runs = []
    for p in sorted(folder.glob("*.h5")):
        if p.is_file() and is_kwave_input(p):
            runs.append(Run(p.stem, str(p), str(out / f"{p.stem}.h5"), flags))
    if not runs:
        raise SpecError(f"{folder}: no k-Wave input files (*.h5 with file_type 'input')")
    return runs


def _load_table(path: Path) -> object:
    text = path.read_text()
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"{path}: not valid JSON ({e})") from None
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise SpecError(f"{path}: TOML needs Python >= 3.11 (or tomli); use JSON") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML ({e})") from None


def _flags(v: object, where: str) -> tuple[str, ...]:
    if isinstance(v, str):
        v = v.split()
    if not isinstance(v, list | tuple) or not all(isinstance(x, str | int | float) for x in v):
        raise SpecError(f"{where}: 'flags' must be a list of strings, got {v!r}")
    return tuple(str(x) for x in v)


def from_file(path: Path, out: Path | None, flags: tuple[str, ...]) -> list[Run]:
    """Runs listed in a JSON / TOML specification file."""
    table = _load_table(path)
    defaults: dict[str, Any] = {}
    if isinstance(table, dict):
        defaults = table.get("defaults", {})
        items = table.get("runs")
        if not isinstance(defaults, dict):
            raise SpecError(f"{path}: 'defaults' must be a table")
    else:
        items = table
    if not isinstance(items, list) or not items:
        raise SpecError(f"{path}: expected a non-empty list of runs (or a table with 'runs')")
    base = path.parent
    out = out or Path(defaults["out"] if "out" in defaults else base / "out")
    out = out if out.is_absolute() else base / out
    dflags = flags + _flags(defaults.get("flags", []), f"{path}: defaults")
    runs = []
    for i, item in enumerate(items):
        where = f"{path}: run {i + 1}"
        if isinstance(item, str):
            item = {"input": item}
        if not isinstance(item, dict) or "input" not in item:
            raise SpecError(f"{where}: expected a table with 'input', got {item!r}")
        unknown = set(item) - {"input", "output", "flags", "name"}
        if unknown:
            raise SpecError(f"{where}: unknown key(s) {sorted(unknown)}")
        inp = Path(item["input"])
        inp = inp if inp.is_absolute() else base / inp
        name = str(item.get("name", inp.stem))
        outp = Path(item["output"]) if "output" in item else out / f"{name}.h5"
        outp = outp if outp.is_absolute() else base / outp
        extra = _flags(item["flags"], where) if "flags" in item else ()
        runs.append(Run(name, str(inp), str(outp), dflags + extra))
    return runs


def check(runs: list[Run]) -> None:
    """Refuse a specification that cannot run as a whole (before anything starts)."""
    from sonotile.base.files import check_input_path
    from sonotile.kwave.cli import UsageError, parse

    names: dict[str, Run] = {}
    outputs: dict[str, Run] = {}
    inputs = {os.path.realpath(r.input) for r in runs}
    for r in runs:
        if r.name in names:
            raise SpecError(f"run '{r.name}': name used twice (give 'name' in the spec)")
        names[r.name] = r
        if not os.path.lexists(r.input):
            raise SpecError(f"run '{r.name}': input file '{r.input}' does not exist")
        try:  # a FIFO, a device, a folder: refused by kind, never opened
            check_input_path(r.input, f"run '{r.name}': input file")
        except OSError as e:
            raise SpecError(str(e)) from None
        real_out = os.path.realpath(r.output)
        if real_out in inputs:
            raise SpecError(f"run '{r.name}': output '{r.output}' is an input file of the batch")
        if real_out in outputs:
            raise SpecError(
                f"runs '{outputs[real_out].name}' and '{r.name}' both write '{r.output}'"
            )
        outputs[real_out] = r
        for f in r.flags:
            if f in RESERVED_FLAGS:
                raise SpecError(f"run '{r.name}': flag {f} is set by the batch (see --threads)")
        try:
            parse(r.argv())
        except (UsageError, ValueError, SystemExit) as e:
            raise SpecError(f"run '{r.name}': flags {list(r.flags)}: {e}") from None


def load(spec: str, out: str | None = None, flags: tuple[str, ...] = ()) -> list[Run]:
    """The checked list of runs of a folder or a JSON / TOML specification file."""
    path = Path(spec)
    outp = Path(out) if out else None
    if path.is_dir():
        runs = from_folder(path, outp, flags)
    elif path.is_file() and path.suffix in (".json", ".toml"):
        runs = from_file(path, outp, flags)
    elif path.exists():
        raise SpecError(f"{spec}: expected a folder of k-Wave inputs or a .json / .toml file")
    else:
        raise SpecError(f"{spec}: no such file or folder")
    check(runs)
    return runs
