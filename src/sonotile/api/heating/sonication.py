"""From an acoustic result to temperature and thermal dose: the second half of a therapy plan.

:func:`heat_from_result` reads a sonotile result file (``Results.save``) holding a steady-state
pressure amplitude (``p_cw_amp_all``, or ``p_max_all`` of a CW steady state), makes the heat
source ``Q = alpha p^2 / (rho c)`` [W/m^3] from the acoustic medium stored with it, optionally
averages it onto a coarser thermal grid, and runs the bioheat model for a sonication
(:mod:`sonotile.physics.heat`). ``sonotile heat RESULT.h5 --duration 10 --on 5`` does the same
and writes temperature, dose and lesion with units to an HDF5 file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sonotile.api.heating.bioheat import x64_for
from sonotile.api.heating.checkpoint import Checkpoint, run_sonication
from sonotile.api.options import RunOptions, renamed
from sonotile.base import files
from sonotile.base.ranges import in_range
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import SINGLE, Decomposition
from sonotile.physics.heat import acoustic_heat_source, sonication
from sonotile.physics.heat.dose import LESION_CEM43
from sonotile.physics.heat.model import check_decomposition, heat_problem
from sonotile.physics.heat.sources import block_mean

FORMAT = "sonotile-heat"
UNITS = {
    "T": "degC", "T_heated": "degC", "T_max": "degC", "cem43": "min", "lesion_map": "",
    "Q": "W/m^3", "T_focus": "degC", "t": "s", "focus": "grid index (0-based)",
    "T_points": "degC", "points": "grid index (0-based)",
    "p_amp": "Pa",
}  # fmt: skip


@dataclass
class Tissue:
    """Thermal properties of the heated tissue (defaults: k-Wave's heating example); each a
    number or a field of the thermal grid's shape (per-tissue values).

    Attributes:
        specific_heat: [J/(kg K)]. thermal_conductivity: [W/(m K)].
        density: [kg/m^3] (None: the acoustic medium's density).
        perfusion_rate: blood perfusion rate [1/s] (0: none), with blood density [kg/m^3],
            blood specific heat [J/(kg K)] and arterial temperature [degC].
        boundary_condition: the grid's faces, k-Wave's ``medium.boundary_condition``:
            "periodic", "insulating" or "conducting" (0 degC one point outside the grid); the
            last two for a homogeneous medium only.
    """

    specific_heat: float | np.ndarray = 3600.0
    thermal_conductivity: float | np.ndarray = 0.5
    density: float | np.ndarray | None = None
    perfusion_rate: float | np.ndarray = 0.0
    blood_density: float = 1060.0
    blood_specific_heat: float = 3617.0
    blood_temperature: float = 37.0
    boundary_condition: str = "periodic"


@dataclass
class HeatRun:
    """A sonication's result: fields on the thermal grid and the focal temperature history.

    ``data``: ``T`` (end) and ``T_heated`` (end of the on-time) [degC], ``T_max`` [degC],
    ``cem43`` [min], ``lesion_map``, ``Q`` [W/m^3], ``T_focus`` [degC] at ``t`` [s] (the
    point of largest ``Q``, ``focus``), and where asked ``T_points`` [degC] ``(steps,
    points)`` at the grid indices ``points``; ``spacing`` [m], ``dt`` [s].
    """

    data: dict[str, np.ndarray]
    spacing: tuple[float, ...]
    dt: float
    attrs: dict[str, Any] = field(default_factory=dict)

    def save(self, path: str, inputs: Sequence[tuple[str, str | None]] = ()) -> None:
        """Write the run to HDF5 (datasets with ``units``): refused if a field holds NaN or
        Inf, or ``path`` is one of ``inputs`` (``(name, path)`` pairs); written under a
        temporary name and renamed into place (:func:`sonotile.base.files.hdf5_output`), so
        a failure leaves an earlier file as it was."""
        for name, v in self.data.items():
            files.check_finite(name, v, f"the heat result for '{path}'")
        need = sum(np.asarray(v).nbytes + 4096 for v in self.data.values())
        with files.hdf5_output(path, "output file", need, inputs) as f:
            f.attrs["format"], f.attrs["version"] = FORMAT, 1
            g = f.create_group("heat")
            for name, v in self.data.items():
                d = g.create_dataset(name, data=v)
                d.attrs["units"] = UNITS.get(name, "")
            g.attrs["spacing"], g.attrs["spacing_units"] = np.asarray(self.spacing), "m"
            g.attrs["dt"], g.attrs["dt_units"] = self.dt, "s"
            for k, v in self.attrs.items():
                g.attrs[k] = v


def pressure_amplitude(results: dict, quantity: str = "auto") -> tuple[np.ndarray, str]:
    """The steady-state amplitude [Pa] of a result and its name: ``p_cw_amp_all`` or
    ``p_max_all`` (``quantity="auto"``: the first present)."""
    names = ("p_cw_amp_all", "p_max_all") if quantity == "auto" else (quantity,)
    for n in names:
        if n in results and np.ndim(results[n]) >= 1:
            return np.asarray(results[n], dtype=np.float64), n
    raise ProblemError(
        f"the result holds none of {names} (record 'p_cw_all' with cw_frequency, or "
        "'p_max_all' in a CW steady state, over the whole grid)"
    )


def _medium_value(medium: Any, name: str, shape: tuple[int, ...]) -> np.ndarray | float:
    v = getattr(medium, name)
    if v is None:
        raise ProblemError(f"the acoustic medium has no {name}: no absorbed power to heat with")
    a = np.asarray(v, dtype=np.float64)
    return float(a) if a.size == 1 else a.reshape(shape)


#: The stored acoustic properties the heat source uses: name, unit, whether 0 is allowed.
STORED = (("sound_speed", "m/s", False), ("density", "kg/m^3", False),
          ("alpha_coeff", "dB/(MHz^y cm)", True), ("alpha_power", "", True))  # fmt: skip


def check_stored(path: str, kgrid: Any, medium: Any, p: np.ndarray, name: str) -> None:
    """Refuse a result whose grid spacing, acoustic medium or pressure amplitude ``p``
    (dataset ``name``) cannot make a heat source: NaN or Inf, a spacing <= 0, a negative
    (or zero) sound speed, density, absorption; a ``ProblemError`` naming the dataset."""
    where = f"result file '{path}'"
    spacing = np.asarray(kgrid.spacing, dtype=np.float64)
    if not (np.all(np.isfinite(spacing)) and np.all(spacing > 0)):
        given = ", ".join(f"{d:g}" for d in spacing)
        raise ProblemError(f"{where}: 'input/grid' spacing ({given}) m: expected finite values > 0")
    for n, unit, zero_ok in STORED:
        v = getattr(medium, n, None)
        if v is None:
            continue
        a = np.asarray(v, dtype=np.float64)
        if not np.all(np.isfinite(a)):
            raise ProblemError(f"{where}: 'input/medium/{n}' holds NaN or Inf")
        low = float(a.min()) if a.size else 0.0
        if low < 0 or (low == 0 and not zero_ok):
            raise ProblemError(
                f"{where}: 'input/medium/{n}' has a minimum of {low:g} {unit}; expected "
                f"{'>= 0' if zero_ok else '> 0'} everywhere"
            )
    if not np.all(np.isfinite(p)):
        bad = int(p.size - np.count_nonzero(np.isfinite(p)))
        raise ProblemError(f"{where}: 'results/{name}' holds {bad} NaN or Inf value(s)")


def source_from_result(path: str, frequency: float | None = None, quantity: str = "auto",
                       coarsen: int = 1) -> tuple[np.ndarray, tuple[float, ...], dict]:  # fmt: skip
    """``(Q [W/m^3], thermal spacing [m], info)`` of a result file: ``Q = alpha p^2/(rho c)``
    on the acoustic grid, averaged over ``coarsen`` points per axis (the total power kept).
    ``frequency`` [Hz]: default the result's ``cw_frequency``."""
    from sonotile.api.results import load_input, load_results

    (kgrid, medium, _, sensor), _ = load_input(path)
    p, name = pressure_amplitude(load_results(path), quantity)
    shape = tuple(kgrid.shape)
    if p.shape != shape:
        raise ProblemError(f"{name}: shape {p.shape} is not the grid's {shape}")
    check_stored(path, kgrid, medium, p, name)
    in_range("coarsen", coarsen, 1, min(shape), whole=True)
    f = frequency if frequency is not None else getattr(sensor, "cw_frequency", None)
    if f is None or not f > 0:
        raise ProblemError(f"frequency: not stored with the result ({name}); give it [Hz]")
    rho = _medium_value(medium, "density", shape)
    q = acoustic_heat_source(
        p, _medium_value(medium, "alpha_coeff", shape), float(medium.alpha_power), float(f),
        rho, _medium_value(medium, "sound_speed", shape),
    )  # fmt: skip
    spacing = tuple(float(d) for d in np.broadcast_to(kgrid.spacing, (len(shape),)))
    if coarsen > 1:
        q = block_mean(q, (coarsen,) * len(shape))
        rho = rho if np.ndim(rho) == 0 else block_mean(rho, (coarsen,) * len(shape))
        spacing = tuple(d * coarsen for d in spacing)
    info = {"quantity": name, "frequency": float(f), "p_amp": p, "density": rho}
    return np.asarray(q, dtype=np.float64), spacing, info


def thermal_medium(tissue: Tissue, rho: Any) -> dict:
    """The heat model's medium (k-Wave's names) of ``tissue`` with density ``rho`` [kg/m^3]
    where the tissue gives none."""
    m = {
        "density": rho if tissue.density is None else tissue.density,
        "specific_heat": tissue.specific_heat,
        "thermal_conductivity": tissue.thermal_conductivity,
        "boundary_condition": tissue.boundary_condition,
    }
    if np.any(np.asarray(tissue.perfusion_rate) > 0):
        m.update(blood_density=tissue.blood_density, blood_specific_heat=tissue.blood_specific_heat,
                 blood_perfusion_rate=tissue.perfusion_rate,
                 blood_ambient_temperature=tissue.blood_temperature)  # fmt: skip
    return m


#: The most time steps a heat run takes (its focal temperature series is kept in memory).
MAX_STEPS = 10**8


def _above(name: str, v: float | np.ndarray, zero_ok: bool, unit: str) -> None:
    """Refuse a number or field that is not finite and > 0 (>= 0 where ``zero_ok``)."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0:
        in_range(name, float(a), 0, None, low_open=not zero_ok, unit=unit)
    elif not (np.all(np.isfinite(a)) and (np.all(a >= 0) if zero_ok else np.all(a > 0))):
        raise ValueError(f"{name}: a field with values outside {'[0' if zero_ok else '(0'}, "
                         f"inf) {unit} or NaN/Inf (min {np.nanmin(a):g})")  # fmt: skip


def check_settings(duration: float, on: float | None, dt: float, period: float | None,
                   duty: float, T0: float, tissue: Tissue | None) -> int:  # noqa: N803  # fmt: skip
    """The number of time steps of a sonication, once every setting is within its range (a
    ``ValueError`` naming the first that is not): see :func:`sonicate`."""
    in_range("duration", duration, 0, None, low_open=True, unit="s")
    in_range("dt", dt, 0, None, low_open=True, unit="s")
    if on is not None:
        in_range("on", on, 0, None, unit="s")
    if period is not None:
        in_range("period", period, 0, None, low_open=True, unit="s")
    in_range("duty", duty, 0, 1, low_open=True)
    in_range("T0", T0, -273.15, None, low_open=True, unit="degC")
    t = tissue or Tissue()
    for name, v, zero_ok, unit in (
        ("specific_heat", t.specific_heat, False, "J/(kg K)"),
        ("thermal_conductivity", t.thermal_conductivity, False, "W/(m K)"),
        ("density", 1.0 if t.density is None else t.density, False, "kg/m^3"),
        ("perfusion_rate", t.perfusion_rate, True, "1/s"),
        ("blood_density", t.blood_density, False, "kg/m^3"),
        ("blood_specific_heat", t.blood_specific_heat, False, "J/(kg K)"),
    ):  # fmt: skip
        _above(name, v, zero_ok, unit)
    in_range("blood_temperature", t.blood_temperature, -273.15, None, low_open=True, unit="degC")
    nt = round(duration / dt)
    if nt > MAX_STEPS:
        raise ValueError(f"duration / dt = {nt:g} time steps: at most {MAX_STEPS:g}; give a "
                         "larger dt or a shorter duration")  # fmt: skip
    return max(1, nt)


def heat_from_result(path: str, duration: float, on: float | None = None, dt: float = 0.1, *,
                     tissue: Tissue | None = None, T0: float = 37.0,  # noqa: N803
                     period: float | None = None, duty: float = 1.0, coarsen: int = 1,
                     frequency: float | None = None, quantity: str = "auto",
                     dtype: str = "float64", decomposition: Decomposition | str = SINGLE,
                     mesh: tuple[int, ...] | None = None,
                     progress: bool | None = False,
                     checkpoint: Checkpoint | None = None,
                     mesh_shape: tuple[int, ...] | None = None) -> HeatRun:  # fmt: skip
    """Heat the tissue of an acoustic result for ``duration`` [s] with steps of ``dt`` [s]:
    the source on for the first ``on`` seconds (None: throughout), pulsed with ``period`` [s]
    at ``duty`` if given, then cooling. ``coarsen``: thermal grid spacing in acoustic points.
    ``decomposition`` (``"single"`` or ``"pencil"`` over ``mesh`` devices per split axis,
    default all on x; ``mesh_shape``: the former spelling of ``mesh``), ``progress``: see
    :class:`~sonotile.api.heating.KWaveDiffusion`; ``checkpoint``: see :func:`sonicate`."""
    if mesh is None:
        mesh = renamed({"mesh_shape": mesh_shape}, "mesh_shape", "mesh", "heat_from_result")
    check_settings(duration, on, dt, period, duty, T0, tissue)
    if checkpoint is not None:
        checkpoint.check((path,))
    q, spacing, info = source_from_result(path, frequency, quantity, coarsen)
    run = sonicate(q, spacing, info["density"], duration, on, dt, tissue=tissue, T0=T0,
                   period=period, duty=duty, dtype=dtype, decomposition=decomposition,
                   mesh=mesh, progress=progress,
                   checkpoint=checkpoint)  # fmt: skip
    run.attrs = {"source": os.path.basename(path), "quantity": info["quantity"],
                 "frequency": info["frequency"], **run.attrs}  # fmt: skip
    return run


def _points(points: Sequence[Sequence[int]], shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """``points`` (grid indices) as one index array per axis, each checked inside ``shape``."""
    try:
        where = np.asarray(points, dtype=np.int64).reshape(len(points), -1)
    except (TypeError, ValueError):
        where = np.zeros((1, 0), np.int64)  # not whole indices: refused below
    if where.shape[1:] != (len(shape),) and len(points):
        raise ProblemError(f"points: one grid index of {len(shape)} numbers each, got {points}")
    where = where.reshape(-1, len(shape))
    if np.any(where < 0) or np.any(where >= np.asarray(shape)):
        raise ProblemError(f"points: grid indices within {shape}, got {where.tolist()}")
    return tuple(where[:, a] for a in range(len(shape)))


def sonicate(q: np.ndarray, spacing: tuple[float, ...], density: np.ndarray | float,
             duration: float, on: float | None = None, dt: float = 0.1, *,
             tissue: Tissue | None = None, T0: float = 37.0,  # noqa: N803
             period: float | None = None, duty: float = 1.0,
             dtype: str = "float64", decomposition: Decomposition | str = SINGLE,
             mesh: tuple[int, ...] | None = None, progress: bool | None = False,
             checkpoint: Checkpoint | None = None,
             mesh_shape: tuple[int, ...] | None = None,
             points: Sequence[Sequence[int]] = ()) -> HeatRun:  # fmt: skip
    """Heat a grid for ``duration`` [s] in steps of ``dt`` [s] with the heat source ``q``
    [W/m^3] (grid spacing ``spacing`` [m], tissue ``density`` [kg/m^3]) on for the first
    ``on`` seconds (None: throughout), pulsed with ``period`` [s] at ``duty`` if given;
    ``decomposition``, ``mesh`` (``mesh_shape``), ``progress``: see :func:`heat_from_result`;
    ``checkpoint``: save and stop, and resume (:class:`~sonotile.api.heating.Checkpoint`;
    raises :class:`~sonotile.api.heating.RunStopped` when it stops the run). ``points``: grid
    indices whose temperature histories are kept too (``T_points``, one column each)."""
    nt = check_settings(duration, on, dt, period, duty, T0, tissue)
    where = _points(points, tuple(q.shape))
    if mesh is None:
        mesh = renamed({"mesh_shape": mesh_shape}, "mesh_shape", "mesh", "sonicate")
    how = RunOptions.of(None, decomposition=decomposition, mesh=mesh, progress=progress,
                        checkpoint=checkpoint)  # fmt: skip
    if checkpoint is not None:
        checkpoint.check()
    n_on = nt if on is None else min(nt, max(0, round(on / dt)))
    switch = sonication(nt, dt, on, period, duty)
    focus = np.unravel_index(int(np.argmax(q)), q.shape)
    medium = thermal_medium(tissue or Tissue(), density)
    problem = heat_problem(tuple(q.shape), tuple(spacing), medium, {"T0": T0, "Q": q}, nt, dt,
                           on=switch, sensor=tuple(np.array([i, *w]) for i, w in zip(focus, where)),
                           dtype=dtype, fft="auto")  # fmt: skip
    check_decomposition(problem.co, how.decomposition)
    with x64_for(dtype):
        final, heated, raw = run_sonication(problem, n_on, how.decomposition, how.mesh,
                                            how.progress, how.checkpoint)  # fmt: skip
    cem43 = np.asarray(final["cem43_final"])
    lesion = cem43 >= LESION_CEM43
    data = {"T": np.asarray(final["T_final"]), "T_heated": heated,
            "T_max": np.asarray(final["T_max_final"]), "cem43": cem43, "lesion_map": lesion,
            "Q": q, "T_focus": np.asarray(raw["T"])[:, 0], "t": (np.arange(nt) + 1) * dt,
            "focus": np.asarray(focus)}  # fmt: skip
    if len(points):
        data["T_points"] = np.asarray(raw["T"])[:, 1:]
        data["points"] = np.stack(where, axis=1)
    attrs = {"duration": nt * dt, "on": n_on * dt,
             "lesion_size": float(np.sum(lesion) * np.prod(spacing))}  # fmt: skip
    return HeatRun(data, spacing, dt, attrs)
