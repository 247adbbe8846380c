"""Whether a run fits: the free memory of a device and the model's estimate of what a run
needs, checked before anything is allocated."""

from __future__ import annotations

import jax

from sonotile.base import config, runtime
from sonotile.model.problem import Problem
from sonotile.physics import model_for


def available_memory(device: jax.Device | None = None) -> tuple[int | None, str]:
    """Free memory of ``device`` (default: JAX's first) [bytes] and where the figure comes from.

    CPU: the smallest of the host's ``MemAvailable``, the memory cgroups' and ``RLIMIT_AS``'s
    room (:func:`sonotile.base.runtime.host_memory_limit`); GPU/TPU: the device's limit minus
    what is in use (``memory_stats``). ``Settings.memory_limit`` (``SONOTILE_MEMORY_LIMIT=BYTES``)
    replaces the figure (a cap, or a test); ``(None, ...)`` when nothing is known."""
    limit = config.current().memory_limit
    if limit is not None:
        return limit, "SONOTILE_MEMORY_LIMIT"
    dev = device or jax.devices()[0]
    if dev.platform == "cpu":
        return runtime.host_memory_limit()
    stats = dev.memory_stats() or {}
    if "bytes_limit" not in stats:
        return None, f"{dev.platform} memory unknown"
    free = int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    return free, f"free memory of {dev.platform}:{dev.id}"


def check_memory(problem: Problem, n_devices: int = 1, device: jax.Device | None = None) -> None:
    """Raise :class:`MemoryError` (one line) when the run's estimated memory
    (the model's :meth:`~sonotile.physics.base.Model.memory_estimate`) exceeds what the device
    has free; on accelerators the estimate is shared over ``n_devices``, on a CPU all share the
    host's RAM."""
    need = model_for(problem).memory_estimate(problem)
    have, what = available_memory(device)
    dev = device or jax.devices()[0]
    per_device = need if dev.platform == "cpu" else need / max(n_devices, 1)
    if have is not None and per_device > have:
        raise MemoryError(
            f"grid {problem.grid.shape} needs about {per_device / 2**20:.3g} MB "
            f"(estimate), more than the {have / 2**20:.3g} MB of {what}: use a smaller grid, "
            "float32, or more devices (--decomposition)"
        )
