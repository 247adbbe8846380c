"""The heat model against k-Wave's own ``kWaveDiffusion`` (k-Wave 1.4.1's MATLAB code run by GNU
Octave 7.3; outputs in tests/data/kwave-diffusion/reference.npz, made by the Octave script
there): temperature and dose after the same steps, in float64, to round-off.

Regenerate: ``python tests/physics/test_heat_kwave.py --inputs DIR``, run
``run_kwave_diffusion.m`` in DIR, then ``--reference DIR`` (it adds to the stored outputs
the cases found in DIR).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "kwave-diffusion" / "reference.npz"
BLOOD = {"rho_b": 1060.0, "C_b": 3617.0, "Ta": 37.0}


def gauss(shape: tuple[int, ...], centre: tuple[float, ...], width: float) -> np.ndarray:
    axes = [(np.arange(n) - n // 2) * 1e-3 for n in shape]
    r2 = sum((x - c) ** 2 for x, c in zip(np.meshgrid(*axes, indexing="ij"), centre))
    return np.exp(-r2 / width**2)


def right_half(shape: tuple[int, ...]) -> np.ndarray:
    """1 where x > 0 (k-Wave's grid coordinates: index N//2 at 0), else 0."""
    x = (np.arange(shape[0]) - shape[0] // 2).reshape((-1,) + (1,) * (len(shape) - 1))
    return np.broadcast_to((x > 0).astype(float), shape).copy()


def cases() -> dict[str, dict]:
    """The compared cases: (A) 2-D homogeneous, perfused, with a source; (B) 2-D two tissues
    (k, rho, C, perfusion); (C) 1-D two tissues with k-Wave's 'min'/'max' references (a finite
    stability limit); (D) 3-D two conductivities, a source and a hot start (a dose of ~30 min);
    (E) 2-D two tissues of one conductivity (rho and C vary: the Laplacian's path). Boundaries
    (homogeneous media, k-Wave's DCT-I / DST-I): (F) 1-D insulating, perfused, with a source;
    (G) 2-D conducting, perfused, with a source; (H) 2-D insulating, no perfusion, a source
    and a hot spot at an edge; (I) 1-D conducting, no perfusion, a reference diffusivity
    below the medium's (a finite ``dt_limit`` from the DST's largest wavenumber)."""
    s2, s1, s3 = (64, 48), (128,), (24, 20, 16)
    hot2 = 37 + 2 * gauss(s2, (4e-3, 2e-3), 2e-3)
    L2, L1 = right_half(s2), right_half(s1)
    two = {"rho": 1079 + 121 * L2, "C": 3540 + 460 * L2, "k": 0.52 - 0.39 * L2}
    return {
        "A": dict(shape=s2, T0=hot2, Q=2e5 * gauss(s2, (0, 0), 3e-3), rho=1079.0, C=3540.0,
                  k=0.52, w_b=0.01, dt=0.5, Nt=40, dref="max", pref="max"),
        "B": dict(shape=s2, T0=hot2, Q=2e5 * gauss(s2, (0, 0), 3e-3), **two,
                  w_b=0.01 + 0.04 * L2, dt=0.5, Nt=40, dref="max", pref="max"),
        "C": dict(shape=s1, T0=37 + gauss(s1, (-32e-3,), 2e-3) + gauss(s1, (32e-3,), 2e-3),
                  Q=0.0, rho=1079 + 121 * L1, C=3540 + 460 * L1, k=0.52 - 0.39 * L1,
                  w_b=0.01 + 0.04 * L1, dt=0.5, Nt=100, dref="min", pref="max"),
        "D": dict(shape=s3, T0=37 + 15 * gauss(s3, (0, 0, 0), 3e-3),
                  Q=4e6 * gauss(s3, (0, 0, 0), 3e-3), rho=1050.0, C=3600.0,
                  k=0.5 + 0.3 * right_half(s3), w_b=0.01, dt=0.25, Nt=40, dref="max",
                  pref="max"),
        "E": dict(shape=s2, T0=hot2, Q=2e5 * gauss(s2, (0, 0), 3e-3), rho=two["rho"],
                  C=two["C"], k=0.52, w_b=0.01, dt=0.5, Nt=40, dref="max", pref="max"),
        "F": dict(shape=(96,), T0=37 + 3 * gauss((96,), (-46e-3,), 4e-3),
                  Q=8e5 * gauss((96,), (40e-3,), 3e-3), rho=1079.0, C=3540.0, k=0.52,
                  w_b=0.01, dt=1.0, Nt=60, dref="max", pref="max", bc="insulating"),
        "G": dict(shape=(40, 30), T0=37.0, Q=2e6 * gauss((40, 30), (5e-3, -3e-3), 3e-3),
                  rho=1079.0, C=3540.0, k=0.52, w_b=0.01, dt=0.5, Nt=40, dref="max",
                  pref="max", bc="conducting"),
        "H": dict(shape=(36, 28), T0=37 + 4 * gauss((36, 28), (-18e-3, 0), 3e-3),
                  Q=2e6 * gauss((36, 28), (6e-3, 8e-3), 2e-3), rho=1050.0, C=3600.0, k=0.5,
                  w_b=0.0, dt=0.5, Nt=40, dref="max", pref="max", bc="insulating"),
        "I": dict(shape=(64,), T0=37 + 10 * gauss((64,), (-30e-3,), 2e-3), Q=0.0, rho=1050.0,
                  C=3600.0, k=0.5, w_b=0.0, dt=0.5, Nt=40, dref=0.4 * 0.5 / (1050 * 3600),
                  pref="max", bc="conducting"),
    }  # fmt: skip


def run_case(case: dict):  # type: ignore[no-untyped-def]
    from sonotile.api.heating.bioheat import KWaveDiffusion

    medium = {
        "density": case["rho"], "specific_heat": case["C"], "thermal_conductivity": case["k"],
        "blood_density": BLOOD["rho_b"], "blood_specific_heat": BLOOD["C_b"],
        "blood_perfusion_rate": case["w_b"], "blood_ambient_temperature": BLOOD["Ta"],
        "diffusion_coeff_ref": case["dref"], "perfusion_coeff_ref": case["pref"],
        "boundary_condition": case.get("bc", "periodic"),
    }  # fmt: skip
    Q = case["Q"] if np.size(case["Q"]) > 1 else None
    grid = SimpleNamespace(shape=case["shape"], spacing=1e-3)
    kd = KWaveDiffusion(grid, medium, {"T0": case["T0"], "Q": Q})
    kd.take_time_step(case["Nt"], case["dt"])
    return kd


@pytest.mark.parametrize("name", ["A", "B", "C", "D", "E", "F", "G", "H", "I"])
def test_matches_kwave_diffusion(name: str, jax_float64: None) -> None:
    """T to 1e-12 of the rise; CEM43 to 1e-12 of its maximum wherever the tissue was heated
    (T_max > 37.01 degC): where T sits at 37 degC, the edge of k-Wave's dose rule (R = 0 below,
    0.25 above), round-off decides whether 0.25^6 per minute counts (<= 1e-4 min here)."""
    ref = np.load(DATA)
    case = cases()[name]
    kd = run_case(case)
    T, cem = ref[f"{name}_T"].reshape(case["shape"]), ref[f"{name}_cem43"].reshape(case["shape"])
    assert np.max(np.abs(kd.T - T)) <= 1e-12 * np.max(np.abs(T - 37.0))
    hot = kd.T_max > 37.01
    assert np.max(np.abs(kd.cem43 - cem)[hot]) <= 1e-12 * cem.max()
    assert np.max(np.abs(kd.cem43 - cem)) <= 1e-4
    assert kd.dt_limit == pytest.approx(float(ref[f"{name}_dt_limit"]), rel=1e-12)


def _write_inputs(folder: Path) -> None:
    import scipy.io

    for name, c in cases().items():
        d = {"bc": "periodic", **c, **BLOOD, "shape": np.array(c["shape"])}
        scipy.io.savemat(folder / f"in_{name}.mat", d)


def _write_reference(folder: Path) -> None:
    import scipy.io

    out = dict(np.load(DATA)) if DATA.exists() else {}
    for name in cases():
        if not (folder / f"out_{name}.mat").exists():
            continue
        m = scipy.io.loadmat(folder / f"out_{name}.mat", squeeze_me=True)
        for k in ("T", "cem43", "dt_limit"):
            out[f"{name}_{k}"] = np.asarray(m[k], dtype=np.float64)
    np.savez_compressed(DATA, **out)


if __name__ == "__main__":
    what, folder = sys.argv[1], Path(sys.argv[2])
    _write_inputs(folder) if what == "--inputs" else _write_reference(folder)
