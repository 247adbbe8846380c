"""Complex or non-numeric medium properties are refused by name, before any work, in every
model's medium type (acoustic ``Medium`` and the API's ``KWaveMedium``, ``ElasticMedium``,
the thermal medium), with no NumPy ComplexWarning on the way."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import sonotile as st
from sonotile.model.grid import Grid
from sonotile.model.lazy import LazyField
from sonotile.model.problem import Medium, ProblemError, check_real
from sonotile.physics.elastic import ElasticMedium
from sonotile.physics.heat.medium import ThermalMedium, coefficients

SHAPE = (16, 16)


@pytest.fixture(autouse=True)
def _warnings_are_errors():  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning would fail the test
        yield


@pytest.mark.parametrize(
    "field", ["sound_speed", "density", "BonA", "alpha_coeff", "alpha_power", "sound_speed_ref"]
)
def test_acoustic_api_refuses_complex_properties(field: str) -> None:
    grid = st.KWaveGrid(SHAPE, spacing=1e-4, dt=2e-8, nt=4)
    values = {"sound_speed": np.full(SHAPE, 1500.0), "density": 1000.0, "BonA": 5.0,
              "alpha_coeff": 0.5, "alpha_power": 1.5, "sound_speed_ref": 1500.0}  # fmt: skip
    values[field] = np.asarray(values[field]) + 1e-3j
    source = st.KSource(p0=np.ones(SHAPE))
    sensor = st.KSensor(mask=np.ones(SHAPE, bool))
    with pytest.raises(ProblemError, match=rf"medium\.{field}: complex values"):
        st.simulate(grid, st.KWaveMedium(**values), source, sensor, quiet=True)


@pytest.mark.parametrize("field", ["c0", "rho0", "bona", "alpha_coeff", "alpha_power", "c_ref"])
def test_acoustic_medium_refuses_complex_properties(field: str) -> None:
    values = {"c0": np.full(SHAPE, 1500.0), "rho0": 1000.0, "bona": 5.0, "alpha_coeff": 0.5,
              "alpha_power": 1.5, "c_ref": 1500.0}  # fmt: skip
    values[field] = np.asarray(values[field]) + 0j  # an imaginary part of 0 is refused too
    name = {"bona": "BonA"}.get(field, field)
    with pytest.raises(ProblemError, match=rf"medium\.{name}.*complex values \(complex128\)"):
        Medium(grid=Grid(SHAPE, (1e-4, 1e-4), 2e-8, 4), absorption="power_law", **values)


@pytest.mark.parametrize("field", ["sound_speed_compression", "sound_speed_shear", "density",
                                   "alpha_coeff_compression", "alpha_coeff_shear"])  # fmt: skip
def test_elastic_medium_refuses_complex_properties(field: str) -> None:
    values = {
        "sound_speed_compression": 3000.0,
        "sound_speed_shear": np.full(SHAPE, 1500.0),
        "density": 1900.0,
        "alpha_coeff_compression": 0.1,
        "alpha_coeff_shear": 0.2,
    }
    values[field] = np.asarray(values[field]) + 1j
    with pytest.raises(ProblemError, match=rf"medium\.{field}.*complex values"):
        ElasticMedium(shape=SHAPE, **values)
    grid = st.KWaveGrid(SHAPE, spacing=1e-4, dt=2e-8, nt=4)
    with pytest.raises(ProblemError, match=rf"medium\.{field}.*complex values"):
        st.pstd_elastic_2d(grid, st.KWaveElasticMedium(**values),
                           st.ElasticSource(p0=np.ones(SHAPE)),
                           st.KSensor(mask=np.ones(SHAPE, bool)))  # fmt: skip


@pytest.mark.parametrize("field", ["density", "specific_heat", "thermal_conductivity",
                                   "perfusion_coeff", "blood_ambient_temperature",
                                   "diffusion_coeff_ref"])  # fmt: skip
def test_thermal_medium_refuses_complex_properties(field: str) -> None:
    values = {"density": 1000.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5,
              "perfusion_coeff": 1e-3, "blood_ambient_temperature": np.full(SHAPE, 37.0),
              "diffusion_coeff_ref": 1e-7}  # fmt: skip
    values[field] = values[field] + 2j
    with pytest.raises(ProblemError, match=rf"medium\.{field}: complex values"):
        coefficients(ThermalMedium(**values), SHAPE)


def test_non_numbers_and_lazy_fields() -> None:
    """Strings are refused by name; a lazily read field is judged by its dtype, unread."""
    with pytest.raises(ProblemError, match=r"medium\.c0: expected real numbers, found <U4"):
        check_real("medium.c0", "fast")
    check_real("medium.c0", np.float32(1500))  # real: accepted
    unread = LazyField(SHAPE, lambda *_: pytest.fail("read"), dtype=np.complex64)
    with pytest.raises(ProblemError, match=r"medium\.c0: complex values \(complex64\)"):
        check_real("medium.c0", unread)
