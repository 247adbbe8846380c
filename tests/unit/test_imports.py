"""What a single-device k-Wave run imports: not the decompositions (their import is ~0.1 s of
every run's start), and the package's public names still resolve to what they were."""

import subprocess
import sys

_PROBE = """
import sys
import sonotile.kwave.cli, sonotile.kwave.run
heavy = [m for m in ("sonotile.parallel.engine", "sonotile.parallel.lfb",
                     "sonotile.parallel.pencil", "sonotile.spectral.linear") if m in sys.modules]
print("HEAVY", heavy)
from sonotile import parallel
from sonotile.parallel import auto, make_mesh, run_decomposed, erf_bell, DECOMPOSITIONS
print("KINDS", type(auto).__name__, type(make_mesh).__name__, type(run_decomposed).__name__,
      type(erf_bell).__name__, DECOMPOSITIONS)
try:
    parallel.no_such_name
except AttributeError:
    print("MISSING ok")
"""


def test_single_run_imports_no_decomposition() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    assert "HEAVY []" in out, out
    assert "KINDS function function function function ('auto', 'single', 'pencil', 'lfb')" in out
    assert "MISSING ok" in out
