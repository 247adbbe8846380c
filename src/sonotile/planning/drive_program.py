"""The convex program of an optimised drive: the least peak skull temperature rise for the
pressures asked, within the array's limits.

Variables: the complex coefficients ``c`` of the basis drives (:mod:`drive_basis`), written
as real vectors ``x = (Re c, Im c)`` for the solver. With ``p(x) = r_x^T c`` the pressure at a
point and ``dT_j = c^H M_j c`` the rise at hotspot ``j`` (:mod:`hotspots`):

    minimise    t + eps |c|^2
    subject to  c^H M_j c <= t                          every hotspot j
                Re(exp(-i theta_g) p(x_g)) >= lo_g       every goal point g
                |p(x_u)| <= hi_u                         every bounded point u
                |w_e(c)| <= A_max                        every element e
                w(c)^H S w(c) <= P_max                   the acoustic power

``M_j`` are positive semidefinite, so every constraint is a second-order cone and the program
is convex: its optimum is global and an interior-point solver (Clarabel, through CVXPY) finds
it in well under a second for a few hundred constraints. ``theta_g`` fixes each goal point's
phase; for one target it is free (the drive's overall phase), for several it is updated
from the last solution (a convex-concave iteration).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sonotile.model.problem import ProblemError


def _real_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Real and imaginary parts of ``rows @ c`` as real rows acting on ``x = (Re c, Im c)``."""
    r = np.atleast_2d(np.asarray(rows, dtype=np.complex128))
    return np.hstack([r.real, -r.imag]), np.hstack([r.imag, r.real])


def _real_factor(m: np.ndarray) -> np.ndarray:
    """``L`` with ``|L x|^2 = c^H m c`` for Hermitian positive semidefinite ``m`` (its
    negative eigenvalues, round-off, dropped)."""
    big = np.block([[m.real, -m.imag], [m.imag, m.real]])
    w, v = np.linalg.eigh(0.5 * (big + big.T))
    keep = w > max(float(w.max()), 0.0) * 1e-12
    return np.sqrt(w[keep])[:, None] * v[:, keep].T


@dataclass
class Program:
    """One convex program (see the module's docstring); pressures [Pa], rises [K].

    Attributes:
        hot: the hotspots' ``M_j`` ``(M, M)``. goal_rows ``(G, M)``, goal_lo ``(G,)``,
        goal_theta ``(G,)``: the goal points. upper_rows ``(U, M)``, upper ``(U,)``: the
        bounded points. element_rows ``(N, M)``, amplitude_cap: the elements' drives [Pa]
        and their largest amplitude (None: no cap). power ``(M, M)``, power_cap [W]: the
        acoustic power's form and its cap (None: no cap). pressure_scale [Pa]: a typical
        pressure (the goal), temperature_scale [K]: a typical rise, for the solver.
        regularisation: ``eps`` in units of temperature_scale per ``|c|^2``.
    """

    hot: list[np.ndarray]
    goal_rows: np.ndarray
    goal_lo: np.ndarray
    goal_theta: np.ndarray
    upper_rows: np.ndarray
    upper: np.ndarray
    element_rows: np.ndarray
    amplitude_cap: float | None
    power: np.ndarray | None
    power_cap: float | None
    pressure_scale: float
    temperature_scale: float
    regularisation: float = 1e-4
    status: str = field(default="", init=False)


def _limits(prog: Program, x: Any, bounds: bool = True) -> list[Any]:
    """The constraints on ``x`` of the bounded points (unless not ``bounds``), the element
    amplitudes and the power."""
    import cvxpy as cp

    ps, cons = prog.pressure_scale, []
    cap = None if prog.amplitude_cap is None else np.full(len(prog.element_rows),
                                                           prog.amplitude_cap / ps)  # fmt: skip
    pairs = [(prog.upper_rows / ps, prog.upper / ps)] if bounds else []
    for rows, bound in (*pairs, (prog.element_rows / ps, cap)):
        if bound is not None and len(rows):
            a, b = _real_rows(rows)
            cons.append(cp.norm(cp.vstack([a @ x, b @ x]), 2, axis=0) <= bound)
    if prog.power is not None and prog.power_cap is not None:
        cons.append(cp.sum_squares(_real_factor(prog.power / prog.power_cap) @ x) <= 1)
    return cons


def reachable(prog: Program) -> float:
    """The largest fraction of every goal the element and power caps allow (heating and the
    bounded points aside)."""
    import cvxpy as cp

    m = prog.goal_rows.shape[1]
    x, f = cp.Variable(2 * m), cp.Variable()
    re, _ = _real_rows(np.exp(-1j * prog.goal_theta)[:, None] * prog.goal_rows)
    cons = [re @ x >= f * prog.goal_lo, *_limits(prog, x, bounds=False)]
    cp.Problem(cp.Maximize(f), cons).solve(solver=cp.CLARABEL)
    return float(f.value) if f.value is not None else 0.0


def _why(prog: Program) -> str:
    """Why no drive meets the goals: the caps, or the bounds on the pressure."""
    caps = reachable(prog)
    if caps < 1:
        return (f"the element amplitude and power caps allow at most {caps:.3g} of the focal "
                "pressure asked: raise them or ask less")  # fmt: skip
    return (
        "the bounds on the pressure (focus, -6 dB volume, side lobes, uniformity) cannot "
        "all hold at the focal pressure asked: loosen them or take more groups"
    )


def solve(prog: Program) -> tuple[np.ndarray, float]:
    """The optimal coefficients ``c`` ``(M,)`` and the peak rise ``t`` [K] the hotspots
    predict; a :class:`ProblemError` saying why when no drive meets the goals within the
    limits."""
    import cvxpy as cp

    m = prog.goal_rows.shape[1]
    x, t = cp.Variable(2 * m), cp.Variable()
    ps, ts = prog.pressure_scale, prog.temperature_scale
    cons = [cp.sum_squares(_real_factor(h / ts) @ x) <= t for h in prog.hot]
    re, im = _real_rows(np.exp(-1j * prog.goal_theta)[:, None] * prog.goal_rows / ps)
    cons += [re @ x >= prog.goal_lo / ps, *_limits(prog, x)]
    problem = cp.Problem(cp.Minimize(t + prog.regularisation * cp.sum_squares(x)), cons)
    with warnings.catch_warnings():  # an inaccurate solution: prog.status says so
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        try:
            problem.solve(solver=cp.CLARABEL)
        except cp.error.SolverError:  # a numerical failure of the interior point: another
            problem.solve(solver=cp.SCS, eps=1e-7, max_iters=200000)
    prog.status = str(problem.status)
    if problem.status not in ("optimal", "optimal_inaccurate") or x.value is None:
        raise ProblemError(f"no drive reaches the goal: {_why(prog)}")
    c = (x.value[:m] + 1j * x.value[m:]) * 1.0
    return c, float(t.value) * ts
