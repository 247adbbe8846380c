"""What the hostile-input tests of the commands share: a small sonotile result file, a snapshot
of a folder's files (to prove them byte-identical afterwards), a tiny or read-only filesystem,
a guard that turns a hang into a failure, and the one-error-line check."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sonotile.base.files import PARTIAL


def result_file(path: Path | str, n: int = 16, p: np.ndarray | None = None, **medium) -> str:
    """A sonotile result of an ``n`` x ``n`` grid (0.25 mm) holding ``p_cw_amp_all`` and
    ``p_max_all`` (a Gaussian focus of 0.5 MPa unless ``p``) and its input; ``medium``
    overrides the stored acoustic medium (k-Wave's heating example)."""
    import sonotile as st
    from sonotile.api.results import Results, save_results

    kgrid = st.KWaveGrid((n, n), 0.25e-3)
    kgrid.dt, kgrid.nt = 5e-8, 10
    med = dict(sound_speed=1510.0, density=1020.0, alpha_coeff=0.75, alpha_power=1.5)
    med.update(medium)
    x = np.arange(n) - n / 2
    if p is None:
        p = 0.5e6 * np.exp(-(x[:, None] ** 2 + x[None, :] ** 2) / 8)
    sensor = st.KSensor(record=("p_cw_all",), cw_frequency=1e6, mask=np.ones((n, n), bool))
    inputs = (kgrid, st.KWaveMedium(**med), st.KSource(), sensor)
    data = {"p_cw_amp_all": p, "p_max_all": p}
    save_results(str(path), Results(data, None, np.zeros(1), None), inputs, {})
    return str(path)


def device_node(folder: Path) -> Path:
    """A character device (a null device) of the test's own: made in ``folder`` where the
    test runs as root, else the system's ``/dev/null`` (which a user cannot replace)."""
    if os.geteuid() != 0:
        return Path("/dev/null")
    path = folder / "null-device"
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return path


def snapshot(folder: Path | str) -> dict[str, bytes | str]:
    """Every entry of ``folder``: a regular file's bytes, a link's target, another kind's
    name (FIFOs and devices are never opened)."""
    out: dict[str, bytes | str] = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            out[name] = "link to " + os.readlink(path)
        elif stat.S_ISREG(mode):
            out[name] = Path(path).read_bytes()
        else:
            out[name] = stat.filemode(mode)
    return out


def no_partial(folder: Path | str, keep: tuple[str, ...] = ()) -> None:
    """No temporary file of sonotile's left in ``folder`` (but those named in ``keep``)."""
    left = [n for n in os.listdir(folder) if PARTIAL in n and n not in keep]
    assert not left, left


def one_error(err: str, prog: str, *parts: str) -> str:
    """The one ``<prog>: error:`` line of ``err``, holding every one of ``parts``; no
    traceback."""
    assert "Traceback" not in err and "Exception ignored" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith(f"{prog}: error:")]
    assert len(lines) == 1, err
    for p in parts:
        assert p in lines[0], f"{p!r} not in {lines[0]!r}"
    return lines[0]


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str, readonly: bool = False) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``path`` (read-only if asked); skips without root."""
    path.mkdir()
    opts = f"size={size}" + (",ro" if readonly else "")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                       capture_output=True)  # fmt: skip
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def readonly_folder(path: Path) -> Iterator[Path]:
    """A folder nobody may write into: mode 0555, or for root a read-only tmpfs."""
    if os.geteuid() == 0:
        with small_tmpfs(path, "64k", readonly=True) as p:
            yield p
        return
    path.mkdir()
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(0o755)


@contextlib.contextmanager
def no_hang(seconds: float = 60.0) -> Iterator[None]:
    """Fail (``TimeoutError``) instead of blocking for ever, e.g. on opening a FIFO."""

    def alarm(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
