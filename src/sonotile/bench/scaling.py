"""Communication and time breakdown of the decompositions (``sonotile bench --decompositions``).

For each decomposition this measures, on the devices at hand:

* bytes each device sends per time step, read from the compiled program (every
  ``all-to-all`` and ``collective-permute`` in one step, with its buffer sizes), next to the
  count the method implies (:func:`predicted_bytes`);
* time per step, and its parts: FFTs (the program's own FFT ops, re-run alone on the same
  shapes), communication (the step with every collective replaced by a local copy of the same
  size, subtracted from the full step), element-wise and other work (the rest), and sensor I/O
  (device-to-host transfer and recording between chunks);

and writes a model of the bytes per device per step for 8 ... 512 devices (:func:`model_rows`).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sonotile.base.cliargs import Parser, integer, positive_int
from sonotile.bench.report import json_file, write_json
from sonotile.parallel.decomposition import Decomposition

if TYPE_CHECKING:  # JAX and the solver are imported where used (after the XLA flags are set)
    import jax

    from sonotile.model.problem import Problem
    from sonotile.solver.runner import Engine

#: ``(fft_type, output shape, fft_length)`` of an FFT op of a compiled program.
FftOp = tuple[str, tuple[int, ...], tuple[int, ...]]

ITEM = {"f32": 4, "f64": 8, "c64": 8, "c128": 16, "s32": 4, "u32": 4, "pred": 1}
_SHAPE = re.compile(r"(f32|f64|c64|c128|s32|u32|pred)\[([0-9,]*)\]")
_COLL = re.compile(
    r"^\s*%\S+\s*=\s*(?P<shape>\(.*?\)|\S+)\s+(?P<op>all-to-all|collective-permute|all-reduce|"
    r"all-gather)(?:-start)?\((?P<rest>.*)$"
)
_FFT = re.compile(
    r"^\s*%\S+\s*=\s*(?P<shape>\S+)\s+fft\(.*fft_type=(?P<type>\w+),\s*fft_length=\{(?P<len>[0-9,]+)\}"
)
_GROUPS = re.compile(r"replica_groups=\{\{([0-9,]+)\}")


def _bytes(shape_text: str) -> int:
    total = 0
    for dt, dims in _SHAPE.findall(shape_text):
        n = math.prod(int(v) for v in dims.split(",") if v) if dims else 1
        total += n * ITEM[dt]
    return total


def collective_list(hlo: str) -> list[tuple[str, int]]:
    """``(kind, buffer bytes)`` of every collective in a compiled program, in program order."""
    out = []
    for line in hlo.splitlines():
        m = _COLL.match(line)
        if m:
            out.append((m.group("op"), _bytes(m.group("shape"))))
    return out


def collective_bytes(hlo: str) -> dict:
    """Bytes one device sends per execution of a compiled program, by collective kind.

    ``all-to-all`` over a group of P devices sends ``(P-1)/P`` of its buffers; a
    ``collective-permute`` sends its whole buffer to one peer; ``all-reduce`` (sensor sums) is
    counted as its buffer size.
    """
    out: dict = {}
    for line in hlo.splitlines():
        m = _COLL.match(line)
        if not m:
            continue
        op, size = m.group("op"), _bytes(m.group("shape"))
        if op == "all-to-all":
            g = _GROUPS.search(m.group("rest"))
            p = len(g.group(1).split(",")) if g else 1
            size = size * (p - 1) // max(p, 1)
        rec = out.setdefault(op, {"count": 0, "bytes": 0})
        rec["count"] += 1
        rec["bytes"] += size
    return out


def fft_ops(hlo: str) -> list[FftOp]:
    """``(fft_type, output shape, fft_length)`` of every FFT op in a compiled program."""
    ops = []
    for line in hlo.splitlines():
        m = _FFT.match(line)
        if m:
            dims = _SHAPE.search(m.group("shape")).group(2)
            shape = tuple(int(v) for v in dims.split(",") if v)
            ops.append((m.group("type"), shape, tuple(int(v) for v in m.group("len").split(","))))
    return ops


def transforms_per_step(problem: Problem) -> int:
    """Global 3-D transforms one step needs (docs/method.md: 10 lossless/Stokes, 14 power law,
    +2 per additive-mode source component)."""
    s, m, d = problem.sources, problem.medium, problem.grid.ndim
    n = 1 + 3 * d + (4 if m.absorption == "power_law" else 0)
    n += 2 * (s.p is not None and s.p.mode == "additive")
    n += 2 * sum(u is not None and u.mode == "additive" for u in s.u)
    return n


def exchanged_fields(problem: Problem) -> int:
    """Fields an LFB step pads from its neighbours: p, each u component, the two power-law
    operands, and the grid of each additive source."""
    s, m, d = problem.sources, problem.medium, problem.grid.ndim
    n = 1 + d + (2 if m.absorption == "power_law" else 0)
    n += int(s.p is not None and s.p.mode == "additive")
    n += sum(u is not None and u.mode == "additive" for u in s.u)
    return n


def predicted_bytes(
    shape: Sequence[int],
    mesh: Sequence[int],
    decomposition: str,
    n_transforms: int,
    n_exchanged: int,
    overlap: int = 16,
    item: int = 4,
    unstaggered: int = 0,
) -> float:
    """Bytes one device sends per step as the method implies.

    pencil: every 3-D transform moves the local complex half-spectrum through one all-to-all
    per mesh axis, keeping ``1/P_j`` of it: ``n_transforms * sum_j B (P_j - 1) / P_j`` with
    ``B = prod(N) / 2 * 2 item / P`` (the forward and the inverse transform each count).
    lfb: each exchanged field sends ``overlap`` planes to both neighbours along every split
    axis (the rest of the axis where a block's box would reach all of it); the planes include
    the padding already added along earlier axes.
    Both: recording ``u_non_staggered`` moves each of the first ``unstaggered`` components whose
    axis is split through two all-to-all transposes of its real block (sensor output only).
    """
    d = len(shape)
    mesh = tuple(mesh) + (1,) * (d - len(mesh))
    p_total = math.prod(mesh)
    local = math.prod(shape) * item / p_total
    extra = sum(2 * local * (mesh[a] - 1) / mesh[a] for a in range(min(unstaggered, d)))
    return extra + _method_bytes(
        shape, mesh, decomposition, n_transforms, n_exchanged, overlap, item
    )


def _method_bytes(
    shape: Sequence[int],
    mesh: tuple[int, ...],
    decomposition: str,
    n_transforms: int,
    n_exchanged: int,
    overlap: int,
    item: int,
) -> float:
    d = len(shape)
    p_total = math.prod(mesh)
    if decomposition == Decomposition.PENCIL:
        half = math.prod(shape[:-1]) * (shape[-1] // 2 + 1)
        b = half * 2 * item / p_total
        return n_transforms * sum(b * (p - 1) / p for p in mesh if p > 1)
    block = [n // p for n, p in zip(shape, mesh)]
    # points a block's box adds along each split axis: an overlap on both sides, or the rest of
    # the axis where the box would reach all of it (sonotile.parallel.lfb.whole_axis)
    pad = [0 if p == 1 else min(2 * overlap, n - b) for n, p, b in zip(shape, mesh, block)]
    total = 0.0
    for a in range(d):
        if mesh[a] == 1:
            continue
        face = math.prod(block[b] + (pad[b] if b < a else 0) for b in range(d) if b != a)
        total += pad[a] * face * item
    return n_exchanged * total


def model_rows(
    n: int = 1024,
    devices: Sequence[int] = (8, 16, 32, 64, 128, 256, 512),
    overlap: int = 16,
    n_transforms: int = 14,
    n_exchanged: int = 6,
) -> list[dict]:
    """Bytes per device per step for an ``n^3`` grid: pencil on a 2-D mesh, LFB on a 3-D mesh,
    with LFB's extra local work ``prod((b + 2 ov) / b)`` from the padding."""
    rows = []
    for p in devices:
        pen = _near_square(p)
        cube = _near_cube(p)
        pb = predicted_bytes((n, n, n), pen, "pencil", n_transforms, n_exchanged, overlap)
        lb = predicted_bytes((n, n, n), cube, "lfb", n_transforms, n_exchanged, overlap)
        work = math.prod((n // c + 2 * overlap) / (n // c) for c in cube if c > 1)
        rows.append({"devices": p, "pencil_mesh": pen, "lfb_mesh": cube,
                     "pencil_MB": pb / 1e6, "lfb_MB": lb / 1e6, "ratio": pb / lb,
                     "lfb_work": work})  # fmt: skip
    return rows


#: Links of the time model: bandwidth per device [B/s] (each direction) and time per message
#: [s]. ``loopback-gloo`` is measured here (benchmarks/parallel/collectives.py, 1 MB messages
#: between 2 processes); the others are stated, not measured: NVLink 4 (H100 SXM, 450
#: GB/s per GPU, NCCL ~10 us per message), InfiniBand NDR (400 Gb/s = 50 GB/s per node shared
#: by its 8 GPUs, ~20 us), used for the bytes that leave a node of 8 devices.
LINKS = {
    "loopback-gloo": {"bandwidth": 0.7e9, "latency": 0.15e-3},
    "nvlink": {"bandwidth": 450e9, "latency": 10e-6},
    "infiniband": {"bandwidth": 50e9 / 8, "latency": 20e-6},
}


def step_time_model(
    shape: Sequence[int],
    mesh: Sequence[int],
    decomposition: str,
    compute_ns: float,
    n_transforms: int = 14,
    n_exchanged: int = 6,
    overlap: int = 16,
    fft_share: float = 0.7,
    node: int = 8,
) -> dict[str, float]:
    """Seconds per step on ``prod(mesh)`` devices: local work plus communication, unhidden.

    Work: ``compute_ns`` per grid point on one device, the FFT share (``fft_share``) of it
    grown by LFB's padding. Communication: the method's bytes (:func:`predicted_bytes`) at the
    link's bandwidth plus a latency per message; with more than ``node`` devices the bytes
    leaving a node (pencil: ``(P - node) / P``; LFB on blocks of ``node`` devices: half) go
    over InfiniBand, the rest over NVLink.
    """
    d, p = len(shape), math.prod(mesh)
    full = tuple(mesh) + (1,) * (d - len(mesh))
    local = math.prod(shape) / p
    pad = 1.0
    if decomposition == Decomposition.LFB:
        pad = math.prod((n / m + 2 * overlap) / (n / m) for n, m in zip(shape, full) if m > 1)
    work = compute_ns * 1e-9 * local * ((1 - fft_share) + fft_share * pad)
    sent = predicted_bytes(shape, mesh, decomposition, n_transforms, n_exchanged, overlap)
    if decomposition == Decomposition.PENCIL:
        msgs = n_transforms * sum(m - 1 for m in mesh if m > 1)
        off = max(p - node, 0) / p
    else:
        msgs = n_exchanged * 2 * sum(1 for m in mesh if m > 1)
        off = 0.5 if p > node else 0.0
    nv, ib = LINKS["nvlink"], LINKS["infiniband"]
    comm = sent * (1 - off) / nv["bandwidth"] + sent * off / ib["bandwidth"]
    comm += msgs * (ib["latency"] if off else nv["latency"])
    return {"work_s": work, "comm_s": comm, "step_s": work + comm, "bytes": sent, "pad": pad}


def large_run_rows(
    n: int = 2048,
    devices: Sequence[int] = (8, 16, 32, 64, 128, 256, 512),
    compute_ns: float = 0.5,
    bytes_per_point: float = 74.0,
    overlap: int = 16,
) -> list[dict]:
    """:func:`step_time_model` for an ``n^3`` power-law absorbing step on GPUs (``compute_ns``
    per point on one GPU: an assumption, see docs/scaling.md), pencil on the most square 2-D
    mesh and LFB on the most cubic 3-D mesh; memory per device at ``bytes_per_point`` of the
    (padded) block."""
    rows = []
    for p in devices:
        row: dict[str, Any] = {"devices": p}
        for dec, mesh in (("pencil", _near_square(p)), ("lfb", _near_cube(p))):
            m = step_time_model((n,) * 3, mesh, dec, compute_ns, overlap=overlap)
            gb = bytes_per_point * n**3 / p * (m["pad"] if dec == Decomposition.LFB else 1) / 1e9
            row[dec] = {"mesh": mesh, "GB_per_device": gb, **m}
        rows.append(row)
    return rows


def _near_square(p: int) -> tuple[int, int]:
    a = int(math.isqrt(p))
    while p % a:
        a -= 1
    return (a, p // a)


def _near_cube(p: int) -> tuple[int, int, int]:
    best: tuple[int, tuple[int, int, int]] | None = None
    for a in range(1, p + 1):
        for b in range(1, p // a + 1):
            if p % (a * b) == 0:
                c = p // (a * b)
                spread = max(a, b, c) - min(a, b, c)
                if best is None or spread < best[0]:
                    best = (spread, (a, b, c))
    return best[1]


@contextmanager
def local_collectives() -> Iterator[None]:
    """Trace the decompositions with every collective replaced by a local copy (timing the step
    without communication; :class:`sonotile.parallel.collectives.LocalCopies`)."""
    from sonotile.parallel import collectives

    with collectives.using(collectives.LocalCopies()):
        yield


def time_chunks(engine: Engine, problem: Problem, steps: int, repeats: int) -> float:
    import jax

    from sonotile.solver import runner

    rs, _ = engine.start()
    carry = rs.carry
    xs = runner.step_inputs(problem, rs.next_step, rs.next_step + steps)
    carry, raw = engine.chunk(carry, xs)  # compile + warm up
    jax.block_until_ready(carry)
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        carry, raw = engine.chunk(carry, xs)
        jax.block_until_ready((carry, raw))
        best = min(best, time.perf_counter() - t)
    return best / steps


def _time_ffts(ops: list[FftOp], mesh_devices: Sequence[jax.Device], repeats: int) -> float:
    """Seconds to run the given FFT ops once on every device of the mesh (as the step does)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    def run(xs: list[jax.Array]) -> list[jax.Array]:
        out = []
        for (kind, shape, length), x in zip(ops, xs):
            axes = tuple(range(len(shape) - len(length), len(shape)))
            if kind == "RFFT":
                out.append(jnp.fft.rfftn(x, s=length, axes=axes))
            elif kind == "IRFFT":
                out.append(jnp.fft.irfftn(x, s=length, axes=axes))
            elif kind == "FFT":
                out.append(jnp.fft.fftn(x, axes=axes))
            else:
                out.append(jnp.fft.ifftn(x, axes=axes))
        return out

    xs = []
    for kind, shape, length in ops:
        if kind == "RFFT":
            inp = shape[: -len(length)] + length
            xs.append(np.zeros(inp, np.float32))
        elif kind == "IRFFT":
            inp = shape[:-1] + (length[-1] // 2 + 1,)
            xs.append(np.zeros(inp, np.complex64))
        else:
            xs.append(np.zeros(shape, np.complex64))
    fn = jax.jit(run)
    per_dev = [jax.device_put(xs, d) for d in mesh_devices]
    jax.block_until_ready([fn(x) for x in per_dev])
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready([fn(x) for x in per_dev])
        best = min(best, time.perf_counter() - t)
    return best


def _io_time(engine: Engine, problem: Problem, steps: int) -> float:
    """Seconds per step spent moving raw sensor samples to the host and recording them."""
    import jax
    import numpy as np

    from sonotile.solver import runner

    rs, _ = engine.start()
    xs = runner.step_inputs(problem, rs.next_step, rs.next_step + steps)
    carry, raw = engine.chunk(rs.carry, xs)
    jax.block_until_ready((carry, raw))
    rec = runner.ListRecorder()
    t = time.perf_counter()
    for name, v in raw.items():
        rec(name, 0, np.asarray(v))
    return (time.perf_counter() - t) / steps


def measure(
    problem: Problem,
    decomposition: str,
    mesh: tuple[int, ...],
    overlap: int = 16,
    steps: int = 10,
    repeats: int = 3,
    timings: bool = True,
) -> dict[str, Any]:
    """Bytes and time breakdown of one decomposition on the current devices."""
    import jax

    from sonotile import parallel
    from sonotile.solver import runner

    def build() -> Engine:
        if decomposition == Decomposition.SINGLE:
            return runner.single_engine(problem)
        return parallel.decomposed_engine(problem, Decomposition.parse(decomposition), mesh,
                                          overlap, 0.5)  # fmt: skip

    engine = build()
    rs, _ = engine.start()
    xs1 = runner.step_inputs(problem, rs.next_step, rs.next_step + 1)
    hlo = engine.lower(rs.carry, xs1).compile().as_text()
    coll = collective_bytes(hlo)
    sent = sum(v["bytes"] for k, v in coll.items() if k != "all-reduce")
    ffts = fft_ops(hlo)
    t_full = t_local = t_fft = t_io = math.nan
    if timings:
        t_full = time_chunks(engine, problem, steps, repeats)
        if decomposition == Decomposition.SINGLE:
            t_local = t_full
            devs = [jax.devices()[0]]
        else:
            with local_collectives():
                t_local = time_chunks(build(), problem, steps, repeats)
            devs = list(jax.devices())[: math.prod(mesh)]
        t_fft = _time_ffts(ffts, devs, repeats)
        t_io = _io_time(engine, problem, steps)
    nu = problem.grid.ndim if engine.layout.needs_unstagger else 0
    pred = predicted_bytes(
        problem.grid.shape,
        mesh or (1,),
        decomposition,
        transforms_per_step(problem),
        exchanged_fields(problem),
        overlap,
        unstaggered=nu,
    )
    return {
        "decomposition": decomposition, "mesh": list(mesh or ()), "overlap": overlap,
        "ms_per_step": 1e3 * t_full, "fft_ms": 1e3 * t_fft,
        "comm_ms": 1e3 * max(t_full - t_local, 0.0) if timings else math.nan,
        "elementwise_other_ms": 1e3 * max(t_local - t_fft, 0.0) if timings else math.nan,
        "io_ms": 1e3 * t_io,
        "bytes_sent_per_device_per_step": sent, "bytes_predicted": pred,
        "collectives": coll, "fft_ops_per_step": len(ffts),
    }  # fmt: skip


def parser() -> Parser:
    ap = Parser(
        prog="sonotile bench --decompositions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--size", type=integer(8), default=64, help="grid points per axis (default 64)")
    ap.add_argument("--steps", type=positive_int, default=10)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument(
        "--cpu_devices",
        type=integer(1, 4096),
        default=8,
        help="virtual CPU devices when JAX is not yet started (default 8)",
    )
    ap.add_argument(
        "--runs",
        default="single,pencil:8,pencil:2x4,lfb:8,lfb:2x4,lfb:2x2x2",
        help="comma-separated decomposition:mesh list",
    )
    ap.add_argument("--overlap", type=integer(2, 32), default=16)
    ap.add_argument("--json", type=json_file, default="bench-decompositions.json")
    ap.add_argument("--bytes_only", action="store_true", help="skip the timings")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if "jax" not in sys.modules:
        import os

        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={a.cpu_devices}"
    import jax

    from sonotile.bench.cases import heterogeneous_absorbing

    problem = heterogeneous_absorbing(a.size, a.steps + 2)
    rows = []
    print(f"{len(jax.devices())} {jax.devices()[0].platform} devices, grid {a.size}^3, "
          f"{transforms_per_step(problem)} transforms and {exchanged_fields(problem)} LFB "
          "exchanges per step")  # fmt: skip
    print(f"{'run':16s} {'ms/step':>8s} {'fft':>7s} {'comm':>7s} {'elem':>7s} {'io':>6s} "
          f"{'MB sent':>8s} {'MB pred':>8s}")  # fmt: skip
    for item in a.runs.split(","):
        dec, _, mesh_txt = item.partition(":")
        mesh = tuple(int(v) for v in mesh_txt.split("x")) if mesh_txt else ()
        r = measure(problem, dec, mesh, a.overlap, a.steps, a.repeats, not a.bytes_only)
        rows.append(r)
        print(f"{item:16s} {r['ms_per_step']:8.1f} {r['fft_ms']:7.1f} {r['comm_ms']:7.1f} "
              f"{r['elementwise_other_ms']:7.1f} {r['io_ms']:6.2f} "
              f"{r['bytes_sent_per_device_per_step'] / 1e6:8.2f} "
              f"{r['bytes_predicted'] / 1e6:8.2f}")  # fmt: skip
    model = model_rows(overlap=a.overlap)
    _print_model(model)
    write_json(
        a.json,
        {"size": a.size, "devices": len(jax.devices()), "runs": rows, "model": model},
        default=str,
    )
    print(f"written {a.json}")
    return 0


def _print_model(model: list[dict]) -> None:
    print("\nmodel, 1024^3 absorbing step, MB sent per device per step:")
    for m in model:
        print(f"  {m['devices']:4d} devices  pencil {m['pencil_mesh']} {m['pencil_MB']:9.1f}   "
              f"lfb {m['lfb_mesh']} {m['lfb_MB']:8.1f}   pencil/lfb {m['ratio']:5.1f}   "
              f"lfb work x{m['lfb_work']:.2f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
