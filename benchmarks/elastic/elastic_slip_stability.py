"""Long-run stability of the elastic model's interface treatments with solids against PML'd
edges: the energy of the state every ``--every`` steps, lossless, float64, every mode excited
by a random ``p0`` (seed 0).

    PYTHONPATH=src .venv/bin/python benchmarks/elastic/elastic_slip_stability.py \
        [--geometry half_high_x] [--size 64x64] [--pml 20,20] [--alpha 2] \
        [--interface slip|kwave] [--steps 100000] [--every 10000]

Geometries (water c 1500 m/s, rho 1000 kg/m^3; solid c_p 3000, c_s 1800 m/s, rho 1900; the
first axis x): ``half_high_x`` / ``half_low_x``: the solid fills the upper / lower half along
x, touching that edge; ``corner``: a quarter of the grid at the upper corner; ``ball``: a
disc of radius 5N/16 centred on the upper corner; ``plate_in_pml``: a plate 6 points thick
inside the upper x PML. The energy is ``sum rho_w |u|^2 + sigma^2 / (rho_w c_w^2)`` over the
summed fields [J/m^3 per point, up to a factor 2] (splits summed: the split-field PML leaves
static split residues that cancel in the sums). Growth shows as a rising last column.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from sonotile.physics.elastic import ElasticMedium, build  # noqa: E402
from sonotile.physics.elastic.interface import ElasticModel  # noqa: E402

WATER, SOLID = (1500.0, 0.0, 1000.0), (3000.0, 1800.0, 1900.0)


def solid_mask(geometry: str, shape: tuple[int, int]) -> np.ndarray:
    """The solid points of a named geometry (module docstring)."""
    n, m = shape
    i, j = np.meshgrid(np.arange(n), np.arange(m), indexing="ij")
    masks = {
        "half_high_x": i >= n // 2,
        "half_low_x": i < n // 2,
        "corner": (i >= n // 2 + 4) & (j >= m // 2 + 4),
        "ball": (i - n + 1) ** 2 + (j - m + 1) ** 2 < (min(n, m) * 5 / 16) ** 2,
        "plate_in_pml": (i >= n - 12) & (i < n - 6),
    }
    return masks[geometry]


def energies(args: argparse.Namespace) -> list[tuple[int, float]]:
    """``(step, energy)`` every ``args.every`` steps."""
    shape = tuple(int(v) for v in args.size.split("x"))
    solid = solid_mask(args.geometry, shape)
    cp, cs, rho = (np.where(solid, s, w) for w, s in zip(WATER, SOLID))
    p0 = np.random.default_rng(0).standard_normal(shape)
    dx = 1e-4
    pml = tuple(int(v) for v in args.pml.split(","))
    run = build(ElasticMedium(cp, cs, rho, shape), (dx, dx), 0.3 * dx / SOLID[0], args.steps,
                p0=p0, pml_size=pml, pml_alpha=(args.alpha,) * 2, dtype="float64",
                interface=args.interface)  # fmt: skip
    model = ElasticModel.of(run)
    c = model.constants(run, derive_axes=(0, 1))

    @jax.jit
    def chunk(state, xs):  # type: ignore[no-untyped-def]
        state, _ = jax.lax.scan(lambda s, x: (model.step(s, x, c, run.ops), None), state, xs)
        eu = sum(jnp.sum(f * f) for f in state.u) * WATER[2]
        es = sum(jnp.sum(f * f) for f in state.s) / (WATER[2] * WATER[0] ** 2)
        return state, eu + es

    state, out = model.zero_state(run.shape, "float64"), []
    for n0 in range(0, args.steps, args.every):
        xs = jax.tree_util.tree_map(lambda a, n0=n0: a[n0 : n0 + args.every], run.xs)
        state, e = chunk(state, xs)
        out.append((min(n0 + args.every, args.steps), float(e)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--geometry", default="half_high_x")
    ap.add_argument("--size", default="64x64")
    ap.add_argument("--pml", default="20,20", help="PML points along x,y")
    ap.add_argument("--alpha", type=float, default=2.0)
    ap.add_argument("--interface", default="slip")
    ap.add_argument("--steps", type=int, default=100000)
    ap.add_argument("--every", type=int, default=10000)
    args = ap.parse_args()
    t = time.perf_counter()
    for step, e in energies(args):
        print(f"{step:8d} {e:.4e}", flush=True)
    print(f"# {time.perf_counter() - t:.0f} s")


if __name__ == "__main__":
    main()
