"""Read a k-Wave HDF5 input file (format 1.0-1.2) into a solver-ready Problem, with the
checks k-Wave does plus the shape checks it does not. See ``docs/kwave.md``.

This is the edge of ``sonotile-kwave``: every value of the file is checked here, as it is read,
in the file's names (``dataset 'c0'``, ``'p_source_index'``); the Problem built from it finds
nothing left to refuse.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, cast, overload

import h5py
import numpy as np

from sonotile.base.files import check_input_path, hdf5_reason, refuse_links
from sonotile.kwave.layout import XyzView, linear_to_grid, to_xyz
from sonotile.model.grid import AXES, Grid
from sonotile.model.lazy import LazyField, is_lazy
from sonotile.model.problem import (
    SOURCE_MODES,
    Absorption,
    MaskSource,
    Medium,
    Pml,
    Problem,
    ProblemError,
    Sensor,
    SourceMode,
    Sources,
    TransducerSource,
    is_field,
)

#: A medium property as read: a scalar, a field, or a field read lazily from the file.
Property = float | np.ndarray | LazyField

VERSIONS = ("0", "1", "2")
#: Most time steps a run can count (the solver's step index is a 32-bit integer).
MAX_STEPS = 2**31 - 1
#: Most grid points of a run (a field's byte offsets must fit in 63 bits on any machine).
MAX_POINTS = 2**56

HEADER = (
    "file_type",
    "created_by",
    "creation_date",
    "file_description",
    "major_version",
    "minor_version",
)


class KwaveFileError(ProblemError):
    """A k-Wave file is missing something or holds something the solver cannot use."""


@dataclass
class KwaveInput:
    """What a k-Wave input file says besides the Problem: header and scalars to copy back."""

    path: str
    header: dict[str, str]
    #: name -> (value, numpy dtype) of the scalars copied to the output
    scalars: dict[str, tuple[Any, np.dtype]]
    shape_xyz: tuple[int, int, int]
    mask_type: int
    mask_raw: np.ndarray | None  # 1-based as stored, for --copy_sensor_mask
    extras: dict[str, Any] = field(default_factory=dict)


def _attr(f: h5py.File, name: str) -> str:
    if name not in f.attrs:
        raise KwaveFileError(f"{f.filename}: root attribute '{name}' is missing")
    v = f.attrs[name]
    if isinstance(v, np.ndarray):
        v = v.reshape(-1)[0]
    return v.decode() if isinstance(v, bytes | np.bytes_) else str(v)


def _reason(e: BaseException) -> str:
    """HDF5's reason, without its stack of C calls."""
    text = str(e).strip("'\"")
    return text.splitlines()[0] if text else type(e).__name__


def _values(name: str, d: h5py.Dataset) -> np.ndarray:
    """All values of dataset ``name``, or :class:`KwaveFileError` naming it when HDF5 cannot
    read them (damaged data, a filter that is not installed)."""
    try:
        return np.asarray(d[()])
    except (OSError, RuntimeError, ValueError) as e:
        raise KwaveFileError(f"dataset '{name}': cannot be read ({_reason(e)})") from None


def check_links(f: h5py.File) -> None:
    """Refuse a soft link that points at nothing in the file (a dangling link), naming it."""
    bad: list[str] = []

    def visit(name: str, link: object) -> None:
        if not bad and isinstance(link, h5py.SoftLink) and link.path not in f:
            bad.append(f"dataset '{name}': a soft link to '{link.path}', which is not in the file")

    f.visititems_links(visit)
    if bad:
        raise KwaveFileError(f"{f.filename}: {bad[0]} (a dangling link)")


class _Reader:
    """Reads datasets with the checks k-Wave does, plus the shape checks it does not."""

    def __init__(self, f: h5py.File, lazy: bool = False) -> None:
        self.f, self.lazy = f, lazy

    def has(self, name: str) -> bool:
        return name in self.f

    def raw(self, name: str) -> h5py.Dataset:
        if name not in self.f:
            raise KwaveFileError(f"{self.f.filename}: dataset '{name}' is missing")
        try:
            d = self.f[name]
        except (OSError, KeyError, RuntimeError) as e:
            raise KwaveFileError(f"dataset '{name}': cannot be opened ({_reason(e)})") from None
        if not isinstance(d, h5py.Dataset):
            raise KwaveFileError(f"dataset '{name}': is a group, expected a dataset")
        if d.dtype.kind not in "fiu":
            raise KwaveFileError(
                f"dataset '{name}': type {d.dtype} cannot be read as a number "
                "(expected float32 or uint64)"
            )
        if d.ndim != 3:
            raise KwaveFileError(
                f"dataset '{name}': rank {d.ndim} (shape {d.shape}), expected rank 3"
            )
        return d

    @overload
    def scalar(self, name: str, kind: type[int]) -> int: ...

    @overload
    def scalar(self, name: str, kind: type[float] = ...) -> float: ...

    def scalar(self, name: str, kind: type = float) -> int | float:
        d = self.raw(name)
        if d.shape != (1, 1, 1):
            raise KwaveFileError(f"dataset '{name}': shape {d.shape}, expected a scalar (1, 1, 1)")
        v = _values(name, d).reshape(-1)[0]
        if kind is int:
            if d.dtype.kind == "f" and (not np.isfinite(v) or v != np.floor(v)):
                raise KwaveFileError(f"dataset '{name}': {v} is not an integer")
            if v < 0:
                raise KwaveFileError(f"dataset '{name}': {v} is negative")
            return int(v)
        v = float(v)
        if not np.isfinite(v):
            raise KwaveFileError(f"dataset '{name}': {v} is not finite")
        return v

    @overload
    def field(
        self, name: str, zyx: tuple[int, ...], scalar_ok: Literal[False]
    ) -> np.ndarray | LazyField: ...

    @overload
    def field(self, name: str, zyx: tuple[int, ...], scalar_ok: bool = ...) -> Property: ...

    def field(self, name: str, zyx: tuple[int, ...], scalar_ok: bool = True) -> Property:
        """A scalar (1,1,1) or a field stored (Nz, Ny, Nx); returned as float or (x, y[, z])."""
        d = self.raw(name)
        if scalar_ok and d.shape == (1, 1, 1):
            return self.scalar(name)
        if d.shape != zyx:
            want = f"(1, 1, 1) or {zyx}" if scalar_ok else f"{zyx}"
            raise KwaveFileError(
                f"dataset '{name}': shape {d.shape}, expected {want} (stored as (Nz, Ny, Nx))"
            )
        if self.lazy:  # read hyperslab by hyperslab, each checked when it is read
            dt = np.float32 if d.dtype == np.float32 else np.float64
            return LazyField.of(XyzView(d, dt), f"dataset '{name}'", "finite")
        a = _values(name, d)
        if a.dtype != np.float32:  # k-Wave's float32 fields stay float32 (half the host memory)
            a = a.astype(np.float64)
        if not np.all(np.isfinite(a)):
            raise KwaveFileError(f"dataset '{name}': contains NaN or Inf")
        return to_xyz(a)

    def vector(self, name: str, count: int | None = None) -> np.ndarray:
        """Any rank-3 dataset read as a flat vector (k-Wave checks the element count only)."""
        d = self.raw(name)
        v = _values(name, d).reshape(-1)
        if count is not None and v.size != count:
            raise KwaveFileError(f"dataset '{name}': {v.size} elements, expected {count}")
        return v

    def indices(self, name: str, n_points: int) -> np.ndarray:
        v = self.vector(name)
        if v.size == 0:
            raise KwaveFileError(f"dataset '{name}': empty")
        if v.dtype.kind == "f" and np.any(v != np.floor(v)):
            raise KwaveFileError(f"dataset '{name}': indices must be integers")
        bad = (v < 1) | (v > n_points)  # in the stored type: no wrap (n_points <= 2**56)
        if np.any(bad):
            first = v[np.argmax(bad)]
            shown = int(first) if v.dtype.kind in "iu" else f"{float(first):.6g}"
            raise KwaveFileError(f"dataset '{name}': index {shown} out of range 1..{n_points}")
        v = v.astype(np.int64)  # exact: all within 1..n_points
        return v


SCALARS_COPIED = (
    "Nx", "Ny", "Nz", "axisymmetric_flag", "Nt", "dt", "dx", "dy", "dz", "c_ref",
    "pml_x_size", "pml_y_size", "pml_z_size", "pml_x_alpha", "pml_y_alpha", "pml_z_alpha",
    "p_source_flag", "p0_source_flag", "transducer_source_flag", "ux_source_flag",
    "uy_source_flag", "uz_source_flag", "nonuniform_grid_flag", "absorbing_flag",
    "nonlinear_flag", "u_source_many", "u_source_mode", "p_source_many", "p_source_mode",
)  # fmt: skip


def _signal(r: _Reader, name: str, flag: int, many: int, n_src: int) -> np.ndarray:
    """A source signal: ``(flag,)`` when shared, ``(flag, Nsrc)`` when one per point."""
    if many:
        v = r.vector(name, flag * n_src)
        return _finite(name, v.astype(np.float64).reshape(flag, n_src))
    d = r.raw(name)
    if d.size != flag:
        raise KwaveFileError(
            f"dataset '{name}': {d.size} samples, expected {flag} (its source flag)"
        )
    return _finite(name, r.vector(name).astype(np.float64))


def _finite(name: str, v: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(v)):
        raise KwaveFileError(f"dataset '{name}': contains NaN or Inf")
    return v


def read_input(
    path: str,
    nt_override: int | None = None,
    start: int = 1,
    record: tuple[str, ...] = ("p",),
    dtype: str = "float32",
    lazy: bool = False,
    size_check: Callable[[tuple[int, ...], int], None] | None = None,
) -> tuple[Problem, KwaveInput]:
    """Read a k-Wave input file (format 1.0, 1.1, 1.2) into a solver-ready Problem.

    Args:
        path: input file.
        nt_override: ``--benchmark N``: number of steps instead of ``Nt``.
        start: ``-s``: first sampled step, 1-based as on k-Wave's command line.
        record: quantities to record (from :data:`sonotile.model.problem.RECORDABLE`).
        dtype: ``float32`` (k-Wave's precision) or ``float64``.
        lazy: leave grid-sized fields (medium, p0) in the file as :class:`LazyField` views,
            read and checked hyperslab by hyperslab when a process builds its shards (the file
            stays open; distributed runs). Scalars, indices and signals are read at once.
        size_check: called with the grid shape and the number of steps as soon as they are
            read, before anything sized by them is read or allocated (the memory check).

    Raises:
        KwaveFileError: naming the dataset or attribute and what was expected.
    """
    check_input_path(path, "input file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise KwaveFileError(f"{path}: cannot open as HDF5 ({hdf5_reason(e)})") from None
    with contextlib.nullcontext(f) if lazy else f:
        refuse_links(f)
        check_links(f)
        header = {k: _attr(f, k) for k in HEADER}
        if header["file_type"] != "input":
            raise KwaveFileError(f"{path}: file_type is '{header['file_type']}', expected 'input'")
        if header["major_version"] != "1" or header["minor_version"] not in VERSIONS:
            raise KwaveFileError(
                f"{path}: file format version {header['major_version']}.{header['minor_version']}"
                " is not supported (expected 1.0, 1.1 or 1.2)"
            )
        minor = int(header["minor_version"])
        r = _Reader(f, lazy)
        nx, ny, nz = (r.scalar(n, int) for n in ("Nx", "Ny", "Nz"))
        if min(nx, ny, nz) < 1:
            raise KwaveFileError(f"grid size Nx, Ny, Nz = {nx, ny, nz}: each must be >= 1")
        if ny == 1 and nz == 1 and not r.has("dy"):
            raise KwaveFileError(
                f"grid size Nx, Ny, Nz = {nx, ny, nz} and no dataset 'dy': a 1-D input file. "
                "k-Wave's C++ solvers, and sonotile-kwave with them, run 2-D and 3-D grids "
                "only; sonotile's Python API (sonotile.simulate) runs 1-D grids"
            )
        ndim = 2 if nz == 1 else 3
        shape = (nx, ny) if ndim == 2 else (nx, ny, nz)
        if min(shape) < 2:
            raise KwaveFileError(
                f"grid size Nx, Ny, Nz = {nx, ny, nz}: each axis of a {ndim}-D grid needs at "
                "least 2 points"
            )
        zyx = (nz, ny, nx)
        # k-Wave 1.3 reads the flag from format 1.2 on and uses it on 2-D grids only
        axisym = (
            minor == 2 and ndim == 2 and r.has("axisymmetric_flag")
            and bool(r.scalar("axisymmetric_flag", int))
        )  # fmt: skip
        if r.has("nonuniform_grid_flag") and r.scalar("nonuniform_grid_flag", int):
            raise KwaveFileError(
                "dataset 'nonuniform_grid_flag': non-uniform grids are not supported"
            )
        nt = r.scalar("Nt", int)
        if nt < 1:
            raise KwaveFileError(f"dataset 'Nt': {nt}, expected >= 1")
        if nt_override is not None:
            nt = int(nt_override)
        _check_sizes((nx, ny, nz), nt, "Nt" if nt_override is None else "--benchmark")
        if size_check is not None:
            size_check(shape, nt)
        spacing = tuple(r.scalar(f"d{a}") for a in AXES[:ndim])
        for a, d in zip(AXES, spacing):
            if d <= 0:
                raise KwaveFileError(f"dataset 'd{a}': {d} m, expected > 0")
        dt = r.scalar("dt")
        if dt <= 0:
            raise KwaveFileError(f"dataset 'dt': {dt} s, expected > 0")
        grid = Grid(shape, spacing, dt, nt)

        absorbing = r.scalar("absorbing_flag", int)
        if absorbing > 2:
            raise KwaveFileError(f"dataset 'absorbing_flag': {absorbing}, expected 0, 1 or 2")
        if axisym and absorbing == 1:
            raise KwaveFileError(
                "dataset 'absorbing_flag': 1 (power law) is not supported with "
                "axisymmetric_flag = 1 (k-Wave's axisymmetric model absorbs with absorbing_flag 2)"
            )
        nonlinear = r.scalar("nonlinear_flag", int)
        c0 = r.field("c0", zyx)
        rho0 = r.field("rho0", zyx)
        c0, rho0 = _positive("c0", c0), _positive("rho0", rho0)
        rho_field = is_field(rho0)
        rho0_sg = tuple(
            r.field(f"rho0_sg{a}", zyx, scalar_ok=not rho_field)
            if rho_field
            else r.scalar(f"rho0_sg{a}")
            for a in AXES[:ndim]
        )
        rho0_sg = tuple(_positive(f"rho0_sg{a}", v) for a, v in zip(AXES, rho0_sg))
        c_ref = r.scalar("c_ref")
        if c_ref <= 0:
            raise KwaveFileError(f"dataset 'c_ref': {c_ref} m/s, expected > 0")
        mode = cast(Absorption, {0: "lossless", 1: "power_law", 2: "stokes"}[absorbing])
        alpha_coeff = alpha_power = None
        if absorbing:
            alpha_coeff = _nonnegative("alpha_coeff", r.field("alpha_coeff", zyx))
            alpha_power = r.scalar("alpha_power")
            if not 0 <= alpha_power <= 3:
                raise KwaveFileError(f"dataset 'alpha_power': {alpha_power}, expected 0 to 3")
            if absorbing == 1 and alpha_power == 1.0:
                raise KwaveFileError(
                    "dataset 'alpha_power': 1.0 is not allowed with power-law "
                    "absorption (tan(pi y/2) is infinite)"
                )
        bona = r.field("BonA", zyx) if nonlinear else None
        medium = Medium(
            c0, rho0, grid, rho0_sg=rho0_sg, c_ref=c_ref, bona=bona, alpha_coeff=alpha_coeff,
            alpha_power=alpha_power, absorption=mode,
        )  # fmt: skip
        pml = _read_pml(r, shape, axisym)
        sources, scalars_src = _read_sources(r, grid, zyx, ndim)
        mask_type = r.scalar("sensor_mask_type", int) if minor >= 1 else 0
        n_points = nx * ny * nz  # Python ints: no wrap
        if mask_type == 0:
            lin = r.indices("sensor_mask_index", n_points)
            sensor = Sensor(index=linear_to_grid(lin, shape), record=record, start=start - 1)
            mask_raw = lin
        elif mask_type == 1:
            d = r.raw("sensor_mask_corners")
            if d.size % 6 or d.size == 0:
                raise KwaveFileError(
                    f"dataset 'sensor_mask_corners': {d.size} elements, expected 6 per cuboid"
                )
            c = r.vector("sensor_mask_corners").astype(np.int64).reshape(-1, 2, 3)
            dims = np.array([nx, ny, nz])
            if np.any(c < 1) or np.any(c > dims):
                raise KwaveFileError(
                    f"dataset 'sensor_mask_corners': corner outside the grid 1..{(nx, ny, nz)}"
                )
            if np.any(c[:, 1] < c[:, 0]):
                raise KwaveFileError("dataset 'sensor_mask_corners': second corner below first")
            sensor = Sensor(cuboids=(c - 1)[:, :, :ndim], record=record, start=start - 1)
            mask_raw = c.reshape(-1)
        else:
            raise KwaveFileError(f"dataset 'sensor_mask_type': {mask_type}, expected 0 or 1")
        if not 1 <= start <= nt:
            raise KwaveFileError(f"-s {start}: the start step must be in 1..Nt = 1..{nt}")
        scalars: dict[str, tuple[Any, np.dtype]] = {}
        for name in SCALARS_COPIED:
            if name in f and f[name].shape == (1, 1, 1):
                if name.endswith("source_many") or name.endswith("source_mode"):
                    continue
                scalars[name] = (f[name][()], f[name].dtype)
        scalars.update(scalars_src)
        if ndim == 2:
            for name in ("dz", "pml_z_size", "pml_z_alpha", "uz_source_flag"):
                scalars.pop(name, None)
        if nt_override is not None:
            scalars["Nt"] = (np.full((1, 1, 1), nt, np.uint64), np.dtype(np.uint64))
    problem = Problem(
        grid, medium, sources, sensor, pml, dtype=dtype, radial_symmetry="WSWA" if axisym else None
    )
    meta = KwaveInput(path, header, scalars, (nx, ny, nz), mask_type, mask_raw)
    if lazy:
        meta.extras["file"] = f  # the lazy fields read from it
    return problem, meta


def _check_sizes(shape_xyz: tuple[int, int, int], nt: int, nt_name: str) -> None:
    """Grid and time axis within what a run can hold and count (Python integers)."""
    points = math.prod(shape_xyz)
    if points > MAX_POINTS:
        raise KwaveFileError(
            f"datasets 'Nx', 'Ny', 'Nz': {shape_xyz} = {points} grid points, more than any "
            f"machine can hold ({MAX_POINTS})"
        )
    if nt > MAX_STEPS:
        raise KwaveFileError(
            f"{'dataset ' if nt_name == 'Nt' else ''}'{nt_name}': {nt} time steps, more than the "
            f"{MAX_STEPS} a run can count "
            "(32-bit step index)"
        )


def _positive(name: str, v: Property) -> Property:
    """A medium field or scalar that must be > 0 (checked now, or per hyperslab when lazy)."""
    if is_lazy(v):  # made by _Reader.field: checked as each hyperslab is read
        v.check = "positive"
        return v
    if np.any(np.asarray(v) <= 0):
        raise KwaveFileError(f"dataset '{name}': must be > 0 everywhere")
    return v


def _nonnegative(name: str, v: Property) -> Property:
    """A medium field or scalar that must be >= 0 (checked now, or per hyperslab when lazy)."""
    if is_lazy(v):  # made by _Reader.field: checked as each hyperslab is read
        v.check = "nonnegative"
        return v
    if np.any(np.asarray(v) < 0):
        raise KwaveFileError(f"dataset '{name}': must be >= 0 everywhere")
    return v


def _read_pml(r: _Reader, shape: tuple[int, ...], axisym: bool) -> Pml:
    """``pml_{x,y,z}_size`` (leaving interior points: on both sides of an axis, on the outer
    edge only of an axisymmetric grid's radial y) and ``pml_{x,y,z}_alpha`` (>= 0)."""
    size, alpha = [], []
    for ax, (a, n) in enumerate(zip(AXES, shape)):
        s = r.scalar(f"pml_{a}_size", int)
        sides = 1 if axisym and ax == 1 else 2
        if sides * s >= n:
            raise KwaveFileError(
                f"dataset 'pml_{a}_size': {s} points on {sides} side(s) leave no interior of "
                f"N{a} = {n}"
            )
        al = r.scalar(f"pml_{a}_alpha")
        if al < 0:
            raise KwaveFileError(f"dataset 'pml_{a}_alpha': {al}, expected >= 0")
        size.append(s)
        alpha.append(al)
    return Pml(tuple(size), tuple(alpha))


def _read_sources(
    r: _Reader, grid: Grid, zyx: tuple[int, ...], ndim: int
) -> tuple[Sources, dict[str, tuple[Any, np.dtype]]]:
    n_points = math.prod(zyx)
    shape = grid.shape
    copied: dict[str, tuple[Any, np.dtype]] = {}
    p0 = None
    if r.scalar("p0_source_flag", int) == 1:
        p0 = r.field("p0_source_input", zyx, scalar_ok=False)
    p = None
    p_flag = r.scalar("p_source_flag", int)
    if p_flag:
        mode = r.scalar("p_source_mode", int)
        many = r.scalar("p_source_many", int)
        if mode > 2:
            raise KwaveFileError(f"dataset 'p_source_mode': {mode}, expected 0, 1 or 2")
        idx = linear_to_grid(r.indices("p_source_index", n_points), shape)
        sig = _signal(r, "p_source_input", p_flag, many, idx.shape[0])
        p = MaskSource(idx, sig, cast(SourceMode, SOURCE_MODES[mode]), "p_source")
        for n in ("p_source_mode", "p_source_many"):
            copied[n] = (r.raw(n)[()], r.raw(n).dtype)
    u_flags = [r.scalar(f"u{a}_source_flag", int) for a in AXES[:ndim]]
    tr_flag = r.scalar("transducer_source_flag", int)
    u: list[MaskSource | None] = [None] * ndim
    transducer = None
    if any(u_flags) or tr_flag:
        idx = linear_to_grid(r.indices("u_source_index", n_points), shape)
    if any(u_flags):
        mode = r.scalar("u_source_mode", int)
        many = r.scalar("u_source_many", int)
        if mode > 2:
            raise KwaveFileError(f"dataset 'u_source_mode': {mode}, expected 0, 1 or 2")
        for ax, flag in enumerate(u_flags):
            if flag:
                name = f"u{AXES[ax]}_source_input"
                u[ax] = MaskSource(
                    idx, _signal(r, name, flag, many, idx.shape[0]),
                    cast(SourceMode, SOURCE_MODES[mode]), name,
                )  # fmt: skip
        for n in ("u_source_mode", "u_source_many"):
            copied[n] = (r.raw(n)[()], r.raw(n).dtype)
    if tr_flag:
        sig = _finite("transducer_source_input", r.vector("transducer_source_input").astype(float))
        delay = r.vector("delay_mask", idx.shape[0])
        if np.any(delay < 1):
            raise KwaveFileError("dataset 'delay_mask': delays are 1-based, found a value < 1")
        delay = delay.astype(np.int64) - 1
        if delay.max() + tr_flag > sig.size:
            raise KwaveFileError(
                f"dataset 'transducer_source_input': {sig.size} samples, expected at least "
                f"max(delay_mask) + transducer_source_flag = {int(delay.max()) + tr_flag}"
            )
        transducer = TransducerSource(idx, sig, delay, tr_flag)
    return Sources(p0=p0, p=p, u=tuple(u), transducer=transducer), copied
