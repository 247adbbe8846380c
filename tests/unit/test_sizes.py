"""Fast grid sizes: prime factors, k-Wave's automatic PML size (``pml_size="auto"``) and the
warning about axes with a large prime factor."""

from __future__ import annotations

import numpy as np
import pytest
from kwave_inputs import write_input

import sonotile as st
from sonotile.api import Options
from sonotile.api.problem import build_problem
from sonotile.api.simulation import size_warnings
from sonotile.fft import sizes
from sonotile.kwave.cli import main as kwave_main
from sonotile.model.problem import ProblemError
from sonotile.physics.acoustic import checks

C, DX = 1500.0, 1e-4  # m/s, m


def test_prime_factors_and_fast_sizes():
    assert sizes.prime_factors(102) == [2, 3, 17]
    assert sizes.prime_factors(1) == []
    assert sizes.largest_prime_factor(97) == 97
    assert sizes.factor_text(360) == "2 x 2 x 2 x 3 x 3 x 5"
    assert [n for n in range(90, 130) if sizes.is_fast(n)] == [
        90, 96, 98, 100, 105, 108, 112, 120, 125, 126, 128
    ]  # fmt: skip
    assert sizes.nearest_fast(102) == (100, 105)
    assert sizes.nearest_fast(122) == (120, 125)
    assert sizes.nearest_fast(1) == (None, 2)


# k-Wave's getOptimalPMLSize(n) (and with PMLRange [5, 30]), run in Octave on k-Wave's own file
KWAVE_AUTO = {
    45: 18,
    64: 32,
    88: 20,
    100: 14,
    101: 12,
    102: 13,
    128: 17,
    200: 28,
    227: 24,
    256: 16,
    630: 21,
    1001: 14,
    1062: 29,
}


@pytest.mark.parametrize("n, pml", sorted(KWAVE_AUTO.items()))
def test_auto_pml_size_matches_kwave(n, pml):
    assert sizes.optimal_pml_size(n) == pml


def test_auto_pml_size_with_another_range_matches_kwave():
    assert sizes.optimal_pml_size(128, 5, 30) == 8


def test_auto_pml_totals_are_products_of_small_primes():
    """Even axes up to 600 points get a total of 2, 3 and 5 alone (the vector FFT's lengths);
    on no axis up to 2000 points is the total's largest prime factor larger than with the
    thicknesses 10, 20 or 40, and every thinner one in the range does worse (k-Wave keeps the
    thinnest of equals)."""
    for n in range(2, 2001):
        p = sizes.optimal_pml_size(n)
        assert 10 <= p <= 40
        worst = sizes.largest_prime_factor(n + 2 * p)
        if n % 2 == 0 and n <= 600:
            assert worst <= 5, (n, p)
        assert worst <= min(sizes.largest_prime_factor(n + 2 * q) for q in (10, 20, 40))
        assert all(sizes.largest_prime_factor(n + 2 * q) > worst for q in range(10, p))


def _inputs(shape):
    p0 = np.zeros(shape)
    p0[tuple(s // 2 for s in shape)] = 1.0
    mask = np.zeros(shape, bool)
    mask[tuple(s // 2 + 4 for s in shape)] = True
    grid = st.KWaveGrid(shape, DX, dt=0.3 * DX / C, nt=40)
    return grid, st.KWaveMedium(C, 1000.0), st.KSource(p0=p0), st.KSensor(mask=mask)


def test_auto_pml_grows_each_axis_to_a_fast_size():
    """``pml_size="auto"`` with the PML outside: each axis of the solver's grid is the user's
    plus twice k-Wave's automatic thickness, a fast size."""
    problem, layout = build_problem(
        *_inputs((100, 102, 88)), Options(pml_size="auto", pml_inside=False)
    )
    assert problem.pml.size == (14, 13, 20)
    assert problem.grid.shape == (128, 128, 128)
    assert layout["crop"] == (slice(14, 114), slice(13, 115), slice(20, 108))


def test_auto_pml_run_returns_the_users_grid():
    """A run with the automatic PML (50 x 46 points grow to 128 x 72) records on the user's
    grid, and its result file keeps the option as given."""
    grid, medium, source, sensor = _inputs((50, 46))
    sensor.record = ("p", "p_final")
    res = st.simulate(grid, medium, source, sensor, pml_size="auto", pml_inside=False,
                      progress=False)  # fmt: skip
    assert res.grid.shape == (128, 72)
    assert res["p_final"].shape == (50, 46)
    assert res.options["pml_size"] == "auto"
    assert np.max(np.abs(res["p"])) > 1e-3  # the pulse reached the sensor


@pytest.mark.parametrize(
    "options, message",
    [
        (Options(pml_size="auto"), "needs pml_inside=False"),
        (Options(pml_size="fast", pml_inside=False), "expected points per axis or 'auto'"),
    ],
)
def test_auto_pml_bad_use_is_named(options, message):
    with pytest.raises(ProblemError, match=message):
        build_problem(*_inputs((64, 64)), options)


def test_size_warning_names_the_nearest_fast_sizes():
    (w,) = checks.size_warnings((128, 102, 102))
    assert "Ny = 102 (2 x 3 x 17), Nz = 102 (2 x 3 x 17)" in w and "Nx" not in w
    assert "Ny = 100 or 105, Nz = 100 or 105" in w
    assert checks.size_warnings((128, 100, 112)) == []  # 7 passes, as in k-Wave
    assert "Nx = 21 or 24" in checks.size_warnings((23,))[0]


def _size_notes(shape, options: Options) -> list[str]:
    grid, medium, source, sensor = _inputs(shape)
    problem, _ = build_problem(grid, medium, source, sensor, options)
    return size_warnings(problem, grid, options)


def test_size_warning_in_the_apis_names():
    """With the PML outside, the warning gives the user's sizes that reach fast totals; the
    automatic PML leaves nothing to warn about."""
    (w,) = _size_notes((64, 46), Options(pml_size=10, pml_inside=False))
    assert "kgrid.shape[1] = 46 + 20 PML points = 66 (2 x 3 x 11)" in w
    assert "kgrid.shape[1] = 44 or 50" in w and "pml_size='auto'" in w
    assert "kgrid.shape[0]" not in w  # 84 = 2 x 2 x 3 x 7
    assert _size_notes((64, 46), Options(pml_size="auto", pml_inside=False)) == []
    (w,) = _size_notes((64, 46), Options())
    assert "kgrid.shape[1] = 46 (2 x 23)" in w and "45 or 48" in w and "pml_inside=False" in w


def test_simulate_warns_about_a_slow_size():
    grid, medium, source, sensor = _inputs((64, 58))
    with pytest.warns(UserWarning, match=r"kgrid.shape\[1\] = 58 \(2 x 29\)"):
        st.simulate(grid, medium, source, sensor, progress=False)


def test_quiet_simulate_keeps_the_size_warning_in_the_result_only(recwarn):
    grid, medium, source, sensor = _inputs((64, 58))
    res = st.simulate(grid, medium, source, sensor, progress=False, quiet=True)
    assert not [w for w in recwarn if "grid size" in str(w.message)]
    assert any("kgrid.shape[1] = 58 (2 x 29)" in w for w in res.warnings)


def test_sonotile_kwave_warns_about_a_slow_size(tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5", shape=(32, 46), nt=10)
    assert kwave_main(["-i", inp, "-o", str(tmp_path / "out.h5")]) == 0
    err = capsys.readouterr().err
    assert "sonotile-kwave: warning: grid size: Ny = 46 (2 x 23)" in err
    assert "Ny = 45 or 48 (k-Wave: 'PMLSize', 'auto'" in err


def test_demo_grid_is_a_fast_size():
    from sonotile.commands.demo import cross_size

    assert cross_size(128) == 100  # not int(0.8 x 128) = 102 = 2 x 3 x 17
    assert cross_size(32) == 25
    assert all(sizes.is_fast(cross_size(n)) for n in range(32, 513))
