"""ducc0's FFTs against FFTW's on the same real 3-D transforms (docs/performance.md, Other FFT
libraries).

    python benchmarks/performance/ducc0_fft.py [N ...] [--threads T] [--rounds R]

Needs ``ducc0`` and ``pyfftw`` (FFTW through its Python wrapper), e.g. in a scratch virtual
environment: neither is a dependency of sonotile. For each ``N`` (default 64, 128, 102) a float32
field of ``N^3`` points goes forward (real to half spectrum) and back, in place of nothing
else: ducc0's ``r2c`` / ``c2r`` and pyFFTW's ``FFTW`` objects planned with FFTW_MEASURE (the
planning excluded), on ``T`` threads (default 1). The two alternate, ``R`` rounds (default 7) of
a few calls each; the best round of each is printed [ms per forward + backward] with their ratio
(> 1: ducc0 faster) and the largest difference of the round trips relative to the field's
largest value.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import numpy as np


def best_of(fn: Callable[[], None], rounds: int, calls: int) -> float:
    """The fastest of ``rounds`` rounds of ``calls`` calls of ``fn`` [s per call]."""
    best = np.inf
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls)
    return best


def compare(n: int, threads: int, rounds: int) -> str:
    """One line: FFTW's and ducc0's forward + backward of a float32 ``n^3`` field."""
    import ducc0
    import pyfftw

    x = np.random.default_rng(n).standard_normal((n, n, n)).astype(np.float32)
    real = pyfftw.empty_aligned((n, n, n), np.float32)
    spec = pyfftw.empty_aligned((n, n, n // 2 + 1), np.complex64)
    fwd = pyfftw.FFTW(real, spec, axes=(0, 1, 2), flags=("FFTW_MEASURE",), threads=threads)
    bwd = pyfftw.FFTW(spec, real, axes=(0, 1, 2), direction="FFTW_BACKWARD",
                      flags=("FFTW_MEASURE",), threads=threads)  # fmt: skip
    dspec = np.empty((n, n, n // 2 + 1), np.complex64)
    dreal = np.empty((n, n, n), np.float32)

    def with_fftw() -> None:
        fwd()
        bwd()  # normalised by 1 / n^3

    def with_ducc() -> None:
        ducc0.fft.r2c(x, axes=(0, 1, 2), out=dspec, nthreads=threads)
        ducc0.fft.c2r(dspec, axes=(0, 1, 2), lastsize=n, forward=False, out=dreal, inorm=2,
                      nthreads=threads)  # fmt: skip

    real[...] = x
    with_fftw()
    with_ducc()
    err = max(np.abs(real - x).max(), np.abs(dreal - x).max()) / np.abs(x).max()
    calls = max(1, int(2e7 / n**3))
    t_f, t_d = np.inf, np.inf
    for _ in range(rounds):  # alternating rounds, the best of each
        real[...] = x
        t_f = min(t_f, best_of(with_fftw, 1, calls))
        t_d = min(t_d, best_of(with_ducc, 1, calls))
    return (f"{n:4d}^3  FFTW {1e3 * t_f:8.2f} ms  ducc0 {1e3 * t_d:8.2f} ms  "
            f"FFTW/ducc0 {t_f / t_d:5.2f}  round trip {err:.1e}")  # fmt: skip


def main(argv: list[str]) -> int:
    import ducc0
    import pyfftw

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="*", type=int, default=[64, 128, 102])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args(argv)
    print(f"ducc0 {ducc0.__version__}, pyFFTW {pyfftw.__version__}, {a.threads} thread(s)")
    for n in a.n:
        print(compare(n, a.threads, a.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
