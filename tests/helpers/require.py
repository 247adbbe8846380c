"""Skips that CI turns into failures: FFTW is the default CPU backend, so with
``SONOTILE_REQUIRE_FFTW=1`` (set by ``.ci/run``) a missing FFTW library, compiler or pyFFTW fails
the FFTW tests instead of skipping them."""

from __future__ import annotations

import os

import pytest

FFTW_REQUIRED = os.environ.get("SONOTILE_REQUIRE_FFTW") == "1"


def require_fftw(ok: bool, reason: str) -> None:
    """Skip (or, when FFTW is required, fail) the calling test unless ``ok``."""
    if ok:
        return
    if FFTW_REQUIRED:
        pytest.fail(f"{reason} (SONOTILE_REQUIRE_FFTW=1: the FFTW tests must run)")
    pytest.skip(reason)
