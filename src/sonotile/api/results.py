"""Result files a user can read, re-plot and re-run: every recorded quantity with its unit, and
the whole input (grid, medium, source, sensor) beside it.

Layout (HDF5)::

    /                     attrs: format = "sonotile-results", version, created_by
    /results/<name>       recorded quantities, attrs: units, description
    /results/t            time of each recorded sample [s]
    /results/sensor_points  grid indices of the sensor points (when a mask or points were used)
    /input/grid           attrs: shape, spacing [m], dt [s], nt
    /input/medium/<name>  scalars or fields, attrs: units
    /input/source/<name>, /input/sensor/<name>   as given to ``simulate`` (signals in Pa, m/s)
    /input/options        attrs: the keyword options of the run (pml_size, dtype, ...)
"""

from __future__ import annotations

import dataclasses
from collections.abc import KeysView
from dataclasses import dataclass, field
from typing import Any, cast

import h5py
import numpy as np

from sonotile.api.types import (
    ElasticSource,
    Inputs,
    KSensor,
    KSource,
    KWaveElasticMedium,
    KWaveGrid,
    KWaveMedium,
)
from sonotile.base import files
from sonotile.model.grid import Grid

FORMAT = "sonotile-results"

UNITS = {
    "p": "Pa", "p_max": "Pa", "p_min": "Pa", "p_rms": "Pa", "p_final": "Pa", "p_max_all": "Pa",
    "p_min_all": "Pa", "u": "m/s", "t": "s", "I": "W/m^2", "sound_speed": "m/s",
    "density": "kg/m^3", "alpha_coeff": "dB/(MHz^y cm)", "alpha_power": "1", "BonA": "1",
    "sound_speed_ref": "m/s", "p0": "Pa", "ux": "m/s", "uy": "m/s", "uz": "m/s",
    "sensor_points": "grid index (0-based)", "points": "grid index (0-based)",
    "corners": "grid index (0-based)", "transducer_signal": "m/s",
    "transducer_delays": "time steps", "record": "", "record_start_index": "time step (1-based)",
    "p_cw_amp": "Pa", "p_cw_amp_all": "Pa", "p_cw_phase": "rad", "p_cw_phase_all": "rad",
    "sxx": "Pa", "syy": "Pa", "szz": "Pa", "sxy": "Pa", "sxz": "Pa", "syz": "Pa",
    "sound_speed_compression": "m/s", "sound_speed_shear": "m/s",
    "alpha_coeff_compression": "dB/(MHz^2 cm)", "alpha_coeff_shear": "dB/(MHz^2 cm)",
    "cw_frequency": "Hz", "cw_periods": "periods", "bli_tolerance": "1",
}  # fmt: skip


@dataclass
class Results:
    """Simulation output: ``results[name]`` as numpy arrays, plus metadata.

    Index and Cartesian sensors give time series as ``(n_sensors, n_recorded_steps)`` and
    statistics as ``(n_sensors,)``; cuboid sensors give per cuboid ``(Cx, Cy, Cz,
    n_recorded_steps)`` lists. Whole-field quantities have the grid shape (the user's grid when
    the PML was outside). ``sensor_points``: ``(n_sensors, ndim)`` 0-based grid indices of the
    user's grid (fractional for Cartesian points).
    """

    data: dict[str, Quantity]
    grid: Grid
    t: np.ndarray
    sensor_points: np.ndarray | None
    warnings: list[str] = field(default_factory=list)
    inputs: Inputs | None = None  # (kgrid, medium, source, sensor) as given to simulate
    options: dict[str, Any] = field(default_factory=dict)  # simulate's keyword options

    def save(self, path: str) -> None:
        """Write every quantity with its unit, and the input, to an HDF5 file that
        :func:`sonotile.load_input` reads back for a re-run (see :mod:`sonotile.api.results`)."""
        save_results(path, self, self.inputs, self.options)

    def __getitem__(self, k: str) -> Quantity:
        return self.data[k]

    def __contains__(self, k: str) -> bool:
        return k in self.data

    def keys(self) -> KeysView[str]:
        return self.data.keys()


#: A recorded quantity: an array, or per cuboid a list of arrays (cuboid sensors).
Quantity = np.ndarray | list[np.ndarray]


def unit_of(name: str) -> str:
    """Unit of a recorded quantity or input by its (k-Wave) name (``""``: none, e.g. masks)."""
    if name in UNITS:
        return UNITS[name]
    if name.endswith("_mask") or name == "mask":
        return ""  # boolean: which grid points
    if name.startswith("u"):
        return "m/s"
    if name.startswith("I"):
        return "W/m^2"
    return UNITS.get(name.split("_")[0], "")


def _put(group: h5py.Group, name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, list | tuple) and value and isinstance(value[0], np.ndarray):
        sub = group.create_group(name)  # per-cuboid lists
        for i, v in enumerate(value):
            sub.create_dataset(str(i + 1), data=v)
        sub.attrs["units"] = unit_of(name)
        return
    if isinstance(value, str):
        group.attrs[name] = value
        return
    a = np.asarray(value)
    if a.dtype.kind == "U":
        a = a.astype("S")
    d = group.create_dataset(name, data=a, compression="gzip" if a.size > 4096 else None)
    d.attrs["units"] = unit_of(name)


def _put_dataclass(group: h5py.Group, obj: KWaveMedium | KSource | KSensor) -> None:
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if v is None:
            continue
        if isinstance(v, str | bool | int | float) and not isinstance(v, np.ndarray):
            group.attrs[f.name] = v
        else:
            _put(group, f.name, v)


def save_results(
    path: str, res: Results, inputs: Inputs | None = None, options: dict[str, Any] | None = None
) -> None:
    """Write ``res`` (a :class:`sonotile.Results`) and the input it came from to ``path``:
    refused when a quantity holds NaN or Inf; under a temporary name renamed into place, the
    room reserved first (:func:`sonotile.base.files.hdf5_output`): a failed write leaves an
    earlier file as it was and no partial file."""
    arrays = [np.asarray(v) for v in _arrays(res.data)]
    for name, v in res.data.items():
        for a in v if isinstance(v, list) else [v]:
            files.check_finite(name, a, f"results for '{path}'")
    extra = [] if inputs is None else [a for x in inputs for a in _arrays(vars(x))]
    need = sum(a.nbytes + 4096 for a in arrays + extra) + np.asarray(res.t).nbytes
    with files.hdf5_output(path, "result file", need) as f:
        from sonotile.base.version import __version__

        f.attrs["format"], f.attrs["version"] = FORMAT, 1
        f.attrs["created_by"] = f"sonotile {__version__}"
        r = f.create_group("results")
        for name, v in res.data.items():
            _put(r, name, v)
        _put(r, "t", res.t)
        _put(r, "sensor_points", res.sensor_points)
        if inputs is not None:
            _write_input(f.create_group("input"), inputs, options or {})


def _arrays(values: dict[str, Any]) -> list[np.ndarray]:
    """The numpy arrays among ``values`` (lists of them included)."""
    out: list[np.ndarray] = []
    for v in values.values():
        for a in v if isinstance(v, list | tuple) else [v]:
            if isinstance(a, np.ndarray):
                out.append(a)
    return out


def _write_input(g: h5py.Group, inputs: Inputs, options: dict[str, Any]) -> None:
    kgrid, medium, source, sensor = inputs
    grid = g.create_group("grid")
    grid.attrs["shape"] = np.asarray(kgrid.shape)
    grid.attrs["spacing"] = np.asarray(kgrid.spacing)
    grid.attrs["spacing_units"] = "m"
    if kgrid.dt is not None:
        grid.attrs["dt"], grid.attrs["nt"] = kgrid.dt, kgrid.nt
        grid.attrs["dt_units"] = "s"
    for name, obj in (("medium", medium), ("source", source), ("sensor", sensor)):
        _put_dataclass(g.create_group(name), obj)
    opts = g.create_group("options")
    for k, v in options.items():
        if v is not None:
            opts.attrs[k] = v if not isinstance(v, tuple | list) else np.asarray(v)


def _read_group(g: h5py.Group) -> dict[str, Any]:
    out = {k: v for k, v in g.attrs.items()}
    for k, v in g.items():
        if isinstance(v, h5py.Group):
            out[k] = [v[str(i + 1)][()] for i in range(len(v))]
        else:
            out[k] = v[()]

    def plain(v: object) -> object:
        if isinstance(v, np.ndarray) and v.dtype.kind == "S":
            return tuple(x.decode() for x in v.reshape(-1))
        if isinstance(v, bytes):
            return v.decode()
        return v.item() if isinstance(v, np.generic) else v

    return {k: plain(v) for k, v in out.items()}


def load_input(path: str) -> tuple[Inputs, dict[str, Any]]:
    """``((kgrid, medium, source, sensor), options)`` of a result file, ready for
    ``simulate(*inputs, **options)``."""

    with files.open_hdf5(path, "result file") as f:
        if f.attrs.get("format") != FORMAT or "input" not in f:
            raise ValueError(f"result file '{path}': not a sonotile result file with its input")
        g = f["input"]
        ga = g["grid"].attrs
        kgrid = KWaveGrid(
            tuple(int(n) for n in ga["shape"]), tuple(float(d) for d in ga["spacing"]),
            float(ga["dt"]) if "dt" in ga else None, int(ga["nt"]) if "nt" in ga else None,
        )  # fmt: skip
        med, src = _read_group(g["medium"]), _read_group(g["source"])
        elastic = "sound_speed" not in med and "sound_speed_compression" in med
        medium = (KWaveElasticMedium if elastic else KWaveMedium)(**med)
        stresses = {"s_mask", "s_mode", "sxx", "syy", "szz", "sxy", "sxz", "syz"}
        source = (ElasticSource if stresses & set(src) else KSource)(**src)
        sen = _read_group(g["sensor"])
        if "record" in sen:
            sen["record"] = tuple(str(x) for x in np.atleast_1d(sen["record"]))
        sensor = KSensor(**sen)
        options = _read_group(g["options"])
    return cast(Inputs, (kgrid, medium, source, sensor)), options  # elastic: duck-typed


def load_results(path: str) -> dict[str, Any]:
    """The recorded quantities of a result file as ``{name: array}`` (``t`` included)."""
    with files.open_hdf5(path, "result file") as f:
        if f.attrs.get("format") != FORMAT:
            raise ValueError(f"result file '{path}': not a sonotile result file")
        return _read_group(f["results"])
