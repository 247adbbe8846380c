"""Fuzzing the k-Wave input reader: a few hundred seeded random mutations of valid inputs
(shapes, dtypes, values, missing and extra datasets, header attributes). Each either runs
correctly (exit 0, a complete output of finite values) or fails before the first step with one
line ``sonotile-kwave: error: ...`` that is not a bare exception name, leaving no output; never a
traceback, a crash or a success with a broken output. In process, tiny grids, few steps."""

from __future__ import annotations

import os
import re

import h5py
import numpy as np
import pytest
from kwave_inputs import DROP, HEADER, datasets, write_input

from sonotile.kwave.cli import main as kwave_main

N_CASES = 300
BASES = [
    dict(shape=(24, 20), nt=6),
    dict(shape=(24, 20), nt=6, p0=False, p_source=True),
    dict(shape=(32, 28), nt=6, cuboid=True),
    dict(shape=(16, 14, 12), nt=4),
]
EXTRA_NAMES = ["BonA", "alpha_coeff", "alpha_power", "elastic_flag", "ux_source_input",
               "sensor_mask_corners", "p_source_mode", "unknown_thing", "dz"]  # fmt: skip
BAD_VALUES = [np.nan, np.inf, -np.inf, -1.0, 0.0, 1e30, 2**40, 3]
GENERIC = re.compile(r"error: [A-Z]\w*(Error|Exception)\b")  # an unexpected exception's name


def _mutate_value(rng, v: np.ndarray) -> np.ndarray:
    v = np.array(v)
    kind = rng.integers(5)
    if kind == 0:  # one element (or the scalar) set to a bad value
        bad = BAD_VALUES[rng.integers(len(BAD_VALUES))]
        flat = v.astype(np.float64).reshape(-1)
        flat[rng.integers(flat.size)] = bad
        with np.errstate(invalid="ignore", over="ignore"):
            return flat.reshape(v.shape).astype(v.dtype if v.dtype.kind == "f" else np.float64)
    if kind == 1:  # another dtype
        return v.astype([np.float64, np.int32, np.uint8, np.float16, np.int64][rng.integers(5)])
    if kind == 2:  # another shape: transposed, flattened, one more or fewer element
        if v.ndim == 3 and v.size > 1 and rng.random() < 0.5:
            return v.transpose(2, 1, 0).copy()
        flat = v.reshape(-1)
        return flat[:-1] if flat.size > 1 and rng.random() < 0.5 else np.append(flat, flat[-1])
    if kind == 3:  # rank 1 or 2 instead of 3
        return v.reshape(-1) if rng.random() < 0.5 else v.reshape(1, -1)
    return (v * rng.uniform(0.5, 2.0)).astype(v.dtype)  # a plausible other value


def _mutated_input(rng, path) -> str:
    base = BASES[rng.integers(len(BASES))]
    d = datasets(**base)
    header = dict(HEADER)
    for _ in range(1 + rng.integers(2)):
        what = rng.integers(6)
        names = sorted(d)
        if what == 0:
            d[names[rng.integers(len(names))]] = DROP
        elif what == 1:
            name = EXTRA_NAMES[rng.integers(len(EXTRA_NAMES))]
            d.setdefault(name, np.float32(rng.uniform(0, 3)))
        elif what <= 3:
            name = names[rng.integers(len(names))]
            if d[name] is not DROP:
                d[name] = _mutate_value(rng, d[name])
        elif what == 4:
            key = sorted(header)[rng.integers(len(header))]
            header[key] = DROP if rng.random() < 0.5 else ["output", "9", "", "x"][rng.integers(4)]
        else:  # a flag switched on without its data, or off with data left
            flag = ["nonlinear_flag", "absorbing_flag", "p_source_flag", "ux_source_flag",
                    "transducer_source_flag", "axisymmetric_flag"][rng.integers(6)]  # fmt: skip
            d[flag] = np.uint64(rng.integers(0, 4))
    return write_input(path, header=header, **d)


def _check_output(out) -> None:
    with h5py.File(out, "r") as f:
        nt = int(f["Nt"][()].reshape(-1)[0])
        assert int(f["t_index"][()].reshape(-1)[0]) == nt
        for name in ("p", "p_final"):
            if name in f and isinstance(f[name], h5py.Dataset):
                assert np.isfinite(f[name][()]).all(), f"{name}: non-finite values"


@pytest.mark.parametrize("block", range(4))
def test_random_mutations(block, tmp_path, capsys):
    rng = np.random.default_rng(1000 + block)
    outcomes = {"ran": 0, "refused": 0}
    for i in range(N_CASES // 4):
        case = tmp_path / f"c{i}"
        case.mkdir()
        try:
            inp = _mutated_input(rng, case / "in.h5")
        except (TypeError, ValueError, OSError):  # h5py cannot store this mutation: skip it
            continue
        out = case / "out.h5"
        status = kwave_main(["-i", inp, "-o", str(out), "--p_raw", "--p_final", "--p_max"])
        cap = capsys.readouterr()
        err = cap.err.strip()
        if status == 0:
            outcomes["ran"] += 1
            _check_output(out)
            assert "Traceback" not in cap.err, err
            continue
        outcomes["refused"] += 1
        lines = [ln for ln in err.splitlines() if "warning:" not in ln]
        assert status == 1 and len(lines) == 1, (i, err)
        assert lines[0].startswith("sonotile-kwave: error: "), (i, err)
        assert not GENERIC.search(lines[0]), (i, err)  # a message, not an exception's name
        assert sorted(os.listdir(case)) == ["in.h5"], (i, os.listdir(case))
    assert outcomes["ran"] > 5 and outcomes["refused"] > 20, outcomes
