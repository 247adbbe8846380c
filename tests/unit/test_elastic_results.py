"""An elastic run's results outside ``st.simulate``: ``sonotile plot`` of its result file."""

from __future__ import annotations

import numpy as np
import pytest

import sonotile as st

N = 24
GRID = st.KWaveGrid((N, N), 1e-4, dt=1e-8, nt=40)


def _solid() -> st.KWaveElasticMedium:
    cs = np.full((N, N), 900.0)
    cs[:, :10] = 0.0  # water on one side
    return st.KWaveElasticMedium(2000.0, cs, 1500.0)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    mask = np.zeros((N, N), bool)
    mask[8, 4:20] = True
    smask = np.zeros((N, N), bool)
    smask[12, 12] = True
    sig = 1e3 * np.sin(np.arange(20) * 0.6)
    source = st.ElasticSource(s_mask=smask, sxx=sig, syy=sig)
    sensor = st.KSensor(mask=mask, record=("p", "u", "s", "p_max_all"))
    res = st.simulate(GRID, _solid(), source, sensor, pml_size=4, quiet=True)
    path = tmp_path_factory.mktemp("elastic") / "elastic.h5"
    res.save(str(path))
    return path, res


def test_plot_reads_an_elastic_result(saved):
    from sonotile.commands.plot import read_any

    path, res = saved
    d = read_any(str(path))
    assert d["name"] == "p_max_all" and d["field"].shape == (N, N)
    assert set(d["series"]) == {"ux", "uy", "sxx", "syy", "sxy"}
    for k, v in d["series"].items():
        np.testing.assert_array_equal(v, res[k], err_msg=k)
    np.testing.assert_array_equal(d["source"], [[12, 12]])  # the stress source's s_mask
    assert d["labels"][0] == "x = 0.8, y = 0.4 mm"


def test_plot_command_draws_an_elastic_result(saved, tmp_path):
    from matplotlib.image import imread

    from sonotile.commands.cli import main

    out = tmp_path / "fig.png"
    assert main(["plot", str(saved[0]), "--out", str(out)]) == 0
    pngs = [out] + [tmp_path / f"fig_{i}.png" for i in (2, 3, 4)]  # map, p, velocity, stress
    for png in pngs:
        assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG", png
    stress = imread(str(pngs[3]))[..., :3]
    assert stress.shape[1] > 2 * stress.shape[0]  # three panels side by side: sxx, syy, sxy
    assert np.std(stress) > 0.05  # drawn traces, not a blank canvas
    assert not (tmp_path / "fig_5.png").exists()


def test_plot_command_draws_velocity_and_stress_without_pressure(tmp_path):
    from sonotile.commands.cli import main

    mask = np.zeros((N, N), bool)
    mask[8, 6:18] = True
    source = st.ElasticSource(ux=1e-3 * np.sin(np.arange(20) * 0.6), u_mask=mask.T)
    res = st.simulate(GRID, _solid(), source, st.KSensor(mask=mask, record=("u", "s")),
                      pml_size=4, quiet=True)  # fmt: skip
    res.save(str(tmp_path / "us.h5"))
    assert main(["plot", str(tmp_path / "us.h5"), "--out", str(tmp_path / "us.png")]) == 0
    assert (tmp_path / "us_2.png").stat().st_size > 10_000  # velocity, then stress
    assert not (tmp_path / "us_3.png").exists()
