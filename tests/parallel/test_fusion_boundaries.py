"""The decomposed steps keep the single-device step's fusion boundaries.

On the FFTW backend each updated velocity component is materialised (``ops.keep``, the
``sonotile_keep`` custom call) before the sensors gather from it. The single-device absorbing
step forms the nonlinear density factor ``2 sum(rho) + rho0`` inside its one divergence call
(``sonotile_fftw_div_density``); the LFB and pencil steps materialise it once before the three
density updates read it. Without that hook XLA fused the factor into each update: every update
read all three old density components and XLA kept copies of them, ~4-5 ms of a 128^3 step on
one core.
And LFB blocks meet their neighbours once per group of
fields (each field's transform before any exchange), the sensors' sum once per chunk. Counted
in the compiled chunk of each engine, in a subprocess with 2 virtual CPU devices.
"""

from __future__ import annotations

import pytest
from devices import run_on_cpu_devices
from require import require_fftw

from sonotile.fft import fftw

SCRIPT = r"""
import json
import jax
from schedule import XLA_COLLECTIVE, meetings
from sonotile import parallel
from sonotile.bench.cases import heterogeneous_absorbing
from sonotile.solver import runner

problem = heterogeneous_absorbing(24, 6)
xs = runner.step_inputs(problem, 0, 4)
out = {}
for name in ("single", "lfb", "pencil"):
    if name == "single":
        eng = runner.single_engine(problem)
    else:
        eng = parallel.decomposed_engine(problem, name, (2,), 8, 0.5)
    text = eng.lower(eng.start()[0].carry, xs).compile().as_text()
    # one field materialised: keep calls of one buffer (several: an ordering of exchanges)
    out[name] = sum(
        'custom_call_target="sonotile_keep"' in line and " = (" not in line
        for line in text.splitlines()
    )
    out[name + "_meetings"] = meetings(text, XLA_COLLECTIVE)
    out[name + "_div_density"] = 'custom_call_target="sonotile_fftw_div_density"' in text
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def counts():
    require_fftw(fftw.available(), f"FFTW extension unavailable: {fftw.reason()}")
    return run_on_cpu_devices(SCRIPT, 2)


def test_nonlinear_factor_is_materialised_on_every_decomposition(counts):
    # single device: the three velocity components (kept from the sensors' gathers), the
    # factor made inside the divergence call; LFB and pencil: those and the factor
    assert counts["single"] >= 3 and counts["single_div_density"], counts
    assert not counts["lfb_div_density"] and not counts["pencil_div_density"], counts
    assert counts["lfb"] == counts["single"] + 1, counts
    assert counts["pencil"] == counts["single"] + 1, counts


def test_lfb_blocks_meet_three_times_per_step(counts):
    # the absorbing step's exchanges: the pressure's overlap (gradient), the three velocity
    # components' (divergence), the two absorption operands' (fractional Laplacians); the
    # sensors' sum comes once per chunk, after the loop (it was a fourth meeting in every
    # step). XLA used to put each field's plane transform between the exchanges of the others:
    # seven meeting points, at each of which a process waits for the other
    assert counts["lfb_meetings"] == 3, counts
