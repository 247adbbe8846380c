"""The elastic model behind the model interface (:class:`sonotile.physics.Model`), over an
:class:`~sonotile.physics.elastic.problem.ElasticRun` (the problem the common time loop runs).

:class:`ElasticModel` is static and hashable (the step's switches); its constants are the
medium's (:func:`~sonotile.physics.elastic.model.medium_constants`), the PML profiles, the
source indices and ``p0``; per-step inputs the scaled source signals. Sensors read ``p``,
``ux``..., the stresses ``sxx``... and, recorded as ``u_split_field``, the compressional and
shear parts of the velocity (:data:`ELASTIC_RECORDS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from sonotile.fft import backend as fft_backend
from sonotile.model.grid import AXES
from sonotile.model.problem import ProblemError
from sonotile.physics.base import GrowthProxy, Records, wave_records
from sonotile.physics.elastic.model import (
    State,
    Statics,
    component_names,
    components,
    derived_constants,
    medium_constants,
    split_axes,
    split_field,
    step,
    stored_constants,
    zero_state,
)
from sonotile.physics.elastic.slip import stored_bytes
from sonotile.spectral.operators import FourierOps, fuses_axis_updates

if TYPE_CHECKING:
    from sonotile.physics.elastic.problem import ElasticRun


def elastic_records(ndim: int) -> Records:
    """What an elastic sensor records (k-Wave's elastic names): a wave model's records
    (:func:`sonotile.physics.wave_records`), the stresses at the points (``s``) and on the
    whole grid after the last step (``s_final``), and ``u_split_field``."""
    s = tuple(component_names(ndim))
    split = tuple(f"u{AXES[a]}_split_{w}" for a in range(ndim) for w in "ps")
    return {**wave_records(ndim), "u_split_field": ("raw", split), "s": ("raw", s),
            "s_final": ("final", s)}  # fmt: skip


#: The key of the split's operators in the prepared constants (:meth:`ElasticModel.prepare`).
SPLIT_OPS = "split_ops"


@dataclass(frozen=True)
class Observed:
    """What sensors read of a state with the constants at hand: ``State.fields`` and, where
    the constants hold ``split_k`` (and the transforms, :meth:`ElasticModel.prepare`), the
    velocity's compressional and shear parts on the grid points (``ux_split_p``,
    ``ux_split_s``...; k-Wave's ``u_split_field``)."""

    state: State
    c: dict

    def fields(self) -> dict[str, jax.Array]:
        out = self.state.fields()
        if "split_k" in self.c:
            up, us = split_field(self.state.u, self.c, self.c[SPLIT_OPS])
            for a, (p, s) in enumerate(zip(up, us)):
                out[f"u{AXES[a]}_split_p"], out[f"u{AXES[a]}_split_s"] = p, s
        return out


@dataclass(frozen=True)
class ElasticModel:
    """k-Wave's pstdElastic2D/3D behind the model interface; ``statics``: the step's switches."""

    statics: Statics

    @classmethod
    def of(cls, run: ElasticRun) -> ElasticModel:
        return cls(run.statics)

    @property
    def ndim(self) -> int:
        return self.statics.ndim

    @property
    def ivp(self) -> bool:
        """``p0`` enters through the stresses of the first two steps: every run starts at rest."""
        return False

    @property
    def warm(self) -> bool:
        return False

    @property
    def splits(self) -> frozenset[str]:
        """A distributed FFT (pencil) or local Fourier bases (lfb: :meth:`box_operators` on
        each padded block); none with the slip-aware interface (its gathers reach along whole
        grid lines)."""
        return frozenset() if self.statics.slip else frozenset({"pencil", "lfb"})

    @property
    def auto_splits(self) -> frozenset[str]:
        """Pencils only: LFB's error at a given overlap is about three times the acoustic
        model's, for which ``auto`` chooses the overlap (docs/decomposition.md)."""
        return frozenset() if self.statics.slip else frozenset({"pencil"})

    @property
    def describe(self) -> str:
        return "elastic model"

    def instability_hint(self, run: ElasticRun) -> str:
        """The CFL number of the compressional speed."""
        c_max = float(np.max(run.medium.sound_speed_compression))
        cfl = c_max * run.dt / min(run.spacing)
        return (
            f"the run became unstable or overflowed (CFL number max(c_p) dt / dx = {cfl:.3g}, "
            f"dt = {run.dt:.3g} s): reduce dt, and check the medium and the "
            "source amplitudes"
        )

    def growth_proxy(self, run: ElasticRun) -> GrowthProxy:
        """The elastic energy with the largest density and compressional speed: ``rho |u|^2``
        per velocity split and ``sigma^2 / (rho c_p^2)`` per stress split; its spread over the
        medium's ``rho c^2`` takes every speed (shear included) into account. The sources end
        with the longest signal, or after the two steps of ``p0``."""
        m = run.medium
        rho = np.asarray(m.density)
        cs = np.asarray(m.sound_speed_shear)
        c_low = min(float(np.min(m.sound_speed_compression)),
                    float(np.min(cs[cs > 0])) if np.any(cs > 0) else np.inf)  # fmt: skip
        rho_max, rho_min = float(rho.max()), float(rho.min())
        spread = (m.c_max / c_low) ** 2 * rho_max / rho_min
        state = self.zero_state((1,) * self.ndim, np.float32)
        n_u = sum(len(ui) for ui in state.u_split)
        n_s = sum(len(sk) for sk in state.s_split)
        weights = (rho_max,) * n_u + (1.0 / (rho_max * m.c_max**2),) * n_s
        ons = [o for k in ("u_on", "s_on") for o in run.xs.get(k, ()) if o is not None]
        end = max([2 * int(self.statics.p0)] + [int(np.sum(np.asarray(o))) for o in ons])
        return GrowthProxy(weights, spread, end)

    def records(self) -> Records:
        return elastic_records(self.ndim)

    def observed(self, state: State, c: dict) -> Observed:
        return Observed(state, c)

    def zero_state(self, shape: tuple[int, ...], dtype: Any, eager: bool = False) -> State:
        return zero_state(shape, dtype)

    def initial_state(self, c: dict, ops: Any) -> State:
        raise NotImplementedError("elastic runs start at rest (ivp and warm are False)")

    def prepare(self, c: dict, ops: Any, state: Any) -> dict:
        """With ``u_split_field`` recorded, the operators that make the split (their
        ``spectrum``, ``field`` and ``axis_vector``: one device or a pencil mesh) go with the
        constants to the sensors (:class:`Observed`)."""
        if "split_k" not in c:
            return c
        if not hasattr(ops, "spectrum"):
            raise ProblemError(f"sensor.record: u_split_field needs whole-grid transforms, "
                               f"which {type(ops).__name__} do not make: record it on one "
                               "device or with decomposition='pencil'")  # fmt: skip
        return c | {SPLIT_OPS: ops}

    def step(self, state: State, x: dict, c: dict, ops: Any) -> State:
        return step(state, x, c, ops, self.statics)

    def constants(self, run: ElasticRun, derive_axes: tuple[int, ...] = (),
                  values: Mapping[str, Any] | None = None) -> dict:  # fmt: skip
        """The medium's constants, PML profiles, source indices and ``p0``. The step derives the
        staggered density and shear moduli along the axes each shard holds whole
        (``derive_axes``); when some axis is split among shards they are made here.
        ``values``: medium values by k-Wave name replacing the medium's (may be traced:
        gradients with respect to the speeds and density)."""
        c = medium_constants({**run.medium_values(), **(values or {})}, self.ndim, run.dt,
                             run.dtype)  # fmt: skip
        c.update(run.fixed)
        c.pop("sensor_index", None)  # the loop's sensors sample the points
        if set(derive_axes) != set(range(self.ndim)):
            c.update(derived_constants(c, self.ndim))
        elif self.fused(run):
            c = stored_constants(c, self.ndim)  # read inside the FFTW calls
        return c

    def fused(self, run: ElasticRun) -> bool:
        """The step's updates run inside FFTW's single-axis calls (3-D float32, one device;
        not with the slip-aware interface, whose continued fields go through ``ops.diffs``)."""
        like = jax.ShapeDtypeStruct(run.shape, run.dtype)
        return fuses_axis_updates(run.ops, like) and not self.statics.slip

    def operators(self, run: ElasticRun, unstagger: bool = False) -> FourierOps:
        if not unstagger:
            return run.ops
        return FourierOps.build(run.shape, run.spacing, run.medium.c_max, run.dt, run.dtype,
                                unstagger=unstagger, fft=fft_backend.PORTABLE)  # fmt: skip

    def box_operators(
        self, run: ElasticRun, shape: tuple[int, ...], unstagger: bool = False
    ) -> FourierOps:  # fmt: skip
        """The run's single-axis derivative operators on a box of ``shape`` (an LFB block
        padded with its overlaps): the grid spacing, the box's own wavenumbers."""
        return FourierOps.build(shape, run.spacing, run.medium.c_max, run.dt, run.dtype,
                                unstagger=unstagger)  # fmt: skip

    def inputs(self, run: ElasticRun, n0: int, n1: int) -> dict[str, Any]:
        """Rows ``n0 <= n < n1`` of the scaled source signals (host arrays)."""
        return jax.tree_util.tree_map(lambda a: np.asarray(a[n0:n1]), run.xs)

    def joined(self, others: Sequence[Any]) -> ElasticModel | None:
        return self if all(o == self for o in others) else None

    def stacked(self, ops: Any) -> str:
        """Why there is no step on stacked fields: the acoustic model's alone has one."""
        return f"the {self.describe} has no stacked step"

    def memory_estimate(self, run: ElasticRun) -> int:
        """Device memory of a single-device run [bytes], following the compiled chunk
        program's accounting (``benchmarks/elastic/elastic_memory.py``, docs/elastic.md): the state
        (every split field), the grid-sized material fields stored (:func:`material_fields`),
        ``p0``, the step's temporaries (:data:`CPU_TEMP_HALVES` on the CPU, with sonotile's
        XLA flags; off the CPU the staggered fields the step derives plus
        :data:`ACCELERATOR_TEMP_HALVES`), the whole-grid aggregates and the split field's
        spectra. A rough figure for decompositions. Exact in Python integers."""
        nd, st = self.ndim, self.statics
        fused = self.fused(run)
        stored, derived = material_fields(run.medium_values(), nd, st.kelvin_voigt, fused)
        state = nd * nd + sum(len(split_axes(k, nd)) for k in components(nd))
        table = self.records()
        whole = sum(len(table[r][1]) for r in run.record
                    if r in table and table[r][0] in ("max_all", "min_all"))  # fmt: skip
        whole += 2 * ("p_cw_all" in run.record)  # the DFT's two sums
        split = 3 * ("u_split_field" in run.record)  # the velocity's spectra
        fields = state + stored + int(st.p0) + whole + split
        if jax.default_backend() == "cpu":
            halves = 2 * fields + CPU_TEMP_HALVES[(fused, nd, st.kelvin_voigt)]
        else:  # XLA:GPU stores the derived staggered fields and keeps more in flight
            halves = 2 * (fields + derived) + ACCELERATOR_TEMP_HALVES[(nd, st.kelvin_voigt)]
        size = int(np.dtype(run.dtype).itemsize)
        extra = 0
        if st.slip:  # its constants, and the continued fields in flight
            fields_ = SLIP_TEMP_FIELDS[(nd, st.kelvin_voigt)]
            extra = stored_bytes(run.fixed, size) + fields_ * size * int(np.prod(run.shape))
        return size * int(np.prod(run.shape)) * halves // 2 + extra


#: The step's grid-sized temporaries on the CPU in half fields, ``(fused, ndim,
#: kelvin_voigt)``: with the updates inside FFTW's single-axis calls (3-D float32, one CPU
#: device) the sums being transformed and ``dt`` times the acceleration; elsewhere (XLA's FFT,
#: float64, 2-D) the derivatives and spectra in flight, XLA recomputing the derived staggered
#: fields inside the fusions that read them. Fitted to XLA:CPU's accounting of the compiled
#: chunk programs at 48^3, 64^3, 192^2 and 256^2 with sonotile's XLA flags (its
#: concurrency-optimised scheduler off, as the API's first run and the entry points set it;
#: with it on, XLA keeps up to 30 % more; ``benchmarks/elastic/elastic_memory.py``).
CPU_TEMP_HALVES = {
    (True, 3, True): 14, (True, 3, False): 8,
    (False, 3, True): 40, (False, 3, False): 23,
    (False, 2, True): 21, (False, 2, False): 11,
}  # fmt: skip


#: The slip-aware step's grid-sized temporaries beyond the step's on the same path (fields,
#: ``(ndim, kelvin_voigt)``): the continued fields in flight; fitted to XLA:CPU's accounting
#: at 48^3, 64^3, 192^2, 256^2 (``benchmarks/elastic/elastic_memory.py``, the ``slip`` cases).
SLIP_TEMP_FIELDS = {(3, True): 8, (3, False): 4, (2, True): 1, (2, False): 1}


#: The step's temporaries on an accelerator (XLA:GPU) in half fields, ``(ndim, kelvin_voigt)``,
#: besides the derived staggered fields it stores: fitted to its accounting on an H200 at
#: 64^3 to 256^3, 256^2 and 512^2 (``docs/gpu-results/h200-elastic-memory.txt``).
ACCELERATOR_TEMP_HALVES = {(3, True): 60, (3, False): 46, (2, True): 28, (2, False): 21}


def material_fields(values: Mapping[str, Any], nd: int, kv: bool, fused: bool) -> tuple[int, int]:
    """``(stored, derived)``: how many of the constants the step reads are grid-sized, from
    which medium values (by k-Wave name) are arrays. ``fused``: the FFTW calls read stored
    ``dt_lam``, ``dt_l2m``, ``dt_mu_sg`` (and ``kv_*``) besides ``rho``
    (:func:`~sonotile.physics.elastic.model.stored_constants`), nothing is derived; else
    ``rho``, ``dt_lam``, ``dt_mu`` (``kv_lam``, ``kv_mu``) are stored and the step derives
    ``dt_rho_sg`` per axis, ``dt_l2m``, ``dt_mu_sg`` per shear component (and ``kv_l2m``,
    ``kv_mu_sg``)."""

    def grid(name: str) -> bool:
        v = values.get(name)
        return v is not None and np.ndim(v) > 0

    shear = nd * (nd - 1) // 2
    rho = grid("density")
    mu = rho or grid("sound_speed_shear")
    lam = mu or grid("sound_speed_compression")
    eta = kv and (mu or grid("alpha_coeff_shear"))
    chi = kv and (lam or eta or grid("alpha_coeff_compression"))
    if fused:
        return int(rho) + 2 * int(lam) + shear * int(mu) + 2 * int(chi) + shear * int(eta), 0
    stored = int(rho) + int(lam) + int(mu) + int(chi) + int(eta)
    return stored, nd * int(rho) + int(lam) + shear * int(mu) + int(chi) + shear * int(eta)
