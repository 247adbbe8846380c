"""All the overlaps of a group of blocks in one MPI call: ``sonotile_mpi_halos``.

The MPI transport's ``ppermute`` is one ``sendrecv`` per halo (mpi4jax), and each needs the
halo cut out of its block first: for a 2-rank LFB step, 12 halos of 1 MB a step, each sliced
into a buffer of its own (a read and a write of every halo) and sent while the other messages
wait. This custom call (``csrc/mpi_halos.cc``) takes the whole group of blocks and one axis,
posts every message at once straight from the blocks' buffers (along axis 0 a halo is a
contiguous run of planes, along a later axis MPI reads it as a strided vector) into the halo
outputs, and waits for all of them.

It joins mpi4jax's ordered effect: its token comes from mpi4jax's chain and goes back into it, so
every MPI call of a program (these, mpi4jax's ``sendrecv`` and ``alltoall``) keeps program order
on every rank — the ranks cannot reach them in different orders and deadlock.

Built on first use with the MPI C++ compiler (``mpicxx``; ``SONOTILE_MPICXX`` overrides) against
jaxlib's FFI headers, cached next to the FFTW extension. Unavailable (no compiler, a build
error, an mpi4jax without the private names used here): :func:`available` is False with
:func:`reason`, and the transport keeps mpi4jax's ``sendrecv``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from importlib import resources
from typing import Any

import jax
import numpy as np

from sonotile import cachedir, config

_state: dict[str, Any] = {}  # "ok", "reason", "primitive"


def _source() -> str:
    return resources.files("sonotile.parallel").joinpath("csrc/mpi_halos.cc").read_text()


def reason() -> str | None:
    """Why the custom call is unavailable (after :func:`available`), or None."""
    return _state.get("reason")


def _build() -> str | None:
    cxx = os.environ.get("SONOTILE_MPICXX") or shutil.which("mpicxx") or shutil.which("mpic++")
    if cxx is None:
        _state["reason"] = "no MPI C++ compiler (mpicxx)"
        return None
    import jax.ffi
    import jaxlib

    inc = jax.ffi.include_dir()
    src = _source()
    try:  # the MPI library the wrapper links: part of the key (another MPI, another build)
        show = subprocess.run([cxx, "--showme"], capture_output=True, text=True).stdout
    except OSError:
        show = ""
    key = "\n".join([src, inc, jaxlib.__version__, cxx, show])
    tag = hashlib.sha256(key.encode()).hexdigest()[:16]
    root = config.current().cache_dir
    os.makedirs(root, exist_ok=True)
    so = os.path.join(root, f"mpi_halos_{tag}.so")
    if os.path.exists(so):
        cachedir.touch(so)
        return so
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-w", f"-I{inc}"]
    r = cachedir.compile_library(src, so, lambda cc, out: [[cxx, *flags, cc, "-o", out]])
    if r.returncode != 0:
        lines = r.stderr.splitlines()
        errors = [ln for ln in lines if "error" in ln] or lines[-3:]
        _state["reason"] = "compiling the MPI halo extension failed: " + "; ".join(errors[:3])
        return None
    cachedir.prune_builds(root, so, ("mpi_halos_", ".so"))
    return so


def available() -> bool:
    """Build, load and register the custom call once per process; False with :func:`reason`."""
    if "ok" in _state:
        return bool(_state["ok"])
    ok = False
    try:
        ok = _setup()
    except Exception as e:  # anything unexpected: mpi4jax's sendrecv stays the way
        _state["reason"] = f"MPI halo extension unavailable: {e}"
    _state["ok"] = ok
    return ok


def _setup() -> bool:
    try:  # mpi4jax's ordered effect and token helpers (private names: checked here)
        from mpi4jax._src.jax_compat import abstract_token, get_token_effect, set_token_effect
        from mpi4jax._src.utils import ordered_effect
    except ImportError as e:
        _state["reason"] = f"this mpi4jax has no ordered-effect helpers ({e})"
        return False
    so = _build()
    if so is None:
        return False
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    lib = ctypes.CDLL(so)
    jax.ffi.register_ffi_target(
        "sonotile_mpi_halos", jax.ffi.pycapsule(lib.SonotileMpiHalos), platform="cpu"
    )
    prim = Primitive("sonotile_mpi_halos")
    prim.multiple_results = True

    def abstract(*xs: Any, axis: int, width: int, **_: Any) -> tuple[list[Any], set[Any]]:
        def halo(x: Any) -> Any:
            return jax.core.ShapedArray((*x.shape[:axis], width, *x.shape[axis + 1 :]), x.dtype)

        outs = [halo(x) for x in xs for _side in (0, 1)]
        return outs, {ordered_effect}

    def lower(
        ctx: Any, *xs: Any, comm: int, left: int, right: int, axis: int, width: int, end: int
    ) -> Any:
        token = get_token_effect(ctx, ordered_effect)
        with_token = ctx.replace(
            avals_in=(*ctx.avals_in, abstract_token), avals_out=(*ctx.avals_out, abstract_token)
        )
        rule = jax.ffi.ffi_lowering("sonotile_mpi_halos", has_side_effect=True)
        i64 = np.int64
        outs = list(rule(with_token, *xs, token, comm=i64(comm), left=i64(left), right=i64(right),
                         axis=i64(axis), width=i64(width), end=i64(end), tag=i64(0)))  # fmt: skip
        set_token_effect(ctx, ordered_effect, outs.pop())
        return outs

    prim.def_effectful_abstract_eval(abstract)
    mlir.register_lowering(prim, lower, platform="cpu")
    _state["primitive"] = prim
    return True


def halos(
    xs: Sequence[jax.Array], comm: int, left: int, right: int, width: int, end: int, axis: int = 0
) -> list[tuple[jax.Array, jax.Array]]:
    """``(left halo, right halo)`` along ``axis`` of each block of ``xs`` (same shape): ``width``
    planes from rank ``left``'s block (its last real ones) and from rank ``right``'s (its first
    ``width``), this block's own going the other way (its last real plane is ``end - 1``).
    ``comm``: the communicator's handle (mpi4py ``_handleof``). Requires :func:`available`."""
    out = _state["primitive"].bind(*xs, comm=int(comm), left=int(left), right=int(right),
                                   axis=int(axis), width=int(width), end=int(end))  # fmt: skip
    return [(out[2 * i], out[2 * i + 1]) for i in range(len(xs))]
