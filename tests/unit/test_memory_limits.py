"""The memory check before a run sees every limit a process lives under (the host's free RAM,
the memory cgroups of containers and batch jobs, ``ulimit -v``) and takes the smallest, naming
it; sizes are exact Python integers, so a huge grid fails the check instead of wrapping around
to a negative estimate that passes it."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sonotile.base import config, runtime
from sonotile.model.grid import Grid
from sonotile.model.problem import Medium, Problem, Sensor, Sources
from sonotile.physics.acoustic import checks

MB = 2**20


def fake_system(tmp_path, cgroup_lines: str, files: dict[str, str], free_kb: int = 8 * 2**20):
    """A ``/proc`` (meminfo, self/cgroup, self/status) and a cgroup tree under ``tmp_path``."""
    proc, root = tmp_path / "proc", tmp_path / "cgroup"
    (proc / "self").mkdir(parents=True)
    (proc / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable: {free_kb} kB\n")
    (proc / "self" / "cgroup").write_text(cgroup_lines)
    (proc / "self" / "status").write_text("VmSize:\t 1024 kB\n")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return str(root), str(proc)


def test_meminfo_alone_when_no_cgroup_limits(tmp_path):
    root, proc = fake_system(
        tmp_path, "0::/job\n", {"job/memory.max": "max\n", "job/memory.current": "5\n"}
    )
    have, what = runtime.host_memory_limit(root, proc)
    assert have == 8 * 2**30 and "MemAvailable" in what


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_a_cgroup_limit_below_the_free_ram_applies(tmp_path, version):
    """A job limited to 2 GB with 1.5 GB charged, 0.25 GB of it reclaimable page cache, on a
    host with 8 GB free: 0.75 GB left, and the message names the cgroup's file."""
    if version == "v2":
        lines = "0::/slurm/job_7/step_0\n"
        files = {
            "slurm/job_7/memory.max": f"{2048 * MB}\n",
            "slurm/job_7/memory.current": f"{1536 * MB}\n",
            "slurm/job_7/memory.stat": f"anon 1\ninactive_file {256 * MB}\n",
            "slurm/job_7/step_0/memory.max": "max\n",  # the step itself: no limit of its own
            "slurm/job_7/step_0/memory.current": "100\n",
        }
        limit_file = "slurm/job_7/memory.max"
    else:
        lines = "12:pids:/\n4:memory:/docker/abc\n1:cpu:/\n"
        files = {
            "memory/docker/abc/memory.limit_in_bytes": f"{2048 * MB}\n",
            "memory/docker/abc/memory.usage_in_bytes": f"{1536 * MB}\n",
            "memory/docker/abc/memory.stat": f"inactive_file 1\ntotal_inactive_file {256 * MB}\n",
            "memory/memory.limit_in_bytes": "9223372036854771712\n",  # the root: unlimited
            "memory/memory.usage_in_bytes": f"{50_000 * MB}\n",
        }
        limit_file = "memory/docker/abc/memory.limit_in_bytes"
    root, proc = fake_system(tmp_path, lines, files)
    have, what = runtime.host_memory_limit(root, proc)
    assert have == 768 * MB
    assert "cgroup limit" in what and limit_file in what and "2048 MB" in what
    cgroups = [w for _, w in runtime.memory_limits(root, proc) if "cgroup" in w]
    assert len(cgroups) == 1  # the unlimited levels are no limit


def test_the_tightest_of_nested_cgroups_applies(tmp_path):
    files = {
        "a/memory.max": f"{1000 * MB}\n",
        "a/memory.current": f"{900 * MB}\n",  # 100 MB left for the whole group
        "a/b/memory.max": f"{500 * MB}\n",
        "a/b/memory.current": f"{10 * MB}\n",  # 490 MB left for this process's cgroup
    }
    root, proc = fake_system(tmp_path, "0::/a/b\n", files)
    have, what = runtime.host_memory_limit(root, proc)
    assert have == 100 * MB and "a/memory.max" in what


def test_unreadable_cgroup_files_are_no_limit(tmp_path):
    files = {"x/memory.max": "garbage\n", "x/memory.current": "1\n"}
    root, proc = fake_system(tmp_path, "0::/x\nnot a cgroup line\n", files)
    assert runtime.host_memory_limit(root, proc)[1].startswith("host RAM available")


RLIMIT = """
import resource
from sonotile.base import runtime
status = open("/proc/self/status").read()
size = int(next(l for l in status.splitlines() if l.startswith("VmSize:")).split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (size + 300 * 2**20, resource.RLIM_INFINITY))
have, what = runtime.host_memory_limit()
print(have // 2**20, what)
"""


def test_ulimit_v_applies(tmp_path):
    """A process under ``ulimit -v`` (RLIMIT_AS) of 300 MB beyond what it has mapped: about
    300 MB left, named as RLIMIT_AS."""
    r = subprocess.run(
        [sys.executable, "-c", RLIMIT], capture_output=True, text=True, timeout=60, check=True
    )
    mb, what = r.stdout.split(maxsplit=1)
    assert 250 <= int(mb) <= 300, r.stdout
    assert "RLIMIT_AS" in what and "ulimit -v" in what


def huge_problem(n: int) -> Problem:
    g = Grid((n,) * 3, (1e-4,) * 3, 1e-8, 10)
    return Problem(g, Medium(1500.0, 1000.0, g), Sources(), Sensor(index=np.array([[20] * 3])))


def test_sizes_do_not_wrap_around_for_huge_grids():
    """(2^21)^3 = 2^63 points: one more than int64 holds. The estimate is exact and
    positive (40 B/point for a homogeneous lossless float32 run), and the check refuses it."""
    problem = huge_problem(2**21)
    assert problem.grid.size == 2**63 and isinstance(problem.grid.size, int)
    need = checks.memory_estimate(problem)
    assert need == 2**63 * 40
    assert need == huge_problem(64).grid.size * 40 * 2**45  # the same formula at any size
    from sonotile.solver import runner

    saved = config.current()
    try:
        config.configure(memory_limit=None)
        with pytest.raises(MemoryError, match=r"needs about 3\.52e\+14 MB \(estimate\), more"):
            runner.check_memory(problem)
    finally:
        config.configure(saved)
