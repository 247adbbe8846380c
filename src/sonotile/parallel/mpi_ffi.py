"""sonotile's MPI custom calls (``csrc/mpi_ffi.cc``): a group's halos, a transpose, each in one
call.

**Halos** (``sonotile_mpi_halos``, :func:`halos`). The MPI transport's ``ppermute`` is one
``sendrecv`` per halo (mpi4jax), and each needs the halo cut out of its block first: for a
2-rank LFB step, 12 halos of 1 MB a step, each sliced into a buffer of its own (a read and a
write of every halo) and sent while the other messages wait. This custom call takes the whole
group of blocks and one axis, posts every message at once straight from the blocks' buffers
(along axis 0 a halo is a contiguous run of planes, along a later axis MPI reads it as a strided
vector) into the halo outputs, and waits for all of them.

**Transpose** (``sonotile_mpi_transpose``, :func:`transpose`). An all-to-all of P pieces in
which each rank's own piece stays where its producer wrote it: the pencil's plane transforms
and passes along x write the piece they keep straight into the result's buffer and the others
into a buffer of their own (``keep`` of :func:`sonotile.fft.fftw.rfft_split` and
:func:`~sonotile.fft.fftw.xpass`); the call (the result aliasing the first) receives each
other rank's piece into its place. mpi4jax's ``alltoall`` (``MPI_Alltoall``) copies the kept
piece from the send buffer to the receive buffer: half of every transpose's bytes at 2 ranks.

Both join mpi4jax's ordered effect: their token comes from mpi4jax's chain and goes back into
it, so every MPI call of a program (these, mpi4jax's ``sendrecv`` and ``alltoall``) keeps program
order on every rank — the ranks cannot reach them in different orders and deadlock.

Built on first use with the MPI C++ compiler (``mpicxx`` of the Python environment, as Open
MPI's wheel installs it, else of ``PATH``; ``Settings.mpicxx``, ``SONOTILE_MPICXX``, overrides)
against jaxlib's FFI headers, cached next to the FFTW extension. Unavailable (no compiler, a
build error, an mpi4jax without the private names used here): :func:`available` is False with
:func:`reason`, and the transport keeps mpi4jax's ``sendrecv`` and ``alltoall``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import jax
import numpy as np

from sonotile.base import cachedir, config

_state: dict[str, Any] = {}  # "ok", "reason", "primitive"


def _source() -> str:
    return resources.files("sonotile.parallel").joinpath("csrc/mpi_ffi.cc").read_text()


def reason() -> str | None:
    """Why the custom call is unavailable (after :func:`available`), or None."""
    return _state.get("reason")


def _build() -> str | None:
    here = os.path.dirname(sys.executable)  # the environment's own (Open MPI's wheel), then PATH
    found = [shutil.which(n, path=p) for p in (here, None) for n in ("mpicxx", "mpic++")]
    cxx = config.current().mpicxx or next((c for c in found if c), None)
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
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-w", f"-I{inc}"]
    key = [src, inc, jaxlib.__version__, cxx, cachedir.compiler_version(cxx), show, *flags]
    root = config.current().cache_dir
    so = os.path.join(root, f"mpi_ffi_{cachedir.key_tag(key)}.so")
    try:
        r = cachedir.ensure_library(src, so, lambda cc, out: [[cxx, *flags, cc, "-o", out]])
    except cachedir.UnsafeCache as e:
        _state["reason"] = str(e)
        return None
    if r.returncode != 0:
        lines = r.stderr.splitlines()
        errors = [ln for ln in lines if "error" in ln] or lines[-3:]
        _state["reason"] = "compiling the MPI extension failed: " + "; ".join(errors[:3])
        return None
    cachedir.prune_builds(root, so, ("mpi_ffi_", ".so"))
    return so


def available() -> bool:
    """Build, load and register the custom call once per process; False with :func:`reason`."""
    if "ok" in _state:
        return bool(_state["ok"])
    ok = False
    try:
        ok = _setup()
    except Exception as e:  # anything unexpected: mpi4jax's sendrecv stays the way
        _state["reason"] = f"MPI extension unavailable: {e}"
    _state["ok"] = ok
    return ok


def _setup() -> bool:
    so = _build()  # first: compiling needs no MPI runtime, and its error is the actionable one
    if so is None:
        return False
    try:  # mpi4jax's ordered effect and token helpers (private names: checked here)
        from mpi4jax._src.jax_compat import abstract_token, get_token_effect, set_token_effect
        from mpi4jax._src.utils import ordered_effect
    except ImportError as e:
        _state["reason"] = f"this mpi4jax has no ordered-effect helpers ({e})"
        return False
    lib = ctypes.CDLL(so)
    for name, symbol in (("sonotile_mpi_halos", lib.SonotileMpiHalos),
                         ("sonotile_mpi_transpose", lib.SonotileMpiTranspose)):  # fmt: skip
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(symbol), platform="cpu")
    tokens = (ordered_effect, abstract_token, get_token_effect, set_token_effect)

    def halo_shapes(*xs: Any, axis: int, width: int, **_: Any) -> list[Any]:
        def halo(x: Any) -> Any:
            return jax.core.ShapedArray((*x.shape[:axis], width, *x.shape[axis + 1 :]), x.dtype)

        return [halo(x) for x in xs for _side in (0, 1)]

    def transposed_shapes(*pairs: Any, **_: Any) -> list[Any]:
        return [jax.core.ShapedArray(f.shape, f.dtype) for f in pairs[::2]]

    _state["primitive"] = _primitive("sonotile_mpi_halos", halo_shapes, tokens)
    # result i is field i's full buffer (the kept piece already in place)
    _state["transpose"] = _primitive("sonotile_mpi_transpose", transposed_shapes, tokens,
                                     lambda n: {2 * i: i for i in range(n // 2)})  # fmt: skip
    return True


def _primitive(
    name: str,
    shapes: Callable[..., list[Any]],
    tokens: tuple[Any, ...],
    aliases: Callable[[int], dict[int, int]] | None = None,
) -> Any:
    """The primitive of custom call ``name`` on mpi4jax's ordered effect (``tokens``: the
    effect, the token's abstract value, and mpi4jax's get / set of the chain): a token from the
    chain goes in with the operands, the call's token goes back into it. ``shapes(*operands,
    **params)``: the results' abstract values; ``aliases(n operands)``: operand → result
    aliases, or None. Every parameter is passed to the call as a 64-bit integer attribute."""
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    effect, abstract_token, get_token, set_token = tokens
    prim = Primitive(name)
    prim.multiple_results = True

    def abstract(*xs: Any, **params: Any) -> tuple[list[Any], set[Any]]:
        return shapes(*xs, **params), {effect}

    def lower(ctx: Any, *xs: Any, **params: Any) -> Any:
        token = get_token(ctx, effect)
        with_token = ctx.replace(
            avals_in=(*ctx.avals_in, abstract_token), avals_out=(*ctx.avals_out, abstract_token)
        )
        extra: dict[str, Any] = (
            {} if aliases is None else {"operand_output_aliases": aliases(len(xs))}
        )
        rule = jax.ffi.ffi_lowering(name, has_side_effect=True, **extra)
        attrs = {k: np.int64(v) for k, v in params.items()}
        outs = list(rule(with_token, *xs, token, **attrs))
        set_token(ctx, effect, outs.pop())
        return outs

    prim.def_effectful_abstract_eval(abstract)
    mlir.register_lowering(prim, lower, platform="cpu")
    return prim


def halos(
    xs: Sequence[jax.Array], comm: int, left: int, right: int, width: int, end: int, axis: int = 0
) -> list[tuple[jax.Array, jax.Array]]:
    """``(left halo, right halo)`` along ``axis`` of each block of ``xs`` (same shape): ``width``
    planes from rank ``left``'s block (its last real ones) and from rank ``right``'s (its first
    ``width``), this block's own going the other way (its last real plane is ``end - 1``).
    ``comm``: the communicator's handle (mpi4py ``_handleof``). Requires :func:`available`."""
    attrs = {"comm": comm, "left": left, "right": right, "axis": axis, "width": width, "end": end}
    out = _state["primitive"].bind(*xs, tag=0, **{k: int(v) for k, v in attrs.items()})
    return [(out[2 * i], out[2 * i + 1]) for i in range(len(xs))]


def transpose(
    pairs: Sequence[tuple[jax.Array, jax.Array]], comm: int, me: int
) -> list[jax.Array]:  # fmt: skip
    """For each ``(full, others)`` of ``pairs`` (one meeting for them all): ``full`` (P pieces
    stacked first, only piece ``me`` written) with every other piece ``p`` received from rank
    ``p`` of ``comm`` (its ``others``' piece for this rank), while this rank's ``others`` (the
    P - 1 pieces for the other ranks, in rank order) go to them: the all-to-all of the pieces,
    the kept one never copied. ``comm``: the communicator's handle (mpi4py ``_handleof``; ranks
    0 .. P - 1 own the pieces). Requires :func:`available`."""
    flat = [a for pair in pairs for a in pair]
    return list(_state["transpose"].bind(*flat, comm=int(comm), me=int(me)))
