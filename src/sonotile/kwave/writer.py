"""Write k-Wave HDF5 input files (format 1.2): what k-Wave's C++ solvers and
``sonotile-kwave`` run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import h5py
import numpy as np

from sonotile.base.files import open_own_hdf5
from sonotile.kwave.layout import grid_to_linear, to_zyx
from sonotile.kwave.output import partial_file
from sonotile.model.grid import AXES
from sonotile.model.problem import (
    SOURCE_MODES,
    Problem,
    ProblemError,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from sonotile.model.problem import MaskSource, Scalar


def put_dataset(f: h5py.File, name: str, value: ArrayLike, kind: str) -> None:
    """Write one k-Wave input dataset: ``kind`` ``"float"`` (float32) or ``"long"`` (uint64),
    rank 3 (scalars ``(1, 1, 1)``, vectors ``(1, 1, N)``), with its type attributes."""
    a = np.asarray(value, np.float32 if kind == "float" else np.uint64)
    if a.ndim == 0 or a.size == 1 and a.ndim <= 1:
        a = a.reshape(1, 1, 1)
    elif a.ndim == 1:
        a = a.reshape(1, 1, -1)
    d = f.create_dataset(name, data=a)
    d.attrs["data_type"] = np.bytes_(kind.encode())
    d.attrs["domain_type"] = np.bytes_(b"real")


def _field(v: Scalar) -> np.ndarray | float:
    return to_zyx(v) if np.ndim(v) > 0 else float(np.asarray(v))


def _signal_zyx(src: MaskSource) -> np.ndarray:
    sig = np.asarray(src.signal)
    return sig.reshape(1, 1, -1) if sig.ndim == 1 else sig.reshape(1, sig.shape[0], -1)


def _write_header(f: h5py.File, description: str) -> None:
    import time as _time

    from sonotile.base.version import __version__

    header = {
        "file_type": "input",
        "created_by": f"sonotile {__version__}",
        "creation_date": _time.strftime("%d-%b-%Y-%H-%M-%S"),
        "file_description": description,
        "major_version": "1",
        "minor_version": "2",
    }
    for k, v in header.items():
        f.attrs[k] = np.bytes_(v.encode())


def _write_grid_medium(f: h5py.File, problem: Problem) -> None:
    """Grid, time axis, PML and medium datasets."""
    g, m, put = problem.grid, problem.medium, put_dataset
    for name, v in zip(("Nx", "Ny", "Nz"), tuple(g.shape) + (1,) * (3 - g.ndim)):
        put(f, name, v, "long")
    put(f, "Nt", g.nt, "long")
    for name, x in (("dt", g.dt), ("c_ref", m.c_ref)):
        put(f, name, x, "float")
    for a in range(g.ndim):
        put(f, f"d{AXES[a]}", g.spacing[a], "float")
        put(f, f"pml_{AXES[a]}_size", problem.pml.size[a], "long")
        put(f, f"pml_{AXES[a]}_alpha", problem.pml.alpha[a], "float")
        put(f, f"rho0_sg{AXES[a]}", _field(m.rho0_sg[a]), "float")
    put(f, "c0", _field(m.c0), "float")
    put(f, "rho0", _field(m.rho0), "float")
    put(f, "nonuniform_grid_flag", 0, "long")
    if problem.radial_symmetry not in (None, "WSWA"):
        raise ProblemError(
            f"radial_symmetry = {problem.radial_symmetry!r}: k-Wave input files hold WSWA "
            "axisymmetric runs only (k-Wave's C++ solver has no other)"
        )
    put(f, "axisymmetric_flag", int(problem.radial_symmetry is not None), "long")
    put(f, "nonlinear_flag", int(m.nonlinear), "long")
    if m.nonlinear:
        put(f, "BonA", _field(m.bona), "float")
    absorbing = {"lossless": 0, "power_law": 1, "stokes": 2}[m.absorption]
    if absorbing == 1 and not m.dispersion:
        raise ProblemError("k-Wave input files cannot switch the dispersion term off")
    put(f, "absorbing_flag", absorbing, "long")
    if absorbing:
        put(f, "alpha_coeff", _field(m.alpha_coeff), "float")
        put(f, "alpha_power", m.alpha_power, "float")


def _write_sources(f: h5py.File, problem: Problem) -> None:
    """p0, p, u and transducer sources (u and transducer share one index list in the file)."""
    g, s, put = problem.grid, problem.sources, put_dataset

    def lin(index: ArrayLike) -> np.ndarray:
        return grid_to_linear(np.asarray(index), g.shape)

    put(f, "p0_source_flag", int(s.p0 is not None), "long")
    if s.p0 is not None:
        put(f, "p0_source_input", to_zyx(s.p0), "float")
    put(f, "p_source_flag", 0 if s.p is None else s.p.length, "long")
    if s.p is not None:
        put(f, "p_source_mode", SOURCE_MODES.index(s.p.mode), "long")
        put(f, "p_source_many", int(s.p.many), "long")
        put(f, "p_source_index", lin(s.p.index), "long")
        put(f, "p_source_input", _signal_zyx(s.p), "float")
    us = [u for u in s.u if u is not None]
    for a in range(g.ndim):
        u = s.u[a] if a < len(s.u) else None
        put(f, f"u{AXES[a]}_source_flag", 0 if u is None else u.length, "long")
        if u is not None:
            put(f, f"u{AXES[a]}_source_input", _signal_zyx(u), "float")
    put(f, "transducer_source_flag", 0 if s.transducer is None else s.transducer.length, "long")
    index_sets = [u.index for u in us] + ([s.transducer.index] if s.transducer else [])
    if index_sets:
        if any(not np.array_equal(i, index_sets[0]) for i in index_sets):
            raise ProblemError(
                "k-Wave input files share one u_source_index between ux, uy, uz and the "
                "transducer; these sources differ in their points"
            )
        put(f, "u_source_index", lin(index_sets[0]), "long")
    if us:
        if len({u.mode for u in us}) > 1 or len({u.many for u in us}) > 1:
            raise ProblemError(
                "k-Wave input files share one u_source_mode/many between ux, uy and uz"
            )
        put(f, "u_source_mode", SOURCE_MODES.index(us[0].mode), "long")
        put(f, "u_source_many", int(us[0].many), "long")
    if s.transducer is not None:
        put(f, "transducer_source_input", s.transducer.signal, "float")
        put(f, "delay_mask", np.asarray(s.transducer.delay) + 1, "long")


def _write_sensor(f: h5py.File, problem: Problem) -> None:
    g, sen, put = problem.grid, problem.sensor, put_dataset
    if sen.cuboids is not None:
        c = np.asarray(sen.cuboids) + 1
        if g.ndim == 2:
            c = np.concatenate([c, np.ones(c.shape[:2] + (1,), c.dtype)], axis=2)
        put(f, "sensor_mask_type", 1, "long")
        put(f, "sensor_mask_corners", c.reshape(1, -1, 6), "long")
        return
    if sen.index is None:
        raise ProblemError("k-Wave input files need sensor points (index or cuboids)")
    put(f, "sensor_mask_type", 0, "long")
    put(f, "sensor_mask_index", grid_to_linear(np.asarray(sen.index), g.shape), "long")


def write_input(path: str, problem: Problem, description: str = "written by sonotile") -> None:
    """Write a solver-ready :class:`Problem` as a k-Wave input file (format 1.2), the inverse of
    :func:`read_input`: what k-Wave's ``kspaceFirstOrder-OMP`` (or ``sonotile-kwave``) runs.

    Supports 2-D and 3-D grids, index or cuboid sensors, every source of the file format. The
    file is written under a temporary name and renamed when complete (nothing is left when it
    fails).
    """
    if problem.grid.ndim not in (2, 3):
        raise ProblemError(f"k-Wave input files are 2-D or 3-D; this grid is {problem.grid.ndim}-D")
    with partial_file(path) as tmp, open_own_hdf5(tmp, "w") as f:
        _write_header(f, description)
        _write_grid_medium(f, problem)
        _write_sources(f, problem)
        _write_sensor(f, problem)
