"""How much memory there is, and a clear refusal of a size that would not fit in it, before
anything of that size is allocated."""

from __future__ import annotations

import os

from sonotile.model.problem import ProblemError


def available_memory() -> int:
    """Bytes of memory available to a new allocation (Linux's MemAvailable, else the free
    physical pages, else a large number when the system does not say)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62


def check_memory(nbytes: float, what: str, hint: str = "") -> None:
    """A :class:`ProblemError` if ``nbytes`` would not fit in the available memory."""
    have = available_memory()
    if nbytes > have:
        gib = 1 << 30
        raise ProblemError(f"{what} needs about {nbytes / gib:.3g} GiB of memory, "
                           f"{have / gib:.3g} GiB available{hint}")  # fmt: skip


#: Bytes of host memory planning holds per CT voxel: the HU (float32 and float64), the tissue
#: classes and masks, and the eight float64 property maps of ``tissue_properties``.
PLAN_BYTES_PER_VOXEL = 96
#: Bytes of memory per point of the simulation grid (with its PML), at least: the acoustic
#: state, medium and operators of the CW runs, their recorded fields, and the heating's fields.
GRID_BYTES_PER_POINT = 200
