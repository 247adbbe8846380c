"""JAX's persistent compilation cache under ``~/.cache/sonotile/jax`` (time to first step).

:func:`enable_env` is called by the entry points (``sonotile-kwave``, ``sonotile bench``,
through ``kwave_cli.configure_threads``), :func:`enable` by
:meth:`sonotile.operators.FourierOps.build`, i.e. before any solver program is compiled
(``simulate``, ``sonotile demo``, every decomposition that uses ``FourierOps``). Programs
that took at least 0.2 s to compile are stored (JAX's default: no size limit; an LRU limit
would need the ``filelock`` package); a second run of the
same problem shape loads them instead of compiling. Nothing is changed when the user set a
cache directory (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config``);
``SONOTILE_COMPILATION_CACHE=0`` disables it.
"""

from __future__ import annotations

import os

MIN_COMPILE_S = 0.2
_done: list[bool] = []


def cache_path() -> str:
    from .fftw import cache_dir

    return os.path.join(cache_dir(), "jax")


def enable_env() -> None:
    """The same through environment variables, before JAX is imported (entry points)."""
    if os.environ.get("SONOTILE_COMPILATION_CACHE", "1") == "0":
        return
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = cache_path()
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", str(MIN_COMPILE_S))


def enable() -> None:
    """Turn on the persistent compilation cache once per process (idempotent)."""
    if _done or os.environ.get("SONOTILE_COMPILATION_CACHE", "1") == "0":
        return
    _done.append(True)
    import jax

    if jax.config.jax_compilation_cache_dir:
        return
    try:
        os.makedirs(cache_path(), exist_ok=True)
        jax.config.update("jax_compilation_cache_dir", cache_path())
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_S)
    except (OSError, AttributeError):
        pass
