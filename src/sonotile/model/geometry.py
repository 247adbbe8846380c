"""Geometry helpers with k-Wave's names, argument order and conventions (numpy only).

Two families:

* On the grid (``make_disc``, ``make_ball``, ``make_circle``, ``make_sphere``, ``make_line``,
  ``make_arc``, ``make_bowl``): boolean masks of ``grid_size``; positions, radii and diameters
  in **grid points**, positions **1-based** as in k-Wave (a position component of 0 means the
  grid centre, ``N // 2 + 1``). Points of a shape that fall outside the grid are dropped (k-Wave
  wraps some shapes around instead).
* Cartesian point sets (``make_cart_*``): coordinates in **metres**, shape ``(D, N)`` (one
  column per point) in the grid's Cartesian frame, whose origin is the grid centre (k-Wave's
  ``kgrid.x_vec``: ``x_i = (i - Nx // 2) dx`` for 0-based ``i``). Use them as integration
  points of a :class:`sonotile.KWaveArray` element or as sensor positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from sonotile.model.problem import ProblemError

GOLDEN_ANGLE = np.pi * (3 - np.sqrt(5))  # [rad]

#: A 1-based grid position, one coordinate per axis (0: the grid centre along that axis).
GridPoint = Sequence[float] | np.ndarray


# --- helpers -------------------------------------------------------------------------------


def vector(name: str, v: ArrayLike, n: int) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.shape != (n,) or not np.all(np.isfinite(a)):
        raise ProblemError(f"{name}: expected {n} finite numbers, got {v!r}")
    return a


def positive(name: str, v: float) -> float:
    v = float(v)
    if not (np.isfinite(v) and v > 0):
        raise ProblemError(f"{name} = {v}: must be finite and > 0")
    return v


def _centre(grid_size: ArrayLike, pos: GridPoint, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Grid size as ints and a 1-based position (0 -> grid centre) as 0-based floats."""
    size = np.asarray(grid_size, dtype=np.int64).reshape(-1)
    p = vector(name, pos, size.size)
    p = np.where(p == 0, size // 2 + 1, p) - 1.0
    if np.any(p < 0) or np.any(p > size - 1):
        raise ProblemError(f"{name} = {tuple(pos)}: outside the grid {tuple(size)} (1-based)")
    return size, p


def _offsets(size: np.ndarray, centre: np.ndarray) -> list[np.ndarray]:
    """Per-axis offsets of every grid point from ``centre`` [grid points], broadcastable."""
    axes = [np.arange(n, dtype=np.float64) - c for n, c in zip(size, centre)]
    return list(np.meshgrid(*axes, indexing="ij", sparse=True))


def rotation_to(direction: ArrayLike) -> np.ndarray:
    """A rotation matrix ``(3, 3)`` taking the unit z axis to the unit vector of ``direction``."""
    d = np.asarray(direction, dtype=np.float64)
    d = d / np.linalg.norm(d)
    z = np.array([0.0, 0.0, 1.0])
    v, c = np.cross(z, d), float(z @ d)
    if np.linalg.norm(v) < 1e-12:
        return np.eye(3) if c > 0 else np.diag([1.0, -1.0, -1.0])
    vx = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + vx + vx @ vx / (1 + c)


def beam_axis(pos: np.ndarray, focus: np.ndarray, name: str) -> np.ndarray:
    d = focus - pos
    n = np.linalg.norm(d)
    if n == 0:
        raise ProblemError(f"{name}: focus_pos must differ from the element position")
    return d / n


# --- masks on the grid ---------------------------------------------------------------------


def make_disc(grid_size: ArrayLike, center: GridPoint, radius: float) -> np.ndarray:
    """Filled disc (k-Wave's ``makeDisc``): ``(Nx, Ny)`` bool, points within ``radius`` [grid
    points] of ``center`` (1-based grid position, 0 for the centre)."""
    size, c = _centre(grid_size, center, "center")
    if size.size != 2:
        raise ProblemError(f"grid_size = {tuple(size)}: make_disc is 2-D")
    x, y = _offsets(size, c)
    return x**2 + y**2 <= float(radius) ** 2


def make_ball(
    grid_size: ArrayLike, ball_center: GridPoint, radius: float, binary: bool = True
) -> np.ndarray:
    """Filled ball (k-Wave's ``makeBall``): ``(Nx, Ny, Nz)`` mask of the points within
    ``radius`` [grid points] of ``ball_center`` (1-based, 0 for the centre); bool when
    ``binary`` else 0/1 integers."""
    size, c = _centre(grid_size, ball_center, "ball_center")
    if size.size != 3:
        raise ProblemError(f"grid_size = {tuple(size)}: make_ball is 3-D")
    x, y, z = _offsets(size, c)
    m = x**2 + y**2 + z**2 <= float(radius) ** 2
    return m if binary else m.astype(np.int64)


def _shell(r: np.ndarray, radius: float) -> np.ndarray:
    """Points whose distance from the centre rounds to the radius: a shell one point thick."""
    return np.abs(r - radius) <= 0.5


def make_circle(
    grid_size: ArrayLike, center: GridPoint, radius: float, arc_angle: float | None = None
) -> np.ndarray:
    """Circle (or arc) one grid point thick (k-Wave's ``makeCircle``): ``(Nx, Ny)`` bool.

    Args:
        grid_size: ``(Nx, Ny)``.
        center: 1-based grid position (0 for the centre).
        radius: [grid points].
        arc_angle: keep only the arc from the -x direction turning towards +y by this angle
            [rad] (default: the whole circle).
    """
    size, c = _centre(grid_size, center, "center")
    if size.size != 2:
        raise ProblemError(f"grid_size = {tuple(size)}: make_circle is 2-D")
    x, y = _offsets(size, c)
    m = _shell(np.hypot(x, y), positive("radius", radius))
    if arc_angle is not None:
        theta = np.mod(np.arctan2(y, -x), 2 * np.pi)
        m &= theta <= float(arc_angle) + 1e-12
    return m


def make_sphere(grid_size: ArrayLike, radius: float, binary: bool = True) -> np.ndarray:
    """Spherical shell one grid point thick centred in the grid (k-Wave's ``makeSphere``):
    ``(Nx, Ny, Nz)`` mask, ``radius`` [grid points]."""
    size = np.asarray(grid_size, dtype=np.int64).reshape(-1)
    if size.size != 3:
        raise ProblemError(f"grid_size = {tuple(size)}: make_sphere is 3-D")
    x, y, z = _offsets(size, (size // 2).astype(float))
    m = _shell(np.sqrt(x**2 + y**2 + z**2), positive("radius", radius))
    return m if binary else m.astype(np.int64)


def make_line(
    grid_size: ArrayLike,
    startpoint: GridPoint,
    endpoint: GridPoint | None = None,
    angle: float | None = None,
    length: float | None = None,
) -> np.ndarray:
    """Straight line of grid points (k-Wave's ``makeLine``), 2-D or 3-D.

    Either ``endpoint`` or (2-D only) ``angle`` [rad, from the x axis towards y] and ``length``
    [grid points] are given. Points are 1-based grid positions; one point per step along the
    longest axis (a line without gaps). Returns a bool mask of ``grid_size``.
    """
    size, a = _centre(grid_size, startpoint, "startpoint")
    if endpoint is not None:
        _, b = _centre(grid_size, endpoint, "endpoint")
    elif angle is not None and length is not None and size.size == 2:
        b = a + float(length) * np.array([np.cos(angle), np.sin(angle)])
    else:
        raise ProblemError("make_line: give endpoint, or (2-D) angle and length")
    n = int(np.ceil(np.max(np.abs(b - a)))) + 1
    pts = np.rint(a[None, :] + np.linspace(0.0, 1.0, n)[:, None] * (b - a)[None, :]).astype(int)
    pts = pts[np.all((pts >= 0) & (pts < size), axis=1)]
    m = np.zeros(tuple(size), dtype=bool)
    m[tuple(pts.T)] = True
    return m


def _cap(
    grid_size: ArrayLike,
    pos: GridPoint,
    radius: float,
    diameter: float,
    focus_pos: ArrayLike,
    nd: int,
    name: str,
) -> np.ndarray:
    """Points of the sphere (circle) of ``radius`` through ``pos`` centred towards
    ``focus_pos``, within the cap of chord ``diameter`` (all in grid points)."""
    size, p = _centre(grid_size, pos, f"{name}_pos")
    if size.size != nd:
        raise ProblemError(f"grid_size = {tuple(size)}: expected {nd}-D")
    radius, diameter = positive("radius", radius), positive("diameter", diameter)
    if diameter > 2 * radius:
        raise ProblemError(f"diameter = {diameter}: exceeds twice the radius ({radius})")
    f = vector("focus_pos", focus_pos, nd)
    f = np.where(f == 0, size // 2 + 1, f) - 1.0
    axis = beam_axis(p, f, name)
    centre = p + radius * axis
    off = _offsets(size, centre)
    r = np.sqrt(sum(o**2 for o in off))
    cos_along = -sum(o * a for o, a in zip(off, axis)) / np.maximum(r, 1e-12)
    cos_max = np.sqrt(1 - (diameter / (2 * radius)) ** 2)
    return _shell(r, radius) & (cos_along >= cos_max - 1e-12)


def make_arc(
    grid_size: ArrayLike, arc_pos: GridPoint, radius: float, diameter: float, focus_pos: ArrayLike
) -> np.ndarray:
    """Arc one grid point thick (k-Wave's ``makeArc``): ``(Nx, Ny)`` bool.

    Args:
        arc_pos: 1-based grid position of the arc's midpoint (its rear surface).
        radius: radius of curvature [grid points].
        diameter: chord of the arc [grid points] (at most ``2 radius``).
        focus_pos: 1-based position of any point on the arc's axis (the side it faces).
    """
    return _cap(grid_size, arc_pos, radius, diameter, focus_pos, 2, "arc")


def make_bowl(
    grid_size: ArrayLike,
    bowl_pos: GridPoint,
    radius: float,
    diameter: float,
    focus_pos: ArrayLike,
    binary: bool = True,
) -> np.ndarray:
    """Spherical bowl one grid point thick (k-Wave's ``makeBowl``): ``(Nx, Ny, Nz)`` mask.

    The points whose distance from the centre of curvature is within half a grid point of
    ``radius``, inside the bowl's aperture (a staircase bowl; for an off-grid bowl without
    staircasing use :class:`sonotile.KWaveArray`). k-Wave's own voxelisation differs in detail.

    Args:
        bowl_pos: 1-based grid position of the bowl's apex (centre of its rear surface).
        radius: radius of curvature [grid points].
        diameter: aperture diameter [grid points] (at most ``2 radius``).
        focus_pos: 1-based position of any point on the beam axis.
        binary: bool mask, else 0/1 integers.
    """
    m = _cap(grid_size, bowl_pos, radius, diameter, focus_pos, 3, "bowl")
    return m if binary else m.astype(np.int64)


# --- Cartesian point sets ------------------------------------------------------------------


def make_cart_circle(
    radius: float,
    num_points: int,
    center_pos: ArrayLike = (0.0, 0.0),
    arc_angle: float = 2 * np.pi,
) -> np.ndarray:
    """``(2, num_points)`` points [m] evenly spaced on a circle or arc (k-Wave's
    ``makeCartCircle``): as k-Wave, the first at ``(0, -radius)`` from the centre, then
    clockwise by ``arc_angle / n`` (``n = num_points`` for a full circle, else
    ``num_points - 1``)."""
    radius = positive("radius", radius)
    c = vector("center_pos", center_pos, 2)
    full = np.isclose(arc_angle, 2 * np.pi)
    steps = num_points if full else max(num_points - 1, 1)
    a = np.arange(num_points) * float(arc_angle) / steps + np.pi / 2
    return np.stack([radius * np.cos(a), radius * np.sin(-a)]) + c[:, None]


def make_cart_sphere(
    radius: float, num_points: int, center_pos: ArrayLike = (0.0, 0.0, 0.0)
) -> np.ndarray:
    """``(3, num_points)`` points [m] spread evenly over a sphere by a golden-angle spiral
    (k-Wave's ``makeCartSphere``)."""
    radius = positive("radius", radius)
    c = vector("center_pos", center_pos, 3)
    k = np.arange(int(num_points))
    off = 2.0 / num_points
    y = k * off - 1 + off / 2
    r = np.sqrt(1 - y**2)
    phi = k * GOLDEN_ANGLE
    return radius * np.stack([np.cos(phi) * r, y, np.sin(phi) * r]) + c[:, None]


def spherical_segment_points(radius: float, cos_min: float, cos_max: float, n: int) -> np.ndarray:
    """``(3, n)`` points evenly spread (equal area each) over the zone of a sphere of ``radius``
    between polar angles ``acos(cos_max)`` and ``acos(cos_min)``, around the +z pole."""
    t = (np.arange(n) + 0.5) / n
    cos_v = cos_max - t * (cos_max - cos_min)
    sin_v = np.sqrt(np.maximum(1 - cos_v**2, 0))
    theta = np.arange(n) * GOLDEN_ANGLE
    return radius * np.stack([np.cos(theta) * sin_v, np.sin(theta) * sin_v, cos_v])


def make_cart_spherical_segment(
    bowl_pos: ArrayLike,
    radius: float,
    inner_diameter: float,
    outer_diameter: float,
    focus_pos: ArrayLike,
    num_points: int,
) -> np.ndarray:
    """``(3, num_points)`` points [m] evenly covering the annular zone of a bowl between apertures
    ``inner_diameter`` and ``outer_diameter`` [m] (k-Wave's ``makeCartSphericalSegment``);
    ``bowl_pos``, ``radius``, ``focus_pos`` as :func:`make_cart_bowl`."""
    pos, f = vector("bowl_pos", bowl_pos, 3), vector("focus_pos", focus_pos, 3)
    radius = positive("radius", radius)
    if not 0 <= inner_diameter < outer_diameter <= 2 * radius:
        raise ProblemError(
            f"diameters ({inner_diameter}, {outer_diameter}): need 0 <= inner < outer <= 2 radius"
        )
    axis = beam_axis(pos, f, "bowl")
    cos_in = np.sqrt(1 - (inner_diameter / (2 * radius)) ** 2)
    cos_out = np.sqrt(1 - (outer_diameter / (2 * radius)) ** 2)
    p0 = spherical_segment_points(radius, cos_out, cos_in, int(num_points))
    return rotation_to(-axis) @ p0 + (pos + radius * axis)[:, None]


def make_cart_bowl(
    bowl_pos: ArrayLike, radius: float, diameter: float, focus_pos: ArrayLike, num_points: int
) -> np.ndarray:
    """``(3, num_points)`` points [m] evenly covering a spherical bowl (k-Wave's
    ``makeCartBowl``; equal-area golden-angle spiral).

    Args:
        bowl_pos: ``(3,)`` apex of the bowl (centre of its rear surface) [m].
        radius: radius of curvature [m].
        diameter: aperture diameter [m] (at most ``2 radius``).
        focus_pos: ``(3,)`` any point on the beam axis [m].
        num_points: number of points.
    """
    return make_cart_spherical_segment(bowl_pos, radius, 0.0, diameter, focus_pos, num_points)


def make_cart_arc(
    arc_pos: ArrayLike, radius: float, diameter: float, focus_pos: ArrayLike, num_points: int
) -> np.ndarray:
    """``(2, num_points)`` points [m] evenly spaced along a 2-D arc (k-Wave's ``makeCartArc``).

    Args:
        arc_pos: ``(2,)`` midpoint of the arc (its rear surface) [m].
        radius: radius of curvature [m].
        diameter: chord [m] (at most ``2 radius``).
        focus_pos: ``(2,)`` any point on the arc's axis [m].
        num_points: number of points.
    """
    pos, f = vector("arc_pos", arc_pos, 2), vector("focus_pos", focus_pos, 2)
    radius, diameter = positive("radius", radius), positive("diameter", diameter)
    if diameter > 2 * radius:
        raise ProblemError(f"diameter = {diameter}: exceeds twice the radius ({radius})")
    axis = beam_axis(pos, f, "arc")
    half = np.arcsin(diameter / (2 * radius))
    phi = (np.arange(int(num_points)) + 0.5) / num_points * 2 * half - half
    back = -axis
    rot = np.stack([np.cos(phi) * back[0] - np.sin(phi) * back[1],
                    np.sin(phi) * back[0] + np.cos(phi) * back[1]])  # fmt: skip
    return (pos + radius * axis)[:, None] + radius * rot


def make_cart_disc(
    disc_pos: ArrayLike, radius: float, focus_pos: ArrayLike | None, num_points: int
) -> np.ndarray:
    """Points [m] evenly covering a disc (k-Wave's ``makeCartDisc``, sunflower pattern, equal
    area per point).

    Args:
        disc_pos: centre, ``(2,)`` for a disc in the plane or ``(3,)`` [m].
        radius: [m].
        focus_pos: ``(3,)`` any point on the disc's axis [m], or ``None`` for a disc in the
            x-y plane (normal +z); ignored in 2-D.
        num_points: number of points.

    Returns:
        ``(len(disc_pos), num_points)``.
    """
    pos = np.asarray(disc_pos, dtype=np.float64).reshape(-1)
    if pos.size not in (2, 3):
        raise ProblemError(f"disc_pos = {disc_pos!r}: expected 2 or 3 coordinates [m]")
    radius = positive("radius", radius)
    k = np.arange(int(num_points))
    r = radius * np.sqrt((k + 0.5) / num_points)
    p = np.stack([r * np.cos(k * GOLDEN_ANGLE), r * np.sin(k * GOLDEN_ANGLE)])
    if pos.size == 2:
        return p + pos[:, None]
    p = np.vstack([p, np.zeros(p.shape[1])])
    if focus_pos is not None:
        p = rotation_to(beam_axis(pos, vector("focus_pos", focus_pos, 3), "disc")) @ p
    return p + pos[:, None]


def euler_rotation(theta: ArrayLike) -> np.ndarray:
    """Rotation matrix for angles ``theta`` [deg]: a scalar (2-D, about z) -> ``(2, 2)``, or
    ``(ax, ay, az)`` (3-D: about x, then y, then z; ``Rz Ry Rx``) -> ``(3, 3)``."""
    t = np.radians(np.asarray(theta, dtype=np.float64).reshape(-1))

    def rz(a: float) -> np.ndarray:
        return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

    if t.size == 1:
        return rz(t[0])[:2, :2]
    if t.size != 3:
        raise ProblemError(f"theta = {theta!r}: expected one angle (2-D) or three (3-D) [deg]")
    cx, sx, cy, sy = np.cos(t[0]), np.sin(t[0]), np.cos(t[1]), np.sin(t[1])
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    return rz(t[2]) @ ry @ rx


def make_cart_rect(
    rect_pos: ArrayLike,
    Lx: float,  # noqa: N803
    Ly: float,  # noqa: N803
    theta: ArrayLike | None = None,
    num_points: int = 100,
) -> np.ndarray:
    """Points [m] evenly covering a rectangle (k-Wave's ``makeCartRect``), each the centre of an
    equal cell.

    Args:
        rect_pos: centre, ``(2,)`` or ``(3,)`` [m].
        Lx, Ly: side lengths [m] (in 2-D the rectangle is in the x-y plane of the grid; in 3-D
            it lies in the x-y plane before rotation).
        theta: rotation [deg]: a scalar in 2-D, ``(ax, ay, az)`` in 3-D (see
            :func:`euler_rotation`); ``None`` for none.
        num_points: approximate number of points (rounded up to a full lattice).

    Returns:
        ``(len(rect_pos), N)``.
    """
    pos = np.asarray(rect_pos, dtype=np.float64).reshape(-1)
    if pos.size not in (2, 3):
        raise ProblemError(f"rect_pos = {rect_pos!r}: expected 2 or 3 coordinates [m]")
    lx, ly = positive("Lx", Lx), positive("Ly", Ly)
    nx = max(int(np.ceil(np.sqrt(num_points * lx / ly))), 1)
    ny = max(int(np.ceil(num_points / nx)), 1)
    gx = (np.arange(nx) + 0.5) / nx * lx - lx / 2
    gy = (np.arange(ny) + 0.5) / ny * ly - ly / 2
    x, y = np.meshgrid(gx, gy, indexing="ij")
    p = np.stack([x.ravel(), y.ravel()])
    if pos.size == 3:
        p = np.vstack([p, np.zeros(p.shape[1])])
    if theta is not None:
        p = euler_rotation(theta) @ p
    return p + pos[:, None]


# --- analytic fields of focused bowls (O'Neil 1949) -----------------------------------------


def focused_annulus_oneil(
    radius: float, diameters: ArrayLike, velocities: Iterable[float], phases: Iterable[float],
    frequency: float, sound_speed: float, density: float, axial_positions: ArrayLike,
) -> np.ndarray:  # fmt: skip
    """Complex on-axis pressure [Pa] of annuli of one spherical bowl (O'Neil's solution).

    Each zone between apertures ``(inner, outer)`` [m] vibrates with normal velocity
    ``velocities[i] sin(w t + phases[i])`` [m/s, rad]; the field is the phasor ``P`` with
    ``p(t) = Im(P exp(i w t))``.

    Args:
        radius: radius of curvature [m].
        diameters: ``(N, 2)`` inner and outer aperture diameters [m] (inner 0: a bowl).
        velocities: ``(N,)`` normal velocity amplitudes [m/s].
        phases: ``(N,)`` [rad].
        frequency: [Hz].
        sound_speed: [m/s].
        density: [kg/m^3].
        axial_positions: distances from the bowl's apex along its axis [m].
    """
    k = 2 * np.pi * frequency / sound_speed
    z = np.asarray(axial_positions, dtype=np.float64)
    near = np.abs(1 - z / radius) < 1e-9
    lead = np.where(near, 0.5, 1 - z / radius)
    total = np.zeros(z.shape, dtype=complex)
    for (inner, outer), u, ph in zip(np.reshape(diameters, (-1, 2)), velocities, phases):
        rims = []
        for d in (inner, outer):
            h = radius - np.sqrt(radius**2 - (d / 2) ** 2)
            rims.append((np.sqrt((z - h) ** 2 + (d / 2) ** 2), (radius - h) / radius))
        (r1, c1), (r2, c2) = rims
        field = (np.exp(-1j * k * r1) - np.exp(-1j * k * r2)) / lead
        at_focus = 1j * k * radius * np.exp(-1j * k * radius) * (c1 - c2)
        total += density * sound_speed * u * np.exp(1j * ph) * np.where(near, at_focus, field)
    return total


def focused_bowl_oneil(
    radius: float, diameter: float, velocity: float, frequency: float, sound_speed: float,
    density: float, axial_positions: ArrayLike | None = None,
    lateral_positions: ArrayLike | None = None,
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]:  # fmt: skip
    """O'Neil's amplitude [Pa] of a bowl with uniform normal velocity ``velocity`` [m/s]:
    on its axis (``axial_positions`` [m] from the apex) and across the geometric focus
    (``lateral_positions`` [m] from the axis; ``p_focus |2 J1(v) / v|``, ``v = k a r / R``).

    Returns:
        ``(p_axial, p_lateral, p_axial_complex)`` (``None`` where positions were not given).
    """
    from scipy.special import j1

    p_ax = p_lat = p_c = None
    if axial_positions is not None:
        p_c = focused_annulus_oneil(
            radius, [(0.0, diameter)], [velocity], [0.0], frequency, sound_speed, density,
            axial_positions,
        )  # fmt: skip
        p_ax = np.abs(p_c)
    if lateral_positions is not None:
        k = 2 * np.pi * frequency / sound_speed
        h = radius - np.sqrt(radius**2 - (diameter / 2) ** 2)
        v = k * (diameter / 2) * np.asarray(lateral_positions, dtype=np.float64) / radius
        safe = np.where(v == 0, 1.0, v)
        p_lat = (
            density
            * sound_speed
            * velocity
            * k
            * h
            * np.abs(np.where(v == 0, 1.0, 2 * j1(safe) / safe))
        )
    return p_ax, p_lat, p_c


__all__ = [
    "make_disc", "make_ball", "make_circle", "make_sphere", "make_line", "make_arc", "make_bowl",
    "make_cart_circle", "make_cart_sphere", "make_cart_bowl", "make_cart_arc", "make_cart_disc",
    "make_cart_rect", "make_cart_spherical_segment", "focused_bowl_oneil", "focused_annulus_oneil",
]  # fmt: skip
