"""Prototype: FFTW as an XLA FFI custom call for the step's 3-D R2C / C2R transforms.

    .venv/bin/python benchmarks/fftw_ffi.py --size 128 --steps 20 --rounds 5 \
        [--case lossless|absorbing_nonlinear] [--threads N] [--plan measure|estimate]

Builds (once, with g++ against the system libfftw3f and jaxlib's FFI headers) a shared library
into ``$XDG_CACHE_HOME/sonotile`` (default ``~/.cache/sonotile``); if anything is missing it
says so and exits (the solver itself keeps XLA's FFT). Then it checks the FFTW step against
the XLA step (max relative difference of p after the run) and times both round-robin.

The C2R transform destroys its input in FFTW, and XLA's input buffer may be read again (the
pressure spectrum feeds three inverse transforms), so the input is copied to a scratch buffer,
with the 1/N normalisation folded into that copy. Plans are made once per shape (FFTW_MEASURE
by default) and executed with the new-array interface on XLA's buffers.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

SOURCE = r"""
#include <complex>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>
#include <fftw3.h>
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

static std::mutex mu;
static int n_threads = 1;
static unsigned plan_flags = FFTW_MEASURE;
struct Plan { fftwf_plan p; int align_r; int align_c; };
static std::map<std::tuple<long, long, long, int>, Plan> plans;

extern "C" void sonotile_fftw_configure(int threads, int measure) {
  std::lock_guard<std::mutex> g(mu);
  static bool init = false;
  if (!init) { fftwf_init_threads(); init = true; }
  n_threads = threads > 0 ? threads : 1;
  plan_flags = measure ? FFTW_MEASURE : FFTW_ESTIMATE;
}

static Plan get_plan(long n0, long n1, long n2, bool r2c) {
  std::lock_guard<std::mutex> g(mu);
  auto key = std::make_tuple(n0, n1, n2, int(r2c));
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  size_t nr = size_t(n0) * n1 * n2, nc = size_t(n0) * n1 * (n2 / 2 + 1);
  float* r = fftwf_alloc_real(nr);
  fftwf_complex* c = fftwf_alloc_complex(nc);
  fftwf_plan_with_nthreads(n_threads);
  fftwf_plan p = r2c ? fftwf_plan_dft_r2c_3d(n0, n1, n2, r, c, plan_flags)
                     : fftwf_plan_dft_c2r_3d(n0, n1, n2, c, r, plan_flags);
  Plan pl{p, fftwf_alignment_of(r), fftwf_alignment_of(reinterpret_cast<float*>(c))};
  fftwf_free(r);
  fftwf_free(c);
  plans[key] = pl;
  return pl;
}

static ffi::Error R2CImpl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::C64> y) {
  auto d = x.dimensions();
  if (d.size() != 3) return ffi::Error(ffi::ErrorCode::kInvalidArgument, "3-D only");
  Plan pl = get_plan(d[0], d[1], d[2], true);
  float* in = x.typed_data();
  auto* out = reinterpret_cast<fftwf_complex*>(y->typed_data());
  if (fftwf_alignment_of(in) != pl.align_r ||
      fftwf_alignment_of(reinterpret_cast<float*>(out)) != pl.align_c)
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "buffer alignment differs from plan");
  fftwf_execute_dft_r2c(pl.p, in, out);
  return ffi::Error::Success();
}

static ffi::Error C2RImpl(ffi::Buffer<ffi::C64> x, ffi::ResultBuffer<ffi::F32> y) {
  auto d = y->dimensions();
  if (d.size() != 3) return ffi::Error(ffi::ErrorCode::kInvalidArgument, "3-D only");
  Plan pl = get_plan(d[0], d[1], d[2], false);
  size_t nc = size_t(d[0]) * d[1] * (d[2] / 2 + 1);
  float scale = 1.0f / (float(d[0]) * float(d[1]) * float(d[2]));
  static thread_local std::vector<std::complex<float>, std::allocator<std::complex<float>>> dummy;
  static thread_local fftwf_complex* scratch = nullptr;
  static thread_local size_t scratch_n = 0;
  if (scratch_n < nc) {
    if (scratch) fftwf_free(scratch);
    scratch = fftwf_alloc_complex(nc);
    scratch_n = nc;
  }
  const std::complex<float>* in = x.typed_data();
  auto* s = reinterpret_cast<std::complex<float>*>(scratch);
  for (size_t i = 0; i < nc; ++i) s[i] = in[i] * scale;
  float* out = y->typed_data();
  if (fftwf_alignment_of(out) != pl.align_r)
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "buffer alignment differs from plan");
  fftwf_execute_dft_c2r(pl.p, scratch, out);
  return ffi::Error::Success();
}

// C2R on the input buffer itself (aliased to the second result, so XLA knows it is
// overwritten); no copy and no normalisation (the caller folds 1/N into its operators).
static ffi::Error C2RDestroyImpl(ffi::Buffer<ffi::C64> x, ffi::ResultBuffer<ffi::F32> y,
                                 ffi::ResultBuffer<ffi::C64> x_out) {
  auto d = y->dimensions();
  if (d.size() != 3) return ffi::Error(ffi::ErrorCode::kInvalidArgument, "3-D only");
  Plan pl = get_plan(d[0], d[1], d[2], false);
  auto* in = reinterpret_cast<fftwf_complex*>(x_out->typed_data());
  float* out = y->typed_data();
  if (fftwf_alignment_of(out) != pl.align_r ||
      fftwf_alignment_of(reinterpret_cast<float*>(in)) != pl.align_c)
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "buffer alignment differs from plan");
  fftwf_execute_dft_c2r(pl.p, in, out);
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwC2RDestroy, C2RDestroyImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::C64>>().Ret<ffi::Buffer<ffi::F32>>()
        .Ret<ffi::Buffer<ffi::C64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwR2C, R2CImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::C64>>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwC2R, C2RImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::C64>>().Ret<ffi::Buffer<ffi::F32>>());
"""


def build() -> str | None:
    """Path of the built library, or None (with a reason on stderr) when it cannot be built."""
    import jax.ffi

    cxx = shutil.which("g++") or shutil.which("c++")
    inc = jax.ffi.include_dir()
    if cxx is None or not os.path.exists("/usr/include/fftw3.h"):
        print("fftw_ffi: no C++ compiler or no fftw3.h; keeping XLA's FFT", file=sys.stderr)
        return None
    tag = hashlib.sha256((SOURCE + inc).encode()).hexdigest()[:12]
    cache = os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "sonotile"
    )
    os.makedirs(cache, exist_ok=True)
    so = os.path.join(cache, f"fftw_ffi_{tag}.so")
    if os.path.exists(so):
        return so
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "fftw_ffi.cc")
        with open(src, "w") as fh:
            fh.write(SOURCE)
        tmp = os.path.join(d, "lib.so")
        cmd = [cxx, "-O3", "-march=native", "-std=c++17", "-shared", "-fPIC", f"-I{inc}",
               src, "-o", tmp, "-lfftw3f_threads", "-lfftw3f", "-lpthread"]  # fmt: skip
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(
                f"fftw_ffi: build failed, keeping XLA's FFT:\n{r.stderr[-2000:]}", file=sys.stderr
            )
            return None
        shutil.move(tmp, so)
    return so


def register(so: str, threads: int, measure: bool = True) -> None:
    import jax

    lib = ctypes.CDLL(so)
    lib.sonotile_fftw_configure(ctypes.c_int(threads), ctypes.c_int(int(measure)))
    for name, sym in (
        ("sonotile_fftw_r2c", "SonotileFftwR2C"),
        ("sonotile_fftw_c2r", "SonotileFftwC2R"),
        ("sonotile_fftw_c2r_destroy", "SonotileFftwC2RDestroy"),
    ):
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, sym)), platform="cpu")
    register.lib = lib


def fftw_ops_class():
    import jax
    import jax.numpy as jnp

    from sonotile.spectral.operators import FourierOps

    @jax.tree_util.register_pytree_node_class
    class FftwOps(FourierOps):
        def _spec(self, f):
            if f.ndim != 3 or f.dtype != jnp.float32:
                return super()._spec(f)
            out = jax.ShapeDtypeStruct((*f.shape[:-1], f.shape[-1] // 2 + 1), jnp.complex64)
            return jax.ffi.ffi_call("sonotile_fftw_r2c", out)(f)

        def _back(self, F, like):
            if like.ndim != 3 or like.dtype != jnp.float32:
                return super()._back(F, like)
            out = jax.ShapeDtypeStruct(like.shape, jnp.float32)
            return jax.ffi.ffi_call("sonotile_fftw_c2r", out)(F)

    @jax.tree_util.register_pytree_node_class
    class FftwDestroyOps(FftwOps):
        """C2R in place on the (fresh) product buffer; 1/N folded into the real operators."""

        @classmethod
        def from_ops(cls, ops, n):
            pos, neg, kappa, n1, n2, sk, un = ops.tree_flatten()[0]

            def sc(a):
                return None if a is None else a / n

            return cls(pos, neg, sc(kappa), sc(n1), sc(n2), sc(sk), un)

        def _back(self, F, like):
            if like.ndim != 3 or like.dtype != jnp.float32:
                return super()._back(F, like) * like.size  # operators carry 1/N
            out = (
                jax.ShapeDtypeStruct(like.shape, jnp.float32),
                jax.ShapeDtypeStruct(F.shape, F.dtype),
            )
            return jax.ffi.ffi_call("sonotile_fftw_c2r_destroy", out, input_output_aliases={0: 1})(
                F
            )[0]

    return FftwOps, FftwDestroyOps


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--case", default="lossless")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--plan", default="measure", choices=("measure", "estimate"))
    a = ap.parse_args(argv)
    from sonotile.base.runtime import configure_threads

    configure_threads(a.threads)
    import time

    import jax
    import numpy as np

    from sonotile.bench.inprocess import SonotileCase, write_input
    from sonotile.solver import runner as rn

    so = build()
    if so is None:
        return 1
    threads = a.threads or len(os.sched_getaffinity(0))
    register(so, threads, a.plan == "measure")
    FftwOps, FftwDestroyOps = fftw_ops_class()
    orig = rn.compile_problem
    cases = {}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.h5")
        write_input(path, a.case, a.size, a.steps)
        cases["xla"] = SonotileCase(path, a.steps)

        variants = {"fftw": lambda o: FftwOps(*o.tree_flatten()[0])}
        variants["fftw_inplace"] = lambda o: FftwDestroyOps.from_ops(o, a.size**3)
        t0 = time.perf_counter()
        for name, make in variants.items():

            def patched(problem, ops=None, consts=None, make=make):
                cp = orig(problem)
                return orig(problem, ops=make(cp.ops), consts=cp.consts)

            rn.compile_problem = patched
            cases[name] = SonotileCase(path, a.steps)
            rn.compile_problem = orig
        setup = time.perf_counter() - t0

    def final_p(sc):
        carry = sc._carry()
        cp = sc.cp
        carry, _ = sc.compiled(carry, sc.xs, cp.consts, cp.ops, cp.index)
        return np.asarray(carry[0].p)

    px = final_p(cases["xla"])
    rel = {}
    for k in variants:
        pf = final_p(cases[k])
        rel[k] = float(np.max(np.abs(px - pf)) / max(np.max(np.abs(px)), 1e-30))
    times = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k, sc in cases.items():
            times[k].append(sc.run() / a.steps * 1e3)
    print(
        f"{a.case} {a.size}^3, {a.steps} steps x {a.rounds} rounds, FFTW threads {threads}, "
        f"plan {a.plan} (setup incl. planning {setup:.1f} s), load {os.getloadavg()[0]:.1f}"
    )
    for k, v in rel.items():
        print(f"  max |p_{k} - p_xla| / max |p_xla| after {a.steps} steps: {v:.2e}")
    for k, t in times.items():
        m = cases[k].memory
        print(
            f"  {k:12s} {statistics.median(t):7.1f} ms/step (min {min(t):.1f}, max {max(t):.1f})"
            f"  compiled {m.get('peak_bytes', 0) / a.size**3:.1f} B/pt"
        )
    for k in variants:
        r = [x / f for x, f in zip(times["xla"], times[k])]
        print(
            f"  speed {k}/xla per round: median {statistics.median(r):.2f} "
            f"(min {min(r):.2f}, max {max(r):.2f})"
        )
    jax.clear_caches()
    return 0


if __name__ == "__main__":
    sys.exit(main())
