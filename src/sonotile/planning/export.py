"""A plan's acoustic run as a k-Wave input file, so that k-Wave's own solvers
(``kspaceFirstOrder-OMP``/``-CUDA``) or ``sonotile-kwave`` run the very same problem: the
medium on the beam grid, the transducer's elements with the plan's drive (the corrected one
for an array), the PML outside the grid. Run it with ``--p_max_all -s START`` (START from
:func:`write_kwave_input`): the maximum over the last periods, after the field is steady.
"""

from __future__ import annotations

import numpy as np

from sonotile.api.problem import build_problem
from sonotile.api.types import KSensor, KSource, Options
from sonotile.base import files
from sonotile.kwave.writer import write_input
from sonotile.model.signals import create_cw_signals
from sonotile.planning.acoustics import RunSettings, make_kgrid, steps_per_period
from sonotile.planning.chain import Plan
from sonotile.planning.geometry import kwave_medium

#: The most grid-sized maps a k-Wave input file holds (medium, staggered densities, masks).
FIELDS_AT_MOST = 12


def write_kwave_input(
    p: Plan,
    path: str,
    record_periods: int = 4,
    run: RunSettings | None = None,
    drive: tuple[np.ndarray, np.ndarray] | None = None,
    sensor_mask: np.ndarray | None = None,
) -> int:
    """Write the plan's forward run to ``path`` (k-Wave HDF5 input, format 1.2) with the
    plan's time axis (a whole number of steps per period); the 1-based first step of the last
    ``record_periods`` periods (k-Wave's ``-s``). ``drive``: per element (amplitude [Pa],
    phase [rad]) as driven, e.g. the optimised drive's (default: the plan's).
    ``sensor_mask``: where ``-p`` records the pressure (boolean, ``p.grid.shape``; default:
    the target's grid point), e.g. for the steady-state amplitude by a DFT over the last
    periods."""
    medium = kwave_medium(p.maps)
    f = p.settings.frequency
    kgrid = make_kgrid(p.grid, medium, f, run or RunSettings())
    assert kgrid.dt is not None and kgrid.nt is not None  # make_kgrid sets both
    per_period = steps_per_period(kgrid.dt, f)
    karray = p.transducer.karray(p.pose, p.grid)
    amplitude, phase = (p.drive[0] * p.scale, p.drive[1]) if drive is None else drive
    sig = create_cw_signals(kgrid.t, f, np.asarray(amplitude), np.asarray(phase))
    signals = karray.get_distributed_source_signal(kgrid, sig).astype(np.float32)
    source = KSource(p_mask=karray.get_array_binary_mask(kgrid), p=signals)
    at_target = np.zeros(p.grid.shape, bool)
    at_target[p.grid.target_index] = True
    if sensor_mask is not None:
        if np.shape(sensor_mask) != tuple(p.grid.shape) or not np.any(sensor_mask):
            raise ValueError(f"sensor_mask: a boolean map of shape {tuple(p.grid.shape)} "
                             "with at least one point")  # fmt: skip
        at_target = np.asarray(sensor_mask, dtype=bool)  # the points recorded
    options = Options(pml_size=p.grid.pml_size, pml_inside=False, smooth_p0=False)
    problem, _ = build_problem(kgrid, medium, source, KSensor(mask=at_target), options)
    fields = FIELDS_AT_MOST * 4 * int(np.prod(p.grid.total_shape))  # float32 maps
    files.check_room(path, fields + signals.nbytes, f"k-Wave input file '{path}'")
    write_input(path, problem, f"sonotile plan: {p.transducer.spec} at {f:g} Hz")
    return int(kgrid.nt - record_periods * per_period + 1)
