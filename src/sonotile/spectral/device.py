"""Host arrays onto the device in the run's dtype, converted on the host.

``jnp.asarray(x, dtype)`` with a host array of another dtype copies it to the device and
converts it there with an eagerly dispatched ``convert_element_type``: one small XLA program
compiled per shape and dtype, 10-30 ms each on a CPU and too quick to enter the persistent
compilation cache. Building a problem made ~10 of them (a quarter of a second of a warm
128^3 start). Converting with numpy first makes it a plain transfer;
:func:`full` makes the initial fields of a run the same way on a CPU (outside a trace).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def to_device(x: Any, dtype: jax.typing.DTypeLike) -> jax.Array:
    """``x`` (array-like) as a device array of ``dtype`` (a device array is converted on the
    device)."""
    if isinstance(x, jax.Array):
        return x if x.dtype == jnp.dtype(dtype) else x.astype(dtype)
    return jax.device_put(np.asarray(x, dtype=np.dtype(jnp.dtype(dtype))))


def full(shape: tuple[int, ...], value: float, dtype: jax.typing.DTypeLike) -> jax.Array:
    """``jnp.full`` for eager use: a transfer of a host array on the CPU (no program to
    compile), ``jnp.full`` on accelerators (the host array would cross the bus)."""
    if jax.default_backend() != "cpu":
        return jnp.full(shape, value, dtype)
    host = np.dtype(jnp.dtype(dtype))
    a = np.zeros(shape, host) if value == 0 else np.full(shape, value, host)  # zeros: untouched
    return jax.device_put(a)


def in_host_memory(v: Any) -> bool:
    """Whether ``v`` is a numpy array or a JAX array on one CPU device (``np.asarray`` of it
    is then a view, no copy)."""
    if not isinstance(v, jax.Array):
        return True
    devices = v.devices()
    return len(devices) == 1 and next(iter(devices)).platform == "cpu"
