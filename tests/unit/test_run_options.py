"""RunOptions: one spelling of every run option, parsed once at the front edge; the former
``mesh_shape=`` spelling warned; the model chosen from the medium in one place; the module
paths the API's rooms replaced still import the same modules."""

import importlib
import warnings

import numpy as np
import pytest

import sonotile as st
from sonotile.api import RunOptions
from sonotile.api.types import model_of
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import Decomposition

N = 24


def _inputs() -> tuple:
    grid = st.KWaveGrid((N, N), 1e-4, dt=2e-8, nt=24)
    medium = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    p0 = np.zeros((N, N))
    p0[12, 12] = 1.0
    mask = np.zeros((N, N), bool)
    mask[12, 4:20] = True
    return grid, medium, st.KSource(p0=p0), st.KSensor(mask=mask)


def test_run_options_parse_once_and_refuse_bad_values_by_name():
    how = RunOptions(decomposition="pencil", mesh=[2, 1])
    assert how.decomposition is Decomposition.PENCIL and how.mesh == (2, 1)
    for bad, name in (({"decomposition": "slab"}, "decomposition"), ({"mesh": (0,)}, "mesh"),
                      ({"mesh": (1.5,)}, "mesh"), ({"overlap": -1}, "overlap"),
                      ({"chunk": 0}, "chunk")):  # fmt: skip
        with pytest.raises(ValueError, match=f"^{name} = "):
            RunOptions(**bad)


def test_keywords_override_run_only_where_given():
    base = RunOptions(decomposition="lfb", overlap=8, quiet=True)
    how = RunOptions.of(base, decomposition=Decomposition.SINGLE, overlap=None, mesh=(4,))
    assert (how.decomposition, how.overlap, how.mesh, how.quiet) == ("lfb", 8, (4,), True)
    assert RunOptions.of(base, decomposition="pencil").decomposition == "pencil"
    with pytest.raises(ProblemError, match="tape = 'host': an option of make_simulator"):
        st.simulate(*_inputs(), run=RunOptions(tape="host"), pml_size=4)


def test_simulate_with_run_options_equals_keywords_bit_for_bit():
    a = st.simulate(*_inputs(), quiet=True, pml_size=4)
    b = st.simulate(*_inputs(), run=RunOptions(quiet=True), pml_size=4)
    np.testing.assert_array_equal(a["p"], b["p"])


def test_simulate_many_takes_run_options_and_refuses_a_decomposition():
    grid, medium, source, sensor = _inputs()
    with pytest.raises(ProblemError, match="decomposition = 'pencil': simulate_many runs each"):
        st.simulate_many(grid, [medium, medium], source, sensor,
                         run=RunOptions(decomposition="pencil"))  # fmt: skip


def test_former_mesh_shape_spelling_warns_naming_mesh():
    grid, _, source, sensor = _inputs()
    solid = st.KWaveElasticMedium(1500.0, 0.0, 1000.0)
    three_d = st.KWaveGrid((N, N, N), 1e-4, dt=2e-8, nt=4)
    with pytest.warns(DeprecationWarning, match="mesh_shape= is now spelled mesh=") as seen:
        with pytest.raises(ProblemError, match="3-D grid"):  # refused after the warning
            st.pstd_elastic_2d(three_d, solid, source, sensor, mesh_shape=(1,))
    assert seen[0].filename == __file__  # the warning names the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new spelling does not warn
        with pytest.raises(ProblemError, match="3-D grid"):
            st.pstd_elastic_2d(three_d, solid, source, sensor, mesh=(1,))


def test_the_model_is_chosen_from_the_medium_and_a_mixed_batch_refused():
    water = st.KWaveMedium(sound_speed=1500.0, density=1000.0)
    solid = st.KWaveElasticMedium(1500.0, 800.0, 1000.0)
    assert model_of(water) == "acoustic" and model_of(solid) == "elastic"
    with pytest.raises(ProblemError, match=r"media\[1\] is elastic and media\[0\] acoustic"):
        model_of(water, [water, solid])


@pytest.mark.parametrize("old", sorted(st.api.MOVED))
def test_moved_module_paths_import_the_same_module(old):
    assert importlib.import_module(old) is importlib.import_module(st.api.MOVED[old])
    assert importlib.import_module("sonotile.batch.many").simulate_many is st.simulate_many
