// FFTW (single precision) as XLA FFI custom calls for sonotile's spectral operators (CPU).
//
// Built by sonotile/fft/fftw_library.py with the C++ compiler against jaxlib's FFI headers and a
// libfftw3f shared library (Debian's libfftw3-dev or the copy inside the pyFFTW wheel). The
// FFTW prototypes are declared here, so no fftw3.h is needed.
//
// sonotile_fftw_conv (grids of rank 2-3, what the operators use there) applies whole spectral
// operators, input to outputs, in one call, and sonotile_fftw_planes_c2r finishes one more
// output from a spectrum conv returned; sonotile_fftw_xpass is conv's pass along x alone, for
// boxes whose planes were transformed before (LFB blocks split along x); see their section
// below. Two more handlers transform whole grids of rank 1-3 (the operators on 1-D grids):
//
//   sonotile_fftw_r2c: a real field -> its half spectrum (the last axis halved).
//   sonotile_fftw_c2r: a spectrum, an optional real operator on the half spectrum (kappa,
//     |k|^(y-2), ...) and optionally a 1-D complex vector along grid axis `axis` (e.g.
//     i k exp(i k dx/2)) -> a real field
//       out = C2R(spec * op * vec[k_axis]) / N.
//     The multiplications and 1/N are done while copying the spectrum into a scratch buffer
//     (FFTW's multi-dimensional C2R destroys its input, and XLA's buffers must stay intact),
//     so XLA never materialises the products.
//
// sonotile_fftw_rfft_axes / _irfft_axes / _fft_axis are numpy's rfftn / irfftn over trailing
// axes and fft / ifft along any one axis, batched and strided (the distributed FFT's local
// transforms); see their section below.
//
// Threads: the kernels' parallel jobs run on XLA's intra-op thread pool, and so do FFTW's own
// parallel loops where FFTW has fftwf_threads_set_callback (>= 3.3.9; its own threads
// otherwise). Plans are made once per (shape, direction, threads, alignment), with wisdom
// imported from / exported to a file.

// This header: what every part shares (FFTW's prototypes, the settings, plans of whole grids,
// scratch buffers, the thread pool's jobs). The parts: fftw_grid.cc (whole grids: R2C, C2R,
// the DCT-I / DST-I operator), fftw_plans.cc (plane and pass-along-x plans, plane kernels),
// fftw_conv.cc (the fused operators: conv, conv_sum, xpass, planes_c2r), fftw_axis.cc (the
// single-axis kernels), fftw_slabs.cc (the distributed FFT's transforms), fftw_ffi.cc (the
// exported functions and the handlers).

#ifndef SONOTILE_FFTW_COMMON_H_
#define SONOTILE_FFTW_COMMON_H_

#include <algorithm>
#include <cmath>
#include <complex>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "xla/ffi/api/ffi.h"

#include "vector_fft.h"  // spliced in by sonotile/fft/fftw_library.py

extern "C" {
typedef float fftwf_complex[2];
typedef struct fftwf_plan_s* fftwf_plan;
fftwf_plan fftwf_plan_many_dft_r2c(int rank, const int* n, int howmany, float* in,
                                   const int* inembed, int istride, int idist,
                                   fftwf_complex* out, const int* onembed, int ostride,
                                   int odist, unsigned flags);
fftwf_plan fftwf_plan_many_dft_c2r(int rank, const int* n, int howmany, fftwf_complex* in,
                                   const int* inembed, int istride, int idist, float* out,
                                   const int* onembed, int ostride, int odist, unsigned flags);
fftwf_plan fftwf_plan_many_dft(int rank, const int* n, int howmany, fftwf_complex* in,
                               const int* inembed, int istride, int idist, fftwf_complex* out,
                               const int* onembed, int ostride, int odist, int sign,
                               unsigned flags);
typedef struct {
  int n, is, os;
} fftwf_iodim;
fftwf_plan fftwf_plan_guru_dft(int rank, const fftwf_iodim* dims, int howmany_rank,
                               const fftwf_iodim* howmany_dims, fftwf_complex* in,
                               fftwf_complex* out, int sign, unsigned flags);
void fftwf_destroy_plan(fftwf_plan p);
void fftwf_execute_dft(const fftwf_plan p, fftwf_complex* in, fftwf_complex* out);
void fftwf_execute_dft_r2c(const fftwf_plan p, float* in, fftwf_complex* out);
void fftwf_execute_dft_c2r(const fftwf_plan p, fftwf_complex* in, float* out);
fftwf_plan fftwf_plan_r2r(int rank, const int* n, float* in, float* out, const int* kind,
                          unsigned flags);  // kind: fftw_r2r_kind values (an int-sized enum)
void fftwf_execute_r2r(const fftwf_plan p, float* in, float* out);
int fftwf_init_threads(void);
void fftwf_plan_with_nthreads(int nthreads);
int fftwf_import_wisdom_from_filename(const char* filename);
int fftwf_export_wisdom_to_filename(const char* filename);
void* fftwf_malloc(size_t n);
void fftwf_free(void* p);
int fftwf_alignment_of(float* p);
// FFTW >= 3.3.9: run FFTW's parallel loops on the caller's threads (weak: absent in older ones)
void fftwf_threads_set_callback(
    void (*parallel_loop)(void* (*work)(char*), char* jobdata, size_t elsize, int njobs,
                          void* data),
    void* data) __attribute__((weak));
}

static const unsigned kMeasure = 0U, kDestroyInput = 1U, kUnaligned = 1U << 1,
                      kPatient = 1U << 5, kEstimate = 1U << 6;

namespace ffi = xla::ffi;

namespace {

std::mutex plan_mu;  // FFTW's planner is not thread-safe; execution is
int g_threads = 1;
unsigned g_effort = kMeasure;
std::string g_wisdom;
bool g_threads_ok = false;
bool g_fail_alloc = false;  // sonotile_fftw_fail_allocations (tests)

// Whether batched n-point transforms down the columns of a block (the pass along x, a plane's
// columns) run on vfft (vector_fft.h): built in and n a product of vfft::kRadices, 2 to 19
// (1.5-1.9x faster than FFTW's plans of the same layout, which copy the columns to buffers of
// their own; 2-3x for lengths with a factor 7, 6-36x with 17 or 19:
// benchmarks/performance/vector_fft_radix.py).
bool vector_columns(int64_t n) {
#ifdef SONOTILE_VFFT
  if (n < 2) return false;
  for (int64_t f : vfft::kRadices)
    while (n % f == 0) n /= f;
  return n == 1;
#else
  (void)n;
  return false;
#endif
}

// Whether n is a length of vector_columns with a prime factor above 7: FFTW has no codelet
// for 17 or 19 and its plans for such lengths run a scalar loop over the factor (51-point rows
// of a 102 x 102 plane: 297 us against 5.8 us on the kernel with the transposes, 102-point
// columns over 64 bins: 129 against 6.7 us; benchmarks/performance/vector_fft_radix.py). For these the
// kernel also takes a plane's rows (through a transposed copy) and the bins after its last
// whole vector (through a padded copy), which lengths of 2, 3, 5 and 7 leave to FFTW.
bool kernel_only(int64_t n) {
  if (!vector_columns(n)) return false;
  for (int64_t f : {2, 3, 5, 7})
    while (n % f == 0) n /= f;
  return n > 1;
}

// The effort for the small batched 1-D plans conv is built from (the plane rows' half-length
// transforms and the pass along x): FFTW_PATIENT where the effort is FFTW_MEASURE. MEASURE
// times few candidates once, on a shared machine under noise, and often keeps a plan that
// loops over the batch outside the codelet (rows of 64: 6.7 against 4.3 us per plane; the
// 128-point pass along x 17.8 against 14.2 us per block; 256 points 78 against 34), and the
// wisdom keeps it for good. PATIENT plans these in ~0.1 s (rows) and ~0.5-1 s (x) per shape,
// once per machine. Whole 128^3 absorbing steps from fresh wisdom, 1 thread, 9 simultaneous
// pairs: 9 ms (9 %) per step faster. Only where
// the batch (a plane of n1 x n2 reals, a block of X x blk bins) has 128 x 128 points or more:
// smaller grids' steps take milliseconds and PATIENT's planning would cost more than it saves
// (the test suite from empty wisdom, one run each: 14.6 min with MEASURE, 16.2 with PATIENT at
// every size).
unsigned batched_effort(int64_t points) {
  return g_effort == kMeasure && points >= 128 * 128 ? kPatient : g_effort;
}

// Every FFTW-aligned allocation. A null result (out of memory) becomes an XLA error of the call,
// never a crash. sonotile_fftw_fail_allocations(1) makes every allocation fail from then on
// (for tests of these error paths); sonotile_fftw_allocations() counts them.
std::atomic<int64_t> g_allocs{0};
void* fft_alloc(size_t bytes) {
  if (g_fail_alloc) return nullptr;
  g_allocs.fetch_add(1, std::memory_order_relaxed);
  return fftwf_malloc(bytes);
}

const char* const kNoMemory = "sonotile FFTW: out of memory (fftwf_malloc failed)";
const char* const kNoPlan = "sonotile FFTW: planning failed (out of memory or unsupported size)";

using Key = std::tuple<int, int64_t, int64_t, int64_t, int, int, int>;
std::map<Key, fftwf_plan> plans;

// Exports the wisdom to its file (plan_mu held), merged with what the file holds now: other
// processes sharing the cache folder (a sweep's runs side by side) save theirs there too, and
// a plain export dropped their plans, which the next run of their shapes planned again.
void save_wisdom_locked() {
  if (g_wisdom.empty() || g_effort == kEstimate) return;
  fftwf_import_wisdom_from_filename(g_wisdom.c_str());
  std::string tmp = g_wisdom + ".tmp" + std::to_string(long(getpid()));
  if (fftwf_export_wisdom_to_filename(tmp.c_str())) std::rename(tmp.c_str(), g_wisdom.c_str());
}

// dims: real shape padded to rank 3 with leading 1s; rank: the real rank.
fftwf_plan get_plan(int rank, const int64_t* dims, bool r2c, int threads, bool aligned) {
  std::lock_guard<std::mutex> g(plan_mu);
  Key key{rank, dims[0], dims[1], dims[2], int(r2c), threads, int(aligned)};
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  int n[3];
  for (int a = 0; a < rank; ++a) n[a] = int(dims[3 - rank + a]);
  size_t nr = size_t(dims[0]) * dims[1] * dims[2];
  size_t nc = size_t(dims[0]) * dims[1] * (dims[2] / 2 + 1);
  float* r = static_cast<float*>(fft_alloc(sizeof(float) * nr));
  fftwf_complex* c = static_cast<fftwf_complex*>(fft_alloc(sizeof(fftwf_complex) * nc));
  if (r == nullptr || c == nullptr) {  // no plan: the caller returns an error to XLA
    fftwf_free(r);
    fftwf_free(c);
    return nullptr;
  }
  if (g_threads_ok) fftwf_plan_with_nthreads(threads);
  unsigned flags = g_effort | (aligned ? 0U : kUnaligned);
  fftwf_plan p = r2c ? fftwf_plan_many_dft_r2c(rank, n, 1, r, nullptr, 1, 0, c, nullptr, 1, 0,
                                               flags)
                     : fftwf_plan_many_dft_c2r(rank, n, 1, c, nullptr, 1, 0, r, nullptr, 1, 0,
                                               flags | kDestroyInput);
  fftwf_free(r);
  fftwf_free(c);
  if (p != nullptr) {
    plans[key] = p;
    save_wisdom_locked();
  }
  return p;
}

// Scratch buffers (C2R inputs, conv's and conv_sum's spectra), reused across calls and threads:
// a request takes the smallest free buffer that is large enough, and a buffer goes back with the
// size it was allocated with (a large buffer lent to a small request stays large for the next).
std::mutex scratch_mu;
std::vector<std::pair<size_t, float*>> scratch_free;  // (floats allocated, buffer)
std::map<float*, size_t> scratch_size;                 // floats allocated, per buffer

float* take_scratch(size_t floats) {
  {
    std::lock_guard<std::mutex> g(scratch_mu);
    size_t best = scratch_free.size();
    for (size_t i = 0; i < scratch_free.size(); ++i)
      if (scratch_free[i].first >= floats &&
          (best == scratch_free.size() || scratch_free[i].first < scratch_free[best].first))
        best = i;
    if (best < scratch_free.size()) {
      float* p = scratch_free[best].second;
      scratch_free.erase(scratch_free.begin() + best);
      return p;
    }
  }
  float* p = static_cast<float*>(fft_alloc(sizeof(float) * floats));  // null: out of memory
  if (p != nullptr) {
    std::lock_guard<std::mutex> g(scratch_mu);
    scratch_size[p] = floats;
  }
  return p;
}

void give_scratch(float* p, size_t /*floats: the request; the allocation's size is kept*/) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> g(scratch_mu);
  scratch_free.emplace_back(scratch_size[p], p);
}

struct Shape {
  int rank;
  int64_t d[3];    // real dims padded to rank 3
  int64_t c2;      // halved last dim
  size_t nr, nc;   // real / complex element counts
};

bool shape_of(ffi::Span<const int64_t> dims, Shape* s) {
  if (dims.size() < 1 || dims.size() > 3) return false;
  s->rank = int(dims.size());
  for (int a = 0; a < 3; ++a) s->d[a] = 1;
  for (int a = 0; a < s->rank; ++a) s->d[3 - s->rank + a] = dims[a];
  s->c2 = s->d[2] / 2 + 1;
  s->nr = size_t(s->d[0]) * s->d[1] * s->d[2];
  s->nc = size_t(s->d[0]) * s->d[1] * s->c2;
  return true;
}

bool is_aligned(const void* p) {
  return fftwf_alignment_of(reinterpret_cast<float*>(const_cast<void*>(p))) == 0;
}

// dst[j] = src[j] * op[j] * vec[k_axis(j)] * scale over rows [r0, r1) of the (d0*d1, c2) view.
void scaled_copy(const Shape& s, const float* src, const float* op, const float* vec, int axis,
                 float scale, float* dst, int64_t r0, int64_t r1) {
  const int64_t c2 = s.c2;
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t i0 = row / s.d[1], i1 = row % s.d[1];
    float wr = scale, wi = 0.f;
    if (vec != nullptr && axis < 2) {
      const int64_t k = axis == 0 ? i0 : i1;
      wr = vec[2 * k] * scale;
      wi = vec[2 * k + 1] * scale;
    }
    const size_t base = size_t(row) * c2;
    const float* a = src + 2 * base;
    const float* o = op != nullptr ? op + base : nullptr;
    float* b = dst + 2 * base;
    if (vec != nullptr && axis == 2) {
      for (int64_t j = 0; j < c2; ++j) {
        const float m = (o != nullptr ? o[j] : 1.f) * scale;
        const float vr = vec[2 * j] * m, vi = vec[2 * j + 1] * m;
        const float xr = a[2 * j], xi = a[2 * j + 1];
        b[2 * j] = xr * vr - xi * vi;
        b[2 * j + 1] = xr * vi + xi * vr;
      }
    } else if (o != nullptr) {
      for (int64_t j = 0; j < c2; ++j) {
        const float xr = a[2 * j] * o[j], xi = a[2 * j + 1] * o[j];
        b[2 * j] = xr * wr - xi * wi;
        b[2 * j + 1] = xr * wi + xi * wr;
      }
    } else {
      for (int64_t j = 0; j < c2; ++j) {
        const float xr = a[2 * j], xi = a[2 * j + 1];
        b[2 * j] = xr * wr - xi * wi;
        b[2 * j + 1] = xr * wi + xi * wr;
      }
    }
  }
}

// Parallel jobs on XLA's intra-op thread pool (the FFI context of the running custom call):
// threads of our own would compete with XLA's pool for the same cores (XLA's idle workers
// spin, and XLA runs independent custom calls side by side, each then asking for all the
// threads: a 128^3 absorbing step on 2 threads took 58 ms with a thread per job against 44
// with the pool's workers, which take a call's jobs only when free). Jobs are taken from a
// shared counter by the caller and by every scheduled task; the caller never waits for a task
// that has not started (no deadlock when the pool is busy or absent: then the caller runs every
// job), and late tasks find no work left.
thread_local ffi::ThreadPool* tl_pool = nullptr;

struct Jobs {
  std::function<void(int)> fn;
  int n;
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  void run() {
    for (int i; (i = next.fetch_add(1)) < n;) {
      fn(i);
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

void run_jobs(int n, int threads, std::function<void(int)> fn) {
  if (n <= 1 || threads <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  auto jobs = std::make_shared<Jobs>();
  jobs->fn = std::move(fn);
  jobs->n = n;
  const int helpers = std::min(threads, n) - 1;
  if (tl_pool != nullptr) {
    for (int t = 0; t < helpers; ++t) tl_pool->Schedule([jobs] { jobs->run(); });
    jobs->run();
    while (jobs->done.load(std::memory_order_acquire) < n) std::this_thread::yield();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < helpers; ++t) pool.emplace_back([jobs] { jobs->run(); });
    jobs->run();
    for (auto& th : pool) th.join();
  }
}

template <class F>
void parallel_for(int n, int threads, F f) {
  run_jobs(n, threads, std::function<void(int)>(f));
}

void fftw_loop(void* (*work)(char*), char* jobdata, size_t elsize, int njobs, void*) {
  run_jobs(njobs, njobs, [=](int i) { work(jobdata + elsize * size_t(i)); });
}

struct PoolScope {  // makes the call's thread pool current for FFTW's loops on this thread
  ffi::ThreadPool* prev;
  explicit PoolScope(ffi::ThreadPool* p) : prev(tl_pool) { tl_pool = p; }
  ~PoolScope() { tl_pool = prev; }
};

}  // namespace

#endif  // SONOTILE_FFTW_COMMON_H_
