"""Labelled source masks and cuboid sensors of the elastic model, as k-Wave's pstdElastic2D/3D
take them: a ``u_mask`` / ``s_mask`` with labels 1..L drives each label's points with that
row of the signals (the sum of the runs with one binary mask per label, the model being
linear); ``sensor.corners`` records each cuboid's points and returns the records per cuboid,
``(Cx, Cy[, Cz], T)``, equal to a binary mask of the same points reshaped; both equal k-Wave's
own output (GNU Octave, ``tests/data/kwave-elastic-sensors/run_kwave_elastic_labels.m``)."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sonotile as st

N, DX, NT, PML = 32, 1e-4, 36, 6
KWAVE = Path(__file__).parent.parent / "data" / "kwave-elastic-sensors"
RECORDS = ("p", "p_max", "p_rms", "u", "u_max", "u_rms", "u_non_staggered", "u_split_field",
           "s", "I", "I_avg", "p_final", "p_max_all")  # fmt: skip


def _grid(shape=(N, N), nt=NT):
    return st.KWaveGrid(shape, DX, dt=0.2 * DX / 2800, nt=nt)


def _medium(shape=(N, N)):
    """A solid whose lower part is stiffer (c_p, c_s, rho differ at the source points too)."""
    cp, cs, rho = np.full(shape, 2000.0), np.full(shape, 900.0), np.full(shape, 1500.0)
    cp[20:], cs[20:], rho[20:] = 2800.0, 1400.0, 1850.0
    return st.KWaveElasticMedium(cp, cs, rho)


def _labels(shape=(N, N)):
    """Three labels: a line, a short segment, a block (one of them in the stiffer part)."""
    lab = np.zeros(shape, int)
    lab[8, 6:10], lab[11, 12:15], lab[22:24, 5:7] = 1, 2, 3
    return lab


def _signals(n, nt=30, phase=0.0):
    t = np.arange(nt)
    return np.stack([np.sin(0.25 * (k + 1) * t + phase) * np.hanning(nt) for k in range(n)])


def _run(source, sensor, fn=st.pstd_elastic_2d, shape=(N, N), pml=PML, **kw):
    return fn(_grid(shape), _medium(shape), source, sensor, pml_size=pml, dtype="float64", **kw)


@pytest.mark.parametrize("kind", ["u", "s"])
def test_labelled_mask_is_the_sum_of_its_labels(kind):
    """Additive velocity / stress sources on a labelled mask equal the sum of the runs with one
    binary mask per label driven by that label's row, every record."""
    names = ("ux", "uy") if kind == "u" else ("sxx", "syy", "sxy")
    lab, sig = _labels(), _signals(3)
    sensor = st.KSensor(mask=np.ones((N, N), bool), record=("p", "u", "s"))
    signals = {n: (i + 1) * sig for i, n in enumerate(names)}
    whole = _run(st.ElasticSource(**{f"{kind}_mask": lab}, **signals), sensor)
    parts = [_run(st.ElasticSource(**{f"{kind}_mask": lab == label + 1},
                                   **{n: v[label] for n, v in signals.items()}), sensor)
             for label in range(3)]  # fmt: skip
    for k, v in whole.items():
        assert np.abs(v).max() > 0, k
        assert np.abs(v - sum(p[k] for p in parts)).max() <= 1e-12 * np.abs(v).max(), k


def test_labelled_dirichlet_equals_the_signals_given_per_point():
    """Dirichlet sources (not linear in the signals) on labelled masks: each point takes its
    label's row, exactly as a binary mask with the rows given per point (column-major)."""
    lab, sig_u, sig_s = _labels(), _signals(3), 1e3 * _signals(3, phase=1.0)
    rows = lab.ravel(order="F")[np.flatnonzero(lab.ravel(order="F"))] - 1
    sensor = st.KSensor(mask=np.ones((N, N), bool), record=("p", "u"))
    labelled = st.ElasticSource(u_mask=lab, uy=sig_u, u_mode="dirichlet", s_mask=lab.T,
                                sxy=sig_s, s_mode="dirichlet")  # fmt: skip
    rows_s = lab.T.ravel(order="F")[np.flatnonzero(lab.T.ravel(order="F"))] - 1
    binary = st.ElasticSource(u_mask=lab > 0, uy=sig_u[rows], u_mode="dirichlet",
                              s_mask=lab.T > 0, sxy=sig_s[rows_s], s_mode="dirichlet")  # fmt: skip
    a, b = _run(labelled, sensor), _run(binary, sensor)
    for k in a:
        assert np.array_equal(a[k], b[k]), k


def test_labelled_through_simulate_and_the_simulator():
    """``st.simulate`` runs labelled masks as ``pstd_elastic_2d``; ``make_simulator`` takes the
    signals in the user's layout ``(L, Nt)``, and its gradient with respect to them matches
    central differences."""
    lab, sig = _labels(), _signals(3)
    src = st.ElasticSource(u_mask=lab, ux=sig, s_mask=lab.T, syy=1e3 * sig)
    sensor = st.KSensor(mask=np.ones((N, N), bool), record=("p", "u"))
    ref = _run(src, sensor)
    res = _run(src, sensor, fn=st.simulate)
    for k in ref:
        assert np.array_equal(res[k], ref[k]), k
    with jax.enable_x64(True):
        sim = st.make_simulator(_grid(), _medium(), src, sensor, pml_size=PML, dtype="float64")
        assert sim.params["ux"].shape == (3, 30)
        assert np.abs(np.asarray(sim()["p"]) - ref["p"]).max() <= 1e-12 * np.abs(ref["p"]).max()

        def loss(ux):
            return jnp.sum(sim({"ux": ux})["p"][100:300] ** 2)

        g = jax.grad(loss)(sim.params["ux"])
        d = np.random.default_rng(1).standard_normal(sig.shape)
        fd = (loss(sim.params["ux"] + d) - loss(sim.params["ux"] - d)) / 2
        assert abs(float(jnp.sum(g * d)) - float(fd)) <= 1e-8 * abs(float(fd))


def test_labelled_3d():
    """3-D: a labelled stress mask equals the sum of its labels' binary-mask runs."""
    shape = (14, 12, 10)
    lab = np.zeros(shape, int)
    lab[4, 3:6, 5], lab[8, 7, 3:6] = 1, 2
    sig = _signals(2, nt=12)
    sensor = st.KSensor(mask=np.ones(shape, bool), record=("p", "u"))
    kw = dict(fn=st.pstd_elastic_3d, shape=shape, pml=3)
    whole = _run(st.ElasticSource(s_mask=lab, szz=sig, sxz=-sig), sensor, **kw)
    parts = [_run(st.ElasticSource(s_mask=lab == i + 1, szz=sig[i], sxz=-sig[i]), sensor, **kw)
             for i in range(2)]  # fmt: skip
    for k, v in whole.items():
        assert np.abs(v - parts[0][k] - parts[1][k]).max() <= 1e-12 * np.abs(v).max(), k


CORNERS = [((3, 4), (8, 10)), ((20, 5), (20, 25)), ((6, 6), (9, 7)), ((14, 14), (14, 14))]


def _p0(shape=(N, N)):
    x = np.meshgrid(*[np.arange(n) - n // 2 for n in shape], indexing="ij")
    return st.ElasticSource(p0=1e3 * np.exp(-sum(a**2 for a in x) / 8.0))


def _box(lo, hi, shape):
    m = np.zeros(shape, bool)
    m[tuple(slice(a, b + 1) for a, b in zip(lo, hi))] = True
    return m


def _as_cuboid(v, lo, hi):
    """Records of a binary mask of a cuboid's points (column-major: x fastest) as
    ``(Cx, Cy[, Cz], ...)``."""
    size = tuple(b - a + 1 for a, b in zip(lo, hi))
    return v.reshape(size[::-1] + v.shape[1:]).transpose(
        tuple(range(len(size)))[::-1] + tuple(range(len(size), v.ndim + len(size) - 1))
    )


def _check_per_cuboid(out, corners, shape, run, record=RECORDS):
    for i, (lo, hi) in enumerate(corners):
        ref = run(st.KSensor(mask=_box(lo, hi, shape), record=record))
        assert set(ref) == set(out)
        size = tuple(b - a + 1 for a, b in zip(lo, hi))
        for k, v in ref.items():
            if k.endswith(("_all", "_final")):
                assert np.array_equal(out[k], v), k
                continue
            got, want = np.asarray(out[k][i]), _as_cuboid(v, lo, hi)
            assert got.shape == size + v.shape[1:], (k, got.shape)
            # moved to the grid points / split / intensity: transforms over other point sets
            derived = k.startswith("I") or "_non_staggered" in k or "_split_" in k
            tol = 1e-13 if derived else 0.0
            assert np.abs(got - want).max() <= tol * np.abs(want).max(), (k, i)


def test_cuboids_equal_a_binary_mask_reshaped():
    """Every point record of ``sensor.corners`` per cuboid ``(Cx, Cy, T)`` / ``(Cx, Cy)`` equals
    the binary mask of that cuboid's points reshaped (overlapping cuboids and a single point
    included); whole-grid records as they are; through ``st.simulate`` as a ``Results`` of
    lists (no ``sensor_points``, as the acoustic model's cuboids)."""
    sensor = st.KSensor(corners=CORNERS, record=RECORDS)
    out = _run(_p0(), sensor)
    _check_per_cuboid(out, CORNERS, (N, N), lambda s: _run(_p0(), s))
    res = _run(_p0(), sensor, fn=st.simulate)
    assert res.sensor_points is None
    for k, v in out.items():
        if isinstance(v, list):
            assert all(np.array_equal(a, b) for a, b in zip(res[k], v)), k


def test_cuboids_3d_simulator_and_many():
    """3-D cuboids through ``pstd_elastic_3d``; ``make_simulator`` and ``simulate_many`` (vmap)
    give the same lists."""
    shape, corners = (10, 10, 8), [((2, 3, 4), (5, 4, 6)), ((7, 2, 2), (7, 8, 3))]
    grid = _grid(shape, nt=8)
    med = st.KWaveElasticMedium(2000.0, 900.0, 1500.0)
    sensor = st.KSensor(corners=corners, record=("p", "u", "p_max"))
    out = st.pstd_elastic_3d(grid, med, _p0(shape), sensor, pml_size=2, dtype="float64")
    _check_per_cuboid(out, corners, shape, lambda s: st.pstd_elastic_3d(
        grid, med, _p0(shape), s, pml_size=2, dtype="float64"), sensor.record)  # fmt: skip
    with jax.enable_x64(True):
        sim = st.make_simulator(grid, med, _p0(shape), sensor, pml_size=2, dtype="float64")
        traced = sim()
    runs = st.simulate_many(grid, [med, med], _p0(shape), sensor, pml_size=2, dtype="float64",
                            vectorize="vmap")  # fmt: skip
    for k, v in out.items():
        for i in range(2):
            assert np.abs(np.asarray(traced[k][i]) - v[i]).max() <= 1e-12 * np.abs(v[i]).max()
            assert np.abs(runs[1][k][i] - v[i]).max() <= 1e-12 * np.abs(v[i]).max()


def test_stop_and_go_on_with_labels_and_cuboids(tmp_path):
    """A checkpointed run with labelled sources and cuboid sensors, stopped and resumed,
    equals the uninterrupted run bit for bit, per cuboid."""
    from sonotile.api.heating.checkpoint import Checkpoint, RunStopped

    lab = _labels()
    src = st.ElasticSource(u_mask=lab, ux=_signals(3), s_mask=lab.T, sxy=1e3 * _signals(3))
    sensor = st.KSensor(corners=CORNERS[:2], record=("p", "u_rms", "p_final"))
    ref = _run(src, sensor)
    path = str(tmp_path / "run.npz")
    with pytest.raises(RunStopped):
        _run(src, sensor, checkpoint=Checkpoint(path, steps=NT // 2))
    out = _run(src, sensor, checkpoint=Checkpoint(path))
    for k, v in ref.items():
        pairs = zip(out[k], v) if isinstance(v, list) else [(out[k], v)]
        assert all(np.array_equal(a, b) for a, b in pairs), k


def test_saved_result_reruns_with_its_labels_and_corners(tmp_path):
    """``Results.save`` keeps the labelled mask and the corners: ``st.load_input`` re-runs it
    to the same per-cuboid records."""
    src = st.ElasticSource(u_mask=_labels(), uy=_signals(3))
    sensor = st.KSensor(corners=CORNERS[:2], record=("p", "p_max"))
    res = _run(src, sensor, fn=st.simulate)
    res.save(str(tmp_path / "r.h5"))
    (grid, medium, source, sens), _ = st.load_input(str(tmp_path / "r.h5"))
    again = st.simulate(grid, medium, source, sens, pml_size=PML, dtype="float64")
    for k in ("p", "p_max"):
        assert all(np.array_equal(a, b) for a, b in zip(again[k], res[k])), k


def _kwave_case() -> dict:
    """The case run by k-Wave (tests/data/kwave-elastic-sensors/run_kwave_elastic_labels.m):
    40 x 40, water-like solid beside a stiffer solid; a labelled velocity mask (3 labels) and a
    labelled stress mask (2 labels), all source points in the part of one compressional speed
    (k-Wave scales a label's row by the speed at the label's index among the mask's points);
    three cuboid sensors (one in the stiffer solid, one a line), in k-Wave's 1-based
    [x1 y1 x2 y2]' columns."""
    n = 40
    cp, cs, rho = np.full((n, n), 2000.0), np.full((n, n), 700.0), np.full((n, n), 1400.0)
    cp[28:], cs[28:], rho[28:] = 2800.0, 1400.0, 1850.0
    u = np.zeros((n, n))
    u[12, 10:15], u[16, 20:22], u[9:11, 26] = 1, 2, 3
    s = np.zeros((n, n))
    s[20, 8:11], s[22:24, 24] = 1, 2
    t = np.arange(40)
    sig = np.stack([np.sin(2 * np.pi * t / p) * np.hanning(40) for p in (9, 12, 15, 10, 13)])
    corners = np.array([[5, 20, 8, 24], [31, 10, 34, 13], [20, 8, 20, 22]]).T  # 1-based
    return dict(
        shape=np.array([n, n]),
        dx=DX,
        Nt=60,
        dt=0.2 * DX / 2800,
        pml=8,
        cp=cp,
        cs=cs,
        rho=rho,
        u_mask=u,
        s_mask=s,
        ux=sig[:3],
        uy=-0.5 * sig[[2, 0, 1]],
        sxx=1e3 * sig[3:],
        syy=-2e3 * sig[3:][::-1],
        sxy=5e2 * sig[3:],
        corners=corners,
    )


def _kwave_inputs(d: dict, mode: str):
    """sonotile's inputs of the k-Wave case (``mode``: both sources ``additive`` or
    ``dirichlet``)."""
    grid = st.KWaveGrid(tuple(d["shape"]), DX, dt=d["dt"], nt=d["Nt"])
    src = st.ElasticSource(u_mask=d["u_mask"], ux=d["ux"], uy=d["uy"], u_mode=mode,
                           s_mask=d["s_mask"], sxx=d["sxx"], syy=d["syy"], sxy=d["sxy"],
                           s_mode=mode)  # fmt: skip
    c = d["corners"].T - 1
    corners = [(tuple(row[:2]), tuple(row[2:])) for row in c.tolist()]
    sensor = st.KSensor(corners=corners, record=("p", "p_max", "u", "u_rms", "I_avg",
                                                 "p_final"))  # fmt: skip
    return grid, st.KWaveElasticMedium(d["cp"], d["cs"], d["rho"]), src, sensor


@pytest.mark.parametrize("mode", ["additive", "dirichlet"])
def test_against_kwave(mode):
    """k-Wave's own pstdElastic2D (GNU Octave, float64) with labelled ``u_mask`` and ``s_mask``
    and cuboid corners: every record of every cuboid equal to round-off."""
    d = _kwave_case()
    out = st.pstd_elastic_2d(*_kwave_inputs(d, mode), pml_size=d["pml"], dtype="float64")
    ref = np.load(KWAVE / "labels.npz")
    names = {k.split("/")[1] for k in ref if k.startswith(mode)}
    assert names == set(out), names
    for k in names:
        parts = [ref[f"{mode}/{k}"]] if k == "p_final" else [
            ref[f"{mode}/{k}/{i}"] for i in range(3)]  # fmt: skip
        got = [out[k]] if k == "p_final" else out[k]
        for a, b in zip(got, parts):
            assert a.shape == b.shape, (k, a.shape, b.shape)
            assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max(), k


if __name__ == "__main__":  # writing k-Wave's inputs / reading its output (see the .m file)
    from scipy.io import loadmat, savemat

    where = Path(sys.argv[2])
    if sys.argv[1] == "--inputs":
        savemat(where / "in_labels.mat", {k: np.asarray(v, float) for k, v in
                                          _kwave_case().items()})  # fmt: skip
    elif sys.argv[1] == "--errors":
        d = _kwave_case()
        ref = np.load(KWAVE / "labels.npz")
        for mode in ("additive", "dirichlet"):
            out = st.pstd_elastic_2d(*_kwave_inputs(d, mode), pml_size=d["pml"], dtype="float64")
            for k in sorted(out):
                got = [out[k]] if k == "p_final" else out[k]
                want = [ref[f"{mode}/{k}"]] if k == "p_final" else [
                    ref[f"{mode}/{k}/{i}"] for i in range(3)]  # fmt: skip
                err = max(np.abs(a - b).max() / np.abs(b).max() for a, b in zip(got, want))
                print(f"{mode:9s} {k:8s} {err:.2e}")
    else:
        keep = {}
        for mode in ("additive", "dirichlet"):
            out = loadmat(where / f"out_{mode}.mat", squeeze_me=False, struct_as_record=False)
            data = out["data"].ravel()
            for i, cub in enumerate(data):
                for k in cub._fieldnames:
                    v = np.asarray(getattr(cub, k))
                    if v.size == 0:
                        continue
                    keep[f"{mode}/{k}" if k == "p_final" else f"{mode}/{k}/{i}"] = v
        np.savez_compressed(KWAVE / "labels.npz", **keep)
