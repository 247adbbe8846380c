"""The settings object: defaults, the environment read in one place, validation, and the FFT
options recorded in the operators (so compiled programs are keyed by them)."""

from __future__ import annotations

import pytest

from sonotile.base import config
from sonotile.base.config import Settings


def test_defaults_then_environment_then_overrides():
    s = Settings.from_env({})
    assert (s.fft, s.fftw_plan, s.fftw_fused, s.compilation_cache) == (
        "auto",
        "measure",
        True,
        True,
    )
    env = {"SONOTILE_FFT": "xla", "SONOTILE_FFTW_PLAN": "estimate", "SONOTILE_FFTW_FUSED": "0",
           "SONOTILE_COMPILATION_CACHE": "0", "XDG_CACHE_HOME": "/tmp/xdg"}  # fmt: skip
    s = Settings.from_env(env, threads=3)
    assert (s.fft, s.fftw_plan, s.fftw_fused, s.compilation_cache) == (
        "xla",
        "estimate",
        False,
        False,
    )
    assert s.threads == 3 and s.cache_dir == "/tmp/xdg/sonotile"
    assert s.fft_mode() == "unfused"
    assert Settings.from_env({}).fftw_planes == "halves"
    assert Settings.from_env({"SONOTILE_FFTW_PLANES": "fftw"}).fftw_planes == "fftw"
    assert Settings.from_env({}).fftw_columns == "vector"
    assert Settings.from_env({"SONOTILE_FFTW_COLUMNS": "fftw"}).fftw_columns == "fftw"


@pytest.mark.parametrize(
    "bad",
    [
        dict(fft="cufft"),
        dict(fftw_plan="fast"),
        dict(fftw_planes="quarters"),
        dict(fftw_columns="avx"),
        dict(threads=0),
    ],
)
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError, match=list(bad)[0]):
        Settings(**bad)


def test_operators_record_the_fft_options():
    from sonotile.fft import fftw
    from sonotile.spectral.operators import FourierOps

    if not fftw.available():
        pytest.skip("FFTW extension unavailable")
    saved = config.current()
    try:
        fused = FourierOps.build((16, 12), (1e-4, 1e-4), 1500.0, 1e-8, settings=Settings())
        unfused = Settings(fftw_fused=False, fftw_grouped=True)
        calls = FourierOps.build((16, 12), (1e-4, 1e-4), 1500.0, 1e-8, settings=unfused)
        assert fused.fft == "fftw" and calls.fft == "fftw-unfused-grouped"
        # the options are static: two operator objects of different options never share a
        # compiled program
        import jax

        assert jax.tree_util.tree_structure(fused) != jax.tree_util.tree_structure(calls)
    finally:
        config.configure(saved)


def test_hugepages_environment():
    """The programs start again with ``glibc.malloc.hugetlb=1`` added to ``GLIBC_TUNABLES``
    (kept: the user's other tunables) only where it acts and is not named yet: glibc >= 2.35,
    the kernel's huge pages not off, not turned off by the settings."""
    from sonotile.base.runtime import hugepages_env

    thp = "always [madvise] never"
    env = hugepages_env({"PATH": "/bin"}, "glibc 2.36", thp)
    assert env == {"PATH": "/bin", "GLIBC_TUNABLES": "glibc.malloc.hugetlb=1"}
    env = hugepages_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, "glibc 2.35", thp)
    assert env == {"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1"}
    for named in ("glibc.malloc.hugetlb=0", "glibc.malloc.hugetlb=1"):  # no loop, user's word
        assert hugepages_env({"GLIBC_TUNABLES": named}, "glibc 2.36", thp) is None
    assert hugepages_env({}, "glibc 2.34", thp) is None  # the tunable is not there yet
    assert hugepages_env({}, "musl 1.2", thp) is None
    assert hugepages_env({}, "", thp) is None
    assert hugepages_env({}, "glibc 2.36", "always madvise [never]") is None
    assert hugepages_env({}, "glibc 2.36", thp, wanted=False) is None
    assert Settings.from_env({"SONOTILE_HUGEPAGES": "0"}).hugepages is False
    assert Settings.from_env({}).hugepages is True
