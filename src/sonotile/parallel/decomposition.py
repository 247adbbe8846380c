"""How a grid is split over devices: the one type every layer passes (no JAX, light)."""

from __future__ import annotations

from enum import Enum


class Decomposition(str, Enum):
    """``single`` (one device), ``pencil`` (a distributed FFT: exact), ``lfb`` (local Fourier
    bases: nearest-neighbour exchange, accuracy set by the overlap) or ``auto`` (chosen from
    the grid, the devices and the accuracy asked for). Equal to its name as a string."""

    AUTO = "auto"
    SINGLE = "single"
    PENCIL = "pencil"
    LFB = "lfb"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: str, name: str = "decomposition") -> Decomposition:
        """``value`` as a decomposition; :class:`ValueError` naming ``name`` otherwise."""
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(repr(d.value) for d in cls)
            raise ValueError(f"{name} = {value!r}: expected one of {known}") from None


#: every decomposition's name, for command-line choices
NAMES = tuple(d.value for d in Decomposition)

SINGLE, PENCIL = Decomposition.SINGLE, Decomposition.PENCIL
LFB, AUTO = Decomposition.LFB, Decomposition.AUTO
