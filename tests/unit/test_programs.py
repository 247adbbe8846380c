"""The on-disk program cache (sonotile.solver.programs): a warm start loads the compiled program
instead of tracing and lowering, keys change with what the program depends on, and a broken or
unusable file never gives a wrong answer."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kwave_inputs import write_input

from sonotile.base import config
from sonotile.solver import programs


@partial(jax.jit, static_argnames=("power",))
def _poly(x, y, power):
    """A small loop with a dynamic trip count, a concatenation and a static argument."""
    body = lambda i, v: jnp.concatenate([v[1:], v[:1]]) * 0.5 + jnp.sin(v) ** power  # noqa: E731
    return jax.lax.fori_loop(0, y, body, x)


class Spy:
    """A jitted function whose lowerings are counted (a load from disk does not lower)."""

    def __init__(self, fn):
        self.fn, self.lowered = fn, 0

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def lower(self, *args, **kwargs):
        self.lowered += 1
        return self.fn.lower(*args, **kwargs)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    # keys of their own: JAX's shared cache may hold the fresh compiles of an earlier run of
    # these tests (whose kept files went with their temporary directory)
    monkeypatch.setattr(programs, "_SOURCE_DIGEST", str(tmp_path))
    monkeypatch.setattr(programs, "directory", lambda: str(tmp_path))
    monkeypatch.setattr(programs, "enabled", lambda: True)
    return tmp_path


def test_a_kept_program_is_loaded_not_lowered_and_gives_the_same_result(cache_dir):
    x = jnp.linspace(0.0, 1.0, 257, dtype=jnp.float32)
    want = np.asarray(_poly(x, 7, power=3))
    first = Spy(_poly)
    got1 = np.asarray(programs.cached(first, "poly", {"power": 3})(x, 7))
    assert first.lowered == 1 and len(list(cache_dir.glob("sonotile-poly-*.prog"))) == 1
    second = Spy(_poly)  # a new process would start like this: nothing in memory
    call = programs.cached(second, "poly", {"power": 3})
    got2 = np.asarray(call(x, 7))
    got3 = np.asarray(call(x, 5))  # same shapes, other trip count: the same program
    assert second.lowered == 0
    np.testing.assert_array_equal(got1, want)
    np.testing.assert_array_equal(got2, want)
    np.testing.assert_array_equal(got3, np.asarray(_poly(x, 5, power=3)))


def test_keys_change_with_shape_dtype_statics_environment_and_source(cache_dir, monkeypatch):
    x = jnp.zeros(16, jnp.float32)
    base = programs.key_of("poly", (x, 3), {"power": 3})
    assert base == programs.key_of("poly", (jnp.ones(16, jnp.float32), 9), {"power": 3})
    others = [
        programs.key_of("poly", (jnp.zeros(17, jnp.float32), 3), {"power": 3}),
        programs.key_of("poly", (jnp.zeros(16, jnp.bfloat16), 3), {"power": 3}),
        programs.key_of("poly", (x, 3), {"power": 2}),
        programs.key_of("other", (x, 3), {"power": 3}),
        programs.key_of("poly", ((x,), 3), {"power": 3}),
    ]
    saved = config.current()
    try:
        config.configure(fftw_updates=False)  # the settings are part of the key
        others.append(programs.key_of("poly", (x, 3), {"power": 3}))
    finally:
        config.configure(saved)
    monkeypatch.setenv("JAX_SONOTILE_TEST_KEY", "1")  # XLA's and JAX's variables
    others.append(programs.key_of("poly", (x, 3), {"power": 3}))
    monkeypatch.delenv("JAX_SONOTILE_TEST_KEY")
    monkeypatch.setattr(programs, "_SOURCE_DIGEST", "another source")
    others.append(programs.key_of("poly", (x, 3), {"power": 3}))
    assert len({base, *others}) == len(others) + 1


def test_the_source_digest_is_taken_at_import_not_at_the_first_compile(monkeypatch):
    # a process keys its programs by the source it imported: files edited while it runs
    # (hashed again here) must not change the key of what it compiles
    at_import = programs.source_digest()
    assert at_import == programs._hash_sources()
    monkeypatch.setattr(programs, "_hash_sources", lambda: "the source as edited later")
    assert programs.source_digest() == at_import


def test_a_broken_file_is_compiled_again_and_replaced(cache_dir):
    x = jnp.linspace(0.0, 1.0, 64, dtype=jnp.float32)
    programs.cached(_poly, "poly", {"power": 1})(x, 4)
    (path,) = cache_dir.glob("sonotile-poly-*.prog")
    path.write_bytes(path.read_bytes()[:100])  # truncated, as by a full disk
    spy = Spy(_poly)
    got = np.asarray(programs.cached(spy, "poly", {"power": 1})(x, 4))
    assert spy.lowered == 1 and path.stat().st_size > 1000
    np.testing.assert_array_equal(got, np.asarray(_poly(x, 4, power=1)))


def test_an_argument_that_does_not_pickle_bypasses_the_cache(cache_dir):
    assert programs.key_of("poly", (jnp.zeros(3), 1), {"power": lambda: 0}) is None


SERVED_BY_JAX = r"""
import os, sys, pickle
import jax, jax.numpy as jnp, numpy as np
from functools import partial
from sonotile.solver import programs
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
programs._SOURCE_DIGEST = sys.argv[2]  # the version of sonotile

@partial(jax.jit, static_argnames=("k",))
def f(x, k):
    return jax.lax.fori_loop(0, 10, lambda i, v: jnp.concatenate([v[k:], v[:k]]) + jnp.sin(v), x)

x = jnp.arange(100.0, dtype=jnp.float32)
got = np.asarray(programs.cached(f, "f", {"k": 1})(x))
kept = [n for n in os.listdir(sys.argv[1]) if n.endswith(".prog")]
print("RESULT", len(kept), float(np.abs(got - np.asarray(f(x, k=1))).max()))
"""


def _served(folder, version: str = "1") -> list[float]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", SONOTILE_PROGRAM_CACHE="1")
    out = subprocess.run([sys.executable, "-c", SERVED_BY_JAX, str(folder), version], env=env,
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT"))
    return [float(v) for v in line.split()[1:]]


def test_a_program_from_jaxs_cache_is_used_but_not_kept(tmp_path):
    """XLA:CPU serializes an executable JAX loaded from its cache without its kernels: keeping
    it would break the next run ("Function ... not found")."""
    assert _served(tmp_path) == [1, 0.0]  # compiled here: kept
    for p in tmp_path.glob("*.prog"):
        p.unlink()  # pruned, while JAX's entry stays
    assert _served(tmp_path) == [0, 0.0]  # JAX's cache served it: used, not kept
    # another sonotile, the same program: JAX's entries of the old one must not serve it
    assert _served(tmp_path, "2") == [1, 0.0]


def test_sonotile_kwave_warm_start_uses_the_kept_program_bit_identically(tmp_path):
    src = tmp_path / "in.h5"
    write_input(src, shape=(40, 36), nt=50, p0=False, p_source=True)
    env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path / "cache"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0", JAX_PLATFORMS="cpu")  # fmt: skip
    cmd = [sys.executable, "-m", "sonotile.kwave.cli", "-i", str(src), "-t", "1", "-p"]
    outs, used = [], []
    # without the program cache first: JAX's cache then holds the program under its usual key,
    # which must not serve the program cache's own compile (it would not serialize whole)
    for i, flag in enumerate(["0", "1", "1"]):
        out = tmp_path / f"out{i}.h5"
        proc = subprocess.run([*cmd, "-o", str(out)], env=dict(env, SONOTILE_PROGRAM_CACHE=flag),
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        outs.append(out)
        kept = list((tmp_path / "cache").glob("sonotile-chunk-*.prog"))
        used.append([p.stat().st_mtime_ns for p in kept])
    assert len(used[0]) == 0 and len(used[1]) == 1
    assert used[2][0] > used[1][0]  # loaded (a use touches the file) by the third run
    with h5py.File(outs[0]) as a, h5py.File(outs[1]) as b, h5py.File(outs[2]) as c:
        np.testing.assert_array_equal(a["p"][()], b["p"][()])
        np.testing.assert_array_equal(a["p"][()], c["p"][()])
        assert np.abs(a["p"][()]).max() > 0
