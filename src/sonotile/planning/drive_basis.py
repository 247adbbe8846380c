"""The drives an optimised plan chooses from: sub-apertures of the phase-conjugated drive.

The elements are split into ``K`` groups of neighbours (:func:`element_groups`); group ``k``
driven alone with the conjugated drive (steered to an aim point, for several targets or a
volume) gives the basis field ``F_k``. By linearity every drive whose elements keep their
conjugate phases within a group, each group scaled by one complex factor ``c_k``, has the
field ``sum_k c_k F_k`` exactly: the optimiser works on ``c`` with the fields in memory, and
one forward run confirms the drive it picks. ``K`` equal to the number of elements frees
every element.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from sonotile.model.problem import ProblemError

#: ``field(amplitude [Pa], phase [rad]) -> complex pressure [Pa] on the grid``
FieldRun = Callable[[np.ndarray, np.ndarray], np.ndarray]


def element_groups(positions: np.ndarray, k: int, iterations: int = 50) -> np.ndarray:
    """Each element's group ``(n,)`` (0 .. k-1): ``k`` groups of neighbouring elements
    (k-means on the positions ``(n, 3)``, started from the element nearest the centroid and
    then each farthest from those chosen, so the result is deterministic); every element
    its own group when ``k >= n``."""
    x = np.asarray(positions, dtype=np.float64)
    n = x.shape[0]
    if k >= n:
        return np.arange(n)
    if k < 1:
        raise ProblemError(f"groups must be at least 1, got {k}")
    seeds = [int(np.argmin(np.linalg.norm(x - x.mean(0), axis=1)))]
    d = np.linalg.norm(x - x[seeds[0]], axis=1)
    for _ in range(k - 1):
        seeds.append(int(np.argmax(d)))
        d = np.minimum(d, np.linalg.norm(x - x[seeds[-1]], axis=1))
    centres = x[seeds]
    label = np.zeros(n, dtype=int)
    for _ in range(iterations):
        label = np.argmin(np.linalg.norm(x[:, None] - centres[None], axis=2), axis=1)
        new = np.array([x[label == j].mean(0) if np.any(label == j) else centres[j]
                        for j in range(k)])  # fmt: skip
        if np.allclose(new, centres):
            break
        centres = new
    return label


@dataclass
class Basis:
    """Basis drives and their fields.

    Attributes:
        drives: ``(n_elements, M)`` complex: basis drive ``m`` per element [Pa] (amplitude
            and phase ``A exp(i phase)``), zero outside its group.
        fields: ``(M, *grid)`` complex64: each basis drive's steady-state pressure [Pa].
        group: each basis drive's group; aim: each basis drive's aim point (index into the
            aim points).
    """

    drives: np.ndarray = field(repr=False)
    fields: np.ndarray = field(repr=False)
    group: np.ndarray = field(repr=False)
    aim: np.ndarray = field(repr=False)

    def drive(self, c: np.ndarray) -> np.ndarray:
        """The element drive ``(n,)`` complex [Pa] of coefficients ``c`` ``(M,)``."""
        return self.drives @ np.asarray(c)

    def field(self, c: np.ndarray) -> np.ndarray:
        """The pressure ``sum_m c_m F_m`` (complex, the grid's shape) [Pa]."""
        return np.tensordot(np.asarray(c, dtype=np.complex128), self.fields, axes=1)


def basis_drives(amplitude: np.ndarray, phases: list[np.ndarray], group: np.ndarray) -> np.ndarray:
    """``(n, M)`` complex basis drives: for each aim's phases (``phases[a]``, per element)
    and each group, the elements of the group at ``amplitude`` with those phases."""
    cols = []
    for ph in phases:
        d = np.asarray(amplitude) * np.exp(1j * np.asarray(ph))
        cols += [np.where(group == k, d, 0) for k in range(int(group.max()) + 1)]
    return np.stack(cols, axis=1)


def run_basis(drives: np.ndarray, n_groups: int, run: FieldRun,
              progress: Callable[[str], None] | None = None) -> Basis:  # fmt: skip
    """Each basis drive's field (one forward run each)."""
    say = progress or (lambda _msg: None)
    fields = []
    for m in range(drives.shape[1]):
        say(f"basis field {m + 1} of {drives.shape[1]}")
        d = drives[:, m]
        fields.append(run(np.abs(d), np.angle(d)).astype(np.complex64))
    m_all = np.arange(drives.shape[1])
    return Basis(drives, np.stack(fields), m_all % n_groups, m_all // n_groups)
