"""Off-grid transducer arrays: k-Wave's ``kWaveArray`` (numpy only).

An element (bowl, annulus, disc, rectangle, arc, line or a custom point set) is sampled by
``ceil(upsampling_rate * m)`` integration points, ``m`` its length/area/volume in grid units.
Each integration point is spread onto the grid by its band-limited interpolant (a product of
sincs, one per axis; Wise, Cox, Jaros & Treeby, JASA 146:278, 2019), truncated where it falls
below ``bli_tolerance`` (k-Wave's "star" stencil: offsets ``|i j k| <= ceil(1 / (pi tol))``
about the nearest grid point), and weighted by ``m / n_points``. The weights of all points
make the element's grid weights; their non-zero points make its mask.

A source built this way goes through the ordinary mask path, as in k-wave-python::

    source = KSource(p_mask=karray.get_array_binary_mask(kgrid),
                     p=karray.get_distributed_source_signal(kgrid, signals))

and recorded grid data combine back to one signal per element with
:meth:`KWaveArray.combine_sensor_data`. Mask points are in k-Wave's order (column-major, x
fastest), the order :mod:`sonotile.api` uses for masks. Cartesian coordinates are those of
:mod:`sonotile.model.geometry` (origin at the grid centre).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model import geometry as geo
from sonotile.model.bli import star_offsets as star_stencil
from sonotile.model.problem import ProblemError

CHUNK = 1 << 21  # stencil entries handled at once (bounds temporary memory)


class GridLike(Protocol):
    """What the array reads of a grid (:class:`sonotile.KWaveGrid`, a model ``Grid``)."""

    @property
    def shape(self) -> Sequence[int]: ...

    @property
    def spacing(self) -> float | Sequence[float]: ...


@dataclass(frozen=True)
class Element:
    """One array element: its kind, measure and how to sample it.

    Attributes:
        kind: ``"bowl"``, ``"annulus"``, ``"disc"``, ``"rect"``, ``"arc"``, ``"line"``,
            ``"custom"``.
        dim: dimension of the measure (1: length, 2: area, 3: volume).
        measure: length [m], area [m^2] or volume [m^3].
        params: the geometry (positions [m], sizes [m], angles [deg]).
        points: integration points ``(D, N)`` [m] of a custom element.
    """

    kind: str
    dim: int
    measure: float
    params: dict[str, Any] = field(default_factory=dict)
    points: np.ndarray | None = None

    def sample(self, n: int) -> np.ndarray:
        """``(D, n)`` integration points [m] evenly covering the element."""
        p = self.params
        if self.kind == "custom":
            assert self.points is not None  # a custom element has its points
            return self.points
        if self.kind in ("bowl", "annulus"):
            return geo.make_cart_spherical_segment(
                p["position"], p["radius"], p["inner"], p["outer"], p["focus_pos"], n
            )
        if self.kind == "disc":
            return geo.make_cart_disc(p["position"], p["diameter"] / 2, p["focus_pos"], n)
        if self.kind == "rect":
            return geo.make_cart_rect(p["position"], p["Lx"], p["Ly"], p["theta"], n)
        if self.kind == "arc":
            return geo.make_cart_arc(p["position"], p["radius"], p["diameter"], p["focus_pos"], n)
        a, b = p["start"], p["end"]
        t = (np.arange(n) + 0.5) / n
        return a[:, None] + (b - a)[:, None] * t[None, :]


def _cap_area(radius: float, diameter: float) -> float:
    """Area of a spherical cap of ``radius`` and aperture ``diameter`` [m^2]."""
    return 2 * np.pi * radius**2 * (1 - np.sqrt(1 - (diameter / (2 * radius)) ** 2))


def grid_info(kgrid: GridLike) -> tuple[tuple[int, ...], float]:
    """``(shape, dx)`` of a grid with equal spacing on every axis (k-Wave's assumption)."""
    shape = tuple(int(n) for n in kgrid.shape)
    d = np.atleast_1d(np.asarray(kgrid.spacing, dtype=np.float64))
    if d.size == 1:
        d = np.repeat(d, len(shape))
    if not np.allclose(d, d[0], rtol=1e-9):
        raise ProblemError(f"kgrid.spacing = {tuple(d)}: KWaveArray needs equal spacing per axis")
    return shape, float(d[0])


def bli_weights(
    points: np.ndarray, scale: np.ndarray, shape: tuple[int, ...], dx: float, tol: float
) -> np.ndarray:
    """Grid weights: the sum of ``scale_i`` times the truncated band-limited interpolant
    (product of sincs) centred on each point.

    Args:
        points: ``(D, N)`` Cartesian positions [m] (origin at the grid centre).
        scale: ``(N,)`` weight of each point.
        shape: grid shape ``(Nx[, Ny[, Nz]])``.
        dx: grid spacing [m].
        tol: BLI truncation tolerance (0 < tol < 1).

    Returns:
        grid-shaped float64 weights.
    """
    nd = len(shape)
    size = math.prod(shape)
    stencil = star_stencil(nd, tol)
    centre = np.array([n // 2 for n in shape], dtype=np.float64)
    u = points.T / dx + centre  # continuous 0-based indices (N, D)
    near = np.rint(u)
    frac = u - near
    frac[np.abs(frac) < 1e-3] = 0.0  # on the grid along that axis: a Kronecker delta there
    k = int(np.abs(stencil).max())
    offs = np.arange(-k, k + 1)
    # per-axis interpolant values (N, 2K+1, D); exactly 1/0 along axes where a point is on the grid
    d = offs[None, :, None] - frac[:, None, :]
    table = np.where(frac[:, None, :] == 0, d == 0, np.sinc(d)) * 1.0
    out = np.zeros(size)
    step = max(1, CHUNK // len(stencil))
    hi = np.array(shape)
    cols = stencil + k
    for s in range(0, u.shape[0], step):
        idx = near[s : s + step, None, :].astype(np.int64) + stencil[None, :, :]
        w = scale[s : s + step, None] * table[s : s + step, cols[:, 0], 0]
        for a in range(1, nd):
            w = w * table[s : s + step, cols[:, a], a]
        ok = np.all((idx >= 0) & (idx < hi), axis=2) & (w != 0)
        flat = np.ravel_multi_index(tuple(idx[ok].T), shape)
        out += np.bincount(flat, weights=w[ok], minlength=size)
    return out.reshape(shape)


class KWaveArray:
    """An array of off-grid elements (k-Wave's ``kWaveArray``).

    Args:
        bli_tolerance: truncation of each band-limited interpolant (k-Wave's default 0.05;
            smaller is more accurate and gives larger masks).
        upsampling_rate: integration points per grid point of element length/area/volume
            (k-Wave's default 10).
        single_precision: return float32 signals and weights.
        axisymmetric: weights for an axisymmetric grid (k-Wave's ``'Axisymmetric', true``):
            2-D elements in (axial x, radial y) coordinates with y = 0 on the grid's first row
            along y; each point's interpolant is laid on a grid continued to negative y and the
            half y >= 0 kept, so that elements crossing the axis (an arc for a bowl) are whole.
    """

    def __init__(
        self,
        bli_tolerance: float = 0.05,
        upsampling_rate: float = 10,
        single_precision: bool = False,
        axisymmetric: bool = False,
    ) -> None:
        if not 0 < float(bli_tolerance) < 1:
            raise ProblemError(f"bli_tolerance = {bli_tolerance}: must be in (0, 1)")
        if not float(upsampling_rate) > 0:
            raise ProblemError(f"upsampling_rate = {upsampling_rate}: must be > 0")
        self.bli_tolerance = float(bli_tolerance)
        self.upsampling_rate = float(upsampling_rate)
        self.single_precision = bool(single_precision)
        self.axisymmetric = bool(axisymmetric)
        self.elements: list[Element] = []
        self.dim: int | None = None
        self._cache: dict[tuple[tuple[int, ...], float, int], np.ndarray] = {}

    # --- elements ------------------------------------------------------------------------

    def _add(self, element: Element, ndim: int) -> None:
        if self.dim is not None and ndim != self.dim:
            raise ProblemError(f"a {ndim}-D element added to a {self.dim}-D array")
        self.dim = ndim
        self.elements.append(element)
        self._cache.clear()

    @property
    def number_elements(self) -> int:
        return len(self.elements)

    def add_bowl_element(
        self, position: ArrayLike, radius: float, diameter: float, focus_pos: ArrayLike
    ) -> None:
        """A focused bowl (3-D): apex ``position`` (3,) [m], radius of curvature [m],
        aperture ``diameter`` [m], ``focus_pos`` (3,) any point on its axis [m]."""
        self.add_annular_element(position, radius, (0.0, diameter), focus_pos, kind="bowl")

    def add_annular_element(
        self,
        position: ArrayLike,
        radius: float,
        diameters: Iterable[float],
        focus_pos: ArrayLike,
        kind: str = "annulus",
    ) -> None:
        """One annulus of a spherical bowl (3-D): ``diameters = (inner, outer)`` apertures [m];
        the other arguments as :meth:`add_bowl_element`."""
        pos, f = geo.vector("position", position, 3), geo.vector("focus_pos", focus_pos, 3)
        inner, outer = (float(d) for d in diameters)
        radius = geo.positive("radius", radius)
        if not 0 <= inner < outer <= 2 * radius:
            raise ProblemError(f"diameters = {diameters}: need 0 <= inner < outer <= 2 radius")
        geo.beam_axis(pos, f, kind)
        area = _cap_area(radius, outer) - (_cap_area(radius, inner) if inner > 0 else 0.0)
        params = dict(position=pos, radius=radius, inner=inner, outer=outer, focus_pos=f)
        self._add(Element(kind, 2, area, params), 3)

    def add_annular_array(
        self,
        position: ArrayLike,
        radius: float,
        diameters: Iterable[Iterable[float]],
        focus_pos: ArrayLike,
    ) -> None:
        """Annuli of one bowl: ``diameters`` a sequence of ``(inner, outer)`` pairs [m]."""
        for d in diameters:
            self.add_annular_element(position, radius, d, focus_pos)

    def add_disc_element(
        self, position: ArrayLike, diameter: float, focus_pos: ArrayLike | None = None
    ) -> None:
        """A flat disc: centre ``position`` (2,) or (3,) [m], ``diameter`` [m]; in 3-D
        ``focus_pos`` (3,) is any point on its axis (``None``: normal along z). In 2-D the
        element is the filled disc (an area)."""
        pos = np.asarray(position, dtype=np.float64).reshape(-1)
        if pos.size not in (2, 3):
            raise ProblemError(f"position = {position!r}: expected 2 or 3 coordinates [m]")
        d = geo.positive("diameter", diameter)
        f = None if focus_pos is None or pos.size == 2 else geo.vector("focus_pos", focus_pos, 3)
        params = dict(position=pos, diameter=d, focus_pos=f)
        self._add(Element("disc", 2, np.pi * d**2 / 4, params), pos.size)

    def add_rect_element(
        self,
        position: ArrayLike,
        Lx: float,  # noqa: N803
        Ly: float,  # noqa: N803
        theta: ArrayLike | None = None,
    ) -> None:
        """A rectangle: centre ``position`` [m], sides ``Lx``, ``Ly`` [m], rotation ``theta``
        [deg] (scalar in 2-D, ``(ax, ay, az)`` in 3-D; see ``geometry.euler_rotation``)."""
        pos = np.asarray(position, dtype=np.float64).reshape(-1)
        if pos.size not in (2, 3):
            raise ProblemError(f"position = {position!r}: expected 2 or 3 coordinates [m]")
        lx, ly = geo.positive("Lx", Lx), geo.positive("Ly", Ly)
        params = dict(position=pos, Lx=lx, Ly=ly, theta=theta)
        self._add(Element("rect", 2, lx * ly, params), pos.size)

    def add_arc_element(
        self, position: ArrayLike, radius: float, diameter: float, focus_pos: ArrayLike
    ) -> None:
        """A 2-D arc: midpoint ``position`` (2,) [m], radius of curvature [m], chord
        ``diameter`` [m], ``focus_pos`` (2,) any point on its axis [m]."""
        pos, f = geo.vector("position", position, 2), geo.vector("focus_pos", focus_pos, 2)
        radius, d = geo.positive("radius", radius), geo.positive("diameter", diameter)
        if d > 2 * radius:
            raise ProblemError(f"diameter = {d}: exceeds twice the radius ({radius})")
        geo.beam_axis(pos, f, "arc")
        length = 2 * radius * np.arcsin(d / (2 * radius))
        params = dict(position=pos, radius=radius, diameter=d, focus_pos=f)
        self._add(Element("arc", 1, length, params), 2)

    def add_line_element(self, start_point: ArrayLike, end_point: ArrayLike) -> None:
        """A straight line from ``start_point`` to ``end_point`` (1-, 2- or 3-D) [m]."""
        a = np.asarray(start_point, dtype=np.float64).reshape(-1)
        b = np.asarray(end_point, dtype=np.float64).reshape(-1)
        if a.shape != b.shape or a.size not in (1, 2, 3) or np.allclose(a, b):
            raise ProblemError("add_line_element: two distinct points of 1-3 coordinates [m]")
        length = float(np.linalg.norm(b - a))
        self._add(Element("line", 1, length, dict(start=a, end=b)), a.size)

    def add_custom_element(
        self, integration_points: ArrayLike, measure: float, element_dim: int, label: str = ""
    ) -> None:
        """An element given by its own integration points ``(D, N)`` [m], its ``measure``
        (length [m], area [m^2] or volume [m^3]) and ``element_dim`` (1, 2 or 3)."""
        p = np.asarray(integration_points, dtype=np.float64)
        if p.ndim != 2 or p.shape[0] not in (1, 2, 3) or p.shape[1] == 0:
            raise ProblemError(f"integration_points: expected (D, N) with D <= 3, got {p.shape}")
        if int(element_dim) not in (1, 2, 3) or int(element_dim) > p.shape[0]:
            raise ProblemError(f"element_dim = {element_dim}: must be 1..{p.shape[0]}")
        m = geo.positive("measure", measure)
        self._add(Element("custom", int(element_dim), m, dict(label=label), p), p.shape[0])

    def remove_element(self, element_num: int) -> None:
        """Remove element ``element_num`` (0-based)."""
        del self.elements[element_num]
        self._cache.clear()

    # --- grid weights and masks ----------------------------------------------------------

    def _check(self, kgrid: GridLike) -> tuple[tuple[int, ...], float]:
        if not self.elements:
            raise ProblemError("KWaveArray: no elements added")
        shape, dx = grid_info(kgrid)
        if len(shape) != self.dim:
            raise ProblemError(f"kgrid is {len(shape)}-D, the array's elements are {self.dim}-D")
        if self.axisymmetric and len(shape) != 2:
            raise ProblemError(f"KWaveArray(axisymmetric=True) needs a 2-D kgrid, got {shape}")
        return shape, dx

    def get_element_grid_weights(self, kgrid: GridLike, element_num: int) -> np.ndarray:
        """Grid-shaped weights of one element (0-based ``element_num``)."""
        shape, dx = self._check(kgrid)
        key = (shape, dx, element_num)
        if key not in self._cache:
            el = self.elements[element_num]
            m_grid = el.measure / dx**el.dim
            if el.kind == "custom":
                assert el.points is not None  # a custom element has its points
                n = el.points.shape[1]
            else:
                n = int(np.ceil(m_grid * self.upsampling_rate))
            pts = el.sample(n)
            scale = np.full(pts.shape[1], m_grid / pts.shape[1])
            if self.axisymmetric:  # y = 0 at index Ny of a grid twice as wide: keep y >= 0
                nx, ny = shape
                w = bli_weights(pts, scale, (nx, 2 * ny), dx, self.bli_tolerance)[:, ny:]
            else:
                w = bli_weights(pts, scale, shape, dx, self.bli_tolerance)
            self._cache[key] = w.astype(np.float32) if self.single_precision else w
        return self._cache[key]

    def get_element_binary_mask(self, kgrid: GridLike, element_num: int) -> np.ndarray:
        """Grid points where the element's weights are non-zero (bool, grid-shaped)."""
        return self.get_element_grid_weights(kgrid, element_num) != 0

    def get_array_grid_weights(self, kgrid: GridLike) -> np.ndarray:
        """Sum of all elements' grid weights (grid-shaped)."""
        total = np.zeros(tuple(kgrid.shape))
        for i in range(self.number_elements):
            total = total + self.get_element_grid_weights(kgrid, i)
        return total

    def get_array_binary_mask(self, kgrid: GridLike) -> np.ndarray:
        """Union of the elements' masks: the source or sensor mask of the array (bool)."""
        m = np.zeros(self._check(kgrid)[0], dtype=bool)
        for i in range(self.number_elements):
            m |= self.get_element_binary_mask(kgrid, i)
        return m

    def _mask_index(self, kgrid: GridLike) -> np.ndarray:
        """Linear (column-major) indices of the array mask, in k-Wave's point order."""
        return np.flatnonzero(self.get_array_binary_mask(kgrid).ravel(order="F"))

    def get_distributed_source_signal(
        self, kgrid: GridLike, source_signal: ArrayLike
    ) -> np.ndarray:
        """Per-mask-point signals from per-element signals.

        Args:
            kgrid: the grid (``shape``, ``spacing``).
            source_signal: ``(n_elements, Nt)`` (or ``(Nt,)`` for one element), in the units
                of the source (e.g. [Pa] for ``p``).

        Returns:
            ``(n_mask_points, Nt)``: each point's weighted sum of the element signals, rows in
            the order of :meth:`get_array_binary_mask`'s points (column-major).
        """
        sig = np.atleast_2d(np.asarray(source_signal, dtype=np.float64))
        if sig.ndim != 2 or sig.shape[0] != self.number_elements:
            raise ProblemError(
                f"source_signal: shape {np.shape(source_signal)}, expected "
                f"({self.number_elements}, Nt)"
            )
        lin = self._mask_index(kgrid)
        out = np.zeros((lin.size, sig.shape[1]))
        for i in range(self.number_elements):
            w = self.get_element_grid_weights(kgrid, i).ravel(order="F")[lin]
            nz = w != 0
            out[nz] += w[nz, None] * sig[i][None, :]
        return out.astype(np.float32) if self.single_precision else out

    def combine_sensor_data(self, kgrid: GridLike, sensor_data: ArrayLike) -> np.ndarray:
        """One signal per element from data recorded on the array mask.

        Args:
            sensor_data: ``(n_mask_points, Nt)`` recorded on :meth:`get_array_binary_mask`
                (rows in its column-major order), e.g. ``simulate(...)["p"]``.

        Returns:
            ``(n_elements, Nt)``: per element the weighted sum of the points, divided by the
            element's measure in grid units (an average over its surface).
        """
        data = np.asarray(sensor_data)
        lin = self._mask_index(kgrid)
        if data.ndim != 2 or data.shape[0] != lin.size:
            raise ProblemError(
                f"sensor_data: shape {data.shape}, expected ({lin.size}, Nt) on the array mask"
            )
        _, dx = grid_info(kgrid)
        out = np.zeros((self.number_elements, data.shape[1]))
        for i, el in enumerate(self.elements):
            w = self.get_element_grid_weights(kgrid, i).ravel(order="F")[lin]
            out[i] = w @ data / (el.measure / dx**el.dim)
        return out


__all__ = ["KWaveArray", "Element", "bli_weights", "star_stencil"]
