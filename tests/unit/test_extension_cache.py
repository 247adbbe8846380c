"""The compiled-extension cache loads only what it built: a library is verified (owner, mode,
SHA-256) before every load; a truncated, planted or foreign one is built again; a folder others
can write to is refused; the build's key follows the compiler's version; installs are fsynced
before the rename; concurrent first runs compile once; stale temporaries are removed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest
from require import require_fftw

from sonotile.base import cachedir

SOURCE = 'extern "C" int sonotile_answer() { return 42; }\n'
#: a library whose constructor leaves a mark: what a planted library would run on load
PLANTED = (
    "#include <cstdio>\n"
    '__attribute__((constructor)) static void mark() {{ std::fopen("{mark}", "w"); }}\n'
    'extern "C" int sonotile_answer() {{ return 666; }}\n'
)
CXX = shutil.which("g++") or shutil.which("c++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")


def commands(cc: str, out: str) -> list[list[str]]:
    assert CXX is not None
    return [[CXX, "-O0", "-shared", "-fPIC", cc, "-o", out]]


def answer(so: str) -> int:
    """Load ``so`` (in a child process: a library cannot be unloaded) and call it."""
    code = f"import ctypes; print(ctypes.CDLL({so!r}).sonotile_answer())"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout)


def built(tmp_path, name: str = "demo_ffi_0123456789abcdef.so") -> str:
    so = str(tmp_path / "cache" / name)
    r = cachedir.ensure_library(SOURCE, so, commands)
    assert r.returncode == 0 and r.args != ["cached"], r.stderr
    return so


@needs_cxx
def test_a_build_is_installed_with_its_digest_and_then_used_from_the_cache(tmp_path):
    so = built(tmp_path)
    assert cachedir.verified(so)
    with open(so + cachedir.DIGEST) as fh:
        assert fh.read().strip() == cachedir.digest(so)
    assert oct(os.stat(os.path.dirname(so)).st_mode & 0o777) == oct(0o700)  # a new folder
    assert not os.stat(so).st_mode & 0o022
    assert cachedir.ensure_library(SOURCE, so, commands).args == ["cached"]
    assert answer(so) == 42


@needs_cxx
def test_a_truncated_library_is_built_again(tmp_path):
    so = built(tmp_path)
    with open(so, "r+b") as fh:  # a build cut short (full disk, killed copy)
        fh.truncate(os.path.getsize(so) // 2)
    assert not cachedir.verified(so)
    r = cachedir.ensure_library(SOURCE, so, commands)
    assert r.returncode == 0 and r.args != ["cached"]
    assert cachedir.verified(so) and answer(so) == 42


@needs_cxx
@pytest.mark.parametrize("how", ["no digest", "wrong digest", "group-writable"])
def test_a_planted_library_is_never_loaded(tmp_path, how):
    """A library put under the cache's name by someone else (its constructor would run on
    load) is replaced by a build of the real source before anything loads it."""
    so = built(tmp_path)
    mark = tmp_path / "constructor-ran"
    plant = tmp_path / "plant.so"
    src = tmp_path / "plant.cc"
    src.write_text(PLANTED.format(mark=mark))
    subprocess.run([CXX, "-shared", "-fPIC", str(src), "-o", str(plant)], check=True)
    shutil.copy(plant, so)
    if how == "no digest":
        os.remove(so + cachedir.DIGEST)
    elif how == "wrong digest":
        (tmp_path / "cache" / (os.path.basename(so) + cachedir.DIGEST)).write_text("0" * 64)
    else:  # a matching digest, but a file anyone in the group could have written
        with open(so + cachedir.DIGEST, "w") as fh:
            fh.write(cachedir.digest(so) + "\n")
        os.chmod(so, 0o775)
    assert not cachedir.verified(so)
    assert cachedir.ensure_library(SOURCE, so, commands).args != ["cached"]
    assert answer(so) == 42
    assert not mark.exists()


@needs_cxx
@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file away needs root")
def test_a_library_of_another_user_is_built_again(tmp_path):
    so = built(tmp_path)
    os.chown(so, 12345, -1)
    assert not cachedir.verified(so)
    assert cachedir.ensure_library(SOURCE, so, commands).args != ["cached"]
    assert os.stat(so).st_uid == os.geteuid() and answer(so) == 42


def test_a_folder_others_can_write_to_is_refused(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(cachedir.UnsafeCache, match=r"writable by others \(mode 777\).*chmod go-w"):
        cachedir.ensure_library(SOURCE, str(folder / "demo_ffi_x.so"), commands)
    folder.chmod(0o755)
    cachedir.check_folder(str(folder))
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(cachedir.UnsafeCache, match="not a folder"):
        cachedir.check_folder(str(link))


def test_the_fftw_extension_is_not_built_in_a_folder_others_can_write_to(tmp_path):
    from sonotile.base import config
    from sonotile.fft import backend as fft_backend
    from sonotile.fft import fftw, fftw_library

    saved, settings = dict(fftw_library._state), config.current()
    fftw_library.reset()
    fft_backend.reset()
    folder = tmp_path / "sonotile"
    folder.mkdir()
    folder.chmod(0o777)
    config.configure(cache_dir=str(folder))
    try:
        if fftw.find_library() is None:
            require_fftw(False, "no libfftw3f: nothing would be built")
        assert not fftw.available()
        assert "writable by others" in fftw.reason()
        assert not list(folder.glob("*.so"))
    finally:
        config.configure(settings)
        fftw_library._state.clear()
        fftw_library._state.update(saved)


def test_the_build_key_follows_the_compiler_version_and_flags(tmp_path):
    """Another compiler at the same path (an upgrade), or other flags: another build."""
    from sonotile.fft import fftw_library

    libs = ("/nonexistent/libfftw3f.so.3", None)
    cxx = tmp_path / "g++"
    tags = []
    for version in ("g++ (Debian 12.2.0-14) 12.2.0", "g++ (Debian 13.1.0-1) 13.1.0"):
        cxx.write_text(f"#!/bin/sh\necho '{version}'\n")
        cxx.chmod(0o755)
        assert cachedir.compiler_version(str(cxx)) == version
        cmds = fftw_library._commands("/inc", libs, str(cxx))("<source>", "<library>")
        tags.append(cachedir.key_tag(fftw_library._build_key("src", "/inc", libs, str(cxx), cmds)))
    assert tags[0] != tags[1]
    o3 = fftw_library._build_key("src", "/inc", libs, str(cxx), [[str(cxx), "-O3"]])
    o2 = fftw_library._build_key("src", "/inc", libs, str(cxx), [[str(cxx), "-O2"]])
    assert cachedir.key_tag(o3) != cachedir.key_tag(o2)
    assert cachedir.compiler_version(str(tmp_path / "missing")) == ""


def test_the_fftw_library_version_is_read_from_the_library():
    from sonotile.fft import fftw

    libs = fftw.find_library()
    if libs is None:
        require_fftw(False, "no libfftw3f")
        return
    assert fftw.library_version(libs[0]).startswith("fftw-3.")
    assert fftw.library_version("/nonexistent.so") == ""


def test_an_install_is_fsynced_before_its_rename(tmp_path, monkeypatch):
    """The library and its digest reach the disk before they take the cached name, then the
    folder's entries do: a crash leaves the old state or the whole new one."""
    events: list[str] = []
    names: dict[int, str] = {}
    real_open, real_fsync, real_replace = os.open, os.fsync, os.replace

    def fake_open(path, *a, **k):
        fd = real_open(path, *a, **k)
        names[fd] = os.path.basename(path)
        return fd

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(f"fsync {names[fd]}"),
                                                 real_fsync(fd))[1])  # fmt: skip
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append(f"rename {os.path.basename(b)}"),
                                                     real_replace(a, b))[1])  # fmt: skip
    src = tmp_path / "built.so"
    src.write_bytes(b"\x7fELF library bytes")
    dest = tmp_path / "cache"
    dest.mkdir()
    cachedir.install(str(src), str(dest / "x.so"))
    pid = os.getpid()
    assert events == [
        f"fsync x.so.{pid}",
        f"fsync x.so.sha256.{pid}",
        "rename x.so.sha256",
        "rename x.so",
        "fsync cache",
    ]
    assert cachedir.verified(str(dest / "x.so"))


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_temporaries_are_pruned(tmp_path):
    d = tmp_path
    gone, me = dead_pid(), os.getpid()
    old = time.time() - 2 * cachedir.STALE_AFTER
    names = {
        f"fftw_ffi_a.so.{gone}": True,  # a crashed install
        f"fftw_ffi_a.so.sha256.{gone}": True,
        f"fftwf_wisdom_n.txt.tmp{gone}": True,  # FFTW's half-written wisdom
        f"fftw_ffi_a.so.{me}": False,  # a running process's
        "fftw_ffi_a.so": False,
        "fftw_ffi_a.so.sha256": False,
        "fftw_ffi_a.so.lock": False,
    }
    for name in names:
        (d / name).write_bytes(b"x")
        os.utime(d / name, (old, old))
    (d / f"fftw_ffi_b.so.{gone}").write_bytes(b"x")  # just written: maybe another machine's
    removed = cachedir.prune_temporaries(str(d))
    assert sorted(removed) == sorted(n for n, stale in names.items() if stale)
    assert (d / f"fftw_ffi_b.so.{gone}").exists()
    later = time.time() + 2 * cachedir.STALE_AFTER
    assert cachedir.prune_temporaries(str(d), now=later) == [f"fftw_ffi_b.so.{gone}"]


CONCURRENT = """
import sys
from sonotile.base import cachedir
cxx, so = sys.argv[1], sys.argv[2]
r = cachedir.ensure_library('extern "C" int f() { return 1; }', so,
                            lambda cc, out: [[cxx, "-shared", "-fPIC", cc, "-o", out]])
print(r.returncode, cachedir.verified(so))
"""


@needs_cxx
def test_concurrent_first_builds_compile_once(tmp_path):
    """Processes that all find no build: one compiles, the others wait and use its build."""
    log = tmp_path / "compiles"
    cxx = tmp_path / "cxx"
    cxx.write_text(f'#!/bin/sh\necho x >> {log}\nsleep 1\nexec {CXX} "$@"\n')
    cxx.chmod(0o755)
    so = str(tmp_path / "cache" / "demo_ffi_0123.so")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT, str(cxx), so],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert outs == [["0", "True"]] * 3
    assert log.read_text().count("x") == 1


def test_old_builds_go_with_their_digest_and_lock(tmp_path):
    d = tmp_path
    for name in ("fftw_ffi_old.so", "fftw_ffi_old.so.sha256", "fftw_ffi_old.so.lock"):
        (d / name).write_bytes(b"x")
        t = time.time() - 90 * 86400
        os.utime(d / name, (t, t))
    (d / "fftw_ffi_new.so").write_bytes(b"x")
    assert cachedir.prune_builds(str(d), str(d / "fftw_ffi_new.so"), ("fftw_ffi_", ".so")) == [
        "fftw_ffi_old.so"
    ]
    assert sorted(os.listdir(d)) == ["fftw_ffi_new.so"]


@pytest.mark.slow
def test_a_truncated_fftw_extension_is_rebuilt_and_runs(tmp_path):
    """The FFTW extension itself: cut in half in the cache (which used to crash every later
    run with SIGBUS), the next process builds it again and computes with it."""
    from sonotile.fft import fftw

    if not fftw.available():
        require_fftw(False, f"FFTW extension unavailable: {fftw.reason()}")
    cache = tmp_path / "sonotile"
    cache.mkdir(mode=0o700)
    so = fftw.build()
    assert so is not None
    for f in (so, so + cachedir.DIGEST):
        shutil.copy(f, cache / os.path.basename(f))
    copy = cache / os.path.basename(so)
    with open(copy, "r+b") as fh:
        fh.truncate(os.path.getsize(copy) // 2)
    code = (
        "import numpy as np, jax.numpy as jnp\n"
        "from sonotile.fft import fftw\n"
        "assert fftw.available(), fftw.reason()\n"
        "x = jnp.asarray(np.random.default_rng(0).random((8, 6, 4)), jnp.float32)\n"
        "y = np.asarray(fftw.r2c(x))\n"
        "print(float(np.abs(y - np.fft.rfftn(np.asarray(x))).max()))\n"
    )
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert float(r.stdout) < 1e-5
    assert cachedir.verified(str(copy))


WISDOM_RUN = """
import glob, os, sys
import numpy as np, jax.numpy as jnp
from sonotile.fft import backend as fft_backend
from sonotile.fft import fftw, fftw_library
assert fftw.available(), fftw.reason()
def plan(shape):
    x = jnp.asarray(np.random.default_rng(0).random(shape), jnp.float32)
    np.asarray(fftw.r2c(x))
plan((8, 6, 4) if len(sys.argv) > 1 else (10, 6, 4))
(wisdom,) = glob.glob(os.path.join(os.environ["XDG_CACHE_HOME"], "sonotile", "fftwf_wisdom*"))
if len(sys.argv) > 1:  # another process saves its wisdom (of another shape) in the meantime
    with open(sys.argv[1]) as f:
        other = f.read()
    with open(wisdom, "w") as f:
        f.write(other)
    plan((12, 10, 6))
print(wisdom)
"""


def test_wisdom_saved_beside_another_process_keeps_its_plans(tmp_path):
    """A process saving FFTW's wisdom merges what the file holds by then (another process's
    plans, saved while it ran) instead of replacing it: every problem the other process planned
    (an entry's flags and MD5 signature; a problem both planned keeps one of the two plans)
    stays in the file."""
    from sonotile.fft import fftw

    if not fftw.available():
        require_fftw(False, f"FFTW extension unavailable: {fftw.reason()}")
    so = fftw.build()
    assert so is not None

    def run(home, *args):
        (home / "sonotile").mkdir(mode=0o700, parents=True)
        for f in (so, so + cachedir.DIGEST):
            shutil.copy(f, home / "sonotile" / os.path.basename(f))
        env = dict(os.environ, XDG_CACHE_HOME=str(home), SONOTILE_FFTW_PLAN="measure")
        r = subprocess.run([sys.executable, "-c", WISDOM_RUN, *args], env=env,
                           capture_output=True, text=True, timeout=600)  # fmt: skip
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.split()[-1]

    def problems(path):
        with open(path) as f:  # "(solver id flags flags index md5 md5 md5 md5)"
            return {tuple(ln.split()[2:]) for ln in f if ln.strip().startswith("(fftwf_")}

    other = run(tmp_path / "a")
    theirs = problems(other)
    assert theirs
    assert theirs <= problems(run(tmp_path / "b", other))
