"""k-Wave's axisymmetric model (kspaceFirstOrderAS) as an option of the acoustic model: the
acoustic equations in cylindrical coordinates on a 2-D grid, x axial and y radial. It is
:class:`~sonotile.physics.acoustic.model.AcousticModel` with other spectral operators
(:mod:`sonotile.spectral.radial`) and a PML on the outer radial edge only; the step is
:mod:`sonotile.physics.acoustic.step` itself (the uy / y term of the divergence lives in the
operators)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from sonotile.model.problem import Problem, pml_profile
from sonotile.physics.acoustic import checks as acoustic_checks
from sonotile.physics.acoustic.model import AcousticModel
from sonotile.spectral.device import to_device
from sonotile.spectral.radial import RadialOps, period


@dataclass(frozen=True)
class AxisymmetricModel(AcousticModel):
    """The acoustic model's switches plus the radial symmetry (``"WSWA"`` or ``"WSWS"``)."""

    symmetry: str = "WSWA"

    @property
    def splits(self) -> frozenset[str]:
        """One device: the radial transforms are not distributed."""
        return frozenset()

    @property
    def auto_splits(self) -> frozenset[str]:
        """All of them."""
        return self.splits

    @property
    def describe(self) -> str:
        return "axisymmetric acoustic model"

    @classmethod
    def of(cls, problem: Problem) -> AxisymmetricModel:
        """The switches of a validated axisymmetric problem."""
        base = AcousticModel.of(problem)
        assert problem.radial_symmetry is not None  # model_for picks this model for these only
        kw = {f.name: getattr(base, f.name) for f in fields(AcousticModel)}
        return cls(**kw, symmetry=problem.radial_symmetry)

    def constants(self, problem: Problem, derive_axes: tuple[int, ...] = ()) -> dict:
        """The acoustic constants, with the radial PML on the outer edge only (the axis is no
        boundary)."""
        c = super().constants(problem, derive_axes)
        c["pml"] = (c["pml"][0], outer_pml(problem, staggered=False))
        c["pml_sg"] = (c["pml_sg"][0], outer_pml(problem, staggered=True))
        return c

    def operators(self, problem: Problem, unstagger: bool) -> RadialOps:  # type: ignore[override]
        g, m, s = problem.grid, problem.medium, problem.sources
        assert m.c_ref is not None  # set by Medium
        additive = (s.p is not None and s.p.mode == "additive") or any(
            u is not None and u.mode == "additive" for u in s.u
        )
        nx, ny = g.shape
        return RadialOps.build(
            (nx, ny),
            (g.spacing[0], g.spacing[1]),
            m.c_ref,
            g.dt,
            self.symmetry,
            problem.dtype,
            source_filter=additive,
            unstagger=unstagger,
        )

    def stacked(self, ops: Any) -> str:
        """Why there is no step on stacked fields: the radial transforms."""
        return f"the {self.describe} has no stacked step (its radial transforms)"

    def memory_estimate(self, problem: Problem) -> int:
        """The acoustic estimate plus the continued grids of the radial transforms (a few
        complex fields of ``Nx x M/2`` points, ``M`` = :func:`~sonotile.spectral.radial.period`)."""
        nx, ny = problem.grid.shape
        item = np.dtype(problem.dtype).itemsize
        spectra = 6 * nx * (period(ny, self.symmetry) // 2 + 1) * 2 * item
        return acoustic_checks.memory_estimate(problem) + spectra


def outer_pml(problem: Problem, staggered: bool) -> object:
    """The radial PML profile ``(1, Ny)`` with its layer on the outer edge only."""
    g, m, pml = problem.grid, problem.medium, problem.pml
    assert pml is not None and m.c_ref is not None  # set when validated
    n, size = g.shape[1], pml.size[1]
    prof = pml_profile(n, size, pml.alpha[1], m.c_ref, g.spacing[1], g.dt, staggered)
    prof[: n - size] = 1.0
    return to_device(prof.reshape(1, n), problem.dtype)
