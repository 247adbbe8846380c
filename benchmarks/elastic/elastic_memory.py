"""The elastic model's compiled memory per grid point on each of its code paths, against
``sonotile.physics.elastic.interface.ElasticModel.memory_estimate`` (the figure printed
before a run and used by the fit check).

Each case is a chunk program of the common time loop (``runner.run_chunk``, what a run
compiles) on a heterogeneous medium with a fluid region (or a homogeneous one), a p0 start
and a few sensor points; memory is XLA's own accounting of the compiled program
(``memory_analysis``: arguments + outputs - aliased + temporaries), nothing is run, with
sonotile's XLA flags set as the API's first run sets them (XLA:CPU's concurrency-optimised
scheduler off: it keeps more temporaries alive). Paths: 3-D
float32 with FFTW's fused single-axis calls (one CPU device), 3-D through XLA's FFT (float32
forced to XLA, as on a GPU; float64), 2-D (FFTW's whole-grid calls in float32, XLA in
float64); with ``interface="slip"`` (the ``slip`` cases).

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_memory.py [--sizes3 48,64] \
        [--sizes2 192,256]
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import numpy as np

#: name -> (ndim, dtype, Kelvin-Voigt absorption, FFT ("auto" or "xla"), heterogeneous, record
#: [, interface])
CASES: dict[str, tuple] = {
    "3d f32 fftw kv": (3, "float32", True, "auto", True, ("p",)),
    "3d f32 fftw lossless": (3, "float32", False, "auto", True, ("p",)),
    "3d f32 fftw kv homogeneous": (3, "float32", True, "auto", False, ("p",)),
    "3d f32 fftw kv p_max_all": (3, "float32", True, "auto", True, ("p", "p_max_all")),
    "3d f32 xla kv": (3, "float32", True, "xla", True, ("p",)),
    "3d f32 xla lossless": (3, "float32", False, "xla", True, ("p",)),
    "3d f64 kv": (3, "float64", True, "auto", True, ("p",)),
    "2d f32 kv": (2, "float32", True, "auto", True, ("p",)),
    "2d f32 lossless": (2, "float32", False, "auto", True, ("p",)),
    "2d f64 kv": (2, "float64", True, "auto", True, ("p",)),
    "2d f32 kv u_split_field": (2, "float32", True, "auto", True, ("p", "u_split_field")),
    "3d f32 fftw kv u_split_field": (3, "float32", True, "auto", True, ("p", "u_split_field")),
    "3d f32 fftw lossless homogeneous": (3, "float32", False, "auto", False, ("p",)),
    "3d f32 xla kv homogeneous": (3, "float32", True, "xla", False, ("p",)),
    "3d f32 xla lossless homogeneous": (3, "float32", False, "xla", False, ("p",)),
    "2d f32 kv homogeneous": (2, "float32", True, "auto", False, ("p",)),
    "2d f32 lossless homogeneous": (2, "float32", False, "auto", False, ("p",)),
    "3d f32 fftw kv p_cw_all": (3, "float32", True, "auto", True, ("p", "p_cw_all")),
    "3d f32 fftw kv u_non_staggered": (3, "float32", True, "auto", True, ("u_non_staggered",)),
    "2d f32 kv s_final": (2, "float32", True, "auto", True, ("p", "s_final", "u_final")),
    "3d f32 kv slip": (3, "float32", True, "auto", True, ("p",), "slip"),
    "3d f32 lossless slip": (3, "float32", False, "auto", True, ("p",), "slip"),
    "2d f32 kv slip": (2, "float32", True, "auto", True, ("p",), "slip"),
    "2d f64 kv slip": (2, "float64", True, "auto", True, ("p",), "slip"),
}


def elastic_run(n: int, ndim: int, dtype: str, absorbing: bool, fft: str, hetero: bool,
                record: tuple[str, ...], interface: str = "kwave") -> Any:  # fmt: skip
    """An :class:`~sonotile.physics.elastic.ElasticRun` on ``n^ndim`` points: a bone-like ball
    in water over a smooth variation (or bone everywhere), p0 at the centre, 8 steps;
    ``interface``: the fluid-solid treatment (``build``'s)."""
    from sonotile.physics.elastic import ElasticMedium, build

    x = np.arange(n) / n
    X = np.meshgrid(*([x] * ndim), indexing="ij")
    smooth = np.sin(2 * np.pi * X[0]) * np.cos(2 * np.pi * X[1])
    ball = sum((c - 0.5) ** 2 for c in X) < 0.25**2
    cp = 1500 + 40 * smooth + 1300 * ball if hetero else 2800.0
    cs = np.where(ball, 1400.0, 0.0) if hetero else 1400.0
    rho = 1000 + 30 * smooth + 850 * ball if hetero else 1850.0
    kw = {}
    if absorbing:
        kw = {"alpha_coeff_compression": 0.5 + 2 * ball if hetero else 2.5,
              "alpha_coeff_shear": 0.5 + 4 * ball if hetero else 4.5}  # fmt: skip
    shape = (n,) * ndim
    dx = 1e-4
    p0 = np.zeros(shape)
    p0[tuple(slice(n // 2 - 2, n // 2 + 2) for _ in shape)] = 1e5
    points = np.array([[n // 4] * ndim, [3 * n // 4] * ndim])
    run = build(ElasticMedium(cp, cs, rho, shape, **kw), (dx,) * ndim, 0.3 * dx / 2800, 8,
                p0=p0, sensor_points=points, record=record, dtype=dtype,
                cw_frequency=1e6, cw_periods=0.01, interface=interface)  # fmt: skip
    if fft == "xla":
        run = dataclasses.replace(run, ops=dataclasses.replace(run.ops, fft="xla"))
    return run


def compiled_bytes(run: Any) -> int:
    """XLA's accounting of the run's chunk program (8 steps): arguments + outputs - aliased +
    temporaries [bytes]."""
    import jax

    from sonotile.solver import runner as rn
    from sonotile.solver import sensors as sens

    cp = rn.compile_problem(run)
    xs = rn.step_inputs(run, 0, run.nt)
    dt = jax.numpy.dtype(run.dtype)
    carry = jax.eval_shape(lambda: (cp.phys.zero_state(run.shape, dt),
                                    sens.init_aggregates(cp.layout, run.shape, dt)))  # fmt: skip
    lowered = rn.run_chunk.lower(carry, xs, cp.consts, cp.ops, cp.index, phys=cp.phys,
                                 layout=cp.layout)  # fmt: skip
    ma = lowered.compile().memory_analysis()
    return int(ma.argument_size_in_bytes + ma.output_size_in_bytes - ma.alias_size_in_bytes
               + ma.temp_size_in_bytes)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes3", default="48,64")
    ap.add_argument("--sizes2", default="192,256")
    ap.add_argument("--cases", default=",".join(CASES))
    a = ap.parse_args(argv)
    from sonotile.base import runtime

    runtime.set_xla_flags()  # as the API's first run: before JAX starts its CPU client
    import jax

    from sonotile.physics.elastic.interface import ElasticModel

    print(f"{'case':30s} {'grid':>10s} {'compiled B/pt':>14s} {'estimate B/pt':>14s} {'ratio':>6s}")
    for name in a.cases.split(","):
        nd, dtype, kv, fft, hetero, record, *itf = CASES[name]
        for n in (int(s) for s in (a.sizes3 if nd == 3 else a.sizes2).split(",")):
            with jax.enable_x64(dtype == "float64"):
                run = elastic_run(n, nd, dtype, kv, fft, hetero, record, *itf)
                got = compiled_bytes(run) / n**nd
                est = ElasticModel.of(run).memory_estimate(run) / n**nd
            print(f"{name:30s} {n:>7d}^{nd} {got:14.1f} {est:14.1f} {est / got:6.2f}",
                  flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
