"""Fixtures shared by the unit tests: the FFTW custom calls' settings, the planning tests' CT."""

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


@pytest.fixture(scope="module")
def ct_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The planning tests' CT: the head phantom at 2 mm (seed 0) as a NIfTI file."""
    from sonotile.planning.images import write_nifti
    from sonotile.planning.phantom import head_phantom

    ct = head_phantom((80, 96, 84), 2.0, seed=0)
    path = str(tmp_path_factory.mktemp("ct") / "head.nii.gz")
    write_nifti(path, ct.hu, ct)
    return path
