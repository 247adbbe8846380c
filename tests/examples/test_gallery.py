"""The gallery (examples/<category>_<name>.py) at reduced size: each example runs, writes its
figure, and its key numbers are the physics it claims (arrival times against distance over c,
reflection coefficients, O'Neil's focal field, Fubini's harmonics, the exact bioheat solution,
finite differences of the gradient ...)."""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable

import numpy as np
import pytest
from paths import REPO

EXAMPLES = REPO / "examples"


def near(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * abs(target)


#: example -> check of its key numbers (each a physical statement, with its tolerance)
CHECKS: dict[str, Callable[[dict], bool]] = {
    # c from the slope of arrival time against distance; the fit's scatter under 2 samples
    "ivp_homogeneous_2d": lambda r: near(r["c_fit"], 1500.0, 0.015) and r["residual_rms_s"] < 2e-8,
    # r p_max constant (spherical spreading), c from arrival times
    "ivp_3d": lambda r: near(r["spreading_ratio"], 1.0, 0.03) and near(r["c_fit"], 1500, 0.01),
    # time advance through the slab = L (1/c1 - 1/c2)
    "ivp_heterogeneous_2d": lambda r: near(r["advance_over_theory"], 1.0, 0.04),
    # R = (Z2 - Z1)/(Z2 + Z1), T = 2 Z2/(Z2 + Z1)
    "ivp_1d_interface": lambda r: (
        near(r["R_over_theory"], 1.0, 0.01) and near(r["T_over_theory"], 1.0, 0.005)
    ),
    # isotropic monopole; dipole ~ |cos theta|
    "tvsp_monopole_dipole": lambda r: (
        r["monopole_max_over_min"] < 1.1 and r["dipole_vs_cos"] < 0.07
    ),
    # Dirichlet holds the signal, both emit s(t - x/c) in 1-D, a Dirichlet point reflects with -1
    "tvsp_dirichlet_additive": lambda r: (
        r["dirichlet_error"] < 1e-5
        and near(r["emitted_additive_over_dirichlet"], 1.0, 0.01)
        and near(r["dirichlet_reflection"], -1.0, 0.01)
    ),
    # wavelength c/f from the phase, 2-D spreading r^-1/2 from the amplitude
    "tvsp_cw_amp_phase": lambda r: (
        near(r["wavelength_over_c_f"], 1.0, 0.01) and near(r["decay_exponent"], -0.5, 0.03)
    ),
    # first null at arcsin(lambda / L) (within 3 deg: 1-deg sampling), main lobe on the sinc
    "sd_directivity": lambda r: (
        near(r["null_angle_over_theory"], 1.0, 0.1) and r["main_lobe_deviation"] < 0.07
    ),
    # lossless energy conserved, kinetic = potential in an outgoing wave
    "sd_whole_field_energy": lambda r: (
        near(r["energy_final_over_initial"], 1.0, 0.005) and near(r["kinetic_fraction"], 0.5, 0.02)
    ),
    # I = p_rms^2 / (rho c) for a plane wave; I ~ exp(-2 alpha x)
    "sd_intensity": lambda r: (
        near(r["I_rho_c_over_p_rms2"], 1.0, 0.01) and near(r["alpha_fit_over_alpha"], 1.0, 0.03)
    ),
    # O'Neil's on-axis solution (3 points per wavelength in the quick run; the focus depth
    # within one axial sample)
    "at_focused_bowl_3d": lambda r: (
        near(r["peak_over_oneil"], 1.0, 0.03) and r["axis_error"] < 0.04
    ),
    "at_annular_array_3d": lambda r: (
        near(r["peak_over_oneil"], 1.0, 0.03)
        and r["axis_error"] < 0.04
        and near(r["focus_depth_over_oneil"], 1.0, 0.08)
    ),
    # the bowl as an arc on an axisymmetric grid: O'Neil's on-axis solution (quick: R = D =
    # 15 mm, 3 points per wavelength, CFL 0.1; the focus depth within half an axial sample)
    "at_focused_bowl_axisymmetric": lambda r: (
        r["axis_error"] < 0.012
        and near(r["peak_over_oneil"], 1.0, 0.01)
        and near(r["focus_depth_over_oneil"], 1.0, 0.03)
    ),
    # the delays steer the beam by 20 deg
    "at_linear_array_steering": lambda r: abs(r["steer_error_deg"]) < 1.5,
    # the default PML absorbs (below -50 dB); a weak one lets the wave wrap round
    "na_pml": lambda r: r["reflection_db_default"] < -50 and r["reflection_db_alpha_0.1"] > -20,
    # alpha_0 f^y and Kramers-Kronig dispersion
    "na_absorption": lambda r: (
        near(r["y_fit"], 1.5, 0.03)
        and near(r["alpha0_fit_over_set"], 1.0, 0.03)
        and near(r["dispersion_over_kramers_kronig"], 1.0, 0.1)
    ),
    # Fubini's second harmonic, growing with B/A; none without nonlinearity
    "na_nonlinearity": lambda r: (
        near(r["p2_over_fubini_ba5"], 1.0, 0.03)
        and near(r["p2_over_fubini_ba10"], 1.0, 0.03)
        and r["linear_p2_over_p1"] < 1e-4
    ),
    # float32 round-off only
    "na_precision": lambda r: (
        0 < r["relative_l2_difference"] < 1e-4 and r["max_difference_over_peak"] < 1e-4
    ),
    # exact in time for a homogeneous medium; the source heats the tissue
    "heat_diffusion": lambda r: r["error_vs_exact"] < 1e-9 and 38.0 < r["T_peak_degC"] < 45.0,
    # the focus first heats at Q / (rho C); a lesion forms
    "heat_focused_ultrasound": lambda r: (
        0.95 < r["heating_rate_over_q_rho_c"] <= 1.0
        and r["T_max_degC"] > 50.0
        and r["lesion_area_mm2"] > 0.0
    ),
    # normal-incidence R = (Z2 - Z1)/(Z2 + Z1) with Z = rho c_p; c_p from the transmitted delay;
    # c_s from the shear arrivals against Fermat's refracted travel times
    "ewp_layered_medium": lambda r: (
        near(r["R_over_theory"], 1.0, 0.01)
        and near(r["c_p_fit_over_c_p"], 1.0, 0.01)
        and near(r["c_s_fit_over_c_s"], 1.0, 0.03)
    ),
    # the adjoint gradient equals finite differences; the kernel lies in the first Fresnel zone
    "grad_sound_speed": lambda r: (
        near(r["grad_over_finite_difference"], 1.0, 1e-5) and r["kernel_share_first_fresnel"] > 0.8
    ),
    # both reconstructions put each disc within a grid point of its place and match p0 where
    # the line sees it (limited view: arcs and blurred edges across the line remain)
    "pr_2d_reconstruction": lambda r: (
        r["centre_error_px"] < 1.0 and r["corr_fft"] > 0.88 and r["corr_tr"] > 0.88
    ),
}


def load(name: str):
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def test_every_example_is_checked():
    found = {p.stem for p in EXAMPLES.glob("*_*.py") if not p.stem.startswith("_")}
    gallery = {
        n
        for n in found
        if n.split("_")[0] in {"ivp", "tvsp", "sd", "at", "na", "heat", "grad", "pr", "ewp"}
    }
    assert gallery == set(CHECKS), f"examples without a check: {gallery - set(CHECKS)}"


def unlabelled_images(fig) -> list[str]:
    """Titles of the panels of ``fig`` that show a field (an image) without a colour bar whose
    label gives its unit; panels on one scale may share a bar (same colour map and limits)."""

    def scale(im) -> tuple:
        return im.cmap.name, im.norm.vmin, im.norm.vmax

    images = [(ax, im) for ax in fig.axes for im in ax.images]
    labelled = {
        scale(im)
        for _, im in images
        if im.colorbar is not None
        and "[" in im.colorbar.ax.get_ylabel() + im.colorbar.ax.get_xlabel()
    }
    return [ax.get_title() or "untitled panel" for ax, im in images if scale(im) not in labelled]


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example(name, tmp_path, monkeypatch):
    module = load(name)
    fields_without_scale: list[str] = []

    def save(fig, out, figure_name):  # the gallery's own, after a look at the figure
        fields_without_scale.extend(unlabelled_images(fig))
        return saved(fig, out, figure_name)

    saved = module.save
    monkeypatch.setattr(module, "save", save)
    doc = " ".join(module.__doc__.split())
    assert (
        "Run: ``python examples/" in doc
        and "--quick" in doc
        and "Key number" in doc
        and "on 2 cores" in doc
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no input warning (PML, stability ...)
        result = module.run(quick=True, out=str(tmp_path))
    assert 1 <= len(result) <= 3 and all(np.isfinite(v) for v in result.values())
    assert (tmp_path / f"{name}.png").stat().st_size > 0
    assert not fields_without_scale, f"{name}: fields without a colour bar in units"
    assert CHECKS[name](result), f"{name}: {result}"


def test_docs_list_every_example_with_its_figure():
    page = (REPO / "docs" / "gallery.md").read_text()
    for name in CHECKS:
        assert f"| `{name}` |" in page, f"docs/gallery.md does not list {name}"
        figure = REPO / "docs" / "gallery" / f"{name}.png"
        assert f"(gallery/{name}.png)" in page and figure.is_file(), figure
        assert figure.stat().st_size < 100_000, f"{figure}: keep the docs' figures small"


def test_command_line_prints_the_key_numbers(tmp_path, capsys):
    gallery = load("_gallery")
    module = load("ivp_1d_interface")
    gallery.main(
        module.run, module.__doc__, "ivp_1d_interface", ["--quick", "--out", str(tmp_path)]
    )
    printed = capsys.readouterr().out
    assert "R_over_theory: " in printed and "T_over_theory: " in printed
    assert (tmp_path / "ivp_1d_interface.png").is_file()
