"""The FFT backends: registered siblings behind one interface, and the choice between them.

A backend is a sibling module of this package holding objects that satisfy :class:`Backend`
(:mod:`~sonotile.fft.xla`: XLA's FFT, DUCC on CPUs and cuFFT on GPUs; :mod:`~sonotile.fft.fftw`:
FFTW as XLA custom calls on CPUs; :mod:`~sonotile.fft.cufft`: cuFFT as XLA custom calls on GPUs, the
inverse's ``1/N`` folded into the spectrum's multiply), registered here as a :class:`Sibling`: its
name (a value of ``SONOTILE_FFT``), the runs it takes (platform and dtype), whether it works in this
process, and its priority per platform for ``auto``. The choice is made once, when operators are
built (:func:`resolve`, from :attr:`sonotile.base.config.Settings.fft`), and recorded by name in the
operators' static part; :func:`get` gives the object back from the name. The operators
(:mod:`sonotile.spectral.operators`), the models and the decompositions (:mod:`sonotile.parallel`)
call the objects' methods and ask their capabilities (``fuses_updates``, ``slab_kernels``,
:meth:`Backend.native`, :func:`unfused`), never a backend's name or its own module.

Everything is on real fields and their half spectra (last axis halved, numpy's ``rfftn``
layout). An operator is ``op`` (real, on the half spectrum, or None) times at most one complex
vector ``vec`` along one grid axis (a derivative's ``i k exp(+-i k d/2)``; on the last axis its
half length), applied between a forward and an inverse transform. Where a backend cannot take
an array (FFTW: float64, or rank above 3) :meth:`Backend.native` is False and the operators use
:func:`portable` for it.

The protocols live in :mod:`sonotile.fft.interface` (re-exported here). A new backend (a GPU
one): a module here with a class satisfying :class:`Backend` (and, optionally,
:class:`SlabKernels`), importing only the interface, and one :func:`register` call below with
its name, the runs it takes, its availability check and its priority on its platform; its
name then joins ``SONOTILE_FFT``'s values (:data:`sonotile.base.config.FFT_BACKENDS`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sonotile.fft import cufft, fftw, xla
from sonotile.fft.interface import AxisVec, Backend, Epilogue, SlabKernels

if TYPE_CHECKING:
    import jax

__all__ = ["PORTABLE", "AxisVec", "Backend", "Epilogue", "Sibling", "SlabKernels", "chooses",
           "describe", "for_array", "get", "library_versions", "portable", "real_scale",
           "register", "reset", "resolve", "summary", "unfused"]  # fmt: skip

#: ``F * k`` for a complex spectrum and a real operator, part by part (see
#: :func:`sonotile.fft.xla.real_scale`): for operators applied outside a backend call
real_scale = xla.real_scale


def _always() -> bool:
    return True


def _no_reason() -> str | None:
    return None


def _nothing() -> str:
    return ""


@dataclass(frozen=True)
class Sibling:
    """One registered FFT backend.

    Attributes:
        name: its value of ``SONOTILE_FFT`` / ``Settings.fft``.
        title: how messages name it (``deterministic mode needs the <title> extension``).
        objects: its backend objects by the names operators record (:func:`get`).
        takes: ``(platform, dtype) -> bool``: runs it can serve (platform as
            ``jax.default_backend()`` says it, dtype ``"float32"`` / ``"float64"``).
        priority: ``auto``'s preference per platform, highest first; a platform not listed:
            ``auto`` never picks it there (naming it still does).
        recorded: ``Settings -> name`` the operators record (a variant by setting).
        available: whether it works in this process (built, loaded); checked only when it
            would be chosen.
        auto_when: whether ``auto`` considers it at all (cuFFT: only where a library is named,
            since it is built by hand); a name chooses it regardless.
        reason: why not, when it is unavailable.
        details: ``() -> {key: value}``: where it ran, for an output's provenance.
        summary: ``() -> str``: what an output file's ``fft`` attribute says of it.
        versions: ``() -> str``: its library's version, for an output's provenance.
    """

    name: str
    title: str
    objects: Mapping[str, Any]
    takes: Callable[[str, str], bool]
    priority: Mapping[str, int]
    recorded: Callable[[Any], str] = lambda settings: ""
    available: Callable[[], bool] = _always
    auto_when: Callable[[], bool] = _always
    reason: Callable[[], str | None] = _no_reason
    details: Callable[[], dict[str, str]] = dict
    summary: Callable[[], str] = _nothing
    versions: Callable[[], str] = _nothing
    noted: set[str] = field(default_factory=set, compare=False)


#: The registered backends by name, in registration order.
SIBLINGS: dict[str, Sibling] = {}
#: The backend every array, dtype and device can use.
PORTABLE = "xla"
#: The backends :func:`resolve` chose in this process (for :func:`describe`).
_used: set[str] = set()


def register(sibling: Sibling) -> None:
    """Add a backend to the choice (see the module docstring)."""
    SIBLINGS[sibling.name] = sibling


register(Sibling(
    name="xla", title="XLA's FFT", objects={"xla": xla.BACKEND},
    takes=lambda platform, dtype: True, priority={"*": 0},
    recorded=lambda settings: "xla", details=xla.details,
))  # fmt: skip
register(Sibling(
    name="fftw", title="FFTW",
    objects={"fftw": fftw.BACKEND, "fftw-separate-updates": fftw.SEPARATE_UPDATES},
    takes=lambda platform, dtype: platform == "cpu" and str(dtype) == "float32",
    priority={"cpu": 10},
    recorded=lambda settings: "fftw" if settings.fftw_updates else "fftw-separate-updates",
    available=fftw.available, reason=fftw.reason, details=fftw.details,
    summary=fftw.summary, versions=fftw.versions,
))  # fmt: skip
register(Sibling(
    name="cufft", title="cuFFT calls", objects={"cufft": cufft.BACKEND},
    takes=lambda platform, dtype: platform in cufft.PLATFORMS
    and str(dtype) in ("float32", "float64"),
    priority={p: 10 for p in cufft.PLATFORMS},
    recorded=lambda settings: "cufft", available=cufft.available, auto_when=cufft.named,
    reason=cufft.unavailable, details=cufft.details,
))  # fmt: skip


def get(name: str) -> Any:
    """The backend object of ``name`` (as :func:`resolve` returns it and operators record it):
    ``xla``, ``cufft``, ``fftw``, or ``fftw-separate-updates`` (FFTW, derivative outputs
    without fused updates: ``Settings.fftw_updates`` off)."""
    for sib in SIBLINGS.values():
        if name in sib.objects:
            return sib.objects[name]
    known = ", ".join(n for sib in SIBLINGS.values() for n in sib.objects)
    raise ValueError(f"unknown FFT backend {name!r} ({known})")


def portable() -> Backend:
    """The backend every array and device can use (XLA's FFT)."""
    return get(PORTABLE)


def for_array(name: str, like: jax.Array) -> Backend:
    """Backend ``name`` where it takes fields like ``like``, else :func:`portable`."""
    be = get(name)
    return be if be.native(like) else portable()


def unfused(name: str) -> str:
    """The recorded name of backend ``name`` whose derivative outputs carry no fused updates
    (a traced run's updates stay outside the backend's calls); ``name`` itself where it has
    none."""
    be = get(name)
    if not be.fuses_updates:
        return name
    for sib in SIBLINGS.values():
        if name in sib.objects:
            for other, obj in sib.objects.items():
                if not obj.fuses_updates and type(obj) is type(be):
                    return other
    return name


def _platform() -> str:
    import jax

    return jax.default_backend()


def _choose(choice: str, dtype: str, settings: Any) -> Sibling:
    """The sibling for ``choice`` (a name, or ``auto``): the named one, or ``auto``'s by
    priority on this platform, where it takes the run and is available; else the portable
    one. A sibling that takes the run but is unavailable is passed over with one line on
    stderr, or (deterministic mode) refused with :class:`RuntimeError`."""
    if choice == PORTABLE:
        return SIBLINGS[PORTABLE]
    platform = _platform()
    if choice == "auto":
        ranked = [s for s in SIBLINGS.values()
                  if (platform in s.priority or "*" in s.priority) and s.auto_when()]  # fmt: skip
        ranked.sort(key=lambda s: -s.priority.get(platform, s.priority.get("*", 0)))
    else:
        ranked = [SIBLINGS[choice]]
    for sib in ranked:
        if not sib.takes(platform, str(dtype)):
            continue
        if sib.available():
            return sib
        if settings.deterministic:
            raise RuntimeError(
                f"deterministic mode needs the {sib.title} extension, which is unavailable "
                f"({sib.reason()}); "
                f"fix that, or choose XLA's FFT explicitly (SONOTILE_FFT={PORTABLE})"
            )
        if sib.name not in sib.noted:
            sib.noted.add(sib.name)
            print(f"sonotile: {sib.title} unavailable, using XLA's FFT ({sib.reason()})",
                  file=sys.stderr)  # fmt: skip
    return SIBLINGS[PORTABLE]


def resolve(fft: str | None, dtype: str, settings: Any = None) -> str:
    """The name of the backend to use, chosen once per set of operators (``fft`` ``"auto"`` /
    None: ``settings.fft`` decides; ``settings`` default :func:`sonotile.base.config.current`).
    ``auto``: the registered backend of highest priority on this platform that takes the dtype
    and works here (on the CPU for float32: FFTW when its extension works; on a GPU: the cuFFT
    calls where ``Settings.cufft_lib`` names their library), else XLA's FFT; a
    name: that backend where it takes the run, else XLA's FFT. In deterministic mode
    (``Settings.deterministic``) a run that would use an unavailable backend raises
    :class:`RuntimeError` instead of falling back. FFTW's name carries
    ``Settings.fftw_updates`` (``fftw-separate-updates`` when off)."""
    from sonotile.base import config

    settings = settings or config.current()
    choice = fft if fft not in (None, "auto") else settings.fft
    choice = choice or "auto"
    if choice != "auto" and choice not in SIBLINGS:
        raise ValueError(f"fft must be auto, {', '.join(SIBLINGS)}, not {choice!r}")
    sib = _choose(choice, dtype, settings)
    _used.add(sib.name)
    return sib.recorded(settings)


def chooses(name: str, dtype: str, fft: str | None = None) -> bool:
    """Whether :func:`resolve` (``fft``, ``dtype``) picks the registered backend ``name``."""
    return resolve(fft, dtype) in SIBLINGS[name].objects


def reset() -> None:
    """Forget the backends chosen so far and the fallbacks noted (tests)."""
    _used.clear()
    for sib in SIBLINGS.values():
        sib.noted.clear()


def describe() -> dict[str, str]:
    """What this process's FFTs ran on, for an output's provenance: ``fft_backend`` (the
    backends resolved so far, e.g. ``fftw``; ``none`` before any), ``deterministic`` (1/0), and
    each backend's details (``fftw_*``, ``xla_fft``: see each sibling's ``details``)."""
    from sonotile.base import config

    out = {
        "fft_backend": ",".join(sorted(_used)) or "none",
        "deterministic": "1" if config.current().deterministic else "0",
    }
    for name in sorted(_used):
        out.update(SIBLINGS[name].details())
    return out


def summary(dtype: str) -> str:
    """What an output file's ``fft`` attribute says: the backend a run of ``dtype`` uses and,
    where it has them, its settings (FFTW: plan effort, threads)."""
    name = resolve(None, dtype)
    for sib in SIBLINGS.values():
        if name in sib.objects:
            return sib.summary() or sib.name
    return name


def library_versions() -> str:
    """The versions of the FFT libraries this process can load (``""``: none beyond jaxlib)."""
    return ", ".join(v for v in (sib.versions() for sib in SIBLINGS.values()) if v)
