"""Photoacoustic reconstruction, k-Wave's way: the FFT-based reconstructions for a line or plane
detector (k-Wave's ``kspaceLineRecon`` / ``kspacePlaneRecon``) and time reversal (k-Wave's
``sensor.time_reversal_boundary_data``; k-wave-python's ``TimeReversal``).

FFT reconstruction (Köstli et al. 2001; Xu, Feng and Wang 2002): the data ``p(t, y[, z])``
recorded on the plane ``x = 0`` is mirrored in time (``t -> -t``), transformed to
``(w, ky[, kz])``, scaled by ``c^2 sqrt(w^2/c^2 - ky^2 - kz^2) / (2 w)`` (evanescent
components set to zero), mapped from the temporal frequency ``w`` to the depth wavenumber
``kx`` by ``w = c sqrt(kx^2 + ky^2 + kz^2)`` (nearest or linear interpolation along ``w``) and
transformed back; the half ``x >= 0`` times ``4 / c`` is the initial pressure. Depth is sampled
at ``c dt``, the lateral axes at the sensor spacing. Given jax arrays, the reconstructions are
JAX functions of the data (``jit``, ``grad``).

Time reversal: the recorded pressure is enforced in reversed time order as a Dirichlet pressure
source on the sensor points, through :func:`~sonotile.api.simulate` (any decomposition), and the
final pressure field is the reconstruction of ``p0``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from sonotile.api.elastic.reversal import stress_source
from sonotile.api.reversal import reversed_source, sensor_grid_points
from sonotile.api.types import (
    ElasticSource,
    KSensor,
    KSource,
    KWaveElasticMedium,
    KWaveGrid,
    KWaveMedium,
    model_of,
)

#: interpolation along the temporal frequency (k-Wave's ``'*nearest'`` / ``'*linear'``)
INTERPOLATIONS = ("nearest", "linear")


def kspace_line_recon(
    p: ArrayLike,
    dy: float,
    dt: float,
    c: float,
    *,
    data_order: str = "ty",
    interp: str = "nearest",
    pos_cond: bool = False,
) -> Any:
    """Initial pressure from data on a line detector (k-Wave's ``kspaceLineRecon``, 2-D).

    Args:
        p: pressure ``(Nt, Ny)`` [Pa] recorded on the line ``x = 0`` at ``Ny`` equally spaced
            points, the first sample at ``t = 0``; ``(Ny, Nt)`` with ``data_order="yt"`` (the
            layout of ``simulate``'s ``res["p"]`` for a line mask).
        dy: sensor spacing [m].
        dt: sampling interval [s].
        c: sound speed [m/s] (homogeneous medium).
        data_order: ``"ty"`` or ``"yt"``.
        interp: ``"nearest"`` (k-Wave's default) or ``"linear"``.
        pos_cond: set negative values to zero.

    Returns:
        ``p0`` ``(Nt, Ny)`` [Pa]: row ``i`` at depth ``i c dt`` [m] from the line, column ``j``
        under sensor ``j``; a numpy array, or a jax array for jax input.
    """
    if data_order not in ("ty", "yt"):
        raise ValueError(f"data_order = {data_order!r}: expected 'ty' or 'yt'")
    arr = _array(p, 2, "p", "(Nt, Ny)" if data_order == "ty" else "(Ny, Nt)")
    if data_order == "yt":
        arr = arr.T
    return _planar_recon(arr, (dy,), dt, c, interp, pos_cond)


def kspace_plane_recon(
    p: ArrayLike,
    dy: float,
    dz: float,
    dt: float,
    c: float,
    *,
    data_order: str = "tyz",
    interp: str = "nearest",
    pos_cond: bool = False,
) -> Any:
    """Initial pressure from data on a plane detector (k-Wave's ``kspacePlaneRecon``, 3-D).

    Args:
        p: pressure ``(Nt, Ny, Nz)`` [Pa] recorded on the plane ``x = 0`` at ``Ny x Nz``
            equally spaced points, the first sample at ``t = 0``; ``(Ny, Nz, Nt)`` with
            ``data_order="yzt"`` (``res["p"].reshape(Ny, Nz, Nt, order="F")`` for a plane mask,
            whose points ``simulate`` orders y fastest).
        dy, dz: sensor spacings [m].
        dt: sampling interval [s].
        c: sound speed [m/s] (homogeneous medium).
        data_order: ``"tyz"`` or ``"yzt"``.
        interp: ``"nearest"`` (k-Wave's default) or ``"linear"``.
        pos_cond: set negative values to zero.

    Returns:
        ``p0`` ``(Nt, Ny, Nz)`` [Pa], row ``i`` at depth ``i c dt`` [m] from the plane.
    """
    if data_order not in ("tyz", "yzt"):
        raise ValueError(f"data_order = {data_order!r}: expected 'tyz' or 'yzt'")
    arr = _array(p, 3, "p", "(Nt, Ny, Nz)" if data_order == "tyz" else "(Ny, Nz, Nt)")
    if data_order == "yzt":
        arr = arr.transpose(2, 0, 1)
    return _planar_recon(arr, (dy, dz), dt, c, interp, pos_cond)


def _array(p: ArrayLike, ndim: int, name: str, layout: str) -> Any:
    """``p`` as a numpy array (float64) or, for jax input, as it is; finite and ``ndim``-D."""
    jax = sys.modules.get("jax")
    arr = p if jax is not None and isinstance(p, jax.Array) else np.asarray(p, np.float64)
    if arr.ndim != ndim:
        raise ValueError(f"{name}: shape {tuple(arr.shape)}, expected {layout}")
    if min(arr.shape) < 2:
        raise ValueError(f"{name}: shape {tuple(arr.shape)}: at least 2 samples per axis")
    if isinstance(arr, np.ndarray) and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}: contains NaN or Inf")
    return arr


def _positive(name: str, v: float) -> float:
    """A finite positive scalar, or a ValueError naming it."""
    if np.ndim(v) != 0 or not np.isfinite(v) or float(v) <= 0:
        raise ValueError(f"{name} = {v!r}: expected a finite number > 0")
    return float(v)


def _planar_recon(
    p: Any, spacing: tuple[float, ...], dt: float, c: float, interp: str, pos_cond: bool
) -> Any:
    """The reconstruction of ``p`` ``(Nt, N1[, N2])`` (time first) from the plane ``x = 0``."""
    names = ("dy", "dz")[: len(spacing)]
    spacing = tuple(_positive(n, d) for n, d in zip(names, spacing))
    dt, c = _positive("dt", dt), _positive("c", c)
    interp = interp.lstrip("*")  # k-Wave's '*nearest' / '*linear' spellings too
    if interp not in INTERPOLATIONS:
        raise ValueError(f"interp = {interp!r}: expected one of {list(INTERPOLATIONS)}")
    xp: Any = np
    if not isinstance(p, np.ndarray):
        import jax.numpy as xp
    nt = p.shape[0]
    full = xp.concatenate([xp.flip(p, axis=0), p[1:]], axis=0)  # t -> -t mirror, (2 Nt - 1)
    axes = tuple(range(full.ndim))
    spec = xp.fft.fftshift(xp.fft.fftn(xp.fft.ifftshift(full, axes), axes=axes), axes)
    idx, wts = _frequency_map(full.shape, spacing, dt, c, interp)
    mapped = sum(
        xp.asarray(w, dtype=spec.real.dtype) * xp.take_along_axis(spec, xp.asarray(i), axis=0)
        for i, w in zip(idx, wts)
    )
    out = xp.real(xp.fft.fftshift(xp.fft.ifftn(xp.fft.ifftshift(mapped, axes), axes=axes), axes))
    out = out[nt - 1 :] * (4.0 / c)
    return xp.maximum(out, 0) if pos_cond else out


def _wavenumbers(n: int, d: float) -> np.ndarray:
    """k-Wave's ``kWaveGrid`` wavenumbers [rad/m] of ``n`` points at spacing ``d`` [m], zero at
    index ``n // 2``, computed as k-Wave computes them (``2 pi / d * m / n``)."""
    return (2 * np.pi / d) * (np.arange(-(n // 2), n - n // 2) / n)


def _frequency_map(
    shape: tuple[int, ...], spacing: tuple[float, ...], dt: float, c: float, interp: str
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Gather indices along the temporal-frequency axis and their weights (the factor
    ``c^2 kx / (2 w)``, the evanescent cut and the interpolation ``w -> c |k|`` in one), so that
    ``mapped = sum(w * take_along_axis(spectrum, i, 0))`` on k-Wave's shifted grids. The grids
    are computed in k-Wave's order of operations, so that nearest-neighbour ties (queries exactly
    half-way, which occur) fall as they do in k-Wave."""
    n_w, nd = shape[0], len(shape) - 1
    kx = _wavenumbers(n_w, dt * c)  # the time axis as depth: kgrid.kx
    w_vec = c * kx  # temporal frequency [rad/s]
    lat = [_wavenumbers(n, d).reshape((1,) * (a + 1) + (-1,) + (1,) * (nd - a - 1))
           for a, (n, d) in enumerate(zip(shape[1:], spacing))]  # fmt: skip
    w = w_vec.reshape((-1,) + (1,) * nd)
    k2 = (w / c) ** 2  # (w/c)^2 - ky^2 [- kz^2]
    for k in lat:
        k2 = k2 - k**2
    k_lat = np.sqrt(sum(k**2 for k in lat))
    evanescent = np.abs(w) < c * k_lat
    with np.errstate(divide="ignore", invalid="ignore"):
        sf = c**2 * np.sqrt(np.maximum(k2, 0)) / (2 * w)
    sf = np.where((w == 0) & (k_lat == 0), c / 2, sf)
    sf = np.broadcast_to(np.where(evanescent, 0.0, sf), shape)
    k_abs = kx.reshape(w.shape) ** 2
    for k in lat:
        k_abs = k_abs + k**2
    w_new = c * np.sqrt(k_abs)  # the query: c |k|
    inside = w_new <= w_vec[-1]  # beyond the last frequency: interp2's NaN, then 0
    lo = np.clip(np.floor(w_new / (w_vec[1] - w_vec[0])) + (n_w - 1) // 2, 0, n_w - 2)
    lo = lo.astype(np.int64)
    w_lo, w_hi = w_vec[lo], w_vec[lo + 1]
    if interp == "nearest":  # the nearer neighbour, the upper one on a tie (interp2's rule)
        i0 = lo + (w_new - w_lo >= w_hi - w_new)
        return [i0], [np.take_along_axis(sf, i0, 0) * inside]
    t = (w_new - w_lo) / (w_hi - w_lo)
    w0 = np.take_along_axis(sf, lo, 0) * (1 - t) * inside
    return [lo, lo + 1], [w0, np.take_along_axis(sf, lo + 1, 0) * t * inside]


def time_reversal(
    kgrid: KWaveGrid,
    medium: KWaveMedium | KWaveElasticMedium,
    sensor: KSensor,
    sensor_data: Any,
    *,
    compensation_factor: float = 1.0,
    positivity: bool = False,
    **simulate_args: Any,
) -> np.ndarray:
    """Initial pressure by time reversal (k-Wave's ``sensor.time_reversal_boundary_data``).

    The recorded pressure is enforced on the sensor points in reversed time order as a Dirichlet
    pressure source (the sensor mask is the source mask) for ``kgrid.nt`` steps of
    :func:`~sonotile.api.simulate`; the final pressure field is the reconstruction. For a
    lossless linear medium this is k-Wave's time-reversal loop step for step (the first step
    enforces the last sample, the last step the first). With an elastic medium (``st.simulate``
    runs the elastic model) the data are enforced as the normal stresses ``-p``, as k-Wave's
    pstdElastic2D/3D do (:mod:`sonotile.api.elastic.reversal`; its PML is inside the grid). The
    PML is as the options say (give those of the forward run); k-Wave changes nothing about it
    for time reversal, and with ``pml_inside=False`` the result is the user's grid. As k-Wave's
    solver does, no factor and no positivity by default (k-Wave's examples double the result of
    a line sensor, which sees half the waves; k-wave-python's :class:`TimeReversal` doubles and
    clips by default).

    Args:
        kgrid: the forward run's grid, with its ``dt`` and ``nt`` (set by ``make_time``, or by
            the forward ``simulate``).
        medium: the medium the waves travel back through [SI] (acoustic or elastic).
        sensor: the forward run's sensor: a boolean ``mask``, Cartesian points (``mask`` of
            shape ``(ndim, N)`` [m], moved to the nearest grid point as k-Wave's ``cart2grid``
            does; two on one grid point are an error) or ``points``.
        sensor_data: the recorded pressure ``(n_sensors, Nt)`` [Pa] in the sensor's order,
            from the first step (``record_start_index = 1``), or the forward run's
            :class:`~sonotile.api.Results`.
        compensation_factor: factor on the result (2 for a sensor on one side only).
        positivity: set negative values to zero.
        simulate_args: passed to ``simulate``: ``decomposition``, ``mesh``, ``devices``,
            ``options`` and its fields (``pml_size``, ``pml_inside``, ``dtype``...), ``quiet``.

    Returns:
        the reconstructed initial pressure [Pa], of the grid's shape.
    """
    from sonotile.api.simulation import simulate

    source, tr_sensor = reversed_source(kgrid, sensor, sensor_data)
    enforced: KSource | ElasticSource = source
    if model_of(medium) == "elastic":  # the data enforced as normal stresses
        enforced = stress_source(source, len(kgrid.shape))
    res = simulate(kgrid, medium, enforced, tr_sensor, **simulate_args)
    p0 = compensation_factor * np.asarray(res["p_final"])
    return np.maximum(p0, 0) if positivity else p0


class TimeReversal:
    """k-wave-python's ``TimeReversal``: time reversal with its defaults (factor 2 for a sensor
    on one side, positivity), bound to a grid, medium and sensor.

    Example::

        tr = TimeReversal(kgrid, medium, sensor)
        p0 = tr(res["p"], pml_inside=False)  # or tr(res)
    """

    def __init__(
        self,
        kgrid: KWaveGrid,
        medium: KWaveMedium | KWaveElasticMedium,
        sensor: KSensor,
        compensation_factor: float = 2.0,
        positivity: bool = True,
    ) -> None:
        if not (np.isfinite(compensation_factor) and compensation_factor > 0):
            raise ValueError(f"compensation_factor = {compensation_factor!r}: must be > 0")
        sensor_grid_points(sensor, kgrid)  # a clear error now rather than at the call
        self.kgrid, self.medium, self.sensor = kgrid, medium, sensor
        self.compensation_factor = float(compensation_factor)
        self.positivity = positivity

    def __call__(self, sensor_data: Any, **simulate_args: Any) -> np.ndarray:
        """The reconstructed initial pressure [Pa] from ``sensor_data`` (see
        :func:`time_reversal`; ``simulate_args`` go to ``simulate``)."""
        return time_reversal(
            self.kgrid, self.medium, self.sensor, sensor_data,
            compensation_factor=self.compensation_factor, positivity=self.positivity,
            **simulate_args,
        )  # fmt: skip
