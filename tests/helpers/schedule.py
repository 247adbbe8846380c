"""Where the devices of a compiled decomposed step wait for each other (tests of its schedule)."""

from __future__ import annotations

import re

#: XLA's own collectives in a compiled program's text
XLA_COLLECTIVE = r" (collective-permute|all-reduce|all-to-all)(-start)?\("
#: the MPI transport's point-to-point calls: sonotile's halo exchanges and mpi4jax's sendrecv
#: (its all-to-alls, the unstagger's transposes around a local FFT, go where XLA puts them)
MPI_POINT_TO_POINT = r'custom_call_target="(sonotile_mpi_halos|mpi_sendrecv_ffi)"'


def meetings(text: str, collective: str) -> int:
    """Groups of collectives (lines matching the regex ``collective``) not separated by a local
    transform (an FFTW call or XLA's ``fft``), in the computation of the compiled program
    ``text`` that has the most (the time loop's body): the points where the devices (processes)
    wait for each other."""
    seqs = [""]
    for line in text.splitlines():
        if line.endswith("{"):  # a computation starts
            seqs.append("")
        elif re.search(collective, line):
            seqs[-1] += "C"
        elif 'custom_call_target="sonotile_fftw_' in line or re.search(r" fft\(", line):
            seqs[-1] += "F"
    return max(len(re.findall("C+", s)) for s in seqs)
