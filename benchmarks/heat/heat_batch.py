"""A batch of heat runs in one vectorised call (``sonotile.bioheat_batch``) against the same
runs one by one (``sonotile.bioheat``), float64, both compiled before timing (alternating,
best of ``--rounds``).

    PYTHONPATH=src .venv/bin/python benchmarks/heat/heat_batch.py --batch 8 --steps 100
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--shape", default="64x64x32")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args(argv)
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import sonotile as st
    from sonotile.physics.heat import sonication

    shape, nt, dt, b = tuple(int(n) for n in a.shape.split("x")), a.steps, 0.1, a.batch
    g = SimpleNamespace(shape=shape, spacing=0.5e-3)
    x = np.meshgrid(*[(np.arange(n) - n // 2) * 0.5e-3 for n in shape], indexing="ij")
    q0 = 2e6 * np.exp(-sum(v**2 for v in x) / 2e-3**2)
    med = {"density": 1050.0, "specific_heat": 3600.0, "thermal_conductivity": 0.5}
    ons = np.stack([sonication(nt, dt, on=1 + i * 0.1) for i in range(b)])
    qs = np.stack([q0 * (1 + 0.1 * i) for i in range(b)])

    def batch() -> None:
        st.bioheat_batch(g, med, {"T0": 37.0}, nt, dt, Q=qs, on=ons).T.block_until_ready()

    def loop() -> None:
        for i in range(b):
            r = st.bioheat(g, med, {"T0": 37.0, "Q": qs[i]}, nt, dt, on=ons[i])
        r.T.block_until_ready()

    times: dict[str, list[float]] = {"batch": [], "loop": []}
    batch(), loop()
    for _ in range(a.rounds):
        for name, f in (("batch", batch), ("loop", loop)):
            t = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t)
    tb, tl = min(times["batch"]), min(times["loop"])
    print(f"{b} runs x {nt} steps on {shape} ({jax.devices()[0].platform}): batch {tb:.3f} s, "
          f"one by one {tl:.3f} s, ratio {tl / tb:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
