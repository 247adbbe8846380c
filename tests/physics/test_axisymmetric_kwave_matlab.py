"""The axisymmetric model against k-Wave's MATLAB ``kspaceFirstOrderAS`` (k-Wave 1.4.1's code run
by GNU Octave, ``'DataCast' 'double'``; outputs in tests/data/kwave-axisym/reference.npz, made by
the Octave script there), every radial symmetry that code has: WSWA and WSWS, each by FFTs on
the continued grid and by trigonometric transforms. k-Wave's C++ solver has WSWA only
(test_kwave_reference's ``2d_axisym_*`` cases); this is the reference for WSWS.

Regenerate: run ``run_kwave_axisym.m`` in an empty folder DIR (see its header), then
``python tests/physics/test_axisymmetric_kwave_matlab.py --reference DIR``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import sonotile as st

DATA = Path(__file__).resolve().parents[1] / "data" / "kwave-axisym" / "reference.npz"
SYMMETRIES = ("WSWA_FFT", "WSWS_FFT", "WSWA", "WSWS")
NX, NY, DX = 64, 32, 1e-4
DT, NT = 0.1 * DX / 1800, 200


def inputs(case: str) -> tuple[st.KWaveMedium, np.ndarray]:
    """The medium and p0 [Pa] of the Octave script: (A) water, a Gaussian p0 on the axis;
    (B) a layer of c = 1800 m/s, rho = 1200 kg/m^3 whose face steps every 6 radial points,
    Stokes absorption (0.75 dB/(MHz^2 cm)), B/A = 6, a Gaussian p0 of 200 kPa off the axis."""
    x, y = np.meshgrid(np.arange(NX), np.arange(NY), indexing="ij")
    if case == "A":
        return st.KWaveMedium(sound_speed=1500.0, density=1000.0), 1e3 * np.exp(
            -((x - 28.0) ** 2 + y**2) / 2.5**2
        )
    layer = x >= 38 + y // 6
    c = np.where(layer, 1800.0, 1500.0)
    rho = np.where(layer, 1200.0, 1000.0)
    medium = st.KWaveMedium(
        sound_speed=c, density=rho, alpha_coeff=np.full(c.shape, 0.75), alpha_power=2.0,
        BonA=np.full(c.shape, 6.0),
    )  # fmt: skip
    return medium, 2e5 * np.exp(-((x - 26.0) ** 2 + (y - 7.0) ** 2) / 2.0**2)


def sensor_mask() -> np.ndarray:
    mask = np.zeros((NX, NY), bool)
    mask[43, 0 : NY - 10 : 3] = True
    mask[11:52:4, 0] = True
    return mask


def run(case: str, symmetry: str, **medium_fields: object) -> dict:
    medium, p0 = inputs(case)
    medium = replace(medium, **medium_fields)
    kgrid = st.KWaveGrid((NX, NY), DX, dt=DT, nt=NT)
    sensor = st.KSensor(mask=sensor_mask(), record=("p", "p_final"))
    return st.simulate(
        kgrid, medium, st.KSource(p0=p0), sensor, axisymmetric=True, pml_size=10,
        radial_symmetry=symmetry.replace("_", "-"), dtype="float64", quiet=True,
    )  # fmt: skip


@pytest.mark.parametrize("case", ["A", "B"])
@pytest.mark.parametrize("symmetry", SYMMETRIES)
def test_matches_kspace_first_order_as(case, symmetry):
    """p at the sensor points (on the axis and across it) and p_final, in float64, to rounding:
    within 1e-12 of k-Wave's peak (measured <= 2.6e-14; WSWA and WSWS differ by 1e-4 here, so
    the check tells the symmetries apart)."""
    ref = np.load(DATA)
    res = run(case, symmetry)
    for key in ("p", "p_final"):
        want = ref[f"{case}_{symmetry}_{key}"]
        got = np.asarray(res[key])
        assert got.shape == want.shape, key
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err < 1e-12, f"{key}: {err:.2e} of k-Wave's peak"


def test_alpha_power_is_replaced_by_two_with_a_warning():
    """k-Wave's axisymmetric model absorbs as Stokes (alpha_power = 2) whatever the user gave,
    and says so: an axisymmetric run with alpha_power = 1.5 warns in the user's names and gives
    k-Wave's alpha_power = 2 answer; with alpha_power = 2 it does not warn."""
    ref = np.load(DATA)["B_WSWA_FFT_p"]
    res = run("B", "WSWA_FFT", alpha_power=1.5)  # quiet: the warnings kept in the result
    assert any(re.search(r"axisymmetric=True: .*medium.alpha_power = 1.5 is ig", w)
               for w in res.warnings), res.warnings  # fmt: skip
    assert np.max(np.abs(np.asarray(res["p"]) - ref)) < 1e-12 * np.max(np.abs(ref))
    assert not any("alpha_power" in w for w in run("B", "WSWA_FFT").warnings)


def write_reference(folder: Path) -> None:
    """k-Wave's outputs (``out_<case>_<symmetry>.mat``) -> ``reference.npz``."""
    from scipy.io import loadmat

    out = {}
    for case in ("A", "B"):
        for sym in SYMMETRIES:
            d = loadmat(folder / f"out_{case}_{sym}.mat")
            out[f"{case}_{sym}_p"] = np.asarray(d["p"], np.float64)
            out[f"{case}_{sym}_p_final"] = np.asarray(d["p_final"], np.float64)
    np.savez_compressed(DATA, **out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--reference"]:
        write_reference(Path(sys.argv[2]))
    else:
        sys.exit("usage: --reference DIR")
