"""Any grid on any mesh: odd and prime axis lengths on 2, 3, 4 and 8 devices (blocks that differ
by one point), compared with the single-device run — pencil to round-off, lfb within its
documented overlap error — and ``auto`` never picks a mesh that fails.

One subprocess with 8 virtual CPU devices (JAX fixes the device count when it starts).
"""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices
from paths import REPO

SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import jax
import numpy as np
from lfb_error import errors
from sonotile.bench.cases import heterogeneous_absorbing
from sonotile.parallel import auto, engine_for, run_decomposed
from sonotile.solver.runner import run

assert len(jax.devices()) == 8
out = {}

# 3-D heterogeneous, absorbing, nonlinear; p and ux sources, 60 point sensors incl. u_non_staggered
prob = heterogeneous_absorbing(shape=(45, 37, 29), nt=40)
ref = run(prob)
for dec, mesh in [("pencil", (2,)), ("pencil", (3,)), ("pencil", (2, 3)), ("pencil", (4, 2, 1)),
                  ("lfb", (3,)), ("lfb", (2, 2, 2)), ("lfb", (1, 3, 2)), ("lfb", (2, 2))]:
    res = run_decomposed(prob, dec, mesh, overlap=16)
    assert {k: v.shape for k, v in res[1].items()} == {k: v.shape for k, v in ref[1].items()}
    out[f"het3d_{dec}_{'x'.join(map(str, mesh))}"] = errors(res, ref)


sys.path.insert(0, sys.argv[2])
from ivp_case import ivp


def ivp_all(shape, nt=30):
    return ivp(shape, nt, ("p", "u_max", "p_max_all", "u_min_all", "p_final", "u_final"))

for shape, runs in [((45, 53), [("pencil", (3,)), ("pencil", (8,)), ("lfb", (2, 4)),
                                ("lfb", (3, 1))]),
                    ((97, 53), [("pencil", (4,)), ("lfb", (8,))]),
                    ((29, 31, 23), [("pencil", (2, 2)), ("lfb", (2, 2, 2))])]:
    p = ivp_all(shape)
    r = run(p)
    for dec, mesh in runs:
        res = run_decomposed(p, dec, mesh, overlap=16)
        out[f"ivp_{'x'.join(map(str, shape))}_{dec}_{'x'.join(map(str, mesh))}"] = errors(res, r)

# auto: every pick builds an engine, for odd and prime shapes and 2, 3, 4, 8 devices
picks = []
for shape in [(45, 53), (97, 53), (53, 53, 53), (45, 37, 29), (7, 97)]:
    small = ivp_all(shape, nt=2) if min(shape) > 20 else None
    for n in (2, 3, 4, 8):
        pick = auto(shape, n)
        if small is not None:
            engine_for(small, "auto", devices=jax.devices()[:n])
        picks.append([list(shape), n, pick["decomposition"], list(pick["mesh_shape"])])
out["auto"] = picks
print("RESULT" + json.dumps(out, default=str))
"""


@pytest.fixture(scope="module")
def results():
    paths = [str(REPO / "benchmarks" / "parallel"), str(REPO / "tests" / "helpers")]
    return run_on_cpu_devices(SCRIPT, 8, *paths, timeout=900)


def runs(kind: str) -> list[str]:
    return [
        f"het3d_{kind}_{m}" for m in
        {"pencil": ["2", "3", "2x3", "4x2x1"], "lfb": ["3", "2x2x2", "1x3x2", "2x2"]}[kind]
    ] + [f"ivp_{s}_{kind}_{m}" for s, ms in {
        "45x53": {"pencil": ["3", "8"], "lfb": ["2x4", "3x1"]},
        "97x53": {"pencil": ["4"], "lfb": ["8"]},
        "29x31x23": {"pencil": ["2x2"], "lfb": ["2x2x2"]},
    }.items() for m in ms[kind]]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", runs("pencil"))
def test_pencil_on_uneven_blocks_equals_single(results, name):
    err = results[name]
    assert max(err.values()) <= 1e-5, err


@pytest.mark.slow
@pytest.mark.parametrize("name", runs("lfb"))
def test_lfb_on_uneven_blocks_within_documented_error(results, name):
    # overlap 16, bell width 0.5: 7.5e-4 measured with windowed boxes (docs/decomposition.md)
    err = results[name]
    assert max(err.values()) <= 1e-3, err


@pytest.mark.slow
def test_auto_picks_build_for_odd_and_prime_grids(results):
    picks = results["auto"]
    assert len(picks) == 20
    for shape, n, dec, mesh in picks:
        assert dec in ("pencil", "lfb")
        assert int(__import__("math").prod(mesh)) == n, (shape, n, mesh)
        assert all(m <= s for m, s in zip(mesh, shape)), (shape, n, mesh)


def test_blocks_bookkeeping():
    import numpy as np

    from sonotile.parallel.blocks import Blocks
    from sonotile.parallel.mesh import OUT_OF_RANGE, local_index

    b = Blocks((45, 53), (4, 1))
    assert list(b.counts(0)) == [12, 11, 11, 11] and list(b.starts(0)) == [0, 12, 23, 34]
    assert b.padded_shape == (48, 53) and b.local_shape == (12, 53)
    x = np.arange(45 * 53, dtype=float).reshape(45, 53)
    padded = np.take(x, b.source_positions(0), axis=0)
    np.testing.assert_array_equal(b.to_true(padded), x)  # dead points removed again
    assert np.all(padded[23] == x[22])  # the dead point of block 1 copies its last point
    idx, owned = local_index(np.array([[11, 0], [12, 5], [44, 52]]), (45, 53), (4,))
    assert owned[:, 0].tolist() == [True, False, False, False]
    assert owned[:, 1].tolist() == [False, True, False, False]
    assert owned[:, 2].tolist() == [False, False, False, True]
    assert idx[0][1, 1] == 0 and idx[0][3, 2] == 10 and idx[0][0, 1] == OUT_OF_RANGE
    with pytest.raises(ValueError, match="fewer than the 4 devices"):
        Blocks((3, 8), (4,)).check("lfb")
