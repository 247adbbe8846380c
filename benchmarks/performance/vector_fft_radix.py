"""sonotile's vector FFT kernel against FFTW on the same batched column transforms.

    PYTHONPATH=src .venv/bin/python benchmarks/performance/vector_fft_radix.py [n ...] \
        [--bins B] [--rounds R] [--rows ROWS] [--avx2]

For each length ``n`` (default: lengths with a factor 7, with a factor 11 to 19 and, for
reference, lengths of 2, 3 and 5), one block of ``n`` rows of ``B`` complex bins (default 64,
in cache) is transformed down its columns forward and backward, as the pass along x and a
plane's columns do: by the kernel (``csrc/vector_fft.h``, ``vfft::block``, rows one vector
longer than the block) and by FFTW's
``fftwf_plan_many_dft`` of that layout (FFTW_PATIENT, as the extension plans these batched
transforms). The two alternate, ``R`` rounds of 200 calls each, in one process; the best round
of each is printed [us per forward + backward] with their ratio (> 1: the kernel is faster), and
the largest difference between the two results relative to their largest value. Built with
``g++ -O3 -march=native`` and Debian's ``libfftw3f``, as the extension is; ``--avx2`` adds
``-mno-avx512f`` (the kernel's 256-bit path, as ``SONOTILE_FFTW_AVX512=0`` builds it).

``--rows ROWS``: a plane's rows instead, ``ROWS`` rows of ``n`` contiguous complex numbers
forward, by FFTW's batched plan (FFTW_PATIENT) and by the kernel through a transposed copy (as
the extension runs the rows of lengths with a prime factor above 7).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from importlib import resources

HARNESS = r"""
#include <fftw3.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "vector_fft.h"

static double now() {
  const auto t = std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration<double>(t).count();
}

// A plane's rows: `rows` rows of n contiguous complex numbers, FFTW's batched plan (PATIENT)
// against the kernel through a transposed copy (as csrc/fftw_ffi.cc's rows_on_kernel), forward.
static void plane_rows(int rows, int rounds, int n) {
  vfft::Plan vf;
  if (!vfft::make(n, -1, &vf)) {
    std::printf("%6d  not a length of the kernel\n", n);
    return;
  }
  const size_t len = 2 * size_t(rows) * n;
  auto* in = static_cast<float*>(fftwf_malloc(4 * len));
  auto* out = static_cast<float*>(fftwf_malloc(4 * len));
  fftwf_plan pf = fftwf_plan_many_dft(1, &n, rows, (fftwf_complex*)in, nullptr, 1, n,
                                      (fftwf_complex*)out, nullptr, 1, n, -1, FFTW_PATIENT);
  for (size_t i = 0; i < len; ++i) in[i] = float(std::rand()) / RAND_MAX - 0.5f;
  const int64_t rs = (2 * int64_t(rows) + 15) / 16 * 16 + vfft::kVW;
  std::vector<float> t(size_t(n) * rs, 0.f), o(len);
  std::vector<vfft::V> scratch(2 * size_t(n));
  auto kernel = [&]() {
    for (int y = 0; y < rows; ++y)
      for (int k = 0; k < n; ++k) std::memcpy(&t[k * rs + 2 * y], in + 2 * (size_t(y) * n + k), 8);
    vfft::block(vf, t.data(), rs, 2 * rows, scratch.data());
    for (int y = 0; y < rows; ++y)
      for (int k = 0; k < n; ++k) std::memcpy(&o[2 * (size_t(y) * n + k)], &t[k * rs + 2 * y], 8);
  };
  kernel();
  fftwf_execute(pf);
  double diff = 0, big = 0;
  for (size_t i = 0; i < len; ++i) {
    diff = std::max(diff, double(std::fabs(o[i] - out[i])));
    big = std::max(big, double(std::fabs(out[i])));
  }
  double best_k = 1e30, best_f = 1e30;
  for (int r = 0; r < rounds; ++r) {
    double s = now();
    for (int c = 0; c < 100; ++c) kernel();
    best_k = std::min(best_k, (now() - s) / 100);
    s = now();
    for (int c = 0; c < 100; ++c) fftwf_execute(pf);
    best_f = std::min(best_f, (now() - s) / 100);
  }
  std::printf("%6d  kernel %8.2f us  FFTW %8.2f us  FFTW/kernel %5.2f  max diff %.1e\n", n,
              1e6 * best_k, 1e6 * best_f, best_f / best_k, diff / big);
  fftwf_destroy_plan(pf);
  fftwf_free(in);
  fftwf_free(out);
}

int main(int argc, char** argv) {
  const int bins = std::atoi(argv[2]), rounds = std::atoi(argv[3]), calls = 200;
  for (int a = 4; a < argc; ++a) {
    if (argv[1][0] == 'r') {
      plane_rows(bins, rounds, std::atoi(argv[a]));
      continue;
    }
    const int n = std::atoi(argv[a]);
    vfft::Plan vf, vb;
    if (!vfft::make(n, -1, &vf) || !vfft::make(n, +1, &vb)) {
      std::printf("%6d  not a length of the kernel\n", n);
      continue;
    }
    const int64_t rs = 2 * int64_t(bins) + vfft::kVW;
    std::vector<float> x(size_t(n) * 2 * bins);
    for (auto& v : x) v = float(std::rand()) / RAND_MAX - 0.5f;
    std::vector<float> kb(size_t(n) * rs, 0.f);
    auto* fb = static_cast<fftwf_complex*>(fftwf_malloc(sizeof(fftwf_complex) * n * bins));
    const int nn = n;
    fftwf_plan pf = fftwf_plan_many_dft(1, &nn, bins, fb, nullptr, bins, 1, fb, nullptr, bins, 1,
                                        -1, FFTW_PATIENT);
    fftwf_plan pb = fftwf_plan_many_dft(1, &nn, bins, fb, nullptr, bins, 1, fb, nullptr, bins, 1,
                                        +1, FFTW_PATIENT);
    std::vector<vfft::V> scratch(2 * size_t(n));
    // one forward transform each, compared
    for (int i = 0; i < n; ++i)
      std::memcpy(&kb[size_t(i) * rs], &x[size_t(i) * 2 * bins], 8 * bins);
    std::memcpy(fb, x.data(), 8 * size_t(n) * bins);
    vfft::block(vf, kb.data(), rs, 2 * bins, scratch.data());
    fftwf_execute(pf);
    double diff = 0, big = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 2 * bins; ++j) {
        const double k = kb[size_t(i) * rs + j];
        const double f = reinterpret_cast<float*>(fb)[size_t(i) * 2 * bins + j];
        diff = std::max(diff, std::fabs(k - f));
        big = std::max(big, std::fabs(f));
      }
    double best_k = 1e30, best_f = 1e30;
    for (int r = 0; r < rounds; ++r) {
      double t = now();
      for (int c = 0; c < calls; ++c) {
        vfft::block(vf, kb.data(), rs, 2 * bins, scratch.data());
        vfft::block(vb, kb.data(), rs, 2 * bins, scratch.data());
        for (auto& v : kb) v *= 1.f / n;  // both sides scale, so that values stay bounded
      }
      best_k = std::min(best_k, (now() - t) / calls);
      t = now();
      for (int c = 0; c < calls; ++c) {
        fftwf_execute(pf);
        fftwf_execute(pb);
        float* f = reinterpret_cast<float*>(fb);
        for (int64_t i = 0; i < int64_t(n) * 2 * bins; ++i) f[i] *= 1.f / n;
      }
      best_f = std::min(best_f, (now() - t) / calls);
    }
    std::printf("%6d  kernel %8.2f us  FFTW %8.2f us  FFTW/kernel %5.2f  max diff %.1e\n", n,
                1e6 * best_k, 1e6 * best_f, best_f / best_k, diff / big);
    fftwf_destroy_plan(pf);
    fftwf_destroy_plan(pb);
    fftwf_free(fb);
  }
  return 0;
}
"""

#: lengths with a factor 7 (k-wave-python's 128-point grids with a PML of 20 outside: 168),
#: with a factor 11 to 19 (102 = 2 x 3 x 17, 51: the half rows of a 102-point axis), then
#: lengths of 2, 3 and 5 for reference
DEFAULT_LENGTHS = (7, 14, 28, 49, 56, 84, 98, 112, 140, 168, 196, 224, 11, 13, 17, 19, 22, 34,
                   51, 102, 110, 64, 96, 120, 128, 160)  # fmt: skip


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="*", type=int, default=list(DEFAULT_LENGTHS))
    p.add_argument("--bins", type=int, default=64)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--rows", type=int, default=0, help="time a plane's ROWS rows of n points")
    p.add_argument("--avx2", action="store_true", help="-mno-avx512f: the kernel's AVX2 path")
    a = p.parse_args(argv)
    csrc = resources.files("sonotile.fft").joinpath("csrc")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "bench.cc"), os.path.join(tmp, "bench")
        with open(src, "w") as f:
            f.write(HARNESS)
        cmd = ["g++", "-O3", "-march=native", "-std=c++17", f"-I{csrc}", src, "-o", exe]
        cmd += ["-mno-avx512f"] if a.avx2 else []
        subprocess.run([*cmd, "-lfftw3f", "-lm"], check=True)
        mode, count = ("rows", a.rows) if a.rows else ("columns", a.bins)
        return subprocess.run([exe, mode, str(count), str(a.rounds), *map(str, a.n)]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
