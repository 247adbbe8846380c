"""Fixtures shared by the unit tests of the FFTW custom calls."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


@contextmanager
def fftw_configured(**changes: Any) -> Iterator[None]:
    """The installed settings with ``changes`` (:class:`sonotile.base.config.Settings` attributes),
    passed to the FFTW extension for the duration; the old ones restored after."""
    from sonotile.base import config
    from sonotile.fft import fftw, fftw_library

    old = config.current()
    config.configure(**changes)
    fftw_library._configure(fftw.load())
    try:
        yield
    finally:
        config.configure(old)
        fftw_library._configure(fftw.load())


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def fftw_threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """FFTW's threads for the calls of one test (1 or 2; XLA runs them when they execute)."""
    with fftw_configured(threads=request.param):
        yield request.param
