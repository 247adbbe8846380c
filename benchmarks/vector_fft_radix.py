"""sonotile's vector FFT kernel against FFTW on the same batched column transforms.

    PYTHONPATH=src .venv/bin/python benchmarks/vector_fft_radix.py [n ...] [--bins B] [--rounds R]

For each length ``n`` (default: lengths with a factor 7 and, for reference, lengths of 2, 3 and
5), one block of ``n`` rows of ``B`` complex bins (default 64, in cache) is transformed down its
columns forward and backward, as the pass along x and a plane's columns do: by the kernel
(``csrc/vector_fft.h``, ``vfft::block``, rows one vector longer than the block) and by FFTW's
``fftwf_plan_many_dft`` of that layout (FFTW_PATIENT, as the extension plans these batched
transforms). The two alternate, ``R`` rounds of 200 calls each, in one process; the best round
of each is printed [us per forward + backward] with their ratio (> 1: the kernel is faster), and
the largest difference between the two results relative to their largest value. Built with
``g++ -O3 -march=native`` and Debian's ``libfftw3f``, as the extension is.
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

int main(int argc, char** argv) {
  const int bins = std::atoi(argv[1]), rounds = std::atoi(argv[2]), calls = 200;
  for (int a = 3; a < argc; ++a) {
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
#: then lengths of 2, 3 and 5 for reference
DEFAULT_LENGTHS = (7, 14, 28, 49, 56, 84, 98, 112, 140, 168, 196, 224, 64, 96, 120, 128, 160)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="*", type=int, default=list(DEFAULT_LENGTHS))
    p.add_argument("--bins", type=int, default=64)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args(argv)
    csrc = resources.files("sonotile.fft").joinpath("csrc")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "bench.cc"), os.path.join(tmp, "bench")
        with open(src, "w") as f:
            f.write(HARNESS)
        cmd = ["g++", "-O3", "-march=native", "-std=c++17", f"-I{csrc}", src, "-o", exe]
        subprocess.run([*cmd, "-lfftw3f", "-lm"], check=True)
        return subprocess.run([exe, str(a.bins), str(a.rounds), *map(str, a.n)]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
