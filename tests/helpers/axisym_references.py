"""The axisymmetric k-Wave reference cases (``tests/data/kwave-reference/2d_axisym_*``).

``python tests/helpers/axisym_references.py KWAVE_BINARY OUT_FOLDER`` writes each case's input
with :mod:`kwave_inputs`, runs k-Wave's C++ solver on it twice (``OMP_NUM_THREADS=1``),
keeps the first output and records the run-to-run spread per dataset in ``case.json`` (the
fields the other reference cases carry, read by :mod:`sonotile.kwave.compare`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kwave_inputs import write_input  # noqa: E402

F32, U64 = np.float32, np.uint64
DX, DT, C0 = 1e-4, 2e-8, 1500.0


def _disc_on_axis(nx: int, ny: int, x0: int, radius: float) -> np.ndarray:
    """A smooth (raised-cosine) disc of pressure centred on the axis, stored layout (1, Ny, Nx)."""
    y, x = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    r = np.hypot(x - x0, y) / radius
    return np.where(r < 1, 0.5 * (1 + np.cos(np.pi * r)), 0.0).astype(F32)[None]


def _linear(points: list[tuple[int, int]], nx: int) -> np.ndarray:
    return np.array([1 + px + nx * py for px, py in points], U64).reshape(1, 1, -1)


def _staggered(rho: np.ndarray, axis: int) -> np.ndarray:
    """k-Wave's density on the staggered grid of ``axis`` (stored layout: x is the last axis)."""
    out = rho.copy()
    lo, hi = [slice(None)] * 3, [slice(None)] * 3
    ax = 2 - axis
    lo[ax], hi[ax] = slice(0, -1), slice(1, None)
    out[tuple(lo)] = 0.5 * (rho[tuple(lo)] + rho[tuple(hi)])
    return out


def case_p0(path: str) -> dict:
    """Homogeneous, lossless; p0 on the axis; points on and off the axis."""
    nx, ny, nt = 72, 40, 160
    pts = [(nx // 2 + d, j) for d in (-20, 8, 18) for j in (0, 1, 6, 14)]
    write_input(
        path, shape=(nx, ny), nt=nt, p0=False, axisymmetric_flag=U64(1),
        c0=F32(C0), rho0=F32(1000.0), rho0_sgx=F32(1000.0), rho0_sgy=F32(1000.0),
        p0_source_flag=U64(1), p0_source_input=_disc_on_axis(nx, ny, nx // 2, 5.0),
        pml_x_size=U64(10), pml_y_size=U64(10), sensor_mask_index=_linear(pts, nx),
    )  # fmt: skip
    return {
        "description": "axisymmetric, homogeneous lossless, smooth p0 disc on the axis, 12 index "
        "sensors on and off the axis; p aggregates, staggered and non-staggered velocity",
        "flags": ["--p_raw", "--p_max", "--p_min", "--p_rms", "--p_final", "--u_raw",
                  "--u_non_staggered_raw"],
        "medium": {"absorbing_flag": 0, "nonlinear_flag": 0},
    }  # fmt: skip


def case_psrc(path: str) -> dict:
    """Heterogeneous, Stokes absorbing, nonlinear; an additive pressure source on an annulus
    (one signal per point); cuboid sensors; whole-field aggregates."""
    nx, ny, nt = 64, 36, 150
    c0 = np.full((1, ny, nx), C0, F32)
    c0[..., nx // 2 + 6 :] = 1650.0
    rho = np.full((1, ny, nx), 1000.0, F32)
    rho[..., nx // 2 + 6 :] = 1100.0
    ring = [(12, j) for j in range(0, 9)]
    n_sig = 60
    t = np.arange(n_sig)[:, None]
    sig = (2e-6 * np.sin(2 * np.pi * t / 14) * np.hanning(n_sig)[:, None]
           * (1 + 0.05 * np.arange(len(ring))[None])).astype(F32)  # fmt: skip
    corners = np.array([[30, 1, 1, 36, 4, 1], [50, 12, 1, 53, 16, 1]], U64).reshape(1, 2, 6)
    write_input(
        path, shape=(nx, ny), nt=nt, p0=False, axisymmetric_flag=U64(1),
        c0=c0, rho0=rho, rho0_sgx=_staggered(rho, 0), rho0_sgy=_staggered(rho, 1),
        c_ref=F32(1650.0), absorbing_flag=U64(2), alpha_coeff=F32(0.75), alpha_power=F32(2.0),
        nonlinear_flag=U64(1), BonA=F32(6.0),
        p_source_flag=U64(n_sig), p_source_mode=U64(2), p_source_many=U64(1),
        p_source_index=_linear(ring, nx), p_source_input=sig.reshape(1, n_sig, -1),
        pml_x_size=U64(8), pml_y_size=U64(8), pml_x_alpha=F32(2.0), pml_y_alpha=F32(3.0),
        sensor_mask_type=U64(1), sensor_mask_corners=corners,
    )  # fmt: skip
    return {
        "description": "axisymmetric, heterogeneous c0/rho0 slab, Stokes absorption (y = 2), "
        "B/A 6, additive pressure source (many signals) on a disc around the axis, 2 cuboids; "
        "p and u aggregates over the whole grid",
        "flags": ["--p_raw", "--p_max", "--p_rms", "--p_max_all", "--p_min_all", "--p_final",
                  "--u_max_all", "--u_min_all", "--u_final"],
        "medium": {"absorbing_flag": 2, "nonlinear_flag": 1},
    }  # fmt: skip


def case_usrc(path: str) -> dict:
    """Homogeneous, lossless; additive ux and uy sources (one shared signal each)."""
    nx, ny, nt = 64, 32, 150
    pts = [(14, j) for j in range(0, 7)]
    n_sig = 50
    t = np.arange(n_sig)
    sig = (1e-6 * np.sin(2 * np.pi * t / 12) * np.hanning(n_sig)).astype(F32)
    sens = [(nx // 2 + d, j) for d in (0, 16) for j in (0, 3, 9)]
    write_input(
        path, shape=(nx, ny), nt=nt, p0=False, axisymmetric_flag=U64(1),
        c0=F32(C0), rho0=F32(1000.0), rho0_sgx=F32(1000.0), rho0_sgy=F32(1000.0),
        ux_source_flag=U64(n_sig), uy_source_flag=U64(n_sig // 2), u_source_mode=U64(2),
        u_source_many=U64(0), u_source_index=_linear(pts, nx),
        ux_source_input=sig.reshape(1, 1, -1),
        uy_source_input=(0.5 * sig[: n_sig // 2]).reshape(1, 1, -1),
        pml_x_size=U64(10), pml_y_size=U64(8), sensor_mask_index=_linear(sens, nx),
    )  # fmt: skip
    return {
        "description": "axisymmetric, homogeneous lossless, additive ux and uy sources (shared "
        "signals of different lengths) on a disc on the axis; p, u aggregates",
        "flags": ["--p_raw", "--p_max", "--p_min", "--u_raw", "--u_max", "--u_min", "--u_rms",
                  "--u_final"],
        "medium": {"absorbing_flag": 0, "nonlinear_flag": 0},
    }  # fmt: skip


CASES = {
    "2d_axisym_homog_lossless_p0_index": case_p0,
    "2d_axisym_het_stokes_nonlin_psrc_additive_many_cuboid": case_psrc,
    "2d_axisym_homog_lossless_usrc_xy_additive_index": case_usrc,
}


def _datasets(path: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None
        )
    return out


def make(binary: str, folder: Path, runs: int = 2) -> None:
    """Write, run and describe every case under ``folder``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name, fn in CASES.items():
        case = folder / name
        case.mkdir(parents=True, exist_ok=True)
        meta = fn(str(case / "input.h5"))
        outs = []
        with tempfile.TemporaryDirectory() as tmp:
            for k in range(runs):
                out = Path(tmp) / f"out{k}.h5"
                cmd = [binary, "-i", str(case / "input.h5"), "-o", str(out), *meta["flags"]]
                run = subprocess.run(cmd, env=env, capture_output=True, text=True)
                if run.returncode:
                    raise RuntimeError(f"{name}: {run.stdout[-2000:]}{run.stderr[-2000:]}")
                outs.append(_datasets(out))
                if k == 0:
                    (case / "output.h5").write_bytes(out.read_bytes())
        ref = outs[0]
        spread = {
            n: float(max(np.abs(o[n].astype(np.float64) - ref[n]).max() for o in outs[1:])
                     / (np.abs(ref[n]).max() or 1.0))
            for n in ref if n[0] in "pu" and not n.startswith("pml") and n.count("_") < 3
            and not n.endswith(("_flag", "_many", "_mode"))
        }  # fmt: skip
        meta.update(
            name=name,
            command="kspaceFirstOrder-OMP -i input.h5 -o output.h5 "
            + " ".join(meta["flags"])
            + "  (OMP_NUM_THREADS=1)",
            jitter_rel={n: float(f"{v:.4g}") for n, v in spread.items()},
        )
        (case / "case.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(name, {n: f"{v:.2e}" for n, v in spread.items()})


if __name__ == "__main__":
    make(sys.argv[1], Path(sys.argv[2]))
