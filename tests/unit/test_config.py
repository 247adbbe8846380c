"""The settings object: defaults, the environment read in one place, validation, and the FFT
options recorded in the operators (so compiled programs are keyed by them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from sonotile.base import config
from sonotile.base.config import Settings


def test_defaults_then_environment_then_overrides():
    s = Settings.from_env({})
    assert (s.fft, s.fftw_plan, s.fftw_updates, s.compilation_cache) == (
        "auto",
        "measure",
        True,
        True,
    )
    env = {"SONOTILE_FFT": "xla", "SONOTILE_FFTW_PLAN": "estimate", "SONOTILE_FFTW_UPDATES": "0",
           "SONOTILE_COMPILATION_CACHE": "false", "XDG_CACHE_HOME": "/tmp/xdg"}  # fmt: skip
    s = Settings.from_env(env, threads=3)
    assert (s.fft, s.fftw_plan, s.fftw_updates, s.compilation_cache) == (
        "xla",
        "estimate",
        False,
        False,
    )
    assert s.threads == 3 and s.cache_dir == "/tmp/xdg/sonotile"
    assert Settings.from_env({"SONOTILE_FFT": ""}).fft == "auto"  # set but empty: the default


def test_job_and_transport_variables():
    """What a launcher tells each process, and the transport, come from the environment too."""
    env = {"SONOTILE_COORDINATOR": "10.0.0.1:1234", "SONOTILE_NUM_PROCESSES": "4",
           "SONOTILE_PROCESS_ID": "3", "SONOTILE_LOCAL_DEVICE_IDS": "6,7",
           "SONOTILE_LOCAL_RANK": "1", "SONOTILE_TRANSPORT": "mpi", "SONOTILE_MPICXX": "/x/mpicxx",
           "SONOTILE_HEARTBEAT_TIMEOUT": "60", "SONOTILE_INIT_TIMEOUT": "300"}  # fmt: skip
    s = Settings.from_env(env)
    assert (s.coordinator, s.num_processes, s.process_id, s.local_device_ids) == (
        "10.0.0.1:1234", 4, 3, (6, 7))  # fmt: skip
    assert (s.local_rank, s.transport, s.mpicxx) == (1, "mpi", "/x/mpicxx")
    assert (s.heartbeat_timeout, s.init_timeout) == (60, 300)
    s = Settings.from_env({})
    assert (s.num_processes, s.process_id, s.transport, s.heartbeat_timeout) == (
        None, None, "auto", 30)  # fmt: skip


@pytest.mark.parametrize(
    "env, match",
    [
        ({"SONOTILE_NUM_PROCESSES": "two"}, "SONOTILE_NUM_PROCESSES='two': expected an integer"),
        ({"SONOTILE_CACHE_LIMIT": "4 GB"}, "SONOTILE_CACHE_LIMIT='4 GB': expected a number"),
        ({"SONOTILE_LOCAL_DEVICE_IDS": "0;1"}, "comma-separated integers"),
        ({"SONOTILE_TRANSPORT": "nccl"}, "SONOTILE_TRANSPORT='nccl': expected one of auto"),
    ],
)
def test_bad_environment_values_name_the_variable(env, match):
    with pytest.raises(ValueError, match=match):
        Settings.from_env(env)


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("SONOTILE_MEMORY_LIMIT", "banana", "a number of bytes >= 1"),
        ("SONOTILE_MEMORY_LIMIT", "-5", "a number of bytes >= 1"),
        ("SONOTILE_MEMORY_LIMIT", "0", "a number of bytes >= 1"),
        ("SONOTILE_MEMORY_LIMIT", "nan", "a number of bytes >= 1"),
        ("SONOTILE_CACHE_LIMIT", "inf", "a number of bytes >= 0"),
        ("SONOTILE_CACHE_LIMIT", "1e30", "a number of bytes >= 0"),
        ("SONOTILE_CACHE_LIMIT", "1.5", "a number of bytes >= 0"),
        ("SONOTILE_FFT", "banana", "one of auto, xla, fftw, cufft"),
        ("SONOTILE_STEP", "fast", "one of auto, stacked, plain"),
        ("SONOTILE_FFTW_PLAN", "banana", "one of estimate, measure, patient"),
        ("SONOTILE_DETERMINISTIC", "banana", "1 or 0"),
        ("SONOTILE_FFTW_UPDATES", "2", "1 or 0"),
        ("SONOTILE_HEARTBEAT_TIMEOUT", "0", "an integer >= 1"),
        ("SONOTILE_INIT_TIMEOUT", "-1", "an integer >= 1"),
        ("SONOTILE_PROCESS_ID", "-1", "an integer >= 0"),
        ("SONOTILE_LOCAL_RANK", "1.5", "an integer >= 0"),
        ("SONOTILE_LOCAL_DEVICE_IDS", "0,-1", "comma-separated integers >= 0"),
        ("SONOTILE_COORDINATOR", "host", "host:port"),
        ("SONOTILE_COORDINATOR", "host:99999", "host:port"),
    ],
)
def test_every_variable_is_checked_against_its_range(name, value, expected):
    """No value outside a variable's range is taken silently: the error names the variable, the
    value and what it may be."""
    with pytest.raises(
        config.SettingsError, match=re.escape(f"{name}={value!r}: expected {expected}")
    ):
        Settings.from_env({name: value})


def test_every_boolean_spelling_and_a_job_out_of_range():
    for word, on in (("1", True), ("Yes", True), ("on", True), ("0", False), ("off", False)):
        assert Settings.from_env({"SONOTILE_DETERMINISTIC": word}).deterministic is on
    assert Settings.from_env({"SONOTILE_MEMORY_LIMIT": "8e9"}).memory_limit == 8 * 10**9
    env = {"SONOTILE_NUM_PROCESSES": "2", "SONOTILE_PROCESS_ID": "2"}
    with pytest.raises(
        config.SettingsError, match=r"SONOTILE_PROCESS_ID: process_id = 2: expected 0\.\.1"
    ):
        Settings.from_env(env)


@pytest.mark.parametrize(
    "bad",
    [
        dict(memory_limit=0),
        dict(process_id=-1),
        dict(fft="mkl"),
        dict(step="fast"),
        dict(fftw_plan="fast"),
        dict(transport="tcp"),
        dict(threads=0),
        dict(num_processes=0),
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
        separate = Settings(fftw_updates=False)
        calls = FourierOps.build((16, 12), (1e-4, 1e-4), 1500.0, 1e-8, settings=separate)
        assert fused.fft == "fftw" and calls.fft == "fftw-separate-updates"
        # the options are static: two operator objects of different options never share a
        # compiled program
        import jax

        assert jax.tree_util.tree_structure(fused) != jax.tree_util.tree_structure(calls)
    finally:
        config.configure(saved)


def _variable_reads(tree: ast.AST) -> list[int]:
    """Lines of a module that look a ``SONOTILE_*`` variable up: ``.get`` / ``getenv`` calls,
    subscripts read and ``in`` tests whose key names one (a literal or an ``ENV_*`` constant)."""
    lines = []
    for node in ast.walk(tree):
        keys: list[ast.expr] = []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            keys = node.args[:1] if node.func.attr in ("get", "getenv") else []
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            keys = [node.slice]
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            keys = [node.left]
        if any(re.search(r"SONOTILE_|\bENV_", ast.unparse(k)) for k in keys):
            lines.append(node.lineno)
    return lines


def test_sonotile_variables_are_read_in_config_only():
    """No module but :mod:`sonotile.base.config` looks a ``SONOTILE_*`` variable up (others take
    the settings; they may name one to set it for a child process), and the C++ sources read
    no environment variable."""
    pkg = Path(config.__file__).parents[1]
    readers = [
        f"{path.relative_to(pkg)}:{line}"
        for path in sorted(pkg.rglob("*.py"))
        if path != Path(config.__file__)
        for line in _variable_reads(ast.parse(path.read_text()))
    ]
    assert readers == []
    for path in sorted(pkg.rglob("*.cc")) + sorted(pkg.rglob("*.h")):
        assert "getenv" not in path.read_text(), path


def test_the_settings_table_lists_every_variable():
    """docs/settings.md names every variable :meth:`Settings.from_env` reads, with its field."""
    table = (Path(config.__file__).parents[3] / "docs" / "settings.md").read_text()
    rows = {ln.split("|")[1].strip(" `"): ln for ln in table.splitlines() if ln.startswith("| `")}
    for name, field, _ in config.VARIABLES:
        assert name in rows, name
        assert f"`{field}`" in rows[name], (name, field)
    read = {name for name, _, _ in config.VARIABLES}
    for name in (n for n in rows if n.startswith("SONOTILE_")):
        assert name in read or "script" in rows[name] or "tests" in rows[name], name


def test_hugepages_environment():
    """The programs start again with ``glibc.malloc.hugetlb=1`` added to ``GLIBC_TUNABLES``
    (kept: the user's other tunables) only where it acts and is not named yet: glibc >= 2.35,
    the kernel's huge pages not off, not turned off by the user (``glibc.malloc.hugetlb=0``)."""
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
