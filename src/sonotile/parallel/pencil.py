"""``pencil``: the global spectral method on a distributed real-to-complex FFT.

A 1-D mesh gives slabs, a 2-D mesh pencils. In real space grid axis ``j`` is split over mesh axis
``j`` (the last grid axis is never split); the forward transform does the local FFTs, then for
each mesh axis (last first) an ``all_to_all`` transpose followed by the FFT along the axis it
made local. Spectra stay in that transposed layout (grid axis 0 local, grid axis ``j + 1``
split over mesh axis ``j``) until the inverse transform undoes it, so the k-space constants
(kappa, shift operators, nablas, source kappa) are built once for the transposed layout and
sharded. Results equal the single-device run to round-off.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import PartitionSpec as P

from sonotile.model.problem import Problem
from sonotile.parallel.mesh import AXIS_NAMES
from sonotile.solver import plan as planmod
from sonotile.solver.operators import FourierOps


@dataclass(frozen=True)
class PencilMeta:
    """Static layout of the distributed FFT (hashable)."""

    shape: tuple  # global grid shape
    names: tuple  # mesh axis names, mesh axis j splits grid axis j in real space
    sizes: tuple  # mesh axis sizes
    nh: int  # rfft length of the last axis
    nh_pad: int  # ... padded to a multiple of the mesh size that splits it in k-space


@jax.tree_util.register_pytree_node_class
@dataclass
class PencilOps(FourierOps):
    """:class:`FourierOps` on a distributed FFT; the constants are this shard's blocks of the
    spectra in the transposed layout (grid axis 0 local, axis ``j+1`` split over mesh axis j)."""

    meta: PencilMeta | None = None

    def tree_flatten(self):
        children, _ = super().tree_flatten()
        return children, self.meta

    @classmethod
    def tree_unflatten(cls, meta, children):
        return cls(*children, meta=meta)

    def _spec(self, f):
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        F = jnp.fft.rfft(f, axis=d - 1)
        for a in range(d - 2, m - 1, -1):
            F = jnp.fft.fft(F, axis=a)
        for j in range(m - 1, -1, -1):
            if j + 1 == d - 1 and mt.nh_pad > mt.nh:
                pad = [(0, 0)] * d
                pad[d - 1] = (0, mt.nh_pad - mt.nh)
                F = jnp.pad(F, pad)
            F = lax.all_to_all(F, mt.names[j], j + 1, j, tiled=True)
            F = jnp.fft.fft(F, axis=j)
        return F

    def _back(self, F, like):
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        for j in range(m):
            F = jnp.fft.ifft(F, axis=j)
            F = lax.all_to_all(F, mt.names[j], j, j + 1, tiled=True)
            if j + 1 == d - 1 and mt.nh_pad > mt.nh:
                F = lax.slice_in_dim(F, 0, mt.nh, axis=d - 1)
        for a in range(m, d - 1):
            F = jnp.fft.ifft(F, axis=a)
        return jnp.fft.irfft(F, n=mt.shape[d - 1], axis=d - 1).astype(like.dtype)

    def unstagger(self, u, axis: int):
        mt = self.meta
        d, m = len(mt.shape), len(mt.names)
        if axis >= m or mt.sizes[axis] == 1:
            return super().unstagger(u, axis)
        name = mt.names[axis]
        v = lax.all_to_all(u, name, d - 1, axis, tiled=True)  # make `axis` local
        v = super().unstagger(v, axis)
        return lax.all_to_all(v, name, axis, d - 1, tiled=True)


def pencil_constants(problem: Problem, m: int, sizes: tuple, unstagger: bool):
    """Global spectral constants in the transposed, padded layout, and their specs."""
    g = problem.grid
    d = g.ndim
    full = planmod.spectral_ops(problem, unstagger=unstagger)
    nh = g.shape[-1] // 2 + 1
    nh_pad = nh
    if m == d - 1:
        q = sizes[d - 2]
        nh_pad = -(-nh // q) * q

    def spectral(x):
        if x is None:
            return None, None
        x = np.asarray(x)
        if x.shape[-1] == nh and nh_pad > nh:
            pad = [(0, 0)] * d
            pad[-1] = (0, nh_pad - nh)
            x = np.pad(x, pad)
        spec = P(*(AXIS_NAMES[a - 1] if 1 <= a <= m and x.shape[a] > 1 else None for a in range(d)))
        return x, spec

    kids, _ = full.tree_flatten()
    arrays, specs = [], []
    for i, kid in enumerate(kids):
        if i == 6:  # unshift: real-layout 1-D spectra, replicated
            arrays.append(kid)
            specs.append(None if kid is None else tuple(P() for _ in kid))
        elif isinstance(kid, tuple):
            pairs = [spectral(k) for k in kid]
            arrays.append(tuple(p[0] for p in pairs))
            specs.append(tuple(p[1] for p in pairs))
        else:
            a, s = spectral(kid)
            arrays.append(a)
            specs.append(s)
    meta = PencilMeta(g.shape, AXIS_NAMES[:m], tuple(sizes), nh, nh_pad)
    return arrays, specs, meta
