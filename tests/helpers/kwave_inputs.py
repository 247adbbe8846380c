"""Small synthetic k-Wave input files (format 1.2 unless told) for the sonotile-kwave tests.

``write_input(path, ...)`` writes a valid 2-D (or 3-D) input exactly as docs/kwave-format.md asks
(rank-3 datasets, uint64 integers, float32 reals, data_type/domain_type attributes, root header
attributes); keyword arguments change single items so that each test can break one thing.
"""

from __future__ import annotations

import h5py
import numpy as np

FLOAT = {"data_type": np.bytes_(b"float"), "domain_type": np.bytes_(b"real")}
LONG = {"data_type": np.bytes_(b"long"), "domain_type": np.bytes_(b"real")}
DROP = object()  # value meaning "leave this dataset out"


def _put(f: h5py.File, name: str, value) -> None:
    if value is DROP:
        return
    a = np.asarray(value)
    if a.dtype.kind in "SUO":
        f.create_dataset(name, data=a)
        return
    if a.ndim == 0:
        a = a.reshape(1, 1, 1)
    d = f.create_dataset(name, data=a)
    for k, v in (LONG if a.dtype.kind in "iu" else FLOAT).items():
        d.attrs[k] = v


def datasets(
    shape=(32, 28), nt=60, p0=True, p_source=False, cuboid=False, sensor_points=None
) -> dict:
    """The datasets of a valid input as ``{name: array}`` (stored layout, (Nz, Ny, Nx))."""
    nx, ny = shape[:2]
    nz = shape[2] if len(shape) == 3 else 1
    zyx = (nz, ny, nx)
    u64, f32 = np.uint64, np.float32
    d: dict = {}
    for n, v in (("Nx", nx), ("Ny", ny), ("Nz", nz), ("Nt", nt)):
        d[n] = u64(v)
    dx = 1e-4
    d.update(dt=f32(2e-8), dx=f32(dx), dy=f32(dx), c_ref=f32(1500.0))
    axes = "xyz" if nz > 1 else "xy"
    if nz > 1:
        d["dz"] = f32(dx)
    for a in axes:
        d[f"pml_{a}_size"] = u64(6 if nz == 1 else 4)
        d[f"pml_{a}_alpha"] = f32(2.0)
        d[f"u{a}_source_flag"] = u64(0)
    for n in ("transducer_source_flag", "nonuniform_grid_flag", "nonlinear_flag"):
        d[n] = u64(0)
    d["absorbing_flag"] = u64(0)
    d["axisymmetric_flag"] = u64(0)
    c0 = np.full(zyx, 1500.0, f32)
    c0[..., nx // 2 + 3 :] = 1700.0  # heterogeneous: a faster slab
    d["c0"] = c0
    d["rho0"] = np.full(zyx, 1000.0, f32)
    for a in axes:
        d[f"rho0_sg{a}"] = np.full(zyx, 1000.0, f32)
    z, y, x = np.meshgrid(*(np.arange(n) for n in zyx), indexing="ij")
    if p0:
        r2 = (x - nx // 2 + 4) ** 2 + (y - ny // 2) ** 2 + ((z - nz // 2) ** 2 if nz > 1 else 0)
        d["p0_source_flag"] = u64(1)
        d["p0_source_input"] = np.where(r2 <= 9, 1.0, 0.0).astype(f32)
    else:
        d["p0_source_flag"] = u64(0)
    if p_source:
        n_sig = nt // 2
        idx = 1 + (nx // 2 - 6) + nx * (ny // 2 + np.arange(-2, 3)) + nx * ny * (nz // 2)
        t = np.arange(n_sig)
        d["p_source_flag"] = u64(n_sig)
        d["p_source_mode"] = u64(2)
        d["p_source_many"] = u64(0)
        d["p_source_index"] = idx.astype(u64).reshape(1, 1, -1)
        d["p_source_input"] = (0.01 * np.sin(2 * np.pi * t / 12)).astype(f32).reshape(1, 1, -1)
    else:
        d["p_source_flag"] = u64(0)
    if cuboid:
        d["sensor_mask_type"] = u64(1)
        z2 = nz // 2 + 1
        c = [[8, 6, max(1, z2 - 1), 12, 10, z2], [nx // 2 + 2, 12, 1, nx - 2, 14, min(nz, 2)]]
        d["sensor_mask_corners"] = np.array(c, u64).reshape(1, 2, 6)
    else:
        d["sensor_mask_type"] = u64(0)
        pts = sensor_points or [(nx // 2 + 6, ny // 2 + k, nz // 2) for k in range(-4, 5, 2)]
        lin = [1 + px + nx * py + nx * ny * pz for px, py, pz in pts]
        d["sensor_mask_index"] = np.array(lin, u64).reshape(1, 1, -1)
    return d


HEADER = {
    "file_type": "input",
    "created_by": "sonotile tests",
    "creation_date": "01/01/25, 00:00:00",
    "file_description": "synthetic test input",
    "major_version": "1",
    "minor_version": "2",
}


def write_input(path, header=None, **overrides) -> str:
    """Write an input file; ``overrides`` replace datasets (``DROP`` removes one),
    ``header`` replaces root attributes (``DROP`` removes one). Keyword arguments of
    :func:`datasets` (shape, nt, p0, p_source, cuboid, sensor_points) are passed on."""
    kw = {
        k: overrides.pop(k)
        for k in ("shape", "nt", "p0", "p_source", "cuboid", "sensor_points")
        if k in overrides
    }
    d = datasets(**kw)
    d.update(overrides)
    h = dict(HEADER)
    h.update(header or {})
    with h5py.File(path, "w") as f:
        for k, v in h.items():
            if v is not DROP:
                f.attrs[k] = np.bytes_(v.encode())
        for name, v in d.items():
            _put(f, name, v)
    return str(path)
