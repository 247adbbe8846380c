"""Bad-input catalogue of ``sonotile-kwave``: every case fails before the first time step with
exit status 1 and ONE error line naming the dataset / attribute / flag and what was expected,
leaves no output (nor a temporary file) behind, and does not touch a file already at the
output path (output is written under a temporary name and renamed only on success)."""

from __future__ import annotations

import os

import numpy as np
import pytest
from kwave_inputs import DROP, write_input

from sonotile.kwave.cli import main as kwave_main

NX, NY = 32, 28  # kwave_inputs default 2-D grid (stored as (1, NY, NX))
OLD = b"a result of an earlier run that must survive"


def _negative_point():
    c = np.full((1, NY, NX), 1500.0, np.float32)
    c[0, 3, 4] = -5.0  # one negative sound speed inside a valid field
    return c


# (id, write_input keyword arguments, expected message parts)
INPUT_CASES = [
    ("missing_dataset", {"c0": DROP}, ["dataset 'c0' is missing"]),
    ("missing_flag", {"absorbing_flag": DROP}, ["dataset 'absorbing_flag' is missing"]),
    (
        "transposed_field",
        {"c0": np.full((1, NX, NY), 1500.0, np.float32)},
        ["dataset 'c0'", f"shape (1, {NX}, {NY})", f"(1, {NY}, {NX})"],
    ),
    (
        "field_wrong_rank",
        {"rho0": np.full((NY, NX), 1000.0, np.float32)},
        ["dataset 'rho0'", "rank 2", "expected rank 3"],
    ),
    (
        "scalar_not_scalar",
        {"dt": np.full((1, 1, 2), 2e-8, np.float32)},
        ["dataset 'dt'", "expected a scalar (1, 1, 1)"],
    ),
    (
        "string_dataset",
        {"c0": np.array([[[b"fifteen hundred"]]])},
        ["dataset 'c0'", "cannot be read as a number"],
    ),
    ("c0_nan", {"c0": np.full((1, NY, NX), np.nan, np.float32)}, ["dataset 'c0'", "NaN"]),
    ("c0_inf_scalar", {"c0": np.float32(np.inf)}, ["dataset 'c0'", "not finite"]),
    ("c0_zero", {"c0": np.float32(0.0)}, ["dataset 'c0'", "> 0"]),
    ("c0_negative_point", {"c0": _negative_point()}, ["dataset 'c0'", "> 0"]),
    ("rho0_zero", {"rho0": np.zeros((1, NY, NX), np.float32)}, ["dataset 'rho0'", "> 0"]),
    (
        "rho0_sg_negative",
        {"rho0_sgy": np.full((1, NY, NX), -1000.0, np.float32)},
        ["dataset 'rho0_sgy'", "> 0"],
    ),
    ("dx_zero", {"dx": np.float32(0.0)}, ["dataset 'dx'", "> 0"]),
    ("dt_negative", {"dt": np.float32(-1e-8)}, ["dataset 'dt'", "> 0"]),
    ("nt_zero", {"Nt": np.uint64(0)}, ["dataset 'Nt'", ">= 1"]),
    (
        "sensor_index_zero",
        {"sensor_mask_index": np.array([[[1, 0, 5]]], np.uint64)},
        ["dataset 'sensor_mask_index'", "index 0 out of range", f"1..{NX * NY}"],
    ),
    (
        "sensor_index_too_large",
        {"sensor_mask_index": np.array([[[1, NX * NY + 1]]], np.uint64)},
        ["dataset 'sensor_mask_index'", f"index {NX * NY + 1} out of range"],
    ),
    (
        "sensor_mask_type_unknown",
        {"sensor_mask_type": np.uint64(2)},
        ["dataset 'sensor_mask_type'", "expected 0 or 1"],
    ),
    (
        "cuboid_outside",
        {
            "sensor_mask_type": np.uint64(1),
            "sensor_mask_corners": np.array([[[1, 1, 1, NX + 1, 4, 1]]], np.uint64),
        },
        ["dataset 'sensor_mask_corners'", "outside the grid"],
    ),
    (
        "cuboid_not_6",
        {
            "sensor_mask_type": np.uint64(1),
            "sensor_mask_corners": np.array([[[1, 1, 1, 4, 4]]], np.uint64),
        },
        ["dataset 'sensor_mask_corners'", "6 per cuboid"],
    ),
    (
        "p_source_index_out_of_range",
        {"p_source": True, "p_source_index": np.array([[[3, NX * NY + 7]]], np.uint64)},
        ["dataset 'p_source_index'", "out of range"],
    ),
    (
        "p_source_signal_too_short",
        {"p_source": True, "p_source_input": np.zeros((1, 1, 7), np.float32)},
        ["dataset 'p_source_input'", "7 samples", "expected 30", "source flag"],
    ),
    (
        "p_source_many_wrong_count",
        {
            "p_source": True,
            "p_source_many": np.uint64(1),
            "p_source_input": np.zeros((30, 4, 1), np.float32),
        },
        ["dataset 'p_source_input'", "120 elements", "expected 150"],
    ),
    (
        "p_source_mode_unknown",
        {"p_source": True, "p_source_mode": np.uint64(3)},
        ["dataset 'p_source_mode'", "expected 0, 1 or 2"],
    ),
    (
        "absorbing_flag_unknown",
        {"absorbing_flag": np.uint64(3)},
        ["dataset 'absorbing_flag'", "expected 0, 1 or 2"],
    ),
    (
        "alpha_power_one",
        {
            "absorbing_flag": np.uint64(1),
            "alpha_coeff": np.float32(0.5),
            "alpha_power": np.float32(1.0),
        },
        ["dataset 'alpha_power'", "1.0 is not allowed"],
    ),
    (
        "axisymmetric_power_law",
        {
            "axisymmetric_flag": np.uint64(1),
            "absorbing_flag": np.uint64(1),
            "alpha_coeff": np.float32(0.5),
            "alpha_power": np.float32(1.5),
        },
        ["dataset 'absorbing_flag'", "power law", "axisymmetric_flag = 1"],
    ),
    (
        "one_d_grid",  # what k-wave-python writes for a 1-D kWaveGrid (k-Wave 1.3: "dy" unread)
        {"Ny": np.uint64(1), "dy": DROP},
        ["Nx, Ny, Nz = (32, 1, 1)", "no dataset 'dy'", "1-D input", "2-D and 3-D grids only"],
    ),
    (
        "nonuniform_grid",
        {"nonuniform_grid_flag": np.uint64(1)},
        ["nonuniform_grid_flag", "not supported"],
    ),
]

HEADER_CASES = [
    ("missing_root_attribute", {"created_by": DROP}, ["root attribute 'created_by' is missing"]),
    ("missing_file_type", {"file_type": DROP}, ["root attribute 'file_type' is missing"]),
    ("file_type_output", {"file_type": "output"}, ["file_type is 'output'", "expected 'input'"]),
    ("file_type_unknown", {"file_type": "banana"}, ["file_type is 'banana'", "expected 'input'"]),
    ("minor_version_3", {"minor_version": "3"}, ["version 1.3", "1.0, 1.1 or 1.2"]),
    ("major_version_2", {"major_version": "2"}, ["version 2.2", "1.0, 1.1 or 1.2"]),
]


def _run(capsys, args):
    status = kwave_main([str(a) for a in args])
    cap = capsys.readouterr()
    return status, cap.out, cap.err


def _assert_failed(status, out, err, parts, out_path):
    assert status == 1
    errors = [ln for ln in err.splitlines() if ln.startswith("sonotile-kwave: error:")]
    assert len(errors) == 1, err
    for p in parts:
        assert p in errors[0], f"{p!r} not in {errors[0]!r}"
    assert "step" not in out, f"time steps were run: {out}"  # failed before any time step
    d = os.path.dirname(out_path)
    assert not [n for n in os.listdir(d) if "sonotile-partial" in n], os.listdir(d)
    with open(out_path, "rb") as f:
        assert f.read() == OLD, "a failed run destroyed the file at the output path"


@pytest.fixture
def old_output(tmp_path):
    p = tmp_path / "out.h5"
    p.write_bytes(OLD)
    return str(p)


@pytest.mark.parametrize("case", INPUT_CASES, ids=[c[0] for c in INPUT_CASES])
def test_bad_input(case, tmp_path, old_output, capsys):
    _, kw, parts = case
    inp = write_input(tmp_path / "in.h5", **kw)
    status, out, err = _run(capsys, ["-i", inp, "-o", old_output])
    _assert_failed(status, out, err, parts, old_output)


@pytest.mark.parametrize("case", HEADER_CASES, ids=[c[0] for c in HEADER_CASES])
def test_bad_header(case, tmp_path, old_output, capsys):
    _, header, parts = case
    inp = write_input(tmp_path / "in.h5", header=header)
    status, out, err = _run(capsys, ["-i", inp, "-o", old_output])
    _assert_failed(status, out, err, parts, old_output)


def test_start_after_nt(tmp_path, old_output, capsys):
    inp = write_input(tmp_path / "in.h5")
    status, out, err = _run(capsys, ["-i", inp, "-o", old_output, "-s", "61"])
    _assert_failed(status, out, err, ["-s 61", "1..Nt = 1..60"], old_output)


def test_missing_input_file(tmp_path, old_output, capsys):
    status, out, err = _run(capsys, ["-i", tmp_path / "nope.h5", "-o", old_output])
    _assert_failed(status, out, err, ["nope.h5", "cannot open as HDF5"], old_output)


def test_input_not_hdf5(tmp_path, old_output, capsys):
    bad = tmp_path / "in.h5"
    bad.write_text("not an HDF5 file")
    status, out, err = _run(capsys, ["-i", bad, "-o", old_output])
    _assert_failed(status, out, err, ["in.h5", "cannot open as HDF5"], old_output)


def test_output_directory_missing(tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5")
    out_path = tmp_path / "no" / "such" / "dir" / "out.h5"
    status, out, err = _run(capsys, ["-i", inp, "-o", out_path])
    assert status == 1
    assert "output file" in err and "does not exist" in err
    assert not (tmp_path / "no").exists()


def test_output_is_a_directory(tmp_path, capsys):
    inp = write_input(tmp_path / "in.h5")
    (tmp_path / "out.h5").mkdir()
    status, out, err = _run(capsys, ["-i", inp, "-o", tmp_path / "out.h5"])
    assert status == 1
    assert "output file" in err and "is a directory" in err
    assert os.listdir(tmp_path / "out.h5") == []


def test_checkpoint_file_not_a_checkpoint(tmp_path, capsys):
    """A --checkpoint_file that exists but is no checkpoint: error, and the output is kept."""
    inp = write_input(tmp_path / "in.h5")
    out_path = tmp_path / "out.h5"
    assert kwave_main(["-i", inp, "-o", str(out_path)]) == 0
    before = out_path.read_bytes()
    ck = write_input(tmp_path / "ck.h5")  # an input file, not a checkpoint
    capsys.readouterr()
    status, out, err = _run(capsys, ["-i", inp, "-o", out_path, "--checkpoint_file", ck])
    assert status == 1
    assert "ck.h5" in err and "expected 'checkpoint'" in err
    assert out_path.read_bytes() == before
    assert not [n for n in os.listdir(tmp_path) if "sonotile-partial" in n]


BAD_FLAGS = [
    (["--no_such_flag"], "unknown option --no_such_flag"),
    (["-c", "10"], "argument -c: '10': expected an integer in 0..9"),
    (["-r", "0"], "argument -r: '0': expected an integer in 1..100"),
    (["-t", "0"], "argument -t: '0': expected an integer in 1..2147483647"),
    (["-s", "0"], "argument -s: '0': expected an integer in 1..2147483647"),
    (["-s", "x"], "argument -s: 'x': expected an integer"),
    (["--benchmark", "0"], "argument --benchmark: '0': expected an integer in 1.."),
    (["--verbose", "3"], "argument --verbose: '3': expected an integer in 0..2"),
    (["-g", "-1"], "argument -g: '-1': expected an integer in 0.."),
    (
        ["--checkpoint_interval", "0", "--checkpoint_file", "c.h5"],
        "argument --checkpoint_interval: '0': expected a finite number > 0",
    ),
    (
        ["--checkpoint_interval", "nan", "--checkpoint_file", "c.h5"],
        "argument --checkpoint_interval: 'nan': expected a finite number > 0",
    ),
    (["--checkpoint_timesteps", "5"], "need --checkpoint_file"),
]


@pytest.mark.parametrize("flags,message", BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_bad_flags(flags, message, tmp_path, old_output, capsys):
    inp = write_input(tmp_path / "in.h5")
    status, out, err = _run(capsys, ["-i", inp, "-o", old_output, *flags])
    assert status == 1
    assert "usage: sonotile-kwave" in err  # k-Wave prints the usage on a command-line error
    assert "sonotile-kwave: error: " in err and message in err, err
    assert open(old_output, "rb").read() == OLD


@pytest.mark.parametrize(
    "args,message",
    [
        (["-o", "out.h5"], "input file (-i) is mandatory"),
        (["-i", "in.h5"], "output file (-o) is mandatory"),
        (["-i", "in.h5", "-o", "-p"], "expected one argument"),
        (["-i-x.h5", "-o", "out.h5"], "must not start with '-'"),
    ],
)
def test_mandatory_files(args, message, capsys):
    status, out, err = _run(capsys, args)
    assert status == 1 and message in err, err


def test_device_index_out_of_range(tmp_path, old_output, capsys):
    inp = write_input(tmp_path / "in.h5")
    status, out, err = _run(capsys, ["-i", inp, "-o", old_output, "-g", "99"])
    _assert_failed(status, out, err, ["-g 99", "device(s) available"], old_output)
