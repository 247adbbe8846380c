"""``simulate_many`` with elastic media: ``vectorize="vmap"`` against ``"loop"``, whole calls.

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_many.py --media 8 --size 128 \
        --steps 200 --rounds 3

``--media`` media on one 2-D grid (water over a bone layer whose speeds and density differ
from medium to medium), a p0 disc in the water, a line of sensors recording ``p`` behind the
layer. One call of each way first (compiling), then ``--rounds`` rounds of both, alternating
which goes first; prints each call's wall time, the ratio loop / vmap per round (above 1: vmap
is faster) and the largest difference of the records between the two ways.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import numpy as np

import sonotile as st


def inputs(media: int, size: int, steps: int) -> tuple:
    """``(grid, media, source, sensor)``: one grid, ``media`` bone layers."""
    n = (size, size)
    grid = st.KWaveGrid(n, 1e-4, dt=0.2 * 1e-4 / 3200, nt=steps)
    out = []
    for i in range(media):
        f = i / max(media - 1, 1)
        cp, cs, rho = np.full(n, 1500.0), np.zeros(n), np.full(n, 1000.0)
        band = slice(size // 2, size // 2 + size // 8)
        cp[band], cs[band], rho[band] = 2600 + 500 * f, 1200 + 400 * f, 1700 + 300 * f
        out.append(st.KWaveElasticMedium(cp, cs, rho))
    x, y = np.meshgrid(np.arange(size), np.arange(size), indexing="ij")
    p0 = 1e3 * ((x - size // 4) ** 2 + (y - size // 2) ** 2 <= 9)
    mask = np.zeros(n, bool)
    mask[3 * size // 4, :] = True
    return grid, out, st.ElasticSource(p0=p0), st.KSensor(mask=mask, record=("p",))


def call(how: str, args: tuple, dtype: str) -> tuple[float, list]:
    """One whole ``simulate_many`` call: wall time [s] and its results."""
    t0 = time.perf_counter()
    res = st.simulate_many(*args, vectorize=how, pml_size=20, dtype=dtype)
    return time.perf_counter() - t0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--media", type=int, default=8)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    a = ap.parse_args()
    args = inputs(a.media, a.size, a.steps)
    out: dict = {"machine": platform.processor() or platform.machine(),
                 "device": str(jax.devices()[0]), "args": vars(a)}  # fmt: skip
    first = {how: call(how, args, a.dtype) for how in ("loop", "vmap")}
    out["first_call_s"] = {how: round(t, 3) for how, (t, _) in first.items()}
    diff = max(float(np.abs(r["p"] - v["p"]).max() / np.abs(r["p"]).max())
               for r, v in zip(first["loop"][1], first["vmap"][1]))  # fmt: skip
    out["max_rel_diff"] = diff
    rounds = []
    for r in range(a.rounds):
        order = ("loop", "vmap") if r % 2 == 0 else ("vmap", "loop")
        t = {how: call(how, args, a.dtype)[0] for how in order}
        rounds.append({"loop_s": round(t["loop"], 3), "vmap_s": round(t["vmap"], 3),
                       "loop_over_vmap": round(t["loop"] / t["vmap"], 3)})  # fmt: skip
        print(rounds[-1], flush=True)
    out["rounds"] = rounds
    print(json.dumps(out))


if __name__ == "__main__":
    main()
