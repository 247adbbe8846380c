"""``sonotile-kwave`` command line and output layout against k-Wave (docs/kwave-format.md).

The output layout (every dataset and group: shape, dtype, chunking, deflate level, attributes)
must equal what kspaceFirstOrder-OMP 1.3 writes for the same input and flags. The k-Wave
layouts are stored in ``tests/data/kwave_layout.json`` (written by running this file as a
script next to a k-Wave binary:
``python tests/kwave/test_kwave_cli.py /path/to/kspaceFirstOrder-OMP``), and the k-Wave
reference outputs in ``tests/data/kwave-reference`` are checked too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from kwave_inputs import write_input
from paths import DATA, REFERENCE

from sonotile import __version__
from sonotile.kwave.cli import main as kwave_main

LAYOUT_JSON = DATA / "kwave_layout.json"
ALL_OUT = ["--p_raw", "--p_max", "--p_min", "--p_rms", "--p_max_all", "--p_min_all", "--p_final",
           "-u", "--u_non_staggered_raw", "--u_rms", "--u_max", "--u_min", "--u_max_all",
           "--u_min_all", "--u_final"]  # fmt: skip
LAYOUT_CASES = {
    "2d_index_all_c3_s3_mask": ({}, [*ALL_OUT, "-c", "3", "-s", "3", "--copy_sensor_mask"]),
    "2d_cuboid_psrc_default": ({"cuboid": True, "p_source": True}, []),
    "3d_cuboid_all_mask_s5": (
        {"shape": (20, 18, 16), "cuboid": True, "nt": 30},
        [*ALL_OUT, "-s", "5", "--copy_sensor_mask"],
    ),
    "3d_index_psrc_bench": ({"shape": (20, 18, 16), "p0": False, "p_source": True},
                            ["--p_raw", "--p_rms", "--benchmark", "25"]),
}  # fmt: skip
RUN_ATTRS = {"host_names", "number_of_cpu_cores", "total_memory_in_use",
             "peak_core_memory_in_use", "total_execution_time",
             "data_loading_phase_execution_time", "pre-processing_phase_execution_time",
             "simulation_phase_execution_time", "post-processing_phase_execution_time"}  # fmt: skip


def layout(path) -> dict:
    """Structure of an HDF5 file, as JSON-able values (without sonotile's provenance, the
    ``sonotile_*`` root attributes k-Wave's readers ignore; tested in test_kwave_safety.py)."""
    out = {}
    with h5py.File(path, "r") as f:
        out["/"] = sorted(a for a in f.attrs if not a.startswith("sonotile_"))

        def visit(name, obj):
            if isinstance(obj, h5py.Group):
                out[name] = "group"
                return
            attrs = {k: [obj.attrs[k].decode(), str(obj.attrs[k].dtype)] for k in obj.attrs}
            out[name] = {
                "shape": list(obj.shape), "dtype": str(obj.dtype),
                "chunks": list(obj.chunks) if obj.chunks else None,
                "compression": obj.compression_opts, "attrs": attrs,
                "scalar": obj[()].reshape(-1)[0].item() if obj.shape == (1, 1, 1) else None,
            }  # fmt: skip

        f.visititems(visit)
    return out


def _scalars_only_differing_in_run(a: dict, b: dict):
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
    for k in a:
        assert a[k] == b[k], f"{k}:\n k-Wave  : {a[k]}\n sonotile: {b[k]}"


@pytest.mark.parametrize("case", sorted(LAYOUT_CASES))
def test_layout_equals_kwave(case, tmp_path):
    kw, flags = LAYOUT_CASES[case]
    inp = write_input(tmp_path / "in.h5", **kw)
    out = tmp_path / "out.h5"
    assert kwave_main(["-i", inp, "-o", str(out), *flags]) == 0
    ref = json.loads(LAYOUT_JSON.read_text())[case]
    _scalars_only_differing_in_run(ref, json.loads(json.dumps(layout(out))))


@pytest.mark.parametrize(
    "case", ["2d_het_absorb15_p0_cuboid_s31", "3d_homog_absorb11_usrc_xyz_addnocorr_many_index"]
)
def test_layout_equals_reference_output(case, tmp_path):
    folder = REFERENCE / case
    flags = json.loads((folder / "case.json").read_text())["flags"]
    out = tmp_path / "out.h5"
    assert kwave_main(["-i", str(folder / "input.h5"), "-o", str(out), *flags]) == 0
    _scalars_only_differing_in_run(layout(folder / "output.h5"), layout(out))


def test_root_attributes(tmp_path):
    inp = write_input(tmp_path / "in.h5")
    out = tmp_path / "out.h5"
    cpus = os.sched_getaffinity(0)
    assert kwave_main(["-i", inp, "-o", str(out), "-t", "1"]) == 0
    assert os.sched_getaffinity(0) == cpus  # -t held for the run only, not for its caller
    with h5py.File(out, "r") as f:
        a = {k: f.attrs[k].decode() for k in f.attrs}
        assert all(f.attrs[k].dtype.kind == "S" for k in f.attrs)  # fixed-length ASCII
    assert a["created_by"] == f"sonotile v{__version__}"
    assert a["file_type"] == "output" and a["major_version"] == "1" and a["minor_version"] == "2"
    assert a["file_description"] == "synthetic test input"
    assert re.fullmatch(r"\d\d/\d\d/\d\d, \d\d:\d\d:\d\d", a["creation_date"])
    assert a["number_of_cpu_cores"] == "1"
    assert "sonotile" in a["host_names"]
    for k in ("total_memory_in_use", "peak_core_memory_in_use"):
        assert re.fullmatch(r"\d+ MB", a[k]) and int(a[k].split()[0]) > 0
    for k in RUN_ATTRS:
        if k.endswith("execution_time"):
            assert re.fullmatch(r" *\d+\.\d\ds", a[k]) and len(a[k]) >= 9, (k, a[k])
    assert float(a["total_execution_time"][:-1]) > 0


def test_help_and_version(capsys):
    assert kwave_main(["-h"]) == 0
    text = capsys.readouterr().out
    for flag in (
        "-i",
        "-o",
        "-t",
        "-g",
        "-r",
        "-c",
        "-s",
        "--benchmark",
        "--copy_sensor_mask",
        "--checkpoint_file",
        "--checkpoint_interval",
        "--checkpoint_timesteps",
        "--verbose",
        "--version",
        "--p_raw",
        "--u_non_staggered_raw",
        "--u_final",
    ):
        assert flag in text, flag  # fmt: skip
    assert kwave_main(["--help"]) == 0
    assert kwave_main(["--version"]) == 0
    assert f"sonotile v{__version__}" in capsys.readouterr().out


def test_console_script_exit_codes(tmp_path):
    """The installed entry point: 0 on success, 1 on error."""
    exe = Path(sys.executable).with_name("sonotile-kwave")
    inp = write_input(tmp_path / "in.h5", nt=10)
    ok = subprocess.run([str(exe), "-i", inp, "-o", str(tmp_path / "o.h5"), "-t", "1"],
                        capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([str(exe), "-i", inp], capture_output=True, text=True)
    assert bad.returncode == 1 and "output file (-o) is mandatory" in bad.stderr


def _p(path):
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f if isinstance(f[k], h5py.Dataset)}


def test_defaults_start_benchmark_device(tmp_path):
    inp = write_input(tmp_path / "in.h5")
    for name, flags in (
        ("a", []),
        ("b", ["-s", "11"]),
        ("c", ["--benchmark", "20"]),
        ("d", ["-g", "0", "-t", "1", "-r", "50", "--verbose", "1"]),
    ):
        assert kwave_main(["-i", inp, "-o", str(tmp_path / f"{name}.h5"), *flags]) == 0  # fmt: skip
    a, b, c, d = (_p(tmp_path / f"{n}.h5") for n in "abcd")
    assert a["p"].shape == (1, 60, 5) and "u" not in a  # no output flag: --p_raw
    assert b["p"].shape == (1, 50, 5)  # -s 11: Nt - s + 1 rows
    np.testing.assert_array_equal(b["p"], a["p"][:, 10:])
    assert c["p"].shape == (1, 20, 5) and c["Nt"].item() == 20 and c["t_index"].item() == 20
    np.testing.assert_array_equal(c["p"], a["p"][:, :20])
    np.testing.assert_array_equal(d["p"], a["p"])


@pytest.mark.parametrize("minor", ["0", "1"])
def test_older_file_versions(minor, tmp_path):
    """Format 1.0 has no sensor_mask_type (index mask); 1.1 has it; both run like 1.2."""
    extra = {"sensor_mask_type": __import__("kwave_inputs").DROP} if minor == "0" else {}
    old = write_input(tmp_path / "old.h5", header={"minor_version": minor}, **extra)
    new = write_input(tmp_path / "new.h5")
    assert kwave_main(["-i", old, "-o", str(tmp_path / "o.h5")]) == 0
    assert kwave_main(["-i", new, "-o", str(tmp_path / "n.h5")]) == 0
    np.testing.assert_array_equal(_p(tmp_path / "o.h5")["p"], _p(tmp_path / "n.h5")["p"])


if __name__ == "__main__":  # regenerate tests/data/kwave_layout.json with a k-Wave binary
    import os
    import tempfile

    binary = sys.argv[1]
    result = {}
    with tempfile.TemporaryDirectory() as d:
        for case, (kw, flags) in sorted(LAYOUT_CASES.items()):
            inp = write_input(Path(d) / "in.h5", **kw)
            out = Path(d) / "out.h5"
            env = dict(os.environ, OMP_NUM_THREADS="1")
            cmd = [binary, "-i", inp, "-o", str(out), "-t", "1", *flags]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
            result[case] = layout(out)
    LAYOUT_JSON.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print("wrote", LAYOUT_JSON)
