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
    from sonotile.fft import fftw

    old = config.current()
    config.configure(**changes)
    fftw._configure(fftw.load())
    try:
        yield
    finally:
        config.configure(old)
        fftw._configure(fftw.load())


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def fftw_threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """FFTW's threads for the calls of one test (1 or 2; XLA runs them when they execute)."""
    with fftw_configured(threads=request.param):
        yield request.param


@pytest.fixture(params=["halves", "fftw"])
def fftw_planes(request: pytest.FixtureRequest) -> Iterator[str]:
    """How FFTW's calls transform 2-D planes with even rows in one test (by halves or by FFTW's
    own plane plans, :attr:`sonotile.base.config.Settings.fftw_planes`)."""
    with fftw_configured(fftw_planes=request.param):
        yield request.param


@pytest.fixture(params=["vector", "fftw"])
def fftw_columns(request: pytest.FixtureRequest) -> Iterator[str]:
    """What runs the operators' batched column transforms (the pass along x, the planes'
    columns) in one test: sonotile's vector kernel where it applies, or FFTW's plans
    (:attr:`sonotile.base.config.Settings.fftw_columns`)."""
    with fftw_configured(fftw_columns=request.param):
        yield request.param
