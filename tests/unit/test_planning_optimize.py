"""The pieces of an optimised drive (:mod:`sonotile.planning.optimize`) against what they must
be: groups of neighbouring elements, the convex program's optimum on problems solved by
hand, the heat model's rows as its exact adjoint, the hotspots' quadratic forms (the reduced
3-D plans: ``test_planning_optimize_plan.py``)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from sonotile.commands.plan import main as plan_command
from sonotile.model.problem import ProblemError
from sonotile.planning import hotspots
from sonotile.planning.drive_basis import element_groups
from sonotile.planning.drive_program import Program, solve
from sonotile.planning.heating import Sonication, green_functions, sonication_heat
from sonotile.planning.phantom import head_phantom
from sonotile.planning.thermal import thermal_properties
from sonotile.planning.tissue import BRAIN, CORTICAL, TRABECULAR, tissue_properties
from sonotile.planning.transducers import parse_transducer

ARRAY = "array:48:50:50:4"
#: the program's regularisation (``eps |c|^2``) shifts an optimum by about this, relative
REG = 3 * Program.regularisation


# -- groups of neighbouring elements ---------------------------------------------------------


@pytest.mark.parametrize("spec", [ARRAY, "array:128:64:64:4"])
@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_element_groups_are_neighbours(spec, k):
    x = parse_transducer(spec).element_centres()
    label = element_groups(x, k)
    np.testing.assert_array_equal(label, element_groups(x.copy(), k))  # deterministic
    assert label.shape == (len(x),) and set(label.tolist()) == set(range(k))  # none empty
    centroids = np.stack([x[label == j].mean(0) for j in range(k)])
    d = np.linalg.norm(x[:, None] - centroids[None], axis=2)
    own = d[np.arange(len(x)), label]
    assert np.all(own <= d.min(axis=1) + 1e-9)  # each nearest its own group's centroid
    sizes = np.bincount(label)
    assert sizes.max() <= 3 * sizes.min()  # comparable sub-apertures on a spiral


def test_element_groups_free_every_element_and_refuse_no_groups():
    x = parse_transducer(ARRAY).element_centres()
    for k in (48, 49, 4096):
        np.testing.assert_array_equal(element_groups(x, k), np.arange(48))
    np.testing.assert_array_equal(element_groups(x, 1), np.zeros(48, dtype=int))
    with pytest.raises(ProblemError, match="groups"):
        element_groups(x, 0)


# -- the convex program on problems solved by hand -------------------------------------------


def _program(hot, rows, lo, theta=None, upper_rows=None, upper=None, elements=None, cap=None,
             power=None, power_cap=None, rise_scale=1.0):  # fmt: skip
    rows = np.atleast_2d(np.asarray(rows, dtype=np.complex128))
    m = rows.shape[1]
    lo = np.atleast_1d(np.asarray(lo, dtype=np.float64))
    theta = np.zeros(len(lo)) if theta is None else np.atleast_1d(theta)
    up_rows = np.zeros((0, m), complex) if upper_rows is None else np.atleast_2d(upper_rows)
    up = np.zeros(0) if upper is None else np.atleast_1d(upper)
    elements = np.eye(m, dtype=complex) if elements is None else elements
    scale = float(lo.max())
    return Program([np.asarray(h, dtype=np.complex128) for h in hot], rows, lo, theta,
                   up_rows, up, elements, cap, power, power_cap, scale, rise_scale)  # fmt: skip


def test_program_one_goal_identity_form_is_the_minimum_norm_drive():
    rng = np.random.default_rng(3)
    for m in (1, 3, 6):
        r = rng.normal(size=m) + 1j * rng.normal(size=m)
        p, theta = 2.5e5, rng.uniform(-np.pi, np.pi)
        c, t = solve(_program([np.eye(m)], r * 1e5, p, theta))
        r = r * 1e5
        expect = p * np.exp(1j * theta) * np.conj(r) / np.vdot(r, r).real
        np.testing.assert_allclose(c, expect, rtol=1e-5, atol=1e-6 * np.abs(expect).max())
        np.testing.assert_allclose(t, p**2 / np.vdot(r, r).real, rtol=1e-5)
        np.testing.assert_allclose(np.exp(-1j * theta) * (r @ c), p, rtol=1e-5)


def test_program_peak_over_hotspots():
    # two hotspots, each heated by one coefficient: the least peak splits the goal evenly
    c, t = solve(_program([np.diag([1.0, 0.0]), np.diag([0.0, 1.0])], [1.0, 1.0], 3.0))
    np.testing.assert_allclose(c, [1.5, 1.5], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, 2.25, rtol=1e-5)


def test_program_amplitude_cap_binds():
    # unconstrained: c = 4 (2, 1) / 5 = (1.6, 0.8), t = 3.2; with |c_e| <= 1.5: (1.5, 1.0)
    c, t = solve(_program([np.eye(2)], [2.0, 1.0], 4.0))
    np.testing.assert_allclose(c, [1.6, 0.8], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, 3.2, rtol=1e-5)
    c, t = solve(_program([np.eye(2)], [2.0, 1.0], 4.0, cap=1.5))
    np.testing.assert_allclose(c, [1.5, 1.0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, 3.25, rtol=1e-5)
    # the cap on element drives mixing the coefficients: w = E c, |w_e| <= A
    e = np.array([[1.0, 1.0], [1.0, -1.0]], dtype=complex)
    c, t = solve(_program([np.eye(2)], [2.0, 1.0], 4.0, elements=e, cap=2.0))
    assert np.abs(e @ c).max() <= 2.0 * (1 + 1e-6)
    np.testing.assert_allclose(np.abs(e @ c)[0], 2.0, rtol=1e-5)  # 2.4 unconstrained
    np.testing.assert_allclose((np.array([2.0, 1.0]) @ c).real, 4.0, rtol=1e-6)


def test_program_power_cap_binds():
    # rise c1^2 + 4 c2^2, c1 + c2 >= 3: (2.4, 0.6), power 6.12; power <= 5: (2, 1), rise 8
    hot = [np.diag([1.0, 4.0])]
    c, t = solve(_program(hot, [1.0, 1.0], 3.0))
    np.testing.assert_allclose(c, [2.4, 0.6], rtol=REG)  # within the regularisation's shift
    np.testing.assert_allclose(t, 7.2, rtol=REG)
    c, t = solve(_program(hot, [1.0, 1.0], 3.0, power=np.eye(2), power_cap=5.0))
    np.testing.assert_allclose(c, [2.0, 1.0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, 8.0, rtol=1e-5)


def test_program_bounded_point_binds():
    # |p_u| = |c1| <= 0.5 at a bounded point: c = (0.5, 1.5), rise 2.5 (1, 1 and 2 unbounded)
    c, t = solve(_program([np.eye(2)], [1.0, 1.0], 2.0, upper_rows=[[1.0, 0.0]], upper=[0.5]))
    np.testing.assert_allclose(c, [0.5, 1.5], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t, 2.5, rtol=1e-5)


@pytest.mark.parametrize(
    "extra",
    [
        {"cap": 1.0},
        {"power": np.eye(2), "power_cap": 4.0},
        {"upper_rows": [[1.0, 1.0]], "upper": [2.0]},
    ],  # fmt: skip
)
def test_program_infeasible_goal_raises(extra):
    # Re(c1 + c2) >= 3 needs |c_e| >= 1.5 somewhere, power >= 4.5, |c1 + c2| >= 3
    prog = _program([np.eye(2)], [1.0, 1.0], 3.0, **extra)
    with pytest.raises(ProblemError, match="no drive reaches the goal"):
        solve(prog)
    assert "infeasible" in prog.status


# -- the heat model's rows and the hotspots' forms -------------------------------------------


@pytest.fixture(scope="module")
def thermal_box():
    """The phantom's thermal maps and a box across the skull (scalp, bone and brain)."""
    ct = head_phantom((80, 96, 84), 2.0, seed=0)
    maps = tissue_properties(ct.hu, "aubry2003", frequency=300e3)
    ijk = np.rint(ct.voxel(np.array([0.0, 0.0, 68.0]))).astype(int)
    box = tuple(slice(int(v) - 5, int(v) + 6) for v in ijk)
    labels = maps.labels[box]
    assert {BRAIN, TRABECULAR, CORTICAL} <= set(np.unique(labels).tolist())
    return thermal_properties(maps), box


@pytest.mark.parametrize(
    "son",
    [Sonication(2.0, 0.0, 1.0, None, 0.1, 37.0), Sonication(2.0, 0.0, 0.5, 0.4, 0.1, 37.0)],
    ids=["continuous", "pulsed"],
)
def test_green_functions_are_the_heat_models_adjoint(thermal_box, son):
    thermal, box = thermal_box
    assert np.ptp(thermal.perfusion_rate[box]) > 0  # perfused brain, less perfused bone
    shape = tuple(s.stop - s.start for s in box)
    points = [(5, 5, 5), (0, 3, 7), (10, 10, 10), (2, 8, 4)]
    g = green_functions(points, thermal, 2.0, son, box)
    assert g.shape == (len(points), *shape)
    # the spectral heat model rings about a point under-resolved in 2 s at 2 mm (diffusion
    # length 0.8 mm): a few per cent below zero, no more
    assert 0 > g.min() > -0.05 * g.max()
    rng = np.random.default_rng(0)
    for _ in range(2):
        q = rng.uniform(0, 2e7, size=shape)  # W/m^3: kelvins
        heat = sonication_heat(q, thermal, 2.0, son, box=box)
        rise = np.asarray(heat.data["T_heated"]) - son.T0
        for j, ijk in enumerate(points):
            np.testing.assert_allclose(np.sum(g[j] * q), rise[ijk], rtol=2e-5)
        assert rise.max() > 2.0


def test_quadratic_form_is_the_rise_of_the_combined_field():
    rng = np.random.default_rng(1)
    shape, m = (9, 8, 7), 5
    box = (slice(2, 7), slice(1, 8), slice(3, 7))
    fields = (rng.normal(size=(m, *shape)) + 1j * rng.normal(size=(m, *shape))).astype(np.complex64)
    g = rng.uniform(0, 1, size=tuple(s.stop - s.start for s in box))
    a = rng.uniform(0, 2, size=shape)
    form = hotspots.quadratic_form(g, box, a, fields)
    np.testing.assert_allclose(form, form.conj().T, atol=0)  # Hermitian
    assert np.linalg.eigvalsh(form).min() > -1e-9 * np.abs(form).max()
    for _ in range(3):
        c = rng.normal(size=m) + 1j * rng.normal(size=m)
        p = np.tensordot(c, fields.astype(np.complex128), axes=1)
        direct = np.sum(g * a[box] * np.abs(p[box]) ** 2)
        np.testing.assert_allclose(np.vdot(c, form @ c).real, direct, rtol=1e-5)
        assert abs(np.vdot(c, form @ c).imag) < 1e-9 * direct


# -- the command's refusals ------------------------------------------------------------------

TARGET = [0.0, 10.0, 45.0]
ENTRY = (np.array(TARGET) + 60 * np.array([0.3, 0.1, 1.0]) / np.linalg.norm([0.3, 0.1, 1])).tolist()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--transducer", "bowl:50:50"], "needs an array"),
        (["--elastic"], "not with elastic"),
        (["--no_correction"], "starts from the corrected drive"),
        (["--also_target", "0", "10", "20"], "outside the simulation grid"),
        (["--also_target", "78", "10", "45"], "lies in air or water around the head"),
        (["--also_target", "0", "10", "90"], "further target [0.0, 10.0, 90.0] mm lies outside"),
        (["--target_volume", "25"], "does not fit the simulation grid"),
        (["--groups", "0"], "--groups"),
        (["--side_lobe", "2"], "--side_lobe"),
        (["--target_volume", "100"], "--target_volume"),
    ],
)
def test_plan_command_refuses_optimize_settings(ct_path, tmp_path, capsys, extra, message):
    out = str(tmp_path / "o")
    argv = [ct_path, "--target", *map(str, TARGET), "--entry", *map(str, ENTRY),
            "--transducer", "array:48:50:50:4", "--frequency", "300e3", "--ppw", "2.5",
            "--margin", "3", "--beyond", "10", "-o", out, "--optimize", *extra]  # fmt: skip
    start = time.perf_counter()
    try:
        code = plan_command(argv)
    except SystemExit as e:  # refused by the parser
        code = e.code
    wall = time.perf_counter() - start
    captured = capsys.readouterr()
    assert code == 2 and message in captured.err, captured.err
    assert "CW field" not in captured.out and not os.path.exists(out)
    assert wall < 2.0, f"{wall:.2f} s"
