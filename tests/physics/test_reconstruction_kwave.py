"""Reconstructions against k-Wave's own (k-Wave 1.4's MATLAB code run by GNU Octave 7.3, double
precision; outputs in tests/data/kwave-recon/reference.npz, made by the Octave script there):
``kspaceLineRecon`` and ``kspacePlaneRecon`` on k-Wave's forward data (nearest and linear
interpolation, positivity), and time reversal (``sensor.time_reversal_boundary_data``) on a
binary ring with the PML outside and on Cartesian points of an arc with the PML inside. Given
k-Wave's recorded data, sonotile's reconstructions equal k-Wave's to round-off.

Regenerate: run ``run_kwave_recon.m`` (k-Wave on Octave's path) in a scratch folder, then
``python tests/physics/test_reconstruction_kwave.py --reference DIR/recon.mat``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import sonotile as st

DATA = Path(__file__).resolve().parents[1] / "data" / "kwave-recon" / "reference.npz"
C, DX = 1500.0, 1e-4
#: round-off of double-precision FFTs over these sizes (measured: <= 1.3e-15 of the maximum)
ROUND_OFF = 1e-12


@pytest.fixture(scope="module")
def ref() -> dict[str, np.ndarray]:
    with np.load(DATA) as d:
        return {k: d[k] for k in d.files}


def rel_err(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(np.asarray(a) - b).max() / np.abs(b).max())


@pytest.mark.parametrize("interp", ["nearest", "linear"])
def test_line_recon_equals_kwave(ref: dict, interp: str) -> None:
    # k-Wave's call: kspaceLineRecon(sensor_data.', dy, dt, c, 'Interp', ...) (linear with
    # 'PosCond'); sonotile's takes simulate's layout with data_order="yt"
    pos = interp == "linear"
    got = st.kspace_line_recon(ref["line_data"], DX, float(ref["line_dt"]), C,
                               data_order="yt", interp=interp, pos_cond=pos)  # fmt: skip
    want = ref[f"line_{interp}"]
    assert got.shape == want.shape == (ref["line_data"].shape[1], 48)
    assert rel_err(got, want) < ROUND_OFF
    assert (want.min() >= 0) == pos  # the positivity condition did something


@pytest.mark.parametrize("interp", ["nearest", "linear"])
def test_plane_recon_equals_kwave(ref: dict, interp: str) -> None:
    data = ref["plane_data"]  # (Ny, Nz, Nt)
    if interp == "nearest":
        got = st.kspace_plane_recon(data, DX, DX, float(ref["plane_dt"]), C, data_order="yzt")
    else:
        got = st.kspace_plane_recon(data.transpose(2, 0, 1), DX, DX, float(ref["plane_dt"]), C,
                                    interp="linear")  # fmt: skip
    assert got.shape == ref[f"plane_{interp}"].shape == (data.shape[2], 14, 12)
    assert rel_err(got, ref[f"plane_{interp}"]) < ROUND_OFF


def test_time_reversal_on_a_ring_equals_kwave(ref: dict) -> None:
    data = ref["ring_data"]
    grid = st.KWaveGrid((40, 40), DX, dt=float(ref["ring_dt"]), nt=data.shape[1])
    sensor = st.KSensor(mask=ref["ring_mask"] > 0)
    got = st.time_reversal(grid, st.KWaveMedium(sound_speed=C), sensor, data,
                           pml_inside=False, pml_size=10, dtype="float64", quiet=True)  # fmt: skip
    assert rel_err(got, ref["ring_tr"]) < ROUND_OFF
    # and k-Wave's result is a reconstruction: the disc back at its place and height
    assert np.corrcoef(got.ravel(), ref["ring_p0"].ravel())[0, 1] > 0.98


def test_time_reversal_on_cartesian_points_equals_kwave(ref: dict) -> None:
    # 40 Cartesian points on a 270-degree arc, moved to grid points (k-Wave's cart2grid) and
    # their data put in the grid's column-major order; PML inside the grid (k-Wave's default)
    data = ref["arc_data"]
    grid = st.KWaveGrid((48, 48), DX, dt=float(ref["arc_dt"]), nt=data.shape[1])
    sensor = st.KSensor(mask=ref["arc_points"])
    got = st.time_reversal(grid, st.KWaveMedium(sound_speed=C), sensor, data, pml_size=8,
                           dtype="float64", quiet=True)  # fmt: skip
    assert rel_err(got, ref["arc_tr"]) < ROUND_OFF
    shuffled = np.random.default_rng(1).permutation(data.shape[0])  # the data follow the points
    again = st.time_reversal(grid, st.KWaveMedium(sound_speed=C),
                             st.KSensor(mask=ref["arc_points"][:, shuffled]), data[shuffled],
                             pml_size=8, dtype="float64", quiet=True)  # fmt: skip
    assert rel_err(again, ref["arc_tr"]) < ROUND_OFF


def _write_reference(mat: str) -> None:
    """k-Wave's outputs (``recon.mat``) -> ``reference.npz``."""
    from scipy.io import loadmat

    d = {k: np.squeeze(v) if v.size == 1 else v for k, v in loadmat(mat).items()
         if not k.startswith("__")}  # fmt: skip
    np.savez_compressed(DATA, **d)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--reference":
        _write_reference(sys.argv[2])
    else:
        sys.exit(__doc__)
