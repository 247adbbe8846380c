"""``u_split_field`` (the particle velocity split into its compressional and shear parts) on a
pencil mesh of virtual CPU devices against one device, in 2-D and 3-D: equal to round-off, and
the split made on the mesh still separates the waves (an initial pressure in a homogeneous
solid radiates a compressional wave only; the parts add up to the velocity on the grid
points). On LFB blocks the record is refused in the user's names, pointing to pencils."""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices

SCRIPT = r"""
import json
import sys
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import sonotile as st

n_dev = len(jax.devices())
assert n_dev == int(sys.argv[1]), jax.devices()
dims = [int(d) for d in sys.argv[2].split(",")]
RECORD = ("u_split_field", "u_non_staggered")
CP, CS, RHO, DX = 2000.0, 1000.0, 1500.0, 1e-4


def case(shape, nt):
    # the single-device split test's case (tests/physics/test_elastic_sensors.py) and a 3-D
    # version of it without PML (periodic: a compressional wave only, to round-off): a p0
    # block in a homogeneous solid, sensor points beyond it
    nd = len(shape)
    p0 = np.zeros(shape)
    p0[tuple(slice(n // 2 - 2, n // 2 + 2) for n in shape)] = 1e3
    mask = np.zeros(shape, bool)
    if nd == 2:
        mask[30:34, 10:40:3] = True
    else:
        mask[12:14, 5:13:3, 5:11:2] = True
    grid = st.KWaveGrid(shape, DX, dt=0.2 * DX / CP, nt=nt)
    return grid, st.ElasticSource(p0=p0), st.KSensor(mask=mask, record=RECORD)


def run(shape, nt, dtype, **kw):
    grid, source, sensor = case(shape, nt)
    fn = st.pstd_elastic_2d if len(shape) == 2 else st.pstd_elastic_3d
    return fn(grid, st.KWaveElasticMedium(CP, CS, RHO), source, sensor,
              pml_size=10 if len(shape) == 2 else 0, dtype=dtype, **kw)


def compare(ref, got, nd):
    axes = "xyz"[:nd]
    peak = max(float(np.abs(ref[f"u{a}_non_staggered"]).max()) for a in axes)
    err = max(float(np.abs(got[k] - v).max()) for k, v in ref.items()) / peak
    up = np.sqrt(sum(got[f"u{a}_split_p"] ** 2 for a in axes)).max()
    us = np.sqrt(sum(got[f"u{a}_split_s"] ** 2 for a in axes)).max()
    parts = max(float(np.abs(got[f"u{a}_split_p"] + got[f"u{a}_split_s"]
                             - got[f"u{a}_non_staggered"]).max()) for a in axes) / peak
    return {"err": err, "shear_over_p": float(us / up), "parts": parts, "peak": peak}


out = {}
meshes = {2: [(n_dev,)], 3: [(n_dev,)] + ([(2, 2)] if n_dev == 4 else [])}
for shape, nt in (((48, 48), 64), ((18, 18, 16), 30)):  # 18 on 4 slabs: uneven blocks
    nd = len(shape)
    if nd not in dims:
        continue
    for dtype in ("float64", "float32"):
        ref = run(shape, nt, dtype)
        for mesh in meshes[nd]:
            got = run(shape, nt, dtype, decomposition="pencil", mesh_shape=mesh)
            out[f"{nd}d {dtype} {'x'.join(map(str, mesh))}"] = compare(ref, got, nd)
try:
    run((48, 48), 4, "float32", decomposition="lfb", mesh_shape=(n_dev,))
    out["lfb"] = "ran"
except ValueError as e:
    out["lfb"] = str(e)
print("RESULT" + json.dumps(out))
"""


def _check(results: dict) -> None:
    for name, r in results.items():
        if name == "lfb":
            continue
        assert r["peak"] > 1e-5, (name, r)  # the wave reached the sensor points
        assert r["err"] <= (1e-12 if "float64" in name else 2e-6), (name, r)
        assert r["shear_over_p"] < 1e-3, (name, r)  # a compressional wave only
        # as on one device: the record's half-cell shift and u_non_staggered's differ at the
        # Nyquist bin (tests/physics/test_elastic_sensors.py)
        assert r["parts"] <= 1e-5, (name, r)
    refused = results["lfb"]
    assert "u_split_field" in refused and "decomposition='pencil'" in refused, refused


def test_split_field_on_two_devices_2d() -> None:
    results = run_on_cpu_devices(SCRIPT, 2, "2", "2")
    assert {"2d float64 2", "2d float32 2"} <= set(results)
    _check(results)


@pytest.mark.slow
def test_split_field_on_two_devices_3d() -> None:
    results = run_on_cpu_devices(SCRIPT, 2, "2", "3")
    assert {"3d float64 2", "3d float32 2"} <= set(results)
    _check(results)


@pytest.mark.slow
def test_split_field_on_four_devices_slabs_and_pencils() -> None:
    results = run_on_cpu_devices(SCRIPT, 4, "4", "2,3")
    assert {"2d float64 4", "3d float64 4", "3d float64 2x2", "3d float32 2x2"} <= set(results)
    _check(results)
