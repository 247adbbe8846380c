"""Shared test set-up: the helper modules in tests/helpers are importable by name."""

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "helpers"))

# A shell without job control starts background commands (``pytest ... &``, ``nohup``) with
# SIGINT ignored, and the processes the tests start inherit that: Python then never raises
# KeyboardInterrupt, and the tests that interrupt a run with Ctrl-C's signal would time out.
# Tests are about sonotile's handling of the signal, not the shell's: children start with it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module")
def jax_float64() -> Iterator[None]:
    """64-bit JAX types for one test module (restored after it: other modules run float32)."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def no_program_cache() -> Iterator[None]:
    """Programs traced and compiled through jit, not loaded whole from the program cache
    (:mod:`sonotile.solver.programs`), with jit's in-memory caches emptied first (an earlier
    test may have traced the same program): for tests that count traces or jit's own cache."""
    import jax

    from sonotile.base import config

    jax.clear_caches()
    saved = config.current()
    config.configure(program_cache=False)
    yield
    config.configure(saved)
