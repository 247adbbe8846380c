"""Compiled programs kept on disk between processes: a warm start neither traces nor lowers.

JAX's persistent compilation cache spares a warm start XLA's compilation, but every process
still traces the time loop in Python and lowers it to MLIR to compute that cache's key (0.1-0.15 s
at 128^3, a tenth of a warm ``sonotile-kwave`` start). :func:`cached` keys a compiled program by
everything its trace depends on instead (sonotile's own source, JAX's version, the devices, the
settings and JAX's configuration, the environment variables that steer XLA and JAX, the
arguments' tree structure, shapes, dtypes and placement, and the static arguments) and keeps
the serialized executable next to JAX's cache (``sonotile-<name>-<key>.prog``: one directory to
bound, :mod:`sonotile.base.cachedir`, and a cold cache is cold for both). A file that cannot be read
or loaded is compiled again and replaced; anything the key cannot be made of (an argument that
does not pickle) bypasses the cache. ``Settings.program_cache`` (``SONOTILE_PROGRAM_CACHE=0``)
switches it off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Hashable, Mapping
from typing import Any, cast

import jax
from jax import monitoring

from sonotile.base import config

#: the prefix and suffix of the files in the compilation cache directory
PREFIX, SUFFIX = "sonotile-", ".prog"
#: An XLA option that changes nothing but debug output, set to a number made of the program's
#: key (:func:`fresh_options`): it gives each program compiled for this cache an entry of its
#: own in JAX's cache. An executable that JAX loaded from its cache serializes without its
#: compiled kernels on XLA:CPU (jaxlib 0.10.2: "Function ... not found" when run), so only
#: programs compiled afresh can be kept, and JAX's cache must not serve these compiles with
#: the entries of other runs (the same program from a run without this cache or from an older
#: sonotile). It still serves one when our file went but JAX's entry of the same key stayed
#: (pruning removes JAX's first: it is never read again); that program is used, not kept.
DEBUG_OPTION = "xla_debug_buffer_assignment_show_max"
_hits: list[int] = []


def enabled() -> bool:
    """Whether programs are kept: the compilation cache and the program cache are on
    (:class:`sonotile.base.config.Settings`) and JAX has a directory for them."""
    settings = config.current()
    return settings.compilation_cache and settings.program_cache and bool(directory())


def directory() -> str | None:
    """JAX's persistent compilation cache directory, where the programs go (None: no cache)."""
    return getattr(jax.config, "jax_compilation_cache_dir", None) or os.environ.get(
        "JAX_COMPILATION_CACHE_DIR"
    )


def _hash_sources() -> str:
    """SHA-256 of sonotile's source files (Python and C++)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for base, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".py", ".cc", ".h")):
                path = os.path.join(base, name)
                h.update(os.path.relpath(path, root).encode() + b"\0")
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


#: the source as this process imported it: hashed at import (~5 ms), not at the first compile,
#: so that files edited while a process runs cannot key its programs as the edited source's
_SOURCE_DIGEST = _hash_sources()


def source_digest() -> str:
    """SHA-256 of sonotile's source files (Python and C++) as they were when this process
    imported its solver."""
    return _SOURCE_DIGEST


def environment() -> tuple:
    """What besides the arguments decides a traced and compiled program."""
    import jaxlib

    dev = jax.devices()[0]
    values = getattr(jax.config, "values", {})
    jax_config = sorted(
        (k, v) for k, v in values.items() if isinstance(v, (bool, int, float, str, type(None)))
    )
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(("XLA_", "JAX_")))
    return (
        source_digest(),
        jax.__version__,
        getattr(jaxlib, "__version__", ""),
        dev.platform,
        dev.client.platform_version,
        dev.device_kind,
        jax.device_count(),
        jax.process_count(),
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        config.current(),
        jax_config,
        env,
    )


def _structure(treedef: Any) -> Any:
    """A picklable description of a tree structure: node types by name and their static data."""
    data = treedef.node_data()
    if data is None:
        return None
    kind, aux = data
    return (
        f"{kind.__module__}.{kind.__qualname__}",
        aux,
        tuple(_structure(c) for c in treedef.children()),
    )


def _placement(leaf: Any) -> Hashable:
    """Shape, dtype, weak type and device ids of an argument (None for a host array)."""
    aval = jax.typeof(leaf)
    devices = None
    if isinstance(leaf, jax.Array):
        devices = tuple(sorted(int(d.id) for d in leaf.sharding.device_set))  # type: ignore[attr-defined]
    return (tuple(aval.shape), str(aval.dtype), bool(getattr(aval, "weak_type", False)), devices)


def key_of(name: str, args: tuple, statics: Mapping[str, Hashable]) -> str | None:
    """The cache key of ``name(*args, **statics)`` (hex), or None when it cannot be made."""
    leaves, treedef = jax.tree_util.tree_flatten(args)
    try:
        parts = (
            name,
            environment(),
            _structure(treedef),
            tuple(_placement(x) for x in leaves),
            sorted(statics.items()),
        )
        blob = pickle.dumps(parts, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an argument or static that does not pickle: no cache
        return None
    return hashlib.sha256(blob).hexdigest()[:40]


def _only_default_device(args: tuple) -> bool:
    """Whether every device array of ``args`` lives on the first device alone, and the default
    device is not changed (the programs kept are for the first device)."""
    first = jax.devices()[0]
    if getattr(jax.config, "jax_default_device", None) not in (None, first):
        return False
    for x in jax.tree_util.tree_leaves(args):
        if isinstance(x, jax.Array) and x.sharding.device_set != {first}:
            return False
    return True


def fresh_options(key: str) -> dict[str, int]:
    """Compiler options that give the program of ``key`` its own entry in JAX's cache."""
    return {DEBUG_OPTION: 1000 + int(key[:7], 16)}


def _cache_hits() -> int:
    """How many compiles JAX's persistent cache has served in this process so far."""
    if not _hits:
        _hits.append(0)

        def count(event: str, **kwargs: Any) -> None:
            if event == "/jax/compilation_cache/cache_hits":
                _hits[0] += 1

        monitoring.register_event_listener(count)
    return _hits[0]


def load(path: str) -> jax.stages.Compiled | None:
    """The program kept in ``path``, or None when there is none or it cannot be loaded."""
    from jax.experimental import serialize_executable

    try:
        with open(path, "rb") as fh:
            blob, in_tree, out_tree = pickle.load(fh)
        # for the first device alone (by default it would load for all of the backend's)
        first = jax.devices()[0]
        return serialize_executable.deserialize_and_load(
            blob, in_tree, out_tree, backend=first.client, execution_devices=[first]
        )
    except Exception:  # none, unreadable, truncated or from another build: compile again
        return None


def save(path: str, compiled: jax.stages.Compiled) -> None:
    """Keep ``compiled`` in ``path`` (written aside, then renamed: readers see all or nothing);
    a program that cannot be serialized or written is simply not kept."""
    from jax.experimental import serialize_executable

    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        blob = pickle.dumps(serialize_executable.serialize(compiled), pickle.HIGHEST_PROTOCOL)
        with open(tmp, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except Exception:
        try:
            os.remove(tmp)
        except OSError:
            pass


def cached(fn: Any, name: str, statics: Mapping[str, Hashable] | None = None) -> Callable[..., Any]:
    """``fn(*args, **statics)`` (``fn`` a ``jax.jit`` function, ``statics`` its static
    arguments) through the program cache: the first call with given argument shapes loads the
    compiled program from disk, or traces, lowers and compiles it and keeps it; later calls in
    the process use it directly. Falls back to ``fn`` where the cache does not apply."""
    statics = dict(statics or {})
    programs: dict[Hashable, Any] = {}

    def call(*args: Any) -> Any:
        leaves, treedef = jax.tree_util.tree_flatten(args)
        mem = (treedef, tuple(_placement(x) for x in leaves), jax.config.read("jax_enable_x64"))
        prog = programs.get(mem)
        if prog is None:
            prog = programs[mem] = _program(fn, name, args, statics)
        return prog(*args)

    return call


def _program(fn: Any, name: str, args: tuple, statics: dict) -> Callable[..., Any]:
    """The compiled program for ``args`` (or ``fn`` itself when the cache does not apply)."""
    if not enabled() or jax.process_count() > 1 or not _only_default_device(args):
        return lambda *a: fn(*a, **statics)
    key = key_of(name, args, statics)
    if key is None:
        return lambda *a: fn(*a, **statics)
    folder = cast(str, directory())  # enabled: there is one
    path = os.path.join(folder, f"{PREFIX}{name}-{key}{SUFFIX}")
    compiled = load(path)
    if compiled is None:
        hits = _cache_hits()
        compiled = fn.lower(*args, **statics).compile(compiler_options=fresh_options(key))
        if _cache_hits() == hits:  # compiled here, not loaded from JAX's cache
            os.makedirs(folder, exist_ok=True)
            save(path, compiled)
    else:
        try:  # a later read counts as a use for the cache's least-recently-used pruning
            os.utime(path)
        except OSError:
            pass
    return compiled
