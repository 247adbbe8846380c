"""Time of one collective against message size: ``ppermute`` and ``all_to_all`` between devices.

Run it in one process with virtual devices, or in several processes (one device each)::

    .venv/bin/python benchmarks/parallel/collectives.py --cpu-devices 2    # 2 devices, 1 process
    .venv/bin/sonotile launch -n 2 -- \
        .venv/bin/python benchmarks/parallel/collectives.py                # 2 processes

Each compiled program chains ``--chain`` collectives (each consumes the previous result), so the
time per collective excludes dispatch; a second program with one collective measures the cost
of a call (``1 call``). Sizes are the bytes each device sends; times in ms. ``--threads 1``
(default) runs XLA on one thread, on this process's own CPU (``runtime.configure_threads``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

KINDS = ("ppermute", "all_to_all", "psum", "all_gather")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-devices", type=int, default=0, help="virtual devices (1 process)")
    ap.add_argument("--sizes-kb", default="1,16,256,1024,4096,16384,65536")
    ap.add_argument("--chain", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default="")
    a = ap.parse_args(argv)
    from sonotile.base import runtime

    runtime.configure_threads(a.threads)
    if a.cpu_devices:
        flags = os.environ.get("XLA_FLAGS", "")
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={a.cpu_devices}"
    from sonotile.parallel import distributed

    distributed.initialize()
    import jax

    rows = [measure(kb, a.chain, a.repeats) for kb in map(int, a.sizes_kb.split(","))]
    if jax.process_index() == 0:
        head = {"processes": jax.process_count(), "devices": jax.device_count(),
                "transport": jax.config.jax_cpu_collectives_implementation,
                "affinity": sorted(os.sched_getaffinity(0))}  # fmt: skip
        print(json.dumps(head))
        print(f"{'KB':>7s}" + "".join(f"{k:>12s}" for k in KINDS) + f"{'1 call':>9s}  [ms]")
        for r in rows:
            print(f"{r['kb']:7d}" + "".join(f"{r[k]:12.3f}" for k in KINDS) + f"{r['call']:9.3f}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({**head, "rows": rows}, f, indent=1)
    return 0


def measure(kb: int, chain: int, repeats: int) -> dict:
    """ms per collective of ``kb`` KiB per device, chained ``chain`` times (``psum`` and
    ``all_gather`` followed by a sum, as the sensor sum needs)."""
    import jax
    import numpy as np
    from jax import lax
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from sonotile.parallel.mesh import shard_map

    devs = jax.devices()
    n = len(devs)
    mesh = Mesh(np.array(devs), ("a",))
    m = max(kb * 256 // n * n, n)  # float32 per device, divisible by n
    perm = [(i, (i + 1) % n) for i in range(n)]

    def chained(op, k):
        def f(x):
            for _ in range(k):
                x = op(x)
            return x

        return jax.jit(shard_map(f, mesh, (P("a"),), P("a")))

    def pp(x):
        return lax.ppermute(x, "a", perm)

    def psum(x):
        return lax.psum(x, "a") * 0.5

    def gather(x):
        return lax.all_gather(x, "a").sum(0) * 0.5

    def a2a(x):
        return lax.all_to_all(x.reshape(n, -1), "a", 0, 0, tiled=True).reshape(-1)

    sharding = NamedSharding(mesh, P("a"))
    x = jax.make_array_from_callback((n * m,), sharding, lambda idx: np.ones(m, np.float32))
    out = {"kb": kb}
    ops = {"ppermute": pp, "all_to_all": a2a, "psum": psum, "all_gather": gather}
    for name, op, k in [(k, ops[k], chain) for k in KINDS] + [("call", pp, 1)]:
        g = chained(op, k)
        x = jax.block_until_ready(g(x))
        best = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            x = jax.block_until_ready(g(x))
            best = min(best, (time.perf_counter() - t) / k)
        out[name] = 1e3 * best
    return out


if __name__ == "__main__":
    sys.exit(main())
