"""How a run runs, in one spelling for every model and verb: :class:`RunOptions` (where the
steps run, how a differentiable run keeps its backward pass, saving and resuming, what is
printed). What is simulated is the grid, medium, source, sensor and
:class:`~sonotile.api.types.Options`.

``simulate``, ``make_simulator`` and ``simulate_many`` take ``run=RunOptions(...)`` and the same
fields as keyword arguments (``decomposition="pencil", mesh=(2, 2)``), which override ``run``'s.
Each verb refuses by name a field it has no use for. The option is parsed here, once, at the
front edge: below it the decomposition is a :class:`~sonotile.parallel.decomposition.
Decomposition` and the mesh a tuple of device counts.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal

from sonotile.base import config
from sonotile.model.problem import ProblemError
from sonotile.parallel.decomposition import SINGLE, Decomposition

if TYPE_CHECKING:
    from sonotile.api.heating.checkpoint import Checkpoint
    from sonotile.solver.tape import Tape


def _mesh(value: Sequence[int] | None) -> tuple[int, ...] | None:
    """``mesh`` as devices per split axis, each a whole number >= 1."""
    if value is None:
        return None
    try:
        mesh = tuple(int(n) for n in value)
        whole = all(int(n) == n for n in value)
    except (TypeError, ValueError):
        mesh, whole = (), False
    if not mesh or not whole or min(mesh) < 1:
        raise ProblemError(f"mesh = {value!r}: expected devices per split axis, e.g. (2, 2): "
                           "whole numbers >= 1")  # fmt: skip
    return mesh


@dataclass(frozen=True)
class RunOptions:
    """Where and how a run runs; one object for ``simulate``, ``make_simulator`` and
    ``simulate_many`` of every model.

    Attributes:
        decomposition: ``"single"`` (one device), ``"pencil"`` (distributed FFT, exact),
            ``"lfb"`` (local Fourier bases, nearest-neighbour exchange) or ``"auto"`` (chosen
            from grid, devices and ``accuracy``; ``simulate`` only); docs/decomposition.md.
        mesh: devices per split axis, e.g. ``(2, 4)`` (None: all devices on x).
        overlap: LFB's overlap [points] (None: auto's pick, else 16).
        bell_width: LFB's bell width (fraction of the overlap).
        accuracy: relative accuracy target of ``decomposition="auto"``.
        chunk: steps per checkpointed chunk of a differentiable run (``"auto"``:
            ``ceil(sqrt(nt))``, with a tape every step; None: no checkpointing).
        remat_step: recompute each step in a differentiable run's backward pass.
        tape: where a differentiable run's backward pass keeps its states: ``"host"``,
            ``"disk"`` or a :class:`sonotile.Tape` (None: on the device).
        checkpoint: a run's state file and when to stop
            (:class:`~sonotile.api.heating.Checkpoint`; elastic ``simulate``).
        progress: print progress (None: when stderr is a terminal).
        quiet: print no warnings nor the memory estimate.
    """

    decomposition: Decomposition = SINGLE
    mesh: tuple[int, ...] | None = None
    overlap: int | None = None
    bell_width: float = 0.5
    accuracy: float = 1e-3
    chunk: int | Literal["auto"] | None = "auto"
    remat_step: bool = False
    tape: Tape | str | None = None
    checkpoint: Checkpoint | None = None
    progress: bool | None = None
    quiet: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: the parsed values replace the given ones
        set_(self, "decomposition", Decomposition.parse(self.decomposition))
        set_(self, "mesh", _mesh(self.mesh))
        if self.overlap is not None and not (int(self.overlap) == self.overlap >= 0):
            raise ProblemError(f"overlap = {self.overlap!r}: expected a whole number of points "
                               ">= 0")  # fmt: skip
        c = self.chunk
        if c != "auto" if isinstance(c, str) else c is not None and not int(c) == c >= 1:
            raise ProblemError(f"chunk = {self.chunk!r}: expected 'auto', None or a whole "
                               "number of steps >= 1")  # fmt: skip

    @classmethod
    def of(cls, run: RunOptions | None, **given: Any) -> RunOptions:
        """``run`` (default: the defaults) with the keyword arguments ``given`` applied where
        they differ from the defaults (a keyword left at its default keeps ``run``'s value).
        The process's ``SONOTILE_*`` settings are checked here too, at every call's front edge
        (a bad one raises :class:`~sonotile.base.config.SettingsError` before any work)."""
        config.current()
        defaults = cls()
        changed = {k: v for k, v in given.items() if not _same(v, getattr(defaults, k))}
        return replace(run or defaults, **changed)

    def refuse(self, names: Sequence[str], why: str) -> None:
        """A :class:`ProblemError` naming the first of ``names`` set away from its default,
        with ``why`` (what the caller has no use for it)."""
        defaults = type(self)()
        for name in names:
            value = getattr(self, name)
            if not _same(value, getattr(defaults, name)):
                shown = repr(str(value) if isinstance(value, Decomposition) else value)
                raise ProblemError(f"{name} = {shown}: {why}")


def _same(a: Any, b: Any) -> bool:
    return a is b or (type(a) is type(b) and bool(a == b))


#: The fields of :class:`RunOptions`.
NAMES = tuple(f.name for f in fields(RunOptions))


def renamed(given: Mapping[str, Any], old: str, new: str, where: str, depth: int = 1) -> Any:
    """The value of a keyword argument ``old`` now spelled ``new``, with a
    :class:`DeprecationWarning` naming the new spelling (None when not given); ``depth``: the
    calls between the user's and this one (the warning names the user's line)."""
    if given.get(old) is None:
        return None
    warnings.warn(f"{where}: {old}= is now spelled {new}= (as in RunOptions)", DeprecationWarning,
                  stacklevel=2 + depth)  # fmt: skip
    return given[old]


__all__ = ["NAMES", "RunOptions", "renamed"]
