"""Fixtures shared by the unit tests of the FFTW custom calls."""

from collections.abc import Iterator

import pytest


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def fftw_threads(request: pytest.FixtureRequest) -> Iterator[int]:
    """FFTW's threads for the calls of one test (1 or 2; XLA runs them when they execute)."""
    from sonotile import config
    from sonotile.fft import fftw

    old = config.current()
    config.configure(threads=request.param)
    fftw._configure(fftw.load())
    yield request.param
    config.configure(old)
    fftw._configure(fftw.load())


@pytest.fixture(params=["halves", "fftw"])
def fftw_planes(request: pytest.FixtureRequest) -> Iterator[str]:
    """How FFTW's calls transform 2-D planes with even rows in one test (by halves or by FFTW's
    own plane plans, :attr:`sonotile.config.Settings.fftw_planes`)."""
    from sonotile import config
    from sonotile.fft import fftw

    old = config.current()
    config.configure(fftw_planes=request.param)
    fftw._configure(fftw.load())
    yield request.param
    config.configure(old)
    fftw._configure(fftw.load())
