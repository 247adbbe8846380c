"""Cost of a gradient against a forward run of the same differentiable simulator.

Case: 3-D heterogeneous sound speed and density, power-law absorption, B/A, an initial pressure
ball, 64 sensor points on a line; loss = sum of squares of the recorded pressure; gradient with
respect to sound speed and density (fields). Reports, for the forward pass and the gradient
(``jax.value_and_grad``, forward included):

* the compiled programs' memory (``memory_analysis()``: arguments + outputs + temporaries);
* the wall time of a compiled call (median of ``--repeat`` alternating calls, after a warm-up).

``--model elastic`` (``--ndim 2`` or 3): the elastic model instead, a heterogeneous solid
(compressional and shear speed, density) with the same ball of initial pressure and line of
sensors; gradient with respect to both speeds and the density.

"backward" = gradient time - forward time. Timings on a shared machine are noisy: compare the
ratios of one run. ``--tape host|disk`` keeps the backward pass's states off the device
(``make_simulator(tape=...)``); ``--processes`` runs the forward pass and the gradient each in a
process of its own and adds their peak resident memory (VmHWM), the memory a user sees, host
tape included (a disk tape is not: its files are in the page cache, not the process). Example::

    .venv/bin/python benchmarks/gradient_cost.py --n 128 --nt 200
    .venv/bin/python benchmarks/gradient_cost.py --n 128 --nt 100 --tape disk --processes
    .venv/bin/python benchmarks/gradient_cost.py --model elastic --ndim 2 --n 512 --nt 200
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np


def make_case(n: int, nt: int):
    import sonotile as st

    grid = st.KWaveGrid((n, n, n), 1e-4, dt=2e-8, nt=nt)
    x, y, z = np.meshgrid(*(np.arange(k) - k // 2 for k in grid.shape), indexing="ij")
    r2 = (x - n // 8) ** 2 + y**2 + z**2
    medium = st.KWaveMedium(
        sound_speed=1500 + 80 * np.exp(-r2 / (n / 6) ** 2),
        density=1000 + 60 * np.exp(-r2 / (n / 5) ** 2),
        alpha_coeff=0.75,
        alpha_power=1.5,
        BonA=6.0,
    )
    source = st.KSource(p0=1e5 * ((x + n // 4) ** 2 + y**2 + z**2 <= 9))
    pts = np.stack([np.full(64, n - 14), np.linspace(10, n - 11, 64).astype(int),
                    np.full(64, n // 2)], axis=1)  # fmt: skip
    sensor = st.KSensor(points=pts, record=("p",))
    return grid, medium, source, sensor


def make_elastic_case(n: int, nt: int, ndim: int):
    """A ``ndim``-D solid of ``n`` points per axis: compressional speed 2500-2700 m/s, shear
    1100-1250 m/s, density 1800-1900 kg/m^3 (smooth bumps), a ball of initial pressure, 64
    sensor points on a line; ``(grid, medium, source, sensor, parameter names)``."""
    import sonotile as st

    shape = (n,) * ndim
    dx = 1e-4
    grid = st.KWaveGrid(shape, dx, dt=0.2 * dx / 2700, nt=nt)
    x = np.meshgrid(*(np.arange(k) - k // 2 for k in shape), indexing="ij")
    r2 = (x[0] - n // 8) ** 2 + sum(c**2 for c in x[1:])
    bump = np.exp(-r2 / (n / 6) ** 2)
    medium = st.KWaveElasticMedium(2500 + 200 * bump, 1100 + 150 * bump, 1800 + 100 * bump)
    ball = (x[0] + n // 4) ** 2 + sum(c**2 for c in x[1:]) <= 9
    source = st.ElasticSource(p0=1e5 * ball.astype(float))
    line = np.linspace(10, n - 11, 64).astype(int)
    pts = np.stack([np.full(64, n - 14), line] + [np.full(64, n // 2)] * (ndim - 2), axis=1)
    names = ("sound_speed_compression", "sound_speed_shear", "density")
    return grid, medium, source, st.KSensor(points=pts, record=("p",)), names


def memory_mb(compiled) -> float:
    m = compiled.memory_analysis()
    total = m.argument_size_in_bytes + m.output_size_in_bytes + m.temp_size_in_bytes
    return (total - m.alias_size_in_bytes) / 2**20


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("acoustic", "elastic"), default="acoustic")
    ap.add_argument("--ndim", type=int, choices=(2, 3), default=3, help="elastic: 2-D or 3-D")
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--nt", type=int, default=100)
    ap.add_argument("--chunk", default="auto", help="steps per checkpointed chunk, or none")
    ap.add_argument("--remat-step", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compile-only", action="store_true", help="memory only, no runs")
    ap.add_argument("--tape", choices=("none", "host", "disk"), default="none")
    ap.add_argument("--only", choices=("forward", "gradient"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--processes", action="store_true", help="forward, gradient: a process each; peak RSS"
    )
    a = ap.parse_args(argv)
    if a.processes:
        return in_processes(argv if argv is not None else sys.argv[1:])
    import jax
    import jax.numpy as jnp

    import sonotile as st

    chunk = None if a.chunk == "none" else (a.chunk if a.chunk == "auto" else int(a.chunk))
    tape = None if a.tape == "none" else a.tape
    if a.model == "elastic":
        *case, names = make_elastic_case(a.n, a.nt, a.ndim)
        sim = st.make_simulator(*case, chunk=chunk, tape=tape)
    else:
        names = ("sound_speed", "density")
        sim = st.make_simulator(*make_case(a.n, a.nt), chunk=chunk, remat_step=a.remat_step,
                                tape=tape)  # fmt: skip
    params = {k: sim.params[k] for k in names}

    def loss(p):
        return jnp.sum(sim(p)["p"] ** 2)

    fwd = jax.jit(loss)
    grad = jax.jit(jax.value_and_grad(loss))
    chunk = sim.chunk if a.model == "elastic" else sim.static.chunk
    out = {"model": a.model, "n": a.n, "nt": a.nt, "chunk": chunk, "remat_step": a.remat_step,
           "tape": a.tape}  # fmt: skip
    if a.model == "elastic":
        out["ndim"] = a.ndim
    if a.only:
        f = fwd if a.only == "forward" else grad
        t0 = time.perf_counter()
        out[f"{a.only}_memory_mb"] = memory_mb(f.lower(params).compile())
        jax.block_until_ready(f(params))
        out[f"{a.only}_first_call_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        jax.block_until_ready(f(params))
        out[f"{a.only}_s"] = time.perf_counter() - t0
        out[f"{a.only}_peak_rss_mb"] = peak_rss_mb()
        print(json.dumps(out))
        return out
    for name, f in (("forward", fwd), ("gradient", grad)):
        t0 = time.perf_counter()
        compiled = f.lower(params).compile()
        out[f"{name}_compile_s"] = time.perf_counter() - t0
        out[f"{name}_memory_mb"] = memory_mb(compiled)
    if a.compile_only:
        out["memory_ratio"] = out["gradient_memory_mb"] / out["forward_memory_mb"]
        print(json.dumps(out, indent=1))
        return out
    times: dict = {"forward": [], "gradient": []}
    cpu: dict = {"forward": [], "gradient": []}
    jax.block_until_ready(fwd(params))
    jax.block_until_ready(grad(params))
    for _ in range(a.repeat):
        for name, f in (("forward", fwd), ("gradient", grad)):
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(f(params))
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    tf, tg = (float(np.median(times[k])) for k in ("forward", "gradient"))
    cf, cg = (float(np.median(cpu[k])) for k in ("forward", "gradient"))
    # CPU time (all threads) is the steadier figure when other jobs share the cores
    out.update(forward_s=tf, gradient_s=tg, backward_over_forward=(tg - tf) / tf,
               gradient_over_forward=tg / tf, forward_cpu_s=cf, gradient_cpu_s=cg,
               backward_over_forward_cpu=(cg - cf) / cf,
               memory_ratio=out["gradient_memory_mb"] / out["forward_memory_mb"])  # fmt: skip
    print(json.dumps(out, indent=1))
    return out


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM) [MiB]."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def in_processes(argv: list) -> dict:
    """Forward and gradient each in a fresh process (compile, a first and a second call)."""
    args = [a for a in argv if a != "--processes"]
    out: dict = {}
    for only in ("forward", "gradient"):
        r = subprocess.run(
            [sys.executable, __file__, *args, "--only", only],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        out.update(json.loads(r.stdout.strip().splitlines()[-1]))
    out["rss_ratio"] = out["gradient_peak_rss_mb"] / out["forward_peak_rss_mb"]
    out["memory_ratio"] = out["gradient_memory_mb"] / out["forward_memory_mb"]
    out["gradient_over_forward"] = out["gradient_s"] / out["forward_s"]
    out["backward_over_forward"] = out["gradient_over_forward"] - 1
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
