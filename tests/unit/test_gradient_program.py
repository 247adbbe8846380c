"""What one time step's backward pass compiles to, on the FFTW backend: the cost of a gradient
without timing it.

The vector-Jacobian product of a step recomputes the step (its FFT calls once) and applies the
transposed operators (the same number again): any more FFT calls is a derivative rule doing
redundant transforms. And no fusion that shifts a field by a grid point (the transpose of the
staggered density's neighbour mean) may read many whole fields: XLA then recomputes the whole
cotangent expression at both points in one scalar loop (it read 17-19 fields and took as long
as two FFT calls, every step, before the fusion boundary of ``step.dt_over_staggered``).
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sonotile as st
from sonotile.api.gradients import constants, step_inputs
from sonotile.fft import fftw
from sonotile.physics.acoustic.step import initial_pressure_state
from sonotile.solver import runner
from sonotile.solver import sensors as sens

N = 16
FFT_CALLS = ("sonotile_fftw_conv", "sonotile_fftw_planes_c2r", "sonotile_fftw_r2c",
             "sonotile_fftw_c2r", "sonotile_fftw_conv_sum")  # fmt: skip
MAX_SHIFT_FUSION_FIELDS = 12
# grid-sized operands read by the fusions of one step's VJP: 149 before the density sum's
# cotangent was materialised once (``step.shared_cotangent``), 132 with it (XLA 0.10.2)
MAX_VJP_FIELD_READS = 135


def _case():
    grid = st.KWaveGrid((N, N, N), 1e-4, dt=2e-8, nt=4)
    x, y, z = np.meshgrid(*(np.arange(N) - N // 2,) * 3, indexing="ij")
    r2 = x**2 + y**2 + z**2
    medium = st.KWaveMedium(sound_speed=1500 + 80 * np.exp(-r2 / 9),
                            density=1000 + 60 * np.exp(-r2 / 12),
                            alpha_coeff=0.75, alpha_power=1.5, BonA=6.0)  # fmt: skip
    source = st.KSource(p0=1e5 * (r2 <= 4))
    sensor = st.KSensor(points=np.array([[3, 4, 5], [10, 8, 6]]), record=("p",))
    return grid, medium, source, sensor


@pytest.fixture(scope="module")
def programs():
    """Compiled HLO text of one step and of its VJP (medium fields and state differentiated)."""
    if not fftw.available():
        pytest.skip(f"FFTW backend unavailable ({fftw.reason()})")
    sim = st.make_simulator(*_case(), pml_size=4)
    static, (ops, index) = sim.static, sim._fixed
    if ops.inner.fft != "fftw":  # the counts below are those of the default (fused) calls
        pytest.skip(f"FFT backend {ops.inner.fft!r}, not the fused FFTW calls")
    c, c0 = constants(static, sim.params, tuple(range(3)))
    x = jax.tree_util.tree_map(lambda a: a[0], step_inputs(static, sim.params, c0))
    state = initial_pressure_state(c, ops, static.phys)
    carry = (state, sens.init_aggregates(static.layout, static.problem.grid.shape, jnp.float32))
    fields = ("c2", "rho0", "tau", "bona_2rho0")

    def body(medium, carry):
        return runner.scan_body(carry, x, {**c, **medium}, ops, index, static.phys,
                                static.layout)  # fmt: skip

    medium = {k: c[k] for k in fields}
    out = body(medium, carry)

    def vjp(medium, carry, g):
        return jax.vjp(body, medium, carry)[1](g)

    g = jax.tree_util.tree_map(jnp.ones_like, out)
    fwd = jax.jit(body).lower(medium, carry).compile().as_text()
    bwd = jax.jit(vjp).lower(medium, carry, g).compile().as_text()
    return fwd, bwd


def _fft_calls(hlo: str) -> int:
    targets = re.findall(r'custom_call_target="([^"]+)"', hlo)
    return sum(t in FFT_CALLS for t in targets)


def _computations(hlo: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    name = None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?(%\S+) ", line)
        if head and line.rstrip().endswith("{"):
            name = head.group(1)
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def _grid_fusions(hlo: str) -> list[tuple[str, int, str]]:
    """``(name, grid-sized operands, fused computation)`` of the entry computation's fusions."""
    comps = _computations(hlo)
    entry = next(n for n in comps if n.startswith("%main"))
    shapes = {}
    for line in comps[entry]:
        m = re.match(r"\s*(%\S+) = (\S+) ", line)
        if m:
            shapes[m.group(1)] = m.group(2).split("{")[0]
    grid = f"f32[{N},{N},{N}]"
    found = []
    for line in comps[entry]:
        m = re.match(r"\s*(%\S+) = \S+ fusion\((.*?)\), kind=\w+, calls=(%[^ ,]+)", line)
        if m:
            operands = re.findall(r"%[^ ,)]+", m.group(2))
            found.append((m.group(1), sum(shapes.get(o) == grid for o in operands), m.group(3)))
    return found


def _shifting_fusions(hlo: str) -> list[tuple[str, int]]:
    """``(name, grid-sized operands)`` of the entry computation's fusions that contain a pad."""
    comps = _computations(hlo)

    def has_pad(comp: str) -> bool:
        lines = comps.get(comp, [])
        return any(" pad(" in ln for ln in lines) or any(
            has_pad(c) for ln in lines for c in re.findall(r"calls=(%[^ ,]+)", ln)
        )

    return [(name, n) for name, n, comp in _grid_fusions(hlo) if has_pad(comp)]


def test_vjp_of_a_step_makes_the_step_s_calls_and_one_per_transposed_operator(programs):
    fwd, bwd = programs
    n_fwd = _fft_calls(fwd)
    assert n_fwd == 8  # grad: conv + 2 plane passes; div: 3; two fractional operators: 2
    # the step recomputed (8), then the transposes: grad's in one summing call (conv_sum, where
    # three conv calls and a sum were), div's 3, the fractional operators' 2
    assert _fft_calls(bwd) == n_fwd + 6
    assert re.findall(r'custom_call_target="([^"]+)"', bwd).count("sonotile_fftw_conv_sum") == 1


def test_no_neighbour_shift_in_the_vjp_recomputes_many_fields(programs):
    _, bwd = programs
    shifting = _shifting_fusions(bwd)
    assert shifting, "expected the transpose of the staggered mean in the VJP"
    assert max(n for _, n in shifting) <= MAX_SHIFT_FUSION_FIELDS, shifting


def test_vjp_of_a_step_reads_each_shared_cotangent_once(programs):
    # XLA:CPU fuses into single-output loops: a cotangent several fusions need is summed again
    # inside each unless materialised once; what every fusion reads is the step's memory traffic
    _, bwd = programs
    reads = sum(n for _, n, _ in _grid_fusions(bwd))
    assert 100 < reads <= MAX_VJP_FIELD_READS, reads


def _taped_gradient_fft_calls(remat_step: bool) -> int:
    """FFTW calls in the compiled gradient of a loss through a host tape, 2 steps per chunk."""
    sim = st.make_simulator(*_case(), pml_size=4, tape="host", chunk=2, remat_step=remat_step)
    params = {"sound_speed": sim.params["sound_speed"]}

    def loss(p):
        return jnp.sum(sim(p)["p"] ** 2)

    return _fft_calls(jax.jit(jax.grad(loss)).lower(params).compile().as_text())


def test_taped_chunks_keep_their_transforms_for_the_backward_pass(programs):
    # A chunk of the backward pass reruns its steps once and keeps their spectral results:
    # rematerialising every step as well costs exactly one more step's transforms per step.
    kept, remat = _taped_gradient_fft_calls(False), _taped_gradient_fft_calls(True)
    assert remat - kept == _fft_calls(programs[0]) == 8
