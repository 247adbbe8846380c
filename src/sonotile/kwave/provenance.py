"""Provenance of a k-Wave run: what ran, on what, from which input (the output's ``sonotile_*``
root attributes; k-Wave's readers ignore attributes they do not know)."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess

from sonotile.base.version import __version__


def git_commit() -> str:
    """The commit of the checkout sonotile runs from (``+dirty`` with local changes), or ``""``
    when it is not a git checkout."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        head = subprocess.run(
            ["git", "-C", here, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(
            ["git", "-C", here, "status", "--porcelain", "--untracked-files=no", "--", here],
            capture_output=True, text=True, timeout=5,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def fft_used(dtype: str) -> str:
    """The FFT backend this run uses and its settings (FFTW: plan effort and threads)."""
    from sonotile.fft import backend

    return backend.summary(dtype)


def versions() -> str:
    """Versions of Python and the libraries that compute and write the results."""
    import h5py
    import jax
    import jaxlib
    import numpy as np

    parts = [
        f"python {platform.python_version()}", f"jax {jax.__version__}",
        f"jaxlib {jaxlib.__version__}", f"numpy {np.__version__}", f"h5py {h5py.__version__}",
        f"hdf5 {h5py.version.hdf5_version}",
    ]  # fmt: skip
    from sonotile.fft import backend

    fv = backend.library_versions()
    if fv:
        parts.append(fv)
    return ", ".join(parts)


def provenance(argv: list[str], input_sha256: str, dtype: str, engine: str) -> dict[str, str]:
    """The ``sonotile_*`` attributes of an output file (names without the prefix)."""
    return {
        "version": __version__,
        "git_commit": git_commit(),
        "command_line": shlex.join(["sonotile-kwave", *argv]),
        "input_sha256": input_sha256,
        "fft": fft_used(dtype),
        "precision": dtype,
        "decomposition": engine,
        "versions": versions(),
    }
