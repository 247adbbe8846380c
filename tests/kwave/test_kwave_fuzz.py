"""Fuzzing the k-Wave input reader: a few hundred seeded random mutations of valid inputs
(shapes, dtypes, values, missing and extra datasets, header attributes). Each either runs
correctly (exit 0, a complete output of finite values) or fails before the first step with one
line ``sonotile-kwave: error: ...`` that is not a bare exception name, leaving no output; never a
traceback, a crash or a success with a broken output. In process, tiny grids, few steps."""

from __future__ import annotations

import os
import re
import time

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


# ------------------------------------------------ header sizes, links, checkpoints, outputs

HUGE = [2**31, 2**31 + 7, 2**32, 2**40, 2**62, 2**63, 2**64 - 1]


def _assert_refused(status, err, folder, keep) -> None:
    lines = [ln for ln in err.strip().splitlines() if "warning:" not in ln]
    assert status == 1 and len(lines) == 1, err
    assert lines[0].startswith("sonotile-kwave: error: "), err
    assert not GENERIC.search(lines[0]) and "Traceback" not in err, err
    assert sorted(os.listdir(folder)) == sorted(keep), os.listdir(folder)


def test_random_header_sizes(tmp_path, capsys):
    """Grid sizes and step counts up to 2**64 - 1 (1-3 of Nx, Ny, Nz, Nt): each refused at
    once, in one line, without allocating what the header asks (no wrap, no hang)."""
    rng = np.random.default_rng(7)
    for i in range(24):
        case = tmp_path / f"c{i}"
        case.mkdir()
        d = datasets(**BASES[rng.integers(len(BASES))])
        for name in rng.choice(["Nx", "Ny", "Nz", "Nt"], size=1 + rng.integers(3), replace=False):
            big = (
                HUGE[rng.integers(len(HUGE))]
                if rng.random() < 0.6
                else 2 ** int(rng.integers(24, 64))
            )
            d[name] = np.uint64(big)
        inp = write_input(case / "in.h5", **d)
        t0 = time.perf_counter()
        status = kwave_main(["-i", inp, "-o", str(case / "out.h5")])
        assert time.perf_counter() - t0 < 30, i
        _assert_refused(status, capsys.readouterr().err, case, ["in.h5"])


LINKS = ["external_link", "external_storage", "virtual", "soft_link_to_same"]


def _relink(rng, inp: str, kind: str) -> str:
    """Replace a random dataset of ``inp`` by a link of ``kind`` to the same values."""
    with h5py.File(inp, "r+") as f:
        names = sorted(n for n in f if f[n].ndim == 3)
        name = names[rng.integers(len(names))]
        v, attrs = f[name][()], dict(f[name].attrs)
        other = f"{inp}.{name}.h5"
        with h5py.File(other, "w") as g:
            g[name] = v
        del f[name]
        if kind == "external_link":
            f[name] = h5py.ExternalLink(other, name)
            return name
        if kind == "external_storage":
            raw = f"{inp}.{name}.raw"
            with open(raw, "wb") as fh:
                fh.write(v.tobytes())
            d = f.create_dataset(name, shape=v.shape, dtype=v.dtype, external=[(raw, 0, v.nbytes)])
        elif kind == "virtual":
            layout = h5py.VirtualLayout(shape=v.shape, dtype=v.dtype)
            layout[...] = h5py.VirtualSource(other, name, shape=v.shape)
            d = f.create_virtual_dataset(name, layout)
        else:  # an in-file soft link to a copy: allowed, the run is the same
            d = f.create_dataset(f"stored/{name}", data=v)
            f[name] = h5py.SoftLink(f"/stored/{name}")
        for k, a in attrs.items():
            d.attrs[k] = a
    return name


def test_random_links(tmp_path, capsys):
    """External links, external raw storage and virtual datasets, on any dataset: refused
    naming it; an in-file soft link runs, equal to the plain input."""
    rng = np.random.default_rng(11)
    ref = tmp_path / "ref.h5"
    assert kwave_main(["-i", write_input(tmp_path / "plain.h5", nt=6), "-o", str(ref)]) == 0
    for i in range(12):
        case = tmp_path / f"c{i}"
        case.mkdir()
        kind = LINKS[i % len(LINKS)]
        inp = write_input(case / "in.h5", nt=6)
        name = _relink(rng, inp, kind)
        keep = sorted(os.listdir(case))
        status = kwave_main(["-i", inp, "-o", str(case / "out.h5")])
        err = capsys.readouterr().err
        if kind == "soft_link_to_same":
            assert status == 0, err
            with h5py.File(case / "out.h5", "r") as a, h5py.File(ref, "r") as b:
                assert np.array_equal(a["p"][()], b["p"][()])
            continue
        _assert_refused(status, err, case, keep)
        assert f"dataset '{name}'" in err, (kind, err)


def test_random_checkpoint_corruption(tmp_path, capsys):
    """Random bytes of a checkpoint or of the partial output flipped: each resume is refused
    (checkpoint and output kept as they were) or ends equal to an uninterrupted run."""
    import shutil

    rng = np.random.default_rng(5)
    inp = write_input(tmp_path / "in.h5", nt=24)
    flags = ["--p_raw", "--p_max", "--u_final"]
    assert kwave_main(["-i", inp, "-o", str(tmp_path / "full.h5"), *flags]) == 0
    leg = tmp_path / "leg"
    leg.mkdir()
    cmd = ["-i", inp, "-o", str(leg / "out.h5"), *flags, "--checkpoint_file", str(leg / "ck.h5")]
    assert kwave_main([*cmd, "--checkpoint_timesteps", "9"]) == 0
    outcomes = {"refused": 0, "resumed": 0, "output_values": 0}
    for i in range(16):
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
        run = shutil.copytree(leg, tmp_path / "run")
        target = run / ("ck.h5" if i % 3 else "out.h5")
        data = bytearray(target.read_bytes())
        in_data = i % 2 == 1  # half inside a dataset's stored values, half anywhere
        # in the output, the time series (its statistics and final fields are rewritten)
        only = "p" if target.name == "out.h5" else None
        lo, hi = _stored_range(target, rng, only) if in_data else (0, len(data))
        at = int(rng.integers(lo, hi))
        data[at] ^= 1 << int(rng.integers(8))
        target.write_bytes(bytes(data))
        before = {n: (run / n).read_bytes() for n in ("ck.h5", "out.h5")}
        status = kwave_main([a.replace(str(leg), str(run)) for a in cmd])
        err = capsys.readouterr().err
        assert not (in_data and status == 0), (i, target.name, at)  # these values are hashed
        outcomes["output_values"] += in_data and target.name == "out.h5"
        if status == 0:  # the flip hit nothing the run uses: the result must be exact
            outcomes["resumed"] += 1
            with h5py.File(run / "out.h5", "r") as a, h5py.File(tmp_path / "full.h5", "r") as b:
                for k in ("p", "p_max", "ux_final", "uy_final"):
                    assert np.array_equal(a[k][()], b[k][()]), (i, target.name, at, k)
            continue
        outcomes["refused"] += 1
        _assert_refused(status, err, run, ["ck.h5", "out.h5"])
        assert all((run / n).read_bytes() == b for n, b in before.items()), i
    assert outcomes["refused"] >= 8 and outcomes["output_values"] >= 2, outcomes


def _stored_range(path, rng, only=None) -> tuple[int, int]:
    """Byte range of a random dataset's stored values (its first chunk when chunked)."""
    spans = []

    def visit(name, obj):
        if not isinstance(obj, h5py.Dataset) or obj.size == 0 or only not in (None, name):
            return
        start = obj.id.get_offset()
        if start is not None:
            spans.append((start, start + obj.id.get_storage_size()))
        elif obj.id.get_num_chunks():
            info = obj.id.get_chunk_info(0)
            spans.append((info.byte_offset, info.byte_offset + info.size))

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return spans[int(rng.integers(len(spans)))]


def test_concurrent_outputs_with_failures(tmp_path, capsys):
    """Runs on one output path, some failing (a bad input) while another writes: the failing
    ones never remove anything but their own temporary file; the output is the good run's."""
    import threading

    good = write_input(tmp_path / "good.h5", nt=30)
    bad = write_input(tmp_path / "bad.h5", nt=30, c0=np.float32(1e30))
    out = tmp_path / "out.h5"
    status: dict[str, int] = {}

    def run(name, inp):
        status[name] = kwave_main(["-i", inp, "-o", str(out)])

    threads = [threading.Thread(target=run, args=(f"{n}{k}", i))
               for k in range(2) for n, i in (("good", good), ("bad", bad))]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    capsys.readouterr()
    assert status == {"good0": 0, "bad0": 1, "good1": 0, "bad1": 1}
    with h5py.File(out, "r") as f:
        assert np.isfinite(f["p"][()]).all() and f["p"].shape[1] == 30
    assert sorted(os.listdir(tmp_path)) == ["bad.h5", "good.h5", "out.h5"]
