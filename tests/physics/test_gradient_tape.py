"""The backward pass with its states on a tape (host memory or disk) instead of the device.

The taped gradient must equal the gradient kept on the device (same arithmetic, recomputed),
for every parameter, whatever the chunk length (including a step count that is not a multiple
of it); the forward values must be untouched; a disk tape must leave its files only in its
folder; and what cannot work (forward mode) must fail with an error rather than a wrong value.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from grad_case import make_case

import sonotile as st


@pytest.fixture(autouse=True, scope="module")
def _float64(jax_float64):
    """64-bit JAX types for these tests only."""


@pytest.fixture(scope="module")
def case(_float64):
    return make_case(24, 30)


def _grad(sim):
    w = jnp.asarray(np.random.default_rng(0).standard_normal(sim()["p"].shape))
    return jax.jit(jax.grad(lambda p: jnp.sum(sim(p)["p"] * w)))(sim.params)


@pytest.fixture(scope="module")
def reference(case):
    return _grad(st.make_simulator(*case, pml_size=4, dtype="float64", chunk=None))


@pytest.mark.parametrize(
    "where,chunk,remat", [("host", "auto", False), ("host", 4, False), ("host", 4, True),
                          ("disk", 7, False)]
)  # fmt: skip
def test_taped_gradient_equals_device_gradient(case, reference, where, chunk, remat):
    sim = st.make_simulator(
        *case, pml_size=4, dtype="float64", chunk=chunk, tape=where, remat_step=remat
    )
    g = _grad(sim)
    assert set(g) == set(reference)
    for k in reference:
        scale = jnp.max(jnp.abs(reference[k]))
        assert scale > 0, k
        assert jnp.max(jnp.abs(g[k] - reference[k])) <= 1e-10 * scale, k


def test_taped_forward_is_unchanged(case):
    a = st.make_simulator(*case, pml_size=4, dtype="float64")()
    b = st.make_simulator(*case, pml_size=4, dtype="float64", tape="host")()
    assert np.array_equal(np.asarray(a["p"]), np.asarray(b["p"]))


def test_disk_tape_writes_only_into_its_folder(case, tmp_path):
    folder = tmp_path / "tape"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep")
    tape = st.Tape("disk", directory=str(folder))
    sim = st.make_simulator(*case, pml_size=4, dtype="float64", chunk=10, tape=tape)
    _grad(sim)
    names = sorted(os.listdir(folder))
    assert "mine.txt" in names and (folder / "mine.txt").read_text() == "keep"
    states = [n for n in names if n.startswith("state-")]
    # p0 makes step 0 the initial state: 29 scanned steps, the first 9 untaped, then 2 chunks
    # of 10 stored; a 2-D state is p, rho_x, rho_y, ux, uy
    assert len(states) == 2 * 5
    tape.close()
    assert folder.is_dir()  # a folder the user gave is not removed


def test_forward_mode_through_a_tape_is_an_error(case):
    sim = st.make_simulator(*case, pml_size=4, dtype="float64", tape="host")
    p = sim.params
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jvp(lambda c: sim({**p, "sound_speed": c})["p"], (p["sound_speed"],),
                (jnp.ones_like(p["sound_speed"]),))  # fmt: skip


def test_bad_tape_is_refused(case):
    with pytest.raises(ValueError, match="tape"):
        st.make_simulator(*case, pml_size=4, tape="gpu")
    with pytest.raises(ValueError, match="does not exist"):
        st.Tape("disk", directory="/nonexistent/sonotile-tape")


def test_host_tape_holds_one_state_per_stored_step(case):
    tape = st.Tape("host")
    sim = st.make_simulator(*case, pml_size=4, dtype="float64", chunk=3, tape=tape)
    _grad(sim)
    # 29 scanned steps (p0 is step 0), the first 29 % 3 = 2 untaped: 9 states of 5 fields
    assert tape.bytes_stored == 9 * 5 * 24 * 24 * 8
    _grad(sim)  # a second gradient overwrites the same keys: nothing accumulates
    assert tape.bytes_stored == 9 * 5 * 24 * 24 * 8


def test_host_tape_overwrites_a_state_in_place():
    tape = st.Tape("host")
    a = np.arange(6.0).reshape(2, 3)
    key = (np.int32(0), np.int32(1))
    tape.store(*key, a, a + 1)
    first = tape.load(*key, np.int32(0))
    tape.store(*key, 2 * a, a)  # same shapes and dtypes: the same arrays take the new values
    second = tape.load(*key, np.int32(0))
    assert all(x is y for x, y in zip(first, second))
    assert np.array_equal(second[0], 2 * a) and np.array_equal(second[1], a)
    a[...] = -1  # the tape holds copies, not the caller's buffers
    assert np.array_equal(second[1], np.arange(6.0).reshape(2, 3))
    tape.store(*key, np.zeros(4, np.float32))  # another layout: replaced
    third = tape.load(*key, np.int32(0))
    assert len(third) == 1 and third[0].dtype == np.float32
    assert tape.bytes_stored == 2 * 6 * 8


def test_tape_is_reached_without_copying_the_state_into_new_arrays(case):
    pytest.importorskip("jax.experimental.buffer_callback")
    sim = st.make_simulator(*case, pml_size=4, dtype="float64", chunk=10, tape="host")
    text = str(jax.make_jaxpr(jax.grad(lambda p: jnp.sum(sim(p)["p"])))(sim.params))
    # pure_callback would device_put every stored field anew (a state's worth of fresh memory
    # per step, as long as a step on a 128^3 grid)
    assert "buffer_callback" in text and "pure_callback" not in text


def test_disk_tape_reads_into_given_arrays_and_reuses_its_copies(tmp_path):
    """A disk tape's state comes back bit for bit, read straight into the caller's arrays; the
    copies it wrote are reused for the next store (no fresh memory per state); a file of
    another shape is refused by name."""
    from sonotile.solver.tape import Tape

    tape = Tape("disk", directory=str(tmp_path))
    rng = np.random.default_rng(0)
    states = [[rng.standard_normal((4, 5, 6)).astype(np.float32) for _ in range(3)]
              for _ in range(4)]  # fmt: skip
    for k, arrays in enumerate(states):
        tape.store(np.int32(0), np.int32(k), *arrays)
    for k in reversed(range(4)):
        outs = [np.empty((4, 5, 6), np.float32) for _ in range(3)]
        tape.load_into(np.int32(0), np.int32(k), np.int32(0), outs)
        assert all(np.array_equal(o, a) for o, a in zip(outs, states[k]))
    assert tape._spare, "written copies are kept for reuse"
    with pytest.raises(ValueError, match=r"state-0-1-0\.npy holds float32\(4, 5, 6\)"):
        tape.load_into(np.int32(0), np.int32(1), np.int32(0), [np.empty((2, 2), np.float32)])
    tape.close()


def test_disk_tape_overwrites_its_files_in_place(tmp_path, monkeypatch):
    """The next run's state goes into the files of the last one without truncating them (which
    would free their pages for the kernel to allocate again); a new layout starts anew."""
    from sonotile.solver import tape as tape_mod

    modes = []

    def spy(path, mode="r", *args, **kwargs):
        modes.append(mode)
        return open(path, mode, *args, **kwargs)

    monkeypatch.setattr(tape_mod, "open", spy, raising=False)
    tape = tape_mod.Tape("disk", directory=str(tmp_path))
    rng = np.random.default_rng(1)
    runs = [rng.standard_normal((3, 4, 5)).astype(np.float32) for _ in range(2)]
    runs.append(rng.standard_normal((2, 3)).astype(np.float32))  # another layout
    for a in runs:
        modes.clear()
        tape.store(np.int32(0), np.int32(0), a)
        out = np.empty(a.shape, a.dtype)
        tape.load_into(np.int32(0), np.int32(0), np.int32(0), [out])
        assert np.array_equal(out, a)
        assert modes[0] == ("r+b" if a is runs[1] else "wb"), (a.shape, modes)
    tape.close()


def test_disk_tape_rewrites_a_state_at_once_from_the_given_buffers(tmp_path):
    """A state stored again under a key with the same layout goes straight from the caller's
    buffers into its files, before ``store`` returns (no copy for a writer thread, nothing
    pending); the files stay valid ``.npy`` files."""
    from sonotile.solver.tape import Tape

    tape = Tape("disk", directory=str(tmp_path))
    rng = np.random.default_rng(2)
    first = [rng.standard_normal((3, 4, 5)).astype(np.float32) for _ in range(2)]
    tape.store(np.int32(0), np.int32(0), *first)
    outs = [np.empty((3, 4, 5), np.float32) for _ in range(2)]
    tape.load_into(np.int32(0), np.int32(0), np.int32(0), outs)  # written (by the thread)
    spares = len(tape._spare)
    second = [rng.standard_normal((3, 4, 5)).astype(np.float32) for _ in range(2)]
    tape.store(np.int32(0), np.int32(0), *second)
    assert not tape._pending and len(tape._spare) == spares
    expected = [a.copy() for a in second]
    for a in second:
        a[...] = 0  # the buffers are the caller's again: the tape took their values already
    tape.load_into(np.int32(0), np.int32(0), np.int32(0), outs)
    assert all(np.array_equal(o, e) for o, e in zip(outs, expected))
    for i, e in enumerate(expected):
        assert np.array_equal(np.load(tmp_path / f"state-0-0-{i}.npy"), e)
    tape.close()
