"""The cache directory stays bounded: least recently used compiled programs go first, a scan
at most once a day, old FFTW builds go after a month, the build in use stays."""

from __future__ import annotations

import os
import time

import pytest

from sonotile.base import cachedir, config


def put(d, name: str, size: int, age_days: float) -> str:
    path = os.path.join(d, name)
    with open(path, "wb") as fh:
        fh.write(b"x" * size)
    t = time.time() - age_days * 86400
    os.utime(path, (t, t))
    return path


def test_prune_removes_least_recently_used_down_to_the_fraction(tmp_path):
    d = str(tmp_path)
    for k in range(10):  # k days since last use, 100 bytes each: 1000 in all
        put(d, f"jit_f-{k}-cache", 100, k)
    os.mkdir(os.path.join(d, "sub"))  # not a file: left alone
    assert cachedir.prune(d, 1000) == []  # at the limit: nothing to do
    removed = cachedir.prune(d, 900)  # over: down to 0.8 * 900 = 720 bytes
    assert sorted(removed) == [f"jit_f-{k}-cache" for k in (7, 8, 9)]  # the oldest three
    left = sorted(n for n in os.listdir(d) if n.endswith("-cache"))
    assert left == [f"jit_f-{k}-cache" for k in range(7)]
    assert os.path.isdir(os.path.join(d, "sub"))
    assert cachedir.prune(d, 0) == []  # no limit


def test_a_program_read_recently_counts_as_used(tmp_path):
    d = str(tmp_path)
    old = put(d, "a-cache", 100, 10)
    put(d, "b-cache", 100, 5)
    now = time.time()
    os.utime(old, (now, now - 10 * 86400))  # written 10 days ago, read now
    assert cachedir.prune(d, 150) == ["b-cache"]


def test_prune_daily_scans_at_most_once_a_day(tmp_path):
    d = str(tmp_path)
    for k in range(4):
        put(d, f"p{k}-cache", 100, k)
    assert cachedir.prune_daily(d, 300) == ["p3-cache", "p2-cache"]  # 400 > 300: to <= 240
    put(d, "new-cache", 500, 0)
    assert cachedir.prune_daily(d, 300) == []  # scanned today already
    later = time.time() + cachedir.SCAN_EVERY + 1
    assert cachedir.prune_daily(d, 300, now=later) == ["p1-cache", "p0-cache", "new-cache"]
    assert cachedir.prune_daily(str(tmp_path / "missing"), 300) == []  # created, empty


def test_prune_builds_keeps_the_one_in_use_and_recent_ones(tmp_path):
    d = str(tmp_path)
    current = put(d, "fftw_ffi_aaaa.so", 10, 90)  # in use, however old
    put(d, "fftw_ffi_bbbb.so", 10, 45)
    put(d, "fftw_ffi_cccc.so", 10, 3)
    put(d, "fftwf_wisdom.txt", 10, 90)  # not a build
    assert cachedir.prune_builds(d, current, ("fftw_ffi_", ".so")) == ["fftw_ffi_bbbb.so"]
    assert sorted(os.listdir(d)) == ["fftw_ffi_aaaa.so", "fftw_ffi_cccc.so", "fftwf_wisdom.txt"]


def test_the_limit_setting():
    assert config.Settings().cache_limit == 2 * 2**30
    assert config.Settings.from_env({"SONOTILE_CACHE_LIMIT": "4e9"}).cache_limit == 4 * 10**9
    with pytest.raises(ValueError, match="cache_limit"):
        config.Settings(cache_limit=-1)
