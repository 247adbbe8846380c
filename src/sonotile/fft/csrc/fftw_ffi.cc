// FFTW (single precision) as XLA FFI custom calls for sonotile's spectral operators (CPU).
//
// Built by sonotile/fftw.py with the C++ compiler against jaxlib's FFI headers and a
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
// Threads: FFTW's parallel loops run on XLA's intra-op thread pool where FFTW has
// fftwf_threads_set_callback (>= 3.3.9), on FFTW's own threads otherwise. Plans are made once
// per (shape, direction, threads, alignment), with wisdom imported from / exported to a file.

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

#include "vector_fft.h"  // spliced in by sonotile/fft/fftw.py

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
bool g_use_pool = false;  // FFTW's loops on XLA's pool (fftwf_threads_set_callback present)
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
// (for tests of these error paths).
void* fft_alloc(size_t bytes) {
  if (g_fail_alloc) return nullptr;
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
// FFTW's threads and XLA's pool would otherwise compete for the same cores (XLA's idle
// workers spin). Jobs are taken from a shared counter by the caller and by every scheduled
// task; the caller never waits for a task that has not started (no deadlock when the pool is
// busy or absent: then the caller runs every job), and late tasks find no work left.
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

ffi::Error R2CImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x,
                   ffi::ResultBuffer<ffi::C64> y) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  Shape s{};
  if (!shape_of(x.dimensions(), &s))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2c: rank 1-3 only");
  if (y->element_count() != s.nc)
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2c: spectrum shape");
  const float* in = x.typed_data();
  auto* out = reinterpret_cast<fftwf_complex*>(y->typed_data());
  fftwf_plan p = get_plan(s.rank, s.d, true, g_threads, is_aligned(in) && is_aligned(out));
  if (p == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  fftwf_execute_dft_r2c(p, const_cast<float*>(in), out);
  return ffi::Error::Success();
}

// FFTW's real-to-real kinds of the two transforms of the first kind (fftw3.h's enum values).
const int kRedft00 = 3, kRodft00 = 7;

using R2RKey = std::tuple<int, int64_t, int64_t, int64_t, int, int, int>;
std::map<R2RKey, fftwf_plan> r2r_plans;

// An in-place plan of the DCT-I (kind 0: REDFT00) or DST-I (kind 1: RODFT00) along every axis
// of a rank-`rank` array of the padded shape `dims`, or null (out of memory, no plan).
fftwf_plan get_r2r_plan(int rank, const int64_t* dims, int kind, int threads, bool aligned) {
  std::lock_guard<std::mutex> g(plan_mu);
  R2RKey key{rank, dims[0], dims[1], dims[2], kind, threads, int(aligned)};
  auto it = r2r_plans.find(key);
  if (it != r2r_plans.end()) return it->second;
  int n[3], kinds[3];
  for (int a = 0; a < rank; ++a) {
    n[a] = int(dims[3 - rank + a]);
    kinds[a] = kind == 0 ? kRedft00 : kRodft00;
  }
  float* r = static_cast<float*>(fft_alloc(sizeof(float) * size_t(dims[0]) * dims[1] * dims[2]));
  if (r == nullptr) return nullptr;
  if (g_threads_ok) fftwf_plan_with_nthreads(threads);
  fftwf_plan p = fftwf_plan_r2r(rank, n, r, r, kinds, g_effort | (aligned ? 0U : kUnaligned));
  fftwf_free(r);
  if (p != nullptr) {
    r2r_plans[key] = p;
    save_wisdom_locked();
  }
  return p;
}

// y = scale * T(op * T(x)), T the unnormalised DCT-I (kind 0) or DST-I (kind 1) along every
// axis (each its own inverse up to the product of the implied periods, which `scale` undoes):
// a real operator applied on the coefficients of a grid with insulating (WSWS) or conducting
// (WAWA) ends. Two in-place transforms of the output buffer, no other field-sized memory.
ffi::Error R2ROpImpl(ffi::ThreadPool pool, int64_t kind, float scale, ffi::Buffer<ffi::F32> x,
                     ffi::Buffer<ffi::F32> op, ffi::ResultBuffer<ffi::F32> y) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  Shape s{};
  if (!shape_of(x.dimensions(), &s) || (kind != 0 && kind != 1))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2r: rank 1-3, kind 0 or 1 only");
  if (op.element_count() != s.nr || y->element_count() != s.nr)
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2r: operator and output shapes");
  for (int a = 3 - s.rank; a < 3; ++a)
    if (kind == 0 && s.d[a] < 2)
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2r: a DCT-I needs 2 points or more");
  float* out = y->typed_data();
  const float* in = x.typed_data();
  const float* o = op.typed_data();
  fftwf_plan p = get_r2r_plan(s.rank, s.d, int(kind), g_threads, is_aligned(out));
  if (p == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const int T = g_threads;
  const int64_t rows = s.d[0] * s.d[1], len = s.d[2];
  auto rows_of = [&](int t) { return std::make_pair(rows * t / T, rows * (t + 1) / T); };
  if (in != out) {
    parallel_for(T, T, [&](int t) {
      auto [lo, hi] = rows_of(t);
      std::memcpy(out + lo * len, in + lo * len, sizeof(float) * size_t(hi - lo) * len);
    });
  }
  fftwf_execute_r2r(p, out, out);
  parallel_for(T, T, [&](int t) {
    auto [lo, hi] = rows_of(t);
    for (int64_t i = lo * len; i < hi * len; ++i) out[i] *= scale * o[i];
  });
  fftwf_execute_r2r(p, out, out);
  return ffi::Error::Success();
}

ffi::Error C2RImpl(ffi::ThreadPool pool, int64_t has_op, int64_t has_vec, int64_t axis,
                   ffi::Buffer<ffi::C64> x, ffi::RemainingArgs args,
                   ffi::ResultBuffer<ffi::F32> y) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  Shape s{};
  if (!shape_of(y->dimensions(), &s))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: rank 1-3 only");
  if (x.element_count() != s.nc || int(args.size()) != (has_op ? 1 : 0) + (has_vec ? 1 : 0))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: spectrum shape, argument count");
  const float* spec = reinterpret_cast<const float*>(x.typed_data());
  const float* op = nullptr;
  const float* vec = nullptr;
  int a = 0;
  if (has_op) {
    auto o = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (o.has_error() || o->element_count() != s.nc)
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: operator shape");
    op = o->typed_data();
  }
  const int ax = 3 - s.rank + int(axis);
  if (has_vec) {
    auto v = args.get<ffi::Buffer<ffi::C64>>(a);
    if (v.has_error() || axis >= s.rank || axis < 0 ||
        int64_t(v->element_count()) != (ax == 2 ? s.c2 : s.d[ax]))
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: vector along axis");
    vec = reinterpret_cast<const float*>(v->typed_data());
  }
  const float scale = float(1.0 / double(s.nr));
  const int T = g_threads;
  const int64_t rows = s.d[0] * s.d[1];
  float* out = y->typed_data();
  fftwf_plan p = get_plan(s.rank, s.d, false, T, is_aligned(out));  // scratch is FFTW-aligned
  if (p == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  float* scr = take_scratch(2 * s.nc);
  if (scr == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  if (T > 1 && rows >= T) {
    parallel_for(T, T, [&](int t) {
      scaled_copy(s, spec, op, vec, ax, scale, scr, rows * t / T, rows * (t + 1) / T);
    });
  } else {
    scaled_copy(s, spec, op, vec, ax, scale, scr, 0, rows);
  }
  fftwf_execute_dft_c2r(p, reinterpret_cast<fftwf_complex*>(scr), out);
  give_scratch(scr, 2 * s.nc);
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// sonotile_fftw_conv: spectral operators on grids of rank 2-3, with the transforms split at the
// outer axis x (the slowest in memory):
//
//   out_o = C2R(op * vec_o * R2C(in_src[o])) / N
//
// (an output of axis kOp2 instead: C2R(op2 * R2C(in_src[o])) / N, op2 the operand after op).
//
//   1. planes forward: the (rank-1)-D R2C of every plane x = const (a plane fits in cache)
//      into the spectrum array C;
//   2. one pass along x: blocks of g.blk adjacent plane bins are gathered for all x,
//      transformed along x, multiplied by op (even along x: rows 0 .. X/2 are read; and by the
//      output's vector where it runs along x),
//      transformed back along x and scattered, one result array per distinct product;
//   3. planes back: each plane is copied to a buffer, multiplied by the output's vector where it
//      runs along a plane axis, and C2R-transformed into the output's plane.
//
// A 3-D R2C, a multiply and a 3-D C2R sweep the grid-sized spectrum three more times: the R2C's
// last pass along x and the C2R's first (done here on a block in cache) and the multiply.
// Outputs of one input share its forward transform; those whose vectors run along plane axes
// (or that have none) also share the pass along x. Between the passes a spectrum waits in the
// buffer of the output it becomes (see Store): no grid-sized scratch. All FFTW plans here are
// 1-thread plans run on many planes / blocks at once.

// Plane bins per block of the pass along x: 128 (1 KB of complex64 per row; two blocks of X
// rows in a worker's scratch, 320 KB at X = 160: in L2), halved down to 16 while a grid has
// fewer than 8 blocks per thread. Measured on 1 thread of the 2-core EPYC:
// 128 against 16 took the single 128^3 step from 165 to 156 ms, an LFB shard's
// local work (160-point box) from 199 to 175 ms, the single 256^3 step from 1532 to 1337 ms;
// 32 and 64 were slower than both.
constexpr int64_t kBlockMax = 128, kBlockMin = 16;
constexpr int64_t kSpectrum = -2;  // conv output axis: return the shared product's spectrum
constexpr int64_t kOp2 = -3;       // conv output axis: the second operator op2, no vector

// A plane of n1 rows of n2 reals (n2 even, >= 4; rank-2 planes: the planes of a 3-D grid, an
// LFB block's, a pencil slab's) is transformed "by halves": each row, read as n2/2 complex
// numbers, by one complex FFT of half that length, unpacked into the row's n2/2 + 1 bins (the
// split into even and odd samples), then the columns by complex FFTs in place (C2R: the same
// steps reversed; the imaginary parts of bins 0 and n2/2 are dropped after the columns, as
// FFTW's C2R does). FFTW's 2-D plans run their rows as real transforms at about half the speed
// of complex ones of half the length (128 rows of 128: 24 against 12 us in cache; a 128^3 conv
// 10 % slower with them). Other planes (odd rows, rank-1 planes) take FFTW's plane plans.

struct PairPlans {
  fftwf_plan rows_f = nullptr, rows_b = nullptr, cols_f = nullptr, cols_b = nullptr;
  // the columns on vfft (vector_columns): bins [0, hv) (whole vectors), the last n2/2 + 1 - hv
  // on FFTW's tail plans (or vfft: vtail); vcols false: all on cols_f / cols_b
  int64_t hv = 0;
  fftwf_plan tail_f = nullptr, tail_b = nullptr;
  bool vcols = false;  // the columns on vfft (bins [0, hv), and [hv, n2/2 + 1) where vtail)
  bool vtail = false;  // the bins after hv on vfft too, through a padded copy (kernel_only)
  bool vrows = false;  // the rows on vfft, through a transposed copy (kernel_only(n2 / 2))
#ifdef SONOTILE_VFFT
  vfft::Plan vf, vb, rf, rb;  // columns (n1 points), rows (n2 / 2 points)
#endif
  // per bin k = 0 .. n2/2, each twice (one per float of a complex number): the unpacking's
  // coefficients u0..u2 and the packing's p0..p2, from w = exp(-2 pi i k / n2)
  std::vector<float> u0, u1, u2, p0, p1, p2;
};

// One plane's transforms: a rank-1 plane (a row of n2 reals: the planes of a 2-D grid) or a
// rank-2 one (n1 x n2), real <-> half spectrum (n1 x n2/2+1, row-major), 1-thread plans.
struct PlanePlans {
  int rank = 2;
  int64_t n1 = 1, n2 = 1, cols = 1;         // rows, reals per row, bins per spectrum row
  fftwf_plan r2c = nullptr, c2r = nullptr;  // FFTW's plane plans (odd rows, rank 1)
  PairPlans pair;                           // by halves when pair.rows_f is set
};
// (rank, n1, n2, real side aligned, spectrum side aligned)
using PlaneKey = std::tuple<int, int64_t, int64_t, int, int>;
std::map<PlaneKey, PlanePlans> plane_plans;  // guarded by plan_mu; entries never move

// `floats` rounded up to a multiple of 16 (64 bytes: a buffer after it stays FFTW-aligned).
size_t pad16(size_t floats) { return (floats + 15) & ~size_t(15); }

// True when planes of n1 x n2 reals are transformed by halves (see PairPlans).
bool by_halves(int rank, int64_t n2) {
  return rank == 2 && n2 % 2 == 0 && n2 >= 4;
}

void destroy_pair(PairPlans* q) {
  for (fftwf_plan* p : {&q->rows_f, &q->rows_b, &q->cols_f, &q->cols_b, &q->tail_f, &q->tail_b}) {
    if (*p != nullptr) fftwf_destroy_plan(*p);
    *p = nullptr;
  }
}

// Plans and coefficients of the transforms by halves (plan_mu held); false (nothing kept) when
// planning failed. `rows` / `cols`: the flags of the row transforms (real side) and of the
// in-place column transforms (spectrum side).
bool make_pair_plans(int n1, int n2, unsigned rows, unsigned cols, PairPlans* q) {
  const int M = n2 / 2, h = M + 1;
  auto* r = static_cast<fftwf_complex*>(fft_alloc(sizeof(float) * size_t(n1) * n2));
  auto* S = static_cast<fftwf_complex*>(fft_alloc(sizeof(float) * size_t(n1) * n2));
  auto* c = static_cast<fftwf_complex*>(fft_alloc(sizeof(fftwf_complex) * size_t(n1) * h));
  if (r != nullptr && S != nullptr && c != nullptr) {
    q->rows_f = fftwf_plan_many_dft(1, &M, n1, r, nullptr, 1, M, S, nullptr, 1, M, -1, rows);
    q->rows_b = fftwf_plan_many_dft(1, &M, n1, S, nullptr, 1, M, r, nullptr, 1, M, +1, rows);
    q->cols_f = fftwf_plan_many_dft(1, &n1, h, c, nullptr, h, 1, c, nullptr, h, 1, -1, cols);
    q->cols_b = fftwf_plan_many_dft(1, &n1, h, c, nullptr, h, 1, c, nullptr, h, 1, +1, cols);
#ifdef SONOTILE_VFFT
    const int hv = h / (vfft::kVW / 2) * (vfft::kVW / 2);
    const bool tail = kernel_only(n1);
    if (vector_columns(n1) && (hv > 0 || tail) && vfft::make(n1, -1, &q->vf) &&
        vfft::make(n1, +1, &q->vb)) {
      q->hv = hv;
      q->vcols = true;
      q->vtail = tail;
      const int t = h - hv;  // FFTW's tail plans: without vtail, and where its copy fails
      if (t > 0) {
        q->tail_f = fftwf_plan_many_dft(1, &n1, t, c + hv, nullptr, h, 1, c + hv, nullptr, h, 1,
                                        -1, cols);
        q->tail_b = fftwf_plan_many_dft(1, &n1, t, c + hv, nullptr, h, 1, c + hv, nullptr, h, 1,
                                        +1, cols);
      }
    }
    q->vrows = kernel_only(M) && vfft::make(M, -1, &q->rf) && vfft::make(M, +1, &q->rb);
#endif
  }
  fftwf_free(r);
  fftwf_free(S);
  fftwf_free(c);
  const bool tails = !q->vcols || q->hv == n2 / 2 + 1 || (q->tail_f && q->tail_b);
  if (!q->rows_f || !q->rows_b || !q->cols_f || !q->cols_b || !tails) {
    destroy_pair(q);
    return false;
  }
  for (auto* v : {&q->u0, &q->u1, &q->u2, &q->p0, &q->p1, &q->p2}) v->resize(size_t(2 * h));
  for (int k = 0; k < h; ++k) {
    const double a = -2.0 * 3.14159265358979323846 * k / n2, wr = std::cos(a), wi = std::sin(a);
    // X = u0 a + u1 conj(b) + u2 (swap(a) s + swap(b)), s = (1, -1): a = Z_k, b = Z_{M-k}
    // Z = p0 a + p1 conj(b) + p2 (swap(a) s + swap(b)): a = X_k, b = X_{M-k} (twice Z)
    const float v[6] = {float(0.5 * (1 + wi)), float(0.5 * (1 - wi)), float(0.5 * wr),
                        float(1 + wi),         float(1 - wi),         float(-wr)};
    std::vector<float>* t[6] = {&q->u0, &q->u1, &q->u2, &q->p0, &q->p1, &q->p2};
    for (int i = 0; i < 6; ++i) (*t[i])[size_t(2 * k)] = (*t[i])[size_t(2 * k + 1)] = v[i];
  }
  return true;
}

// The plane plans of `rank` (1: a row of n2 reals, n1 = 1; 2: n1 x n2) with plan_mu held, made
// if new (1-thread plans; `real_al` / `spec_al`: the real / spectrum planes they will run on are
// FFTW-aligned); nullptr when planning fails.
const PlanePlans* plane_plans_locked(int rank, int64_t n1, int64_t n2, bool real_al,
                                     bool spec_al) {
  const bool halves = by_halves(rank, n2);
  PlaneKey key{rank, n1, n2, int(real_al), int(spec_al)};
  auto it = plane_plans.find(key);
  if (it != plane_plans.end()) return &it->second;
  PlanePlans p;
  p.rank = rank;
  p.n1 = rank == 2 ? n1 : 1;
  p.n2 = n2;
  p.cols = n2 / 2 + 1;
  if (g_threads_ok) fftwf_plan_with_nthreads(1);
  const unsigned real_f = g_effort | (real_al ? 0U : kUnaligned);
  const unsigned spec_f = g_effort | (spec_al ? 0U : kUnaligned);
  if (halves) {
    const unsigned rows_f = batched_effort(p.n1 * n2) | (real_al ? 0U : kUnaligned);
    if (!make_pair_plans(int(p.n1), int(n2), rows_f, spec_f, &p.pair)) return nullptr;
  } else {
    const int n[2] = {int(p.n1), int(n2)};
    const int* dims = rank == 2 ? n : n + 1;
    const size_t nr = size_t(p.n1 * n2), nc = size_t(p.n1 * p.cols);
    float* r = static_cast<float*>(fft_alloc(sizeof(float) * nr));
    auto* c = static_cast<fftwf_complex*>(fft_alloc(sizeof(fftwf_complex) * nc));
    const unsigned f = real_f | spec_f;
    if (r != nullptr && c != nullptr) {
      p.r2c = fftwf_plan_many_dft_r2c(rank, dims, 1, r, nullptr, 1, 0, c, nullptr, 1, 0, f);
      p.c2r = fftwf_plan_many_dft_c2r(rank, dims, 1, c, nullptr, 1, 0, r, nullptr, 1, 0,
                                      f | kDestroyInput);
    }
    fftwf_free(r);
    fftwf_free(c);
    if (p.r2c == nullptr || p.c2r == nullptr) {
      if (p.r2c != nullptr) fftwf_destroy_plan(p.r2c);
      if (p.c2r != nullptr) fftwf_destroy_plan(p.c2r);
      return nullptr;
    }
  }
  save_wisdom_locked();
  return &(plane_plans[key] = p);
}

const PlanePlans* get_plane_plans(int rank, int64_t n1, int64_t n2, bool real_al, bool spec_al) {
  std::lock_guard<std::mutex> lock(plan_mu);
  return plane_plans_locked(rank, n1, n2, real_al, spec_al);
}

// The pass along x's transforms: X points down the columns of a block of X rows of `blk`
// adjacent bins, in place, the rows `rs` floats apart; one per (X, blk, kernel), shared by
// conv and sonotile_fftw_xpass (an LFB box). sonotile's vector kernel (vector_fft.h) where
// the build has it and X factors into vfft::kRadices (rows one
// vector longer than the block: see vfft::block); else FFTW's plans (rows 2 blk floats apart)
// with the effort of batched_effort.
struct XPlans {
  fftwf_plan fwd = nullptr, bwd = nullptr;
  int64_t rs = 0;    // floats from one row of a block to the next
  bool vec = false;  // vfft's plans, not FFTW's
#ifdef SONOTILE_VFFT
  vfft::Plan vf, vb;
#endif
  // floats of one block buffer
  size_t floats(int64_t X) const { return size_t(X) * size_t(rs); }
};
std::map<std::pair<int64_t, int64_t>, XPlans> x_plans;  // (X, blk); guarded by plan_mu

// plan_mu held; nullptr (nothing kept) when planning fails.
const XPlans* x_plans_locked(int64_t X, int64_t blk) {
  auto it = x_plans.find({X, blk});
  if (it != x_plans.end()) return &it->second;
  XPlans p;
#ifdef SONOTILE_VFFT
  if (vector_columns(X)) {
    p.vec = vfft::make(int(X), -1, &p.vf) && vfft::make(int(X), +1, &p.vb);
    if (!p.vec) return nullptr;
    p.rs = 2 * blk + vfft::kVW;
    return &(x_plans[{X, blk}] = std::move(p));
  }
#endif
  auto* b = static_cast<fftwf_complex*>(fft_alloc(sizeof(fftwf_complex) * X * blk));
  if (b == nullptr) return nullptr;
  if (g_threads_ok) fftwf_plan_with_nthreads(1);
  const unsigned f = batched_effort(X * blk);
  const int nx = int(X), hm = int(blk);
  p.fwd = fftwf_plan_many_dft(1, &nx, hm, b, nullptr, hm, 1, b, nullptr, hm, 1, -1, f);
  p.bwd = fftwf_plan_many_dft(1, &nx, hm, b, nullptr, hm, 1, b, nullptr, hm, 1, +1, f);
  fftwf_free(b);
  if (!p.fwd || !p.bwd) {
    if (p.fwd != nullptr) fftwf_destroy_plan(p.fwd);
    if (p.bwd != nullptr) fftwf_destroy_plan(p.bwd);
    return nullptr;
  }
  p.rs = 2 * blk;
  save_wisdom_locked();
  return &(x_plans[{X, blk}] = std::move(p));
}

const XPlans* get_x_plans(int64_t X, int64_t blk) {
  std::lock_guard<std::mutex> lock(plan_mu);
  return x_plans_locked(X, blk);
}

// The pass along x's transform of one block in place (`forward`: sign -1), its first `b` bins
// of each row used; false when the kernel's scratch could not be allocated.
bool x_transform(const XPlans* P, bool forward, float* buf, int64_t X, int64_t b) {
#ifdef SONOTILE_VFFT
  if (P->vec) {
    vfft::V* scratch = vfft::scratch(2 * size_t(X));
    if (scratch == nullptr) return false;
    vfft::block(forward ? P->vf : P->vb, buf, P->rs, 2 * b, scratch);
    return true;
  }
#else
  (void)X;
  (void)b;
#endif
  fftwf_execute_dft(forward ? P->fwd : P->bwd, reinterpret_cast<fftwf_complex*>(buf),
                    reinterpret_cast<fftwf_complex*>(buf));
  return true;
}

struct ConvPlans {
  const PlanePlans* plane;
  const XPlans* x;
};
using ConvKey = std::tuple<int, int64_t, int64_t, int64_t, int, int64_t>;
std::map<ConvKey, ConvPlans> conv_plans;  // guarded by plan_mu; entries never move

struct Grid {  // a real grid (X, plane...) of rank 2 or 3 and its half spectrum
  int rank = 0;
  int64_t d[3] = {1, 1, 1};  // real dims, rank entries used
  int64_t X = 1;             // outer axis
  int64_t pr = 1, pc = 1;    // real / complex elements per plane
  int64_t cols = 1;          // halved last axis (the contiguous axis of a spectrum plane)
  size_t nr = 0, nc = 0;     // real / complex elements of the grid
  int64_t blk = kBlockMax;   // plane bins per block of the pass along x
};

bool grid_from(int rank, const int64_t* dims, Grid* g) {
  if (rank < 2 || rank > 3) return false;
  g->rank = rank;
  for (int a = 0; a < g->rank; ++a) g->d[a] = dims[a];
  g->X = g->d[0];
  g->cols = g->d[g->rank - 1] / 2 + 1;
  g->pr = g->d[g->rank - 1] * (g->rank == 3 ? g->d[1] : 1);
  g->pc = g->cols * (g->rank == 3 ? g->d[1] : 1);
  g->nr = size_t(g->X) * g->pr;
  g->nc = size_t(g->X) * g->pc;
  g->blk = kBlockMax;
  while (g->blk > kBlockMin && (g->pc + g->blk - 1) / g->blk < 8 * int64_t(g_threads)) g->blk /= 2;
  return true;
}

bool grid_of(ffi::Span<const int64_t> dims, Grid* g) {
  return grid_from(int(dims.size()), dims.begin(), g);
}

// The plans of conv on `g`: its planes' (real side `aligned`; the spectrum planes are the
// workers' aligned scratch) and the pass along x's; nullptr when planning fails.
const ConvPlans* get_conv_plans(const Grid& g, bool aligned) {
  std::lock_guard<std::mutex> lock(plan_mu);
  const int64_t n1 = g.rank == 3 ? g.d[1] : 1, n2 = g.d[g.rank - 1];
  ConvKey key{g.rank, g.d[0], g.d[1], g.rank == 3 ? g.d[2] : 0, int(aligned), g.blk};
  auto it = conv_plans.find(key);
  if (it != conv_plans.end()) return &it->second;
  ConvPlans p{};
  p.plane = plane_plans_locked(g.rank - 1, n1, n2, aligned, true);
  if (p.plane == nullptr) return nullptr;
  const XPlans* x = x_plans_locked(g.X, g.blk);
  if (x == nullptr) return nullptr;  // no plans: the caller's error
  p.x = x;
  return &(conv_plans[key] = p);
}

// Floats of scratch a plane transform needs beyond its plane buffers (by halves: the rows' half
// spectra), a multiple of 16.
size_t plane_extra(const PlanePlans* P) {
  return P->pair.rows_f == nullptr ? 0 : pad16(size_t(P->n1 * P->n2));
}

// Unaligned loads and stores of a GCC / Clang vector type.
template <class V>
inline V load_v(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
inline void store_v(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// Two complex numbers per vector (GCC / Clang vector extensions: SSE2, NEON, ...).
typedef float V4 __attribute__((vector_size(16)));
inline V4 load4(const float* p) { return load_v<V4>(p); }
inline void store4(float* p, V4 v) { store_v(p, v); }
inline V4 swap_ri(V4 v) { return V4{v[1], v[0], v[3], v[2]}; }  // (re, im) -> (im, re)
inline V4 swap_pairs(V4 v) { return V4{v[2], v[3], v[0], v[1]}; }
#ifdef __AVX__
// Four complex numbers per vector where the build has 256-bit registers (x86 with AVX): a plane
// row's combine 1.6x faster on the 2-core EPYC (3.0 against 4.9 us per 128 x 128 plane; 512-bit
// vectors took 3.7). Without AVX these would be emulated at half the speed of V4: not used.
typedef float V8 __attribute__((vector_size(32)));
inline V8 load8(const float* p) { return load_v<V8>(p); }
inline void store8(float* p, V8 v) { store_v(p, v); }
inline V8 swap_ri8(V8 v) { return V8{v[1], v[0], v[3], v[2], v[5], v[4], v[7], v[6]}; }
inline V8 reverse_pairs8(V8 v) { return V8{v[6], v[7], v[4], v[5], v[2], v[3], v[0], v[1]}; }
#endif

// out[k] = c0 a + c1 conj(b) + c2 (swap(a) s + swap(b)) for k = 0 .. kn - 1, a = z[k],
// b = z[(M - k) mod M] (z: M complex numbers), coefficients per k from c0..c2 (PairPlans).
void combine_row(const float* z, int64_t M, int64_t kn, const float* c0, const float* c1,
                 const float* c2, float* out) {
  const V4 s = {1.f, -1.f, 1.f, -1.f};
  auto one = [&](int64_t k) {
    const float* a = z + 2 * (k % M);
    const float* b = z + 2 * ((M - k) % M);
    const float ar = a[0], ai = a[1], br = b[0], bi = b[1];
    out[2 * k] = c0[2 * k] * ar + c1[2 * k] * br + c2[2 * k] * (ai + bi);
    out[2 * k + 1] = c0[2 * k] * ai - c1[2 * k] * bi + c2[2 * k] * (br - ar);
  };
  one(0);
  int64_t k = 1;
  const int64_t end = std::min(kn, M);
#ifdef __AVX__
  const V8 s8 = {1.f, -1.f, 1.f, -1.f, 1.f, -1.f, 1.f, -1.f};
  for (; k + 3 < end; k += 4) {  // a = z[k .. k+3], b = z[M-k .. M-k-3]
    const V8 a = load8(z + 2 * k), b = reverse_pairs8(load8(z + 2 * (M - k - 3)));
    const V8 v = load8(c0 + 2 * k) * a + load8(c1 + 2 * k) * (b * s8) +
                 load8(c2 + 2 * k) * (swap_ri8(a) * s8 + swap_ri8(b));
    store8(out + 2 * k, v);
  }
#endif
  for (; k + 1 < end; k += 2) {  // a = z[k, k+1], b = z[M-k, M-k-1]
    const V4 a = load4(z + 2 * k), b = swap_pairs(load4(z + 2 * (M - k - 1)));
    const V4 v = load4(c0 + 2 * k) * a + load4(c1 + 2 * k) * (b * s) +
                 load4(c2 + 2 * k) * (swap_ri(a) * s + swap_ri(b));
    store4(out + 2 * k, v);
  }
  for (; k < kn; ++k) one(k);
}

#ifdef SONOTILE_VFFT
// A worker's buffer of at least `floats` floats for the copies of rows_on_kernel and
// tail_on_kernel (kept for the thread's life); nullptr when out of memory.
float* copy_buffer(size_t floats) {
  thread_local std::vector<float> buf;
  try {
    if (buf.size() < floats) buf.resize(floats);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return buf.data();
}

// Floats from one row of a copied block to the next for `w` complex numbers per row: whole
// cache lines plus one vector (see vfft::block).
int64_t copy_stride(int64_t w) { return (2 * w + 15) / 16 * 16 + vfft::kVW; }

// The n1 rows of `R.n` complex numbers of `in` (rows R.n apart) transformed into `out` (the same
// layout; may be `in`) on vfft: transposed into a block of R.n rows of n1 bins, its columns
// transformed, transposed back. false (nothing written) when a buffer could not be allocated.
bool rows_on_kernel(const vfft::Plan& R, int64_t n1, const float* in, float* out) {
  const int64_t M = R.n, rs = copy_stride(n1);
  float* b = copy_buffer(size_t(M * rs));
  vfft::V* s = vfft::scratch(2 * size_t(M));
  if (b == nullptr || s == nullptr) return false;
  for (int64_t y = 0; y < n1; ++y)
    for (int64_t k = 0; k < M; ++k) std::memcpy(b + k * rs + 2 * y, in + 2 * (y * M + k), 8);
  vfft::block(R, b, rs, 2 * n1, s);
  for (int64_t y = 0; y < n1; ++y)
    for (int64_t k = 0; k < M; ++k) std::memcpy(out + 2 * (y * M + k), b + k * rs + 2 * y, 8);
  return true;
}

// The columns of `t` bins at `spec` (C.n rows `rs` floats apart) in place on vfft, through a
// copy whose rows hold whole vectors; false (nothing changed) when a buffer failed.
bool tail_on_kernel(const vfft::Plan& C, float* spec, int64_t rs, int64_t t, vfft::V* s) {
  const int64_t n = C.n, bs = copy_stride(t);
  float* b = copy_buffer(size_t(n * bs));
  if (b == nullptr) return false;
  for (int64_t i = 0; i < n; ++i) std::memcpy(b + i * bs, spec + i * rs, 8 * size_t(t));
  vfft::block(C, b, bs, 2 * t, s);
  for (int64_t i = 0; i < n; ++i) std::memcpy(spec + i * rs, b + i * bs, 8 * size_t(t));
  return true;
}
#endif

// The column transforms of a plane's half spectrum (n1 rows of `cols` bins) in place: on vfft
// where the plans have it (the bins after the last whole vector on FFTW's tail plans, or on
// vfft through a padded copy where vtail), else FFTW's column plans.
void plane_columns(const PlanePlans* P, bool forward, float* spec) {
  const PairPlans& q = P->pair;
#ifdef SONOTILE_VFFT
  if (q.vcols) {
    if (vfft::V* s = vfft::scratch(2 * size_t(P->n1)); s != nullptr) {
      const vfft::Plan& v = forward ? q.vf : q.vb;
      if (q.hv > 0) vfft::block(v, spec, 2 * P->cols, 2 * q.hv, s);
      float* tail = spec + 2 * q.hv;
      if (q.hv < P->cols && !(q.vtail && tail_on_kernel(v, tail, 2 * P->cols, P->cols - q.hv, s)))
        fftwf_execute_dft(forward ? q.tail_f : q.tail_b, reinterpret_cast<fftwf_complex*>(tail),
                          reinterpret_cast<fftwf_complex*>(tail));
      return;
    }
  }
#endif
  fftwf_execute_dft(forward ? q.cols_f : q.cols_b, reinterpret_cast<fftwf_complex*>(spec),
                    reinterpret_cast<fftwf_complex*>(spec));
}

// A plane's row transforms (`forward`: sign -1) on vfft where the plans have them
// (PairPlans::vrows); false when they did not run there (then FFTW's row plans do).
bool rows_vector(const PairPlans& q, bool forward, int64_t n1, const float* in, float* out) {
#ifdef SONOTILE_VFFT
  return q.vrows && rows_on_kernel(forward ? q.rf : q.rb, n1, in, out);
#else
  (void)q;
  (void)forward;
  (void)n1;
  (void)in;
  (void)out;
  return false;
#endif
}

// One plane's R2C: `in` (n1 n2 reals) -> `out` (n1 cols complex, row-major); `ws`: plane_extra
// floats.
void plane_r2c(const PlanePlans* P, const float* in, float* out, float* ws) {
  if (P->pair.rows_f == nullptr) {
    fftwf_execute_dft_r2c(P->r2c, const_cast<float*>(in), reinterpret_cast<fftwf_complex*>(out));
    return;
  }
  const PairPlans& q = P->pair;
  const int64_t M = P->n2 / 2;
  if (!rows_vector(q, true, P->n1, in, ws))
    fftwf_execute_dft(q.rows_f, reinterpret_cast<fftwf_complex*>(const_cast<float*>(in)),
                      reinterpret_cast<fftwf_complex*>(ws));
  for (int64_t y = 0; y < P->n1; ++y)
    combine_row(ws + 2 * y * M, M, P->cols, q.u0.data(), q.u1.data(), q.u2.data(),
                out + 2 * y * P->cols);
  plane_columns(P, true, out);
}

// One plane's C2R (unnormalised): `in` (n1 cols complex, row-major; overwritten) -> `out`.
void plane_c2r(const PlanePlans* P, float* in, float* out, float* ws) {
  if (P->pair.rows_f == nullptr) {
    fftwf_execute_dft_c2r(P->c2r, reinterpret_cast<fftwf_complex*>(in), out);
    return;
  }
  const PairPlans& q = P->pair;
  const int64_t M = P->n2 / 2;
  plane_columns(P, false, in);
  for (int64_t y = 0; y < P->n1; ++y) {
    float* row = in + 2 * y * P->cols;
    row[1] = 0.f;  // bins 0 and M: real parts only
    row[2 * M + 1] = 0.f;
    combine_row(row, M, M, q.p0.data(), q.p1.data(), q.p2.data(), ws + 2 * y * M);
    // k = 0 again, with b = X_M (combine_row read b = X_0 there: it reads b mod M)
    const float ar = row[0], br = row[2 * M];
    ws[2 * y * M] = q.p0[0] * ar + q.p1[0] * br;
    ws[2 * y * M + 1] = q.p2[0] * (br - ar);
  }
  if (!rows_vector(q, false, P->n1, ws, out))
    fftwf_execute_dft(q.rows_b, reinterpret_cast<fftwf_complex*>(ws),
                      reinterpret_cast<fftwf_complex*>(out));
}

struct FBuf {  // FFTW-aligned, zeroed scratch owned by one worker
  float* p = nullptr;
  explicit FBuf(size_t floats) {
    if (floats == 0) return;
    p = static_cast<float*>(fft_alloc(sizeof(float) * floats));
    if (p != nullptr) std::memset(p, 0, sizeof(float) * floats);
  }
  ~FBuf() { fftwf_free(p); }
  FBuf(const FBuf&) = delete;
  FBuf& operator=(const FBuf&) = delete;
};

// body(scratch, i) for i in [0, n) on up to `threads` workers, each with its own scratch of
// `floats` floats; items are taken from a shared counter (the machine's other load is uneven).
// False when a worker's scratch could not be allocated (its items are then not done).
template <class Body>
bool parallel_items(int64_t n, int threads, size_t floats, Body body) {
  std::atomic<int64_t> next{0};
  std::atomic<bool> ok{true};
  const int w = int(std::max<int64_t>(1, std::min<int64_t>(threads, n)));
  run_jobs(w, w, [&](int) {
    FBuf buf(floats);
    if (floats > 0 && buf.p == nullptr) {
      ok = false;
      return;
    }
    for (int64_t i; (i = next.fetch_add(1)) < n;) body(buf.p, i);
  });
  return ok;
}

// t[x, j] = s[x, j] * op[x, c0 + j] * w_x for the x-block (X rows `rs` floats apart, b bins
// valid).
// op is even along x (a function of |k|: op[x] = op[X - x]), so only its rows 0 .. X/2 are read:
// half the operator's bytes of every pass along x (~2 % of a 128^3 absorbing step).
void multiply_block(const Grid& g, int64_t rs, const float* s, const float* op,
                    const float* vecx, float scale, int64_t c0, int64_t b, float* t) {
  for (int64_t x = 0; x < g.X; ++x) {
    const float wr = vecx ? vecx[2 * x] * scale : scale, wi = vecx ? vecx[2 * x + 1] * scale : 0.f;
    const float* a = s + x * rs;
    float* o = t + x * rs;
    const int64_t row = x <= g.X - x ? x : g.X - x;  // op's row for k_x and -k_x
    const float* k = op ? op + row * g.pc + c0 : nullptr;
    for (int64_t j = 0; j < b; ++j) {
      const float m = k ? k[j] : 1.f;
      const float xr = a[2 * j] * m, xi = a[2 * j + 1] * m;
      o[2 * j] = xr * wr - xi * wi;
      o[2 * j + 1] = xr * wi + xi * wr;
    }
  }
}

// dst = src * vec along plane axis `axis` (1: rows of a rank-3 plane, last: columns), or a copy.
void plane_times(const Grid& g, const float* src, const float* vec, int axis, float* dst) {
  if (vec == nullptr) {
    std::memcpy(dst, src, sizeof(float) * 2 * g.pc);
    return;
  }
  const int64_t rows = g.pc / g.cols;
  const bool by_col = axis == g.rank - 1;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = src + 2 * r * g.cols;
    float* o = dst + 2 * r * g.cols;
    for (int64_t j = 0; j < g.cols; ++j) {
      const float* w = vec + 2 * (by_col ? j : r);
      const float xr = a[2 * j], xi = a[2 * j + 1];
      o[2 * j] = xr * w[0] - xi * w[1];
      o[2 * j + 1] = xr * w[1] + xi * w[0];
    }
  }
}

// A split-field update applied to an operator's real output as each plane is made (the plane
// is in cache; XLA would read the derivative back from memory, on one thread):
//
//   out = m (m old - coef d),   m: a real vector along the output's axis (a PML profile),
//   coef = s (kEpiScalar), s G (kEpiField) or s / mean_axis(G) (kEpiStaggered: G's mean with
//   the next point along the axis, the last point G itself: k-Wave's rho0 on the staggered
//   grid),
//
// d the operator's output, old / G grids of the output's shape (old may be the output's own
// buffer: the plane is read before it is written). sonotile's velocity update
// u = pml_sg (pml_sg u - dt / rho0_sg dp/dx) and density update rho = pml (pml rho - dt rho0
// du/dx) (sonotile/physics/acoustic/step.py), same arithmetic in the same order.
enum EpiMode : int64_t { kEpiNone = 0, kEpiScalar = 1, kEpiField = 2, kEpiStaggered = 3 };

struct Epilogue {
  int64_t mode = kEpiNone;
  int axis = 0;
  const float* old = nullptr;
  const float* m = nullptr;
  const float* G = nullptr;
  float s = 0.f;
};

// One row of n values of the update: mk (a pointer: m along the row; else the scalar mv),
// coefficient by mode (g: G's row, gn: the next row of the mean, or g itself for the last).
// Written as plain loops per case so that the compiler vectorises them.
void epilogue_row(int64_t mode, int64_t n, const float* mk, float mv, float s, const float* o,
                  const float* d, const float* g, const float* gn, float* y) {
  if (mk != nullptr) {  // m along the row (the output's axis is the last one)
    if (mode == kEpiScalar) {
      for (int64_t c = 0; c < n; ++c) y[c] = mk[c] * (mk[c] * o[c] - s * d[c]);
    } else if (mode == kEpiField) {
      for (int64_t c = 0; c < n; ++c) y[c] = mk[c] * (mk[c] * o[c] - (s * g[c]) * d[c]);
    } else {  // staggered along the row: the mean of g[c] and g[c + 1], the last g itself
      for (int64_t c = 0; c + 1 < n; ++c)
        y[c] = mk[c] * (mk[c] * o[c] - (s / (0.5f * (g[c] + g[c + 1]))) * d[c]);
      const int64_t c = n - 1;
      y[c] = mk[c] * (mk[c] * o[c] - (s / g[c]) * d[c]);
    }
    return;
  }
  const float m = mv;
  if (mode == kEpiScalar) {
    for (int64_t c = 0; c < n; ++c) y[c] = m * (m * o[c] - s * d[c]);
  } else if (mode == kEpiField) {
    for (int64_t c = 0; c < n; ++c) y[c] = m * (m * o[c] - (s * g[c]) * d[c]);
  } else if (gn == g) {  // the last row / plane of the mean's axis: g itself
    for (int64_t c = 0; c < n; ++c) y[c] = m * (m * o[c] - (s / g[c]) * d[c]);
  } else {
    for (int64_t c = 0; c < n; ++c)
      y[c] = m * (m * o[c] - (s / (0.5f * (g[c] + gn[c]))) * d[c]);
  }
}

// Plane x of `out` from plane x of the derivative `d` (may be `out` itself; `out` may be the
// old field's plane too: each value is read before it is written).
void apply_epilogue(const Grid& g, const Epilogue& e, int64_t x, const float* d, float* out) {
  const int64_t n2 = g.d[g.rank - 1], n1 = g.pr / n2;
  const int64_t off = x * g.pr;
  const int col_axis = g.rank - 1;
  const bool along_x = e.axis == 0, along_row = e.axis == col_axis;
  for (int64_t r = 0; r < n1; ++r) {
    const int64_t i = r * n2;
    const float* gp = e.G != nullptr ? e.G + off + i : nullptr;
    const float* gn = gp;
    if (e.mode == kEpiStaggered && !along_row) {
      if (along_x) gn = x == g.X - 1 ? gp : gp + g.pr;
      else gn = r == n1 - 1 ? gp : gp + n2;
    }
    const float mv = along_x ? e.m[x] : (along_row ? 0.f : e.m[r]);
    epilogue_row(e.mode, n2, along_row ? e.m : nullptr, mv, e.s, e.old + off + i, d + i, gp, gn,
                 out + i);
  }
}

// The epilogue operands of one output (after the call's other operands, from index `a` on):
// old, m, s (1 element) and, for kEpiField / kEpiStaggered, G. Advances `a`.
ffi::Error epilogue_args(const Grid& g, int64_t mode, int axis, ffi::RemainingArgs& args,
                         int* a, Epilogue* e) {
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  if (mode < kEpiNone || mode > kEpiStaggered) return bad("epilogue: mode 0-3");
  e->mode = mode;
  if (mode == kEpiNone) return ffi::Error::Success();
  if (axis < 0 || axis >= g.rank) return bad("epilogue: needs the output's grid axis");
  e->axis = axis;
  const int n = mode == kEpiScalar ? 3 : 4;
  if (*a + n > int(args.size())) return bad("epilogue: operand count");
  auto old = args.get<ffi::Buffer<ffi::F32>>((*a)++);
  auto m = args.get<ffi::Buffer<ffi::F32>>((*a)++);
  auto s = args.get<ffi::Buffer<ffi::F32>>((*a)++);
  if (old.has_error() || old->element_count() != g.nr) return bad("epilogue: old field shape");
  if (m.has_error() || int64_t(m->element_count()) != g.d[axis]) return bad("epilogue: m length");
  if (s.has_error() || s->element_count() != 1) return bad("epilogue: one scale");
  e->old = old->typed_data();
  e->m = m->typed_data();
  e->s = s->typed_data()[0];
  if (n == 4) {
    auto G = args.get<ffi::Buffer<ffi::F32>>((*a)++);
    if (G.has_error() || G->element_count() != g.nr) return bad("epilogue: field shape");
    e->G = G->typed_data();
  }
  return ffi::Error::Success();
}

// Where a product's spectrum waits between the passes: in the output it becomes (plane x of
// the spectrum in the output's plane x, the 2 pc - pr floats that do not fit in `side`), so
// the operators need no grid-sized scratch.
struct Store {
  float* main;
  float* side;
  int64_t pr, ov;
  // floats [f, f + n) of spectrum plane x to / from dst
  void get(int64_t x, int64_t f, int64_t n, float* dst) const {
    const int64_t n1 = std::max<int64_t>(0, std::min(n, pr - f));
    if (n1 > 0) std::memcpy(dst, main + x * pr + f, sizeof(float) * n1);
    if (n > n1) std::memcpy(dst + n1, side + x * ov + (f + n1 - pr), sizeof(float) * (n - n1));
  }
  void put(int64_t x, int64_t f, int64_t n, const float* src) const {
    const int64_t n1 = std::max<int64_t>(0, std::min(n, pr - f));
    if (n1 > 0) std::memcpy(main + x * pr + f, src, sizeof(float) * n1);
    if (n > n1) std::memcpy(side + x * ov + (f + n1 - pr), src + n1, sizeof(float) * (n - n1));
  }
};

struct Prod {
  const float* vecx;  // vector along x applied in the pass along x, or nullptr
  int out;            // the output whose buffer stores it
  const float* op;    // the operator applied in the pass along x (op, or op2), or nullptr
};

ffi::Error ConvImpl(ffi::ThreadPool pool, int64_t has_op, ffi::Span<const int64_t> src,
                    ffi::Span<const int64_t> axis, ffi::Span<const int64_t> epi,
                    ffi::RemainingArgs args, ffi::RemainingRets rets) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  const int m = int(rets.size());
  if (m == 0 || int(src.size()) != m || int(axis.size()) != m) return bad("conv: src/axis per output");
  if (int(epi.size()) != m) return bad("conv: epi per output");
  int k = 0, n_vec = 0, n_epi = 0;
  bool has_op2 = false;
  for (int o = 0; o < m; ++o) {
    if (src[o] < 0) return bad("conv: negative src");
    k = std::max(k, int(src[o]) + 1);
    n_vec += axis[o] >= 0 ? 1 : 0;
    n_epi += epi[o] == kEpiNone ? 0 : (epi[o] == kEpiScalar ? 3 : 4);
    has_op2 = has_op2 || axis[o] == kOp2;
  }
  if (int(args.size()) != k + (has_op ? 1 : 0) + (has_op2 ? 1 : 0) + n_vec + n_epi)
    return bad("conv: argument count");
  Grid g;
  std::vector<const float*> in(k);
  int a = 0;
  for (int j = 0; j < k; ++j, ++a) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a);
    if (x.has_error()) return bad("conv: float32 inputs");
    if (j == 0 && !grid_of(x->dimensions(), &g)) return bad("conv: rank 2-3 only");
    if (x->element_count() != g.nr) return bad("conv: input shapes differ");
    in[j] = x->typed_data();
  }
  std::vector<float*> out(m);
  for (int o = 0; o < m; ++o) {
    if (axis[o] == kSpectrum) {  // the shared product after the pass along x, complex64
      auto y = rets.get<ffi::Buffer<ffi::C64>>(o);
      if (y.has_error() || (*y)->element_count() != g.nc) return bad("conv: spectrum output");
      out[o] = reinterpret_cast<float*>((*y)->typed_data());
      continue;
    }
    if (axis[o] < -1 && axis[o] != kOp2)
      return bad("conv: axis -1 (none), -2 (spectrum), -3 (op2) or a grid axis");
    auto y = rets.get<ffi::Buffer<ffi::F32>>(o);
    if (y.has_error() || (*y)->element_count() != g.nr) return bad("conv: real output shape");
    out[o] = (*y)->typed_data();
  }
  const float* op = nullptr;
  if (has_op) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (x.has_error() || x->element_count() != g.nc) return bad("conv: operator shape");
    op = x->typed_data();
  }
  const float* op2 = nullptr;
  if (has_op2) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (x.has_error() || x->element_count() != g.nc) return bad("conv: op2 shape");
    op2 = x->typed_data();
  }
  std::vector<const float*> vec(m, nullptr);
  for (int o = 0; o < m; ++o) {
    if (axis[o] < 0) continue;
    auto x = args.get<ffi::Buffer<ffi::C64>>(a++);
    if (axis[o] >= g.rank) return bad("conv: vector axis beyond the rank");
    const int64_t len = axis[o] == g.rank - 1 ? g.cols : g.d[axis[o]];
    if (x.has_error() || int64_t(x->element_count()) != len) return bad("conv: vector length");
    vec[o] = reinterpret_cast<const float*>(x->typed_data());
  }
  std::vector<Epilogue> epis(m);
  for (int o = 0; o < m; ++o) {
    ffi::Error e = epilogue_args(g, epi[o], int(axis[o]), args, &a, &epis[o]);
    if (e.failure()) return e;
    // the output holds a spectrum between the passes: its old field must be another buffer
    if (epis[o].old == out[o] || epis[o].G == out[o]) return bad("conv: epilogue aliases out");
  }
  bool aligned = true;
  for (const float* p : in) aligned = aligned && is_aligned(p) && is_aligned(p + g.pr);
  for (int o = 0; o < m; ++o)
    if (axis[o] != kSpectrum) aligned = aligned && is_aligned(out[o]) && is_aligned(out[o] + g.pr);
  const ConvPlans* P = get_conv_plans(g, aligned);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);

  const float scale = float(1.0 / double(g.nr));
  const int T = g_threads;
  const int64_t nblocks = (g.pc + g.blk - 1) / g.blk;
  const int64_t ov = 2 * g.pc - g.pr;  // floats of a spectrum plane beyond a real plane
  const size_t plane = size_t(2 * g.pc), blk = P->x->floats(g.X);
  const int64_t rs = P->x->rs;
  std::vector<float*> sides;  // the overflow of each product's storage, X * ov floats
  for (int j = 0; j < k; ++j) {
    // products: [shared: op only, for outputs with no vector or one along a plane axis]
    //           + one per output with a vector along x (op * vector)
    //           + one per op2 output (op2 instead of op: a second operator of the same
    //             forward transform, e.g. kappa beside a gradient's sqrt(kappa))
    std::vector<int> shared_users;  // real outputs of the shared product
    int spectrum = -1;              // an output returning the shared product itself
    std::vector<Prod> prods;
    for (int o = 0; o < m; ++o) {
      if (src[o] != j || axis[o] == 0 || axis[o] == kOp2) continue;
      if (axis[o] != kSpectrum) shared_users.push_back(o);
      else if (spectrum >= 0) return bad("conv: one spectrum output per input");
      else spectrum = o;
    }
    if (spectrum >= 0) prods.push_back({nullptr, spectrum, op});
    else if (!shared_users.empty()) prods.push_back({nullptr, shared_users[0], op});
    for (int o = 0; o < m; ++o)
      if (src[o] == j && axis[o] == 0) prods.push_back({vec[o], o, op});
    for (int o = 0; o < m; ++o)
      if (src[o] == j && axis[o] == kOp2) prods.push_back({nullptr, o, op2});
    if (prods.empty()) continue;
    while (sides.size() < prods.size()) sides.push_back(take_scratch(size_t(g.X * ov)));
    if (std::find(sides.begin(), sides.end(), nullptr) != sides.end()) {
      for (float* p : sides)
        if (p != nullptr) give_scratch(p, size_t(g.X * ov));
      return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
    }
    std::vector<Store> store;
    for (size_t q = 0; q < prods.size(); ++q) {
      if (prods[q].out == spectrum)  // a whole spectrum buffer: nothing overflows
        store.push_back({out[spectrum], nullptr, 2 * g.pc, 0});
      else
        store.push_back({out[prods[q].out], sides[q], g.pr, ov});
    }
    const float* x_in = in[j];
    // 1. planes forward, into the storage of product 0 (the pass along x makes it last)
    const size_t pp = pad16(plane), extra = plane_extra(P->plane);
    bool ok = parallel_items(g.X, T, pp + extra, [&](float* pb, int64_t x) {
      plane_r2c(P->plane, x_in + x * g.pr, pb, pb + pp);
      store[0].put(x, 0, 2 * g.pc, pb);
    });
    // 2. along x, block by block
    std::atomic<bool> x_ok{true};
    ok = ok && parallel_items(nblocks, T, 2 * blk, [&](float* buf, int64_t i) {
      float* tmp = buf + blk;
      const int64_t c0 = i * g.blk, b = std::min(g.blk, g.pc - c0);
      for (int64_t x = 0; x < g.X; ++x) store[0].get(x, 2 * c0, 2 * b, buf + x * rs);
      if (!x_transform(P->x, true, buf, g.X, b)) x_ok = false;
      for (int q = int(prods.size()) - 1; q >= 0; --q) {  // product 0 last, in place
        float* t = q == 0 ? buf : tmp;
        multiply_block(g, rs, buf, prods[q].op, prods[q].vecx, scale, c0, b, t);
        if (!x_transform(P->x, false, t, g.X, b)) x_ok = false;
        for (int64_t x = 0; x < g.X; ++x) store[q].put(x, 2 * c0, 2 * b, t + x * rs);
      }
    });
    ok = ok && x_ok;
    // 3. planes back; each plane of a storage is read before its output plane is written
    const bool keep_shared = shared_users.size() > 1;
    const bool shared0 = spectrum >= 0 || !shared_users.empty();  // product 0 is the shared one
    ok = ok && parallel_items(g.X, T, 2 * pp + extra, [&](float* pb, int64_t x) {
      float* sp = pb + pp;
      float* ws = pb + 2 * pp;
      for (size_t q = 0; q < prods.size(); ++q) {
        const bool shared = shared0 && q == 0;
        if (!shared) {  // an x product: op and vector applied
          const int o = prods[q].out;
          store[q].get(x, 0, 2 * g.pc, pb);
          plane_c2r(P->plane, pb, out[o] + x * g.pr, ws);
          if (epis[o].mode != kEpiNone)
            apply_epilogue(g, epis[o], x, out[o] + x * g.pr, out[o] + x * g.pr);
          continue;
        }
        if (shared_users.empty()) continue;  // returned as a spectrum only
        store[q].get(x, 0, 2 * g.pc, keep_shared ? sp : pb);
        for (int o : shared_users) {
          const float* v = axis[o] >= 1 ? vec[o] : nullptr;
          if (keep_shared || v != nullptr) plane_times(g, keep_shared ? sp : pb, v, int(axis[o]), pb);
          plane_c2r(P->plane, pb, out[o] + x * g.pr, ws);
          if (epis[o].mode != kEpiNone)
            apply_epilogue(g, epis[o], x, out[o] + x * g.pr, out[o] + x * g.pr);
        }
      }
    });
    if (!ok) {
      for (float* p : sides) give_scratch(p, size_t(g.X * ov));
      return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
    }
  }
  for (float* p : sides) give_scratch(p, size_t(g.X * ov));
  return ffi::Error::Success();
}

// sonotile_fftw_conv_sum: one real output, the sum of k spectral operators of conv's kind,
//
//   out = C2R(op * sum_j vec_j * R2C(in_j)) / N      (vec_j along grid axis axis[j], or none)
//
// (the adjoint of the gradient: sum_a D_a^T c_a). Inputs whose vectors run along plane axes
// (or that have none) are summed while their planes are transformed (their vectors applied on
// the plane in cache), each input with a vector along x has its own spectrum until the pass
// along x, where the x-transformed blocks are summed before one transform back; then one C2R.
// Three inputs cost 3 plane R2C, 2 forward and 1 inverse pass along x and 1 plane C2R, where
// three conv calls and a sum cost 3 of each and a pass over 4 grids.
struct SumArgs {
  Grid g;
  std::vector<const float*> in, vec;  // per input; vec null: no vector
  std::vector<int64_t> axis;
  const float* op = nullptr;
  float* out = nullptr;
};

ffi::Error conv_sum_args(int64_t has_op, ffi::Span<const int64_t> axis, ffi::RemainingArgs args,
                         float* out, size_t out_count, SumArgs* a) {
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  const int k = int(axis.size());
  int n_vec = 0;
  for (int j = 0; j < k; ++j) {
    if (axis[j] < -1) return bad("conv_sum: axis -1 (none) or a grid axis per input");
    n_vec += axis[j] >= 0 ? 1 : 0;
  }
  if (k == 0 || int(args.size()) != k + (has_op ? 1 : 0) + n_vec)
    return bad("conv_sum: argument count");
  a->in.assign(k, nullptr);
  a->vec.assign(k, nullptr);
  a->axis.assign(axis.begin(), axis.end());
  int i = 0;
  for (int j = 0; j < k; ++j, ++i) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(i);
    if (x.has_error()) return bad("conv_sum: float32 inputs");
    if (j == 0 && !grid_of(x->dimensions(), &a->g)) return bad("conv_sum: rank 2-3 only");
    if (x->element_count() != a->g.nr) return bad("conv_sum: input shapes differ");
    a->in[j] = x->typed_data();
  }
  if (out_count != a->g.nr) return bad("conv_sum: output shape");
  a->out = out;
  if (has_op) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(i++);
    if (x.has_error() || x->element_count() != a->g.nc) return bad("conv_sum: operator shape");
    a->op = x->typed_data();
  }
  for (int j = 0; j < k; ++j) {
    if (axis[j] < 0) continue;
    auto x = args.get<ffi::Buffer<ffi::C64>>(i++);
    if (axis[j] >= a->g.rank) return bad("conv_sum: vector axis beyond the rank");
    const int64_t len = axis[j] == a->g.rank - 1 ? a->g.cols : a->g.d[axis[j]];
    if (x.has_error() || int64_t(x->element_count()) != len) return bad("conv_sum: vector length");
    a->vec[j] = reinterpret_cast<const float*>(x->typed_data());
  }
  return ffi::Error::Success();
}

// The three stages of conv_sum (see above) on spectra stored in `sum` (the plane-axis inputs'
// sum, in the output's buffer) and `xs` (one whole spectrum per input with a vector along x).
bool conv_sum_run(const SumArgs& a, const ConvPlans* P, const Store& sum,
                  const std::vector<std::pair<int, float*>>& xs) {
  const Grid& g = a.g;
  const int T = g_threads, k = int(a.in.size());
  const size_t plane = size_t(2 * g.pc), blk = P->x->floats(g.X);
  const int64_t rs = P->x->rs;
  const float scale = float(1.0 / double(g.nr));
  const bool has_sum = int(xs.size()) < k;
  const size_t pp = pad16(plane);  // a second plane buffer, FFTW-aligned too
  const size_t extra = plane_extra(P->plane);
  bool ok = parallel_items(g.X, T, 2 * pp + extra, [&](float* pb, int64_t x) {
    float* t = pb + pp;
    float* ws = pb + 2 * pp;
    bool first = true;
    for (int j = 0; j < k; ++j) {
      if (a.axis[j] == 0) continue;
      float* q = first ? pb : t;
      plane_r2c(P->plane, a.in[j] + x * g.pr, q, ws);
      if (a.vec[j] != nullptr) plane_times(g, q, a.vec[j], int(a.axis[j]), q);
      if (!first)
        for (size_t i = 0; i < plane; ++i) pb[i] += t[i];
      first = false;
    }
    if (has_sum) sum.put(x, 0, 2 * g.pc, pb);
    for (const auto& [j, spec] : xs) {
      plane_r2c(P->plane, a.in[j] + x * g.pr, t, ws);
      std::memcpy(spec + x * plane, t, sizeof(float) * plane);
    }
  });
  const int64_t nblocks = (g.pc + g.blk - 1) / g.blk;
  std::atomic<bool> x_ok{true};
  ok = ok && parallel_items(nblocks, T, 2 * blk, [&](float* buf, int64_t i) {
    float* tmp = buf + blk;
    const int64_t c0 = i * g.blk, b = std::min(g.blk, g.pc - c0);
    if (has_sum) {
      for (int64_t x = 0; x < g.X; ++x) sum.get(x, 2 * c0, 2 * b, buf + x * rs);
      if (!x_transform(P->x, true, buf, g.X, b)) x_ok = false;
    } else {
      std::memset(buf, 0, sizeof(float) * blk);
    }
    for (const auto& [j, spec] : xs) {
      for (int64_t x = 0; x < g.X; ++x)
        std::memcpy(tmp + x * rs, spec + x * plane + 2 * c0, sizeof(float) * 2 * b);
      if (!x_transform(P->x, true, tmp, g.X, b)) x_ok = false;
      multiply_block(g, rs, tmp, nullptr, a.vec[j], 1.f, c0, b, tmp);
      for (size_t f = 0; f < blk; ++f) buf[f] += tmp[f];
    }
    multiply_block(g, rs, buf, a.op, nullptr, scale, c0, b, buf);
    if (!x_transform(P->x, false, buf, g.X, b)) x_ok = false;
    for (int64_t x = 0; x < g.X; ++x) sum.put(x, 2 * c0, 2 * b, buf + x * rs);
  });
  ok = ok && x_ok;
  return ok && parallel_items(g.X, T, pp + extra, [&](float* pb, int64_t x) {
    sum.get(x, 0, 2 * g.pc, pb);
    plane_c2r(P->plane, pb, a.out + x * g.pr, pb + pp);
  });
}

ffi::Error ConvSumImpl(ffi::ThreadPool pool, int64_t has_op, ffi::Span<const int64_t> axis,
                       ffi::RemainingArgs args, ffi::Result<ffi::Buffer<ffi::F32>> out) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  SumArgs a;
  ffi::Error e = conv_sum_args(has_op, axis, args, out->typed_data(), out->element_count(), &a);
  if (e.failure()) return e;
  const Grid& g = a.g;
  bool aligned = is_aligned(a.out) && is_aligned(a.out + g.pr);
  for (const float* p : a.in) aligned = aligned && is_aligned(p) && is_aligned(p + g.pr);
  const ConvPlans* P = get_conv_plans(g, aligned);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const int64_t ov = 2 * g.pc - g.pr;
  const size_t whole = size_t(2 * g.pc) * size_t(g.X);
  float* side = take_scratch(size_t(g.X * ov));
  std::vector<std::pair<int, float*>> xs;  // inputs with a vector along x: their spectra
  bool ok = side != nullptr;
  for (int j = 0; ok && j < int(a.in.size()); ++j) {
    if (a.axis[j] != 0) continue;
    float* p = take_scratch(whole);
    ok = p != nullptr;
    if (ok) xs.emplace_back(j, p);
  }
  ok = ok && conv_sum_run(a, P, Store{a.out, side, g.pr, ov}, xs);
  if (side != nullptr) give_scratch(side, size_t(g.X * ov));
  for (const auto& [j, p] : xs) give_scratch(p, whole);
  return ok ? ffi::Error::Success() : ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
}

// Row x of an input box of sonotile_fftw_xpass: the box itself, or (pad mode) assembled from a
// block's interior planes and its two halos, [left | count interior planes | right | zeros]
// times the bell along x, as LFB pads and windows a block (sonotile/parallel/lfb.py).
struct XRows {
  const float* box = nullptr;  // the whole box (no pad)
  const float *mid = nullptr, *left = nullptr, *right = nullptr, *bell = nullptr;
  int64_t ov = 0, count = 0;
  // floats [2 c0, 2 (c0 + b)) of row x into dst
  void get(const Grid& g, int64_t x, int64_t c0, int64_t b, float* dst) const {
    const float* r = nullptr;
    if (box != nullptr) r = box + 2 * x * g.pc;
    else if (x < ov) r = left + 2 * x * g.pc;
    else if (x < ov + count) r = mid + 2 * (x - ov) * g.pc;
    else if (x < 2 * ov + count) r = right + 2 * (x - ov - count) * g.pc;
    if (r == nullptr) {
      std::memset(dst, 0, sizeof(float) * 2 * b);
      return;
    }
    r += 2 * c0;
    const float w = bell != nullptr ? bell[x] : 1.f;
    if (w == 1.f) {
      std::memcpy(dst, r, sizeof(float) * 2 * b);
      return;
    }
    for (int64_t i = 0; i < 2 * b; ++i) dst[i] = r[i] * w;
  }
};

// sonotile_fftw_xpass: the pass along x of sonotile_fftw_conv on its own, for boxes whose
// planes are already transformed (the LFB blocks split along x only transform their planes
// before the overlap exchange; sonotile/parallel/lfb.py). `dims` is the real grid (X, plane...)
// of rank 2-3; the inputs are k complex64 plane half spectra [X, plane bins] (unnormalised
// R2Cs of the planes), then an optional real operator on the half spectrum, then one complex
// vector of length X per output with axis 0. Output o, complex64 [Xo, plane bins], is planes
// lo .. lo + Xo - 1 (an output of all X planes: 0 .. X - 1; it may alias its input) of
//
//   IFFT_x(FFT_x(in[src_o]) * op * vec_o[k_x]) / N,     N = X * (real points of a plane)
//
// (axis -1: no vector), so sonotile_fftw_planes_c2r of it is the real result on those planes
// (the same scaling as conv's spectrum output). Outputs of one input share its forward pass.
//
// Pad mode (`pad` = the overlap ov > 0, one input): the input is not the box but its parts,
// the block's interior plane spectra [X - 2 ov, plane bins], the left and right halos
// [ov, plane bins], the bell along x (float32 [X]) and the block's real planes `count` (int32
// [1], <= X - 2 ov): the box is [left | count interior planes | right | zeros] * bell, assembled
// while the pass gathers it (no padded copy in memory). Output 0 may then alias the interior.
//
// Pieces (`parts` P > 1, `keep` 0 .. P - 1; outputs of all X planes, P dividing X): output o is
// two results, the X planes cut into P pieces of X / P along x, piece `keep` in the first
// result ([X, plane bins], its other pieces left for sonotile_mpi_transpose to fill) and the
// other pieces, in order, in the second ([X - X / P, plane bins]).
ffi::Error XPassImpl(ffi::ThreadPool pool, ffi::Span<const int64_t> dims, int64_t has_op,
                     int64_t lo, int64_t pad, int64_t parts, int64_t keep,
                     ffi::Span<const int64_t> src, ffi::Span<const int64_t> axis,
                     ffi::RemainingArgs args, ffi::RemainingRets rets) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  Grid g;
  if (!grid_of(dims, &g)) return bad("xpass: rank 2-3 only");
  const bool pieces = parts > 1;
  if (pieces && (keep < 0 || keep >= parts || g.X % parts != 0 || rets.size() % 2 != 0))
    return bad("xpass: pieces (parts dividing X, keep among them, two results per output)");
  const int m = int(rets.size()) / (pieces ? 2 : 1);
  if (m == 0 || int(src.size()) != m || int(axis.size()) != m) return bad("xpass: src/axis per output");
  int k = 0, n_vec = 0;
  for (int o = 0; o < m; ++o) {
    if (src[o] < 0) return bad("xpass: negative src");
    if (axis[o] != -1 && axis[o] != 0) return bad("xpass: axis -1 (none) or 0 (x)");
    k = std::max(k, int(src[o]) + 1);
    n_vec += axis[o] == 0 ? 1 : 0;
  }
  if (pad < 0 || (pad > 0 && (k != 1 || 2 * pad >= g.X))) return bad("xpass: pad mode, one input");
  const int n_in = pad > 0 ? 5 : k;  // pad mode: interior, left, right, bell, count
  if (int(args.size()) != n_in + (has_op ? 1 : 0) + n_vec) return bad("xpass: argument count");
  std::vector<XRows> in(k);
  int a = 0;
  if (pad > 0) {
    auto mid = args.get<ffi::Buffer<ffi::C64>>(0);
    auto left = args.get<ffi::Buffer<ffi::C64>>(1);
    auto right = args.get<ffi::Buffer<ffi::C64>>(2);
    auto bell = args.get<ffi::Buffer<ffi::F32>>(3);
    auto count = args.get<ffi::Buffer<ffi::S32>>(4);
    const size_t halo = size_t(pad) * g.pc;
    if (mid.has_error() || left.has_error() || right.has_error() || bell.has_error() ||
        count.has_error() || mid->element_count() != g.nc - 2 * halo ||
        left->element_count() != halo || right->element_count() != halo ||
        int64_t(bell->element_count()) != g.X || count->element_count() != 1)
      return bad("xpass: pad mode inputs (interior, left, right, bell, count)");
    XRows& r = in[0];
    r.mid = reinterpret_cast<const float*>(mid->typed_data());
    r.left = reinterpret_cast<const float*>(left->typed_data());
    r.right = reinterpret_cast<const float*>(right->typed_data());
    r.bell = bell->typed_data();
    r.ov = pad;
    r.count = count->typed_data()[0];
    if (r.count < 1 || r.count > g.X - 2 * pad) return bad("xpass: count beyond the interior");
    a = 5;
  } else {
    for (int j = 0; j < k; ++j, ++a) {
      auto x = args.get<ffi::Buffer<ffi::C64>>(a);
      if (x.has_error() || x->element_count() != g.nc) return bad("xpass: input spectrum shape");
      in[j].box = reinterpret_cast<const float*>(x->typed_data());
    }
  }
  const float* op = nullptr;
  if (has_op) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (x.has_error() || x->element_count() != g.nc) return bad("xpass: operator shape");
    op = x->typed_data();
  }
  std::vector<float*> out(m), rest(m, nullptr);
  std::vector<int64_t> planes(m), first(m);
  std::vector<const float*> vec(m, nullptr);
  const int64_t piece = pieces ? g.X / parts : g.X;  // planes per piece
  for (int o = 0; o < m; ++o) {
    auto y = rets.get<ffi::Buffer<ffi::C64>>(pieces ? 2 * o : o);
    if (y.has_error() || (*y)->element_count() % g.pc != 0) return bad("xpass: output shape");
    planes[o] = int64_t((*y)->element_count()) / g.pc;
    first[o] = planes[o] == g.X ? 0 : lo;
    if (first[o] < 0 || first[o] + planes[o] > g.X) return bad("xpass: output planes beyond the box");
    out[o] = reinterpret_cast<float*>((*y)->typed_data());
    if (pieces) {
      auto r = rets.get<ffi::Buffer<ffi::C64>>(2 * o + 1);
      if (planes[o] != g.X || r.has_error() ||
          int64_t((*r)->element_count()) != (g.X - piece) * g.pc)
        return bad("xpass: pieces need outputs of all X planes and X - X / parts others");
      rest[o] = reinterpret_cast<float*>((*r)->typed_data());
    }
    if (axis[o] != 0) continue;
    auto x = args.get<ffi::Buffer<ffi::C64>>(a++);
    if (x.has_error() || int64_t(x->element_count()) != g.X) return bad("xpass: vector length");
    vec[o] = reinterpret_cast<const float*>(x->typed_data());
  }
  const XPlans* P = get_x_plans(g.X, g.blk);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const float scale = float(1.0 / double(g.nr));
  const int64_t nblocks = (g.pc + g.blk - 1) / g.blk;
  const size_t blk = P->floats(g.X);
  const int64_t rs = P->rs;
  std::vector<std::vector<int>> by_src(k);  // the outputs of each input
  for (int o = 0; o < m; ++o) by_src[src[o]].push_back(o);
  std::atomic<bool> x_ok{true};
  const bool ok = parallel_items(nblocks, g_threads, 2 * blk, [&](float* buf, int64_t i) {
    float* tmp = buf + blk;
    const int64_t c0 = i * g.blk, b = std::min(g.blk, g.pc - c0);
    for (int j = 0; j < k; ++j) {
      const std::vector<int>& mine = by_src[j];
      if (mine.empty()) continue;
      for (int64_t x = 0; x < g.X; ++x) in[j].get(g, x, c0, b, buf + x * rs);
      if (!x_transform(P, true, buf, g.X, b)) x_ok = false;
      for (int q = int(mine.size()) - 1; q >= 0; --q) {  // the first output last, in place
        const int o = mine[q];
        float* t = q == 0 ? buf : tmp;
        multiply_block(g, rs, buf, op, vec[o], scale, c0, b, t);
        if (!x_transform(P, false, t, g.X, b)) x_ok = false;
        // an output aliasing an input overwrites only this block, already gathered
        for (int64_t x = 0; x < planes[o]; ++x) {
          const int64_t p = x / piece;  // the kept piece in out, the others in rest
          float* row = p == keep || !pieces
                           ? out[o] + 2 * x * g.pc
                           : rest[o] + 2 * (x - (p > keep ? piece : 0)) * g.pc;
          std::memcpy(row + 2 * c0, t + (first[o] + x) * rs, sizeof(float) * 2 * b);
        }
      }
    }
  });
  if (!ok || !x_ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

// sonotile_fftw_planes_c2r: the last stage of sonotile_fftw_conv on its own, for a spectrum
// that conv returned after its pass along x (axis -2): out = plane C2R(spec * vec_axis), the
// vector along a plane axis (1 .. rank-1) or none (axis -1). The spectrum is left intact, so
// several outputs can be made from it one at a time (the gradient: XLA can consume each
// component before the next exists). The output's planes are spectrum planes lo, lo + 1, ...
// (a spectrum of more planes than the output: e.g. a padded box from sonotile_fftw_xpass).
// An epilogue (`epi`, operands after the vector) updates the output along grid axis
// `epi_axis` (the vector's axis, or 0 for a spectrum whose derivative along x the pass applied).
ffi::Error PlanesC2RImpl(ffi::ThreadPool pool, int64_t axis, int64_t lo, int64_t epi,
                         int64_t epi_axis,
                         ffi::Buffer<ffi::C64> spec, ffi::RemainingArgs args,
                         ffi::Result<ffi::Buffer<ffi::F32>> out) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  Grid g;
  if (!grid_of(out->dimensions(), &g)) return bad("planes_c2r: rank 2-3 only");
  if (lo < 0 || spec.element_count() % g.pc != 0 ||
      int64_t(spec.element_count() / g.pc) < lo + g.X)
    return bad("planes_c2r: spectrum shape");
  const float* vec = nullptr;
  const int n_epi = epi == kEpiNone ? 0 : (epi == kEpiScalar ? 3 : 4);
  int a = 0;
  if (axis >= 0) {
    if (axis < 1 || axis >= g.rank || int(args.size()) != 1 + n_epi)
      return bad("planes_c2r: a plane axis");
    auto v = args.get<ffi::Buffer<ffi::C64>>(a++);
    const int64_t len = axis == g.rank - 1 ? g.cols : g.d[axis];
    if (v.has_error() || int64_t(v->element_count()) != len) return bad("planes_c2r: vector");
    vec = reinterpret_cast<const float*>(v->typed_data());
  } else if (int(args.size()) != n_epi) {
    return bad("planes_c2r: a vector needs its axis");
  }
  Epilogue e;  // (out may be its old field: each plane goes through a scratch plane first)
  ffi::Error err = epilogue_args(g, epi, int(epi_axis), args, &a, &e);
  if (err.failure()) return err;
  float* o = out->typed_data();
  const bool aligned = is_aligned(o) && is_aligned(o + g.pr);
  const ConvPlans* P = get_conv_plans(g, aligned);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const float* s = reinterpret_cast<const float*>(spec.typed_data()) + 2 * lo * g.pc;
  const size_t pp = pad16(size_t(2 * g.pc)), rp = e.mode != kEpiNone ? pad16(size_t(g.pr)) : 0;
  const bool ok = parallel_items(g.X, g_threads, pp + rp + plane_extra(P->plane), [&](float* pb, int64_t x) {
    plane_times(g, s + 2 * x * g.pc, vec, int(axis), pb);
    if (e.mode == kEpiNone) {
      plane_c2r(P->plane, pb, o + x * g.pr, pb + pp);
      return;
    }
    plane_c2r(P->plane, pb, pb + pp, pb + pp + rp);
    apply_epilogue(g, e, x, pb + pp, o + x * g.pr);
  });
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// sonotile_fftw_axis_diff: operators along one grid axis of a rank-3 float32 grid (the elastic
// model's single-axis derivatives), 1-D transforms only:
//
//   out_o = irfft(rfft(in_src[o], axis_o) * vec_o, axis_o)
//
// An axis before the last: the grid read as (O, n, I/2) complex numbers, O the points before
// the axis, n its length, I the reals after it (even): each pair of adjacent reals (a, b) is one
// complex column a + i b, transformed along the axis (the blocks of the pass along x: XPlans,
// x_transform), multiplied by vec_o (n values, Hermitian: vec[n - k] = conj(vec[k]), real at
// k = 0 and n/2; the caller makes it so), transformed back: the operator is real, so the real
// and imaginary parts of the result are the two columns' outputs. One pass each way over the
// grid, no spectrum in memory, no transposes. The last axis: each plane's rows by halves (the
// rows' steps of plane_r2c / plane_c2r without the columns), vec_o its n/2 + 1 bins (the
// imaginary parts of bins 0 and n/2 dropped, as a C2R does). Needs an even last axis >= 4.

// One plane's rows R2C by halves: `in` (n1 rows of n2 reals) -> `out` (n1 x cols complex).
void rows_r2c(const PlanePlans* P, const float* in, float* out, float* ws) {
  const PairPlans& q = P->pair;
  const int64_t M = P->n2 / 2;
  fftwf_execute_dft(q.rows_f, reinterpret_cast<fftwf_complex*>(const_cast<float*>(in)),
                    reinterpret_cast<fftwf_complex*>(ws));
  for (int64_t y = 0; y < P->n1; ++y)
    combine_row(ws + 2 * y * M, M, P->cols, q.u0.data(), q.u1.data(), q.u2.data(),
                out + 2 * y * P->cols);
}

// One plane's rows C2R by halves (unnormalised): `in` (overwritten) -> `out`.
void rows_c2r(const PlanePlans* P, float* in, float* out, float* ws) {
  const PairPlans& q = P->pair;
  const int64_t M = P->n2 / 2;
  for (int64_t y = 0; y < P->n1; ++y) {
    float* row = in + 2 * y * P->cols;
    row[1] = 0.f;
    row[2 * M + 1] = 0.f;
    combine_row(row, M, M, q.p0.data(), q.p1.data(), q.p2.data(), ws + 2 * y * M);
    const float ar = row[0], br = row[2 * M];
    ws[2 * y * M] = q.p0[0] * ar + q.p1[0] * br;
    ws[2 * y * M + 1] = q.p2[0] * (br - ar);
  }
  fftwf_execute_dft(q.rows_b, reinterpret_cast<fftwf_complex*>(ws),
                    reinterpret_cast<fftwf_complex*>(out));
}

// b complex numbers of each of n rows `rs` floats apart times vec[row] * scale, in place.
void rows_times(float* buf, int64_t n, int64_t rs, int64_t b, const float* vec, float scale) {
  for (int64_t y = 0; y < n; ++y) {
    const float wr = vec[2 * y] * scale, wi = vec[2 * y + 1] * scale;
    float* a = buf + y * rs;
    for (int64_t j = 0; j < b; ++j) {
      const float xr = a[2 * j], xi = a[2 * j + 1];
      a[2 * j] = xr * wr - xi * wi;
      a[2 * j + 1] = xr * wi + xi * wr;
    }
  }
}

// Output along an axis before the last (see above); false when out of memory or plans.
bool axis_columns(const int64_t* d, int axis, const float* in, const float* vec, float* out) {
  int64_t O = 1, I = 1;
  for (int a = 0; a < axis; ++a) O *= d[a];
  for (int a = axis + 1; a < 3; ++a) I *= d[a];
  const int64_t n = d[axis], h = I / 2;
  const int64_t blk = std::min<int64_t>(kBlockMax, h);
  const XPlans* P = get_x_plans(n, blk);
  if (P == nullptr) return false;
  const int64_t nb = (h + blk - 1) / blk;
  const float scale = float(1.0 / double(n));
  std::atomic<bool> ok{true};
  const bool got = parallel_items(O * nb, g_threads, P->floats(n), [&](float* buf, int64_t i) {
    const int64_t o = i / nb, c0 = (i % nb) * blk, b = std::min(blk, h - c0);
    const float* src = in + o * n * I + 2 * c0;
    float* dst = out + o * n * I + 2 * c0;
    for (int64_t y = 0; y < n; ++y) std::memcpy(buf + y * P->rs, src + y * I, sizeof(float) * 2 * b);
    if (!x_transform(P, true, buf, n, b)) ok = false;
    rows_times(buf, n, P->rs, b, vec, scale);
    if (!x_transform(P, false, buf, n, b)) ok = false;
    for (int64_t y = 0; y < n; ++y) std::memcpy(dst + y * I, buf + y * P->rs, sizeof(float) * 2 * b);
  });
  return got && ok;
}

// Output along the last axis (see above); false when out of memory or plans.
bool axis_rows(const int64_t* d, const float* in, const float* vec, float* out, bool aligned) {
  const PlanePlans* P = get_plane_plans(2, d[1], d[2], aligned, true);
  if (P == nullptr || P->pair.rows_f == nullptr) return false;
  const int64_t pr = d[1] * d[2], cols = P->cols;
  const float scale = float(1.0 / double(d[2]));
  const size_t pp = pad16(size_t(2 * d[1] * cols)), extra = plane_extra(P);
  return parallel_items(d[0], g_threads, pp + extra, [&](float* pb, int64_t x) {
    rows_r2c(P, in + x * pr, pb, pb + pp);
    for (int64_t y = 0; y < d[1]; ++y) {
      float* a = pb + 2 * y * cols;
      for (int64_t j = 0; j < cols; ++j) {
        const float wr = vec[2 * j] * scale, wi = vec[2 * j + 1] * scale;
        const float xr = a[2 * j], xi = a[2 * j + 1];
        a[2 * j] = xr * wr - xi * wi;
        a[2 * j + 1] = xr * wi + xi * wr;
      }
    }
    rows_c2r(P, pb, out + x * pr, pb + pp);
  });
}

// The single-axis kernels' sources: the first `count` arguments, float32 rank-3 fields of one
// shape with an even last axis >= 4; their data go to `in`, their shape to `d`. Returns what
// was wrong, or null.
const char* axis_sources(const ffi::RemainingArgs& args, int count, int64_t* d, const float** in) {
  for (int j = 0; j < count; ++j) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(j);
    if (x.has_error() || x->dimensions().size() != 3) return "float32 rank-3 sources";
    for (int a = 0; a < 3; ++a) {
      if (j == 0) d[a] = x->dimensions()[a];
      else if (d[a] != x->dimensions()[a]) return "source shapes differ";
    }
    in[j] = x->typed_data();
  }
  if (d[2] % 2 != 0 || d[2] < 4) return "an even last axis >= 4";
  return nullptr;
}

ffi::Error AxisDiffImpl(ffi::ThreadPool pool, ffi::Span<const int64_t> src,
                        ffi::Span<const int64_t> axis, ffi::RemainingArgs args,
                        ffi::RemainingRets rets) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  const int m = int(rets.size());
  if (m == 0 || int(src.size()) != m || int(axis.size()) != m) return bad("axis_diff: src/axis per output");
  int k = 0;
  for (int o = 0; o < m; ++o) {
    if (src[o] < 0 || axis[o] < 0 || axis[o] > 2) return bad("axis_diff: src >= 0, axis 0-2");
    k = std::max(k, int(src[o]) + 1);
  }
  if (int(args.size()) != k + m) return bad("axis_diff: argument count");
  int64_t d[3] = {0, 0, 0};
  std::vector<const float*> in(k);
  if (const char* why = axis_sources(args, k, d, in.data()))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::string("axis_diff: ") + why);
  const size_t nr = size_t(d[0]) * d[1] * d[2];
  for (int o = 0; o < m; ++o) {
    auto v = args.get<ffi::Buffer<ffi::C64>>(k + o);
    auto y = rets.get<ffi::Buffer<ffi::F32>>(o);
    const int64_t len = axis[o] == 2 ? d[2] / 2 + 1 : d[axis[o]];
    if (v.has_error() || int64_t(v->element_count()) != len) return bad("axis_diff: vector length");
    if (y.has_error() || (*y)->element_count() != nr) return bad("axis_diff: output shape");
    const float* vec = reinterpret_cast<const float*>(v->typed_data());
    const float* x = in[size_t(src[o])];
    float* out = (*y)->typed_data();
    bool ok;
    if (axis[o] < 2) {
      ok = axis_columns(d, int(axis[o]), x, vec, out);
    } else {
      const int64_t pr = d[1] * d[2];
      const bool aligned = is_aligned(x) && is_aligned(x + pr) && is_aligned(out) &&
                           is_aligned(out + pr);
      ok = axis_rows(d, x, vec, out, aligned);
    }
    if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  }
  return ffi::Error::Success();
}

// sonotile_fftw_axis_update: the elastic model's split-field updates, each made from one or two
// single-axis derivatives as the derivative's block / plane is made (no derivative in memory).
// The derivatives d_s = irfft(rfft(src_s, axis) * vec, axis) of one or two sources along one
// axis (as sonotile_fftw_axis_diff) update each target t:
//
//   out_t = m (m old_t + sum_c G_tc d_{s_tc}),   m = v_a[i_a] v_b[i_b] v_c[i_c]
//
// (a the derivative's axis, then the others in order: the PML along a times the multi-axial
// PML along the others, each a vector along its axis; without vectors m = 1 and out_t = old_t
// + sum, or the sum alone without old_t); G_tc grids, single values, or s / mean(G) with the
// next point along an axis (see coefficients). A target may add
// w P after (P a grid, w one value: the elastic p0 start, w = 0 after its two steps). old_t may
// be out_t's own buffer. The last `ndeps` operands are not read: the call runs after they are
// made (an order XLA must keep: an old field overwritten here is read before them).
struct AxisTarget {
  const float* old = nullptr;
  const float* v[3] = {nullptr, nullptr, nullptr};
  int ncoef = 0;
  int src[2] = {0, 0};
  const float* G[2] = {nullptr, nullptr};
  bool scalar[2] = {false, false};  // G[c] one value (a homogeneous medium)
  int gaxis[2] = {-1, -1};          // >= 0: the term's coefficient is gs / mean_gaxis(G)
  float gs[2] = {0.f, 0.f};
  const float* post = nullptr;      // w P added after the update (P a grid), or none
  float w = 0.f;
  float* out = nullptr;
};

// A row of `cnt` copies of v (a worker's, kept for the thread's life).
const float* filled(float v, int64_t cnt, int slot) {
  thread_local std::vector<float> rows[2];
  std::vector<float>& r = rows[slot];
  if (int64_t(r.size()) < cnt) r.resize(size_t(cnt));
  std::fill(r.begin(), r.begin() + cnt, v);
  return r.data();
}

// Term c's coefficients at points [p, p + cnt) of a row (at ix, iy, iz0 ..) of a grid `dims`:
// G there, its one value, or gs / mean(G) with the next point along gaxis (the last point
// along it: G itself; k-Wave's density on a velocity grid, as staggered_mean).
const float* coefficients(const AxisTarget& t, int c, const int64_t* dims, int64_t p, int64_t ix,
                          int64_t iy, int64_t iz0, int64_t cnt) {
  if (t.scalar[c]) return filled(t.G[c][0], cnt, c);
  const float* g = t.G[c] + p;
  if (t.gaxis[c] < 0) return g;
  thread_local std::vector<float> rows[2];
  std::vector<float>& r = rows[c];
  if (int64_t(r.size()) < cnt) r.resize(size_t(cnt));
  const int ax = t.gaxis[c];
  const int64_t st = ax == 0 ? dims[1] * dims[2] : (ax == 1 ? dims[2] : 1);
  const bool last = (ax == 0 && ix == dims[0] - 1) || (ax == 1 && iy == dims[1] - 1);
  const float s = t.gs[c];
  float* o = r.data();
  if (last) {
    for (int64_t k = 0; k < cnt; ++k) o[k] = s / g[k];
    return o;
  }
  const int64_t n = ax == 2 && iz0 + cnt == dims[2] ? cnt - 1 : cnt;  // the row's last point
  for (int64_t k = 0; k < n; ++k) o[k] = s / (0.5f * (g[k] + g[k + st]));
  if (n < cnt) o[n] = s / g[n];
  return o;
}

// Points [p, p + cnt) of one row along the last axis (at ix, iy, iz0 ..) from d[s] + 0 ..
void target_row(const AxisTarget& t, int axis, const int64_t* dims, const float* const* d,
                int64_t p, int64_t ix, int64_t iy, int64_t iz0, int64_t cnt) {
  if (t.post != nullptr) {
    float* o = t.out + p;
    const float* P = t.post + p;
    AxisTarget u = t;
    u.post = nullptr;
    target_row(u, axis, dims, d, p, ix, iy, iz0, cnt);
    const float w = t.w;
#pragma GCC ivdep
    for (int64_t c = 0; c < cnt; ++c) o[c] = o[c] + w * P[c];
    return;
  }
  float* o = t.out + p;
  const float* old = t.old != nullptr ? t.old + p : nullptr;
  const float* g0 = coefficients(t, 0, dims, p, ix, iy, iz0, cnt);
  const float* e0 = d[t.src[0]];
  const float* g1 = t.ncoef < 2 ? g0 : coefficients(t, 1, dims, p, ix, iy, iz0, cnt);
  const float* e1 = t.ncoef > 1 ? d[t.src[1]] : e0;
  const bool two = t.ncoef > 1;
  if (t.v[0] == nullptr) {
    if (old == nullptr) {
#pragma GCC ivdep
      for (int64_t c = 0; c < cnt; ++c) o[c] = two ? g0[c] * e0[c] + g1[c] * e1[c] : g0[c] * e0[c];
    } else {
#pragma GCC ivdep
      for (int64_t c = 0; c < cnt; ++c)
        o[c] = old[c] + (two ? g0[c] * e0[c] + g1[c] * e1[c] : g0[c] * e0[c]);
    }
    return;
  }
  const float* vz = t.v[2] + iz0;
  if (axis == 2) {  // m = (v_z v_x) v_y
    const float vx = t.v[0][ix], vy = t.v[1][iy];
#pragma GCC ivdep
    for (int64_t c = 0; c < cnt; ++c) {
      const float m = (vz[c] * vx) * vy;
      const float r = two ? g0[c] * e0[c] + g1[c] * e1[c] : g0[c] * e0[c];
      o[c] = m * (m * old[c] + r);
    }
    return;
  }
  const float vxy = t.v[0][ix] * t.v[1][iy];  // m = (v_x v_y) v_z (v_y v_x: the same)
#pragma GCC ivdep
  for (int64_t c = 0; c < cnt; ++c) {
    const float m = vxy * vz[c];
    const float r = two ? g0[c] * e0[c] + g1[c] * e1[c] : g0[c] * e0[c];
    o[c] = m * (m * old[c] + r);
  }
}

// Every target over grid points [p, p + cnt) (d[s]: the derivatives there), split at rows.
void targets_range(const std::vector<AxisTarget>& ts, int axis, const int64_t* dims,
                   const float* const* d, int nsrc, int64_t p, int64_t cnt) {
  const int64_t Y = dims[1], Z = dims[2];
  int64_t done = 0;
  while (done < cnt) {
    const int64_t q = p + done, iz = q % Z, iy = (q / Z) % Y, ix = q / (Y * Z);
    const int64_t len = std::min(cnt - done, Z - iz);
    const float* dd[2] = {d[0] + done, nsrc > 1 ? d[1] + done : nullptr};
    for (const AxisTarget& t : ts) target_row(t, axis, dims, dd, q, ix, iy, iz, len);
    done += len;
  }
}

bool update_columns(const int64_t* d, int axis, const float* const* in, int nsrc,
                    const float* vec, const std::vector<AxisTarget>& ts) {
  int64_t O = 1, I = 1;
  for (int a = 0; a < axis; ++a) O *= d[a];
  for (int a = axis + 1; a < 3; ++a) I *= d[a];
  const int64_t n = d[axis], h = I / 2;
  const int64_t blk = std::min<int64_t>(kBlockMax, h);
  const XPlans* P = get_x_plans(n, blk);
  if (P == nullptr) return false;
  const int64_t nb = (h + blk - 1) / blk;
  const float scale = float(1.0 / double(n));
  const size_t one = P->floats(n);
  std::atomic<bool> ok{true};
  const bool got = parallel_items(O * nb, g_threads, one * nsrc, [&](float* buf, int64_t i) {
    const int64_t o = i / nb, c0 = (i % nb) * blk, b = std::min(blk, h - c0);
    for (int s = 0; s < nsrc; ++s) {
      float* bs = buf + s * one;
      const float* src = in[s] + o * n * I + 2 * c0;
      for (int64_t y = 0; y < n; ++y) std::memcpy(bs + y * P->rs, src + y * I, sizeof(float) * 2 * b);
      if (!x_transform(P, true, bs, n, b)) ok = false;
      rows_times(bs, n, P->rs, b, vec, scale);
      if (!x_transform(P, false, bs, n, b)) ok = false;
    }
    for (int64_t y = 0; y < n; ++y) {
      const float* dd[2] = {buf + y * P->rs, nsrc > 1 ? buf + one + y * P->rs : nullptr};
      targets_range(ts, axis, d, dd, nsrc, o * n * I + y * I + 2 * c0, 2 * b);
    }
  });
  return got && ok;
}

bool update_rows(const int64_t* d, const float* const* in, int nsrc, const float* vec,
                 const std::vector<AxisTarget>& ts, bool aligned) {
  const PlanePlans* P = get_plane_plans(2, d[1], d[2], aligned, true);
  if (P == nullptr || P->pair.rows_f == nullptr) return false;
  const int64_t pr = d[1] * d[2], cols = P->cols;
  const float scale = float(1.0 / double(d[2]));
  const size_t pp = pad16(size_t(2 * d[1] * cols)), rp = pad16(size_t(pr)), extra = plane_extra(P);
  return parallel_items(d[0], g_threads, pp + 2 * rp + extra, [&](float* pb, int64_t x) {
    float* ws = pb + pp + 2 * rp;
    for (int s = 0; s < nsrc; ++s) {
      rows_r2c(P, in[s] + x * pr, pb, ws);
      for (int64_t y = 0; y < d[1]; ++y) {
        float* a = pb + 2 * y * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const float wr = vec[2 * j] * scale, wi = vec[2 * j + 1] * scale;
          const float xr = a[2 * j], xi = a[2 * j + 1];
          a[2 * j] = xr * wr - xi * wi;
          a[2 * j + 1] = xr * wi + xi * wr;
        }
      }
      rows_c2r(P, pb, pb + pp + s * rp, ws);
    }
    const float* dd[2] = {pb + pp, pb + pp + rp};
    targets_range(ts, 2, d, dd, nsrc, x * pr, pr);
  });
}

ffi::Error AxisUpdateImpl(ffi::ThreadPool pool, int64_t axis, int64_t nsrc,
                          ffi::Span<const int64_t> has_old, ffi::Span<const int64_t> has_m,
                          ffi::Span<const int64_t> ncoef, ffi::Span<const int64_t> coef_src,
                          ffi::Span<const int64_t> coef_axis,
                          ffi::Span<const int64_t> has_post, int64_t ndeps,
                          ffi::RemainingArgs args, ffi::RemainingRets rets) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  const int m = int(rets.size());
  if (axis < 0 || axis > 2 || nsrc < 1 || nsrc > 2) return bad("axis_update: axis 0-2, 1-2 sources");
  if (m == 0 || int(has_old.size()) != m || int(has_m.size()) != m || int(ncoef.size()) != m ||
      int(has_post.size()) != m)
    return bad("axis_update: has_old/has_m/ncoef/has_post per target");
  int64_t d[3] = {0, 0, 0};
  const float* in[2] = {nullptr, nullptr};
  if (const char* why = axis_sources(args, int(nsrc), d, in))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::string("axis_update: ") + why);
  int a = int(nsrc);
  const size_t nr = size_t(d[0]) * d[1] * d[2];
  auto v = args.get<ffi::Buffer<ffi::C64>>(a++);
  const int64_t len = axis == 2 ? d[2] / 2 + 1 : d[axis];
  if (v.has_error() || int64_t(v->element_count()) != len) return bad("axis_update: vector length");
  const float* vec = reinterpret_cast<const float*>(v->typed_data());
  auto grid = [&](const float** p, bool* one = nullptr) -> bool {
    if (a >= int(args.size())) return false;
    auto g = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (g.has_error()) return false;
    if (one != nullptr) *one = g->element_count() == 1 && nr != 1;
    if (g->element_count() != nr && !(one != nullptr && *one)) return false;
    *p = g->typed_data();
    return true;
  };
  std::vector<AxisTarget> ts(m);
  size_t cs = 0;
  for (int t = 0; t < m; ++t) {
    AxisTarget& T = ts[size_t(t)];
    if (has_old[t] && !grid(&T.old)) return bad("axis_update: old field");
    if (has_m[t]) {
      for (int k = 0; k < 3; ++k) {
        auto u = args.get<ffi::Buffer<ffi::F32>>(a++);
        if (u.has_error() || int64_t(u->element_count()) != d[k]) return bad("axis_update: m vector");
        T.v[k] = u->typed_data();
      }
      if (!has_old[t]) return bad("axis_update: m needs an old field");
    }
    T.ncoef = int(ncoef[t]);
    if (T.ncoef < 1 || T.ncoef > 2 || cs + T.ncoef > coef_src.size()) return bad("axis_update: 1-2 terms");
    if (coef_axis.size() != coef_src.size()) return bad("axis_update: coef_axis per term");
    for (int c = 0; c < T.ncoef; ++c, ++cs) {
      T.src[c] = int(coef_src[cs]);
      if (T.src[c] < 0 || T.src[c] >= nsrc) return bad("axis_update: term source");
      if (!grid(&T.G[c], &T.scalar[c])) return bad("axis_update: coefficient field");
      T.gaxis[c] = int(coef_axis[cs]);
      if (T.gaxis[c] >= 0) {  // gs / mean(G): G a grid, then gs
        const float* w = nullptr;
        bool one = false;
        if (T.gaxis[c] > 2 || T.scalar[c] || !grid(&w, &one) || !one)
          return bad("axis_update: a staggered coefficient's field and scale");
        T.gs[c] = w[0];
      }
    }
    if (has_post[t]) {
      const float* w = nullptr;
      bool one = false;
      if (!grid(&T.post) || !grid(&w, &one) || !one) return bad("axis_update: post field, weight");
      T.w = w[0];
    }
    auto y = rets.get<ffi::Buffer<ffi::F32>>(t);
    if (y.has_error() || (*y)->element_count() != nr) return bad("axis_update: output shape");
    T.out = (*y)->typed_data();
  }
  if (ndeps < 0 || a + ndeps != int(args.size())) return bad("axis_update: argument count");
  bool ok;
  if (axis < 2) {
    ok = update_columns(d, int(axis), in, int(nsrc), vec, ts);
  } else {
    const int64_t pr = d[1] * d[2];
    bool aligned = true;
    for (int s = 0; s < nsrc; ++s) aligned = aligned && is_aligned(in[s]) && is_aligned(in[s] + pr);
    ok = update_rows(d, in, int(nsrc), vec, ts, aligned);
  }
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// numpy-convention transforms for the distributed FFT (sonotile/parallel/pencil.py), batched
// over the axes they leave alone, each on one plan with all threads (no transposes: strides):
//
//   sonotile_fftw_rfft_axes:  float32 (lead..., n_1..n_k) -> complex64 (lead..., n_1..n_k/2+1),
//     the unnormalised R2C over the k = `naxes` trailing axes (numpy's rfftn over them); a
//     batch of k >= 2 axes transforms (>= 2 per thread) goes group by group in cache instead,
//     on 1-thread plans shared among the threads (rfft_groups: an LFB block's planes), and
//     2-D planes with rows of even length one by one by halves (rfft_planes, see PairPlans).
//   sonotile_fftw_irfft_axes: the C2R back (the real shape is the output's), times `scale`
//     (1 / (n_1 ... n_k) gives numpy's irfftn); the spectrum is copied to scratch first, scaled
//     on the way (FFTW's C2R destroys its input; XLA's buffers must stay intact).
//   sonotile_fftw_fft_axis:   complex64 c2c along grid axis `axis` of a rank 1-4 array (a guru
//     plan: the transform's stride is the product of the later axes, the other axes are its
//     loops), out of place, exponent sign `sign` (-1 forward, +1 inverse), times `scale`.
//
// Plans are made once per (kind, shape, axes, sign, alignment, threads), on scratch arrays.

constexpr int kMaxRank = 4;
enum AxesKind : int64_t { kAxesR2C = 0, kAxesC2R = 1, kAxesC2C = 2 };
std::map<std::vector<int64_t>, fftwf_plan> axes_plans;  // guarded by plan_mu

// The plan of `key`, made by make(in, out) on FFTW-aligned scratch of the given sizes (floats)
// with `threads` threads (0: all) if it is not cached; nullptr when planning fails.
template <class Make>
fftwf_plan axes_plan(std::vector<int64_t> key, size_t in_floats, size_t out_floats, Make make,
                     int threads = 0) {
  std::lock_guard<std::mutex> g(plan_mu);
  if (threads <= 0) threads = g_threads;
  key.push_back(threads);
  auto it = axes_plans.find(key);
  if (it != axes_plans.end()) return it->second;
  float* a = static_cast<float*>(fft_alloc(sizeof(float) * std::max<size_t>(in_floats, 2)));
  float* b = static_cast<float*>(fft_alloc(sizeof(float) * std::max<size_t>(out_floats, 2)));
  fftwf_plan p = nullptr;
  if (a != nullptr && b != nullptr) {
    if (g_threads_ok) fftwf_plan_with_nthreads(threads);
    p = make(a, b);
  }
  fftwf_free(a);
  fftwf_free(b);
  if (p != nullptr) {
    axes_plans[key] = p;
    save_wisdom_locked();
  }
  return p;
}

// A real array's dims as (batch, n_1..n_k): its k trailing axes transformed, the rest a loop.
struct Trailing {
  int k = 0;
  int n[3] = {1, 1, 1};
  int64_t batch = 1, real = 1, half = 1;  // transforms; real / complex elements of each
};

bool trailing_of(ffi::Span<const int64_t> dims, int64_t naxes, Trailing* t) {
  const int64_t r = int64_t(dims.size());
  if (naxes < 1 || naxes > 3 || naxes > r || r > kMaxRank) return false;
  t->k = int(naxes);
  for (int64_t a = 0; a < r - naxes; ++a) t->batch *= dims[a];
  for (int a = 0; a < t->k; ++a) {
    t->n[a] = int(dims[r - naxes + a]);
    t->real *= t->n[a];
    t->half *= a + 1 < t->k ? t->n[a] : t->n[a] / 2 + 1;
  }
  return true;
}

unsigned axes_flags(bool aligned) { return g_effort | (aligned ? 0U : kUnaligned); }

// The 1-thread plan of `g` consecutive transforms of `t` (r2c: real -> complex; c2r: complex ->
// real, destroying its input), each `t.real` / `t.half` elements after the previous.
fftwf_plan group_plan(const Trailing& t, bool r2c, int64_t g, bool aligned) {
  const size_t nr = size_t(g * t.real), nc = size_t(2 * g * t.half);
  auto make = [&](float* a, float* b) {
    if (r2c)
      return fftwf_plan_many_dft_r2c(t.k, t.n, int(g), a, nullptr, 1, int(t.real),
                                     reinterpret_cast<fftwf_complex*>(b), nullptr, 1,
                                     int(t.half), axes_flags(aligned));
    return fftwf_plan_many_dft_c2r(t.k, t.n, int(g), reinterpret_cast<fftwf_complex*>(a),
                                   nullptr, 1, int(t.half), b, nullptr, 1, int(t.real),
                                   axes_flags(aligned) | kDestroyInput);
  };
  const int64_t kind = r2c ? kAxesR2C : kAxesC2R;
  return axes_plan({kind, 1, t.k, t.n[0], t.n[1], t.n[2], g, int64_t(aligned)},
                   r2c ? nr : nc, r2c ? nc : nr, make, 1);
}

// Transforms per work item of a batch taken group by group: as many as fit in ~256 KB of
// spectrum (a plane of a 128^2 or larger grid: one), so each group stays in cache.
int64_t group_size(const Trailing& t) {
  const int64_t cap = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, t.half));
  return std::min<int64_t>(std::max<int64_t>(1, t.batch), cap);
}

// dst[i] = src[i] * s for i < n, split over the threads for large arrays (dst may be src).
void scale_floats(const float* src, float s, size_t n, float* dst) {
  auto part = [=](size_t i0, size_t i1) {
    for (size_t i = i0; i < i1; ++i) dst[i] = src[i] * s;
  };
  const int T = g_threads;
  if (T <= 1 || n < (size_t(1) << 16)) {
    part(0, n);
    return;
  }
  parallel_for(T, T, [&](int t) { part(n * size_t(t) / T, n * size_t(t + 1) / T); });
}

// rfft_axes of a batch of multi-dimensional transforms (e.g. the planes of an LFB block) group
// by group (group_size) on 1-thread plans, the groups shared among the threads as conv shares
// its planes: each group's transform runs in cache, where one batched plan sweeps the whole
// batch once per axis (measured: 1.5x the time of conv's plane transforms on 144 planes 128^2).
// rfft_groups of planes by halves (by_halves): one plane per work item, in cache.
ffi::Error rfft_planes(const Trailing& t, const float* in, float* out) {
  const bool real_al = is_aligned(in) && is_aligned(in + t.real);
  const bool spec_al = is_aligned(out) && is_aligned(out + 2 * t.half);
  const PlanePlans* P = get_plane_plans(2, t.n[0], t.n[1], real_al, spec_al);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const bool ok = parallel_items(t.batch, g_threads, plane_extra(P), [&](float* ws, int64_t b) {
    plane_r2c(P, in + b * t.real, out + 2 * b * t.half, ws);
  });
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

ffi::Error rfft_groups(const Trailing& t, float* in, fftwf_complex* out) {
  const int64_t G = group_size(t), rem = t.batch % G;
  // every group starts aligned when the first two do (constant strides)
  const bool al = is_aligned(in) && is_aligned(in + G * t.real) && is_aligned(out) &&
                  is_aligned(out + G * t.half);
  fftwf_plan full = group_plan(t, true, G, al);
  fftwf_plan last = rem ? group_plan(t, true, rem, al) : full;
  if (full == nullptr || last == nullptr)
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  parallel_items((t.batch + G - 1) / G, g_threads, 0, [&](float*, int64_t i) {
    const int64_t b0 = i * G;
    fftwf_execute_dft_r2c(b0 + G <= t.batch ? full : last, in + b0 * t.real, out + b0 * t.half);
  });
  return ffi::Error::Success();
}

ffi::Error RfftAxesImpl(ffi::ThreadPool pool, int64_t naxes, ffi::Buffer<ffi::F32> x,
                        ffi::Result<ffi::Buffer<ffi::C64>> y) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  Trailing t;
  if (!trailing_of(x.dimensions(), naxes, &t))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "rfft_axes: 1-3 trailing axes, rank <= 4");
  if (y->element_count() != size_t(t.batch * t.half))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "rfft_axes: output shape");
  if (t.batch * t.real == 0) return ffi::Error::Success();
  float* in = const_cast<float*>(x.typed_data());
  auto* out = reinterpret_cast<fftwf_complex*>(y->typed_data());
  if (t.k >= 2 && t.batch >= 2 * g_threads) {
    if (t.k == 2 && by_halves(2, t.n[1])) return rfft_planes(t, in, reinterpret_cast<float*>(out));
    return rfft_groups(t, in, out);
  }
  const bool al = is_aligned(in) && is_aligned(out);
  fftwf_plan p = axes_plan({kAxesR2C, 0, t.k, t.n[0], t.n[1], t.n[2], t.batch, int64_t(al)},
                           size_t(t.batch * t.real), size_t(2 * t.batch * t.half),
                           [&](float* a, float* b) {
                             return fftwf_plan_many_dft_r2c(
                                 t.k, t.n, int(t.batch), a, nullptr, 1, int(t.real),
                                 reinterpret_cast<fftwf_complex*>(b), nullptr, 1, int(t.half),
                                 axes_flags(al));
                           });
  if (p == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  fftwf_execute_dft_r2c(p, in, out);
  return ffi::Error::Success();
}

ffi::Error IrfftAxesImpl(ffi::ThreadPool pool, int64_t naxes, float scale,
                         ffi::Buffer<ffi::C64> x, ffi::Result<ffi::Buffer<ffi::F32>> y) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  Trailing t;
  if (!trailing_of(y->dimensions(), naxes, &t))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "irfft_axes: 1-3 trailing axes, rank <= 4");
  if (x.element_count() != size_t(t.batch * t.half))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "irfft_axes: spectrum shape");
  if (t.batch * t.real == 0) return ffi::Error::Success();
  float* out = y->typed_data();
  const bool al = is_aligned(out);  // the scratch input is FFTW-aligned
  const size_t nc = size_t(2 * t.batch * t.half);
  fftwf_plan p = axes_plan({kAxesC2R, 0, t.k, t.n[0], t.n[1], t.n[2], t.batch, int64_t(al)},
                           nc, size_t(t.batch * t.real), [&](float* a, float* b) {
                             return fftwf_plan_many_dft_c2r(
                                 t.k, t.n, int(t.batch), reinterpret_cast<fftwf_complex*>(a),
                                 nullptr, 1, int(t.half), b, nullptr, 1, int(t.real),
                                 axes_flags(al) | kDestroyInput);
                           });
  if (p == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  float* scr = take_scratch(nc);
  if (scr == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  scale_floats(reinterpret_cast<const float*>(x.typed_data()), scale, nc, scr);
  fftwf_execute_dft_c2r(p, reinterpret_cast<fftwf_complex*>(scr), out);
  give_scratch(scr, nc);
  return ffi::Error::Success();
}

ffi::Error FftAxisImpl(ffi::ThreadPool pool, int64_t axis, int64_t sign, float scale,
                       ffi::Buffer<ffi::C64> x, ffi::Result<ffi::Buffer<ffi::C64>> y) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  auto dims = x.dimensions();
  const int64_t r = int64_t(dims.size());
  if (r < 1 || r > kMaxRank || axis < 0 || axis >= r || (sign != -1 && sign != 1))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "fft_axis: an axis of rank 1-4, sign +-1");
  if (y->element_count() != x.element_count())
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "fft_axis: output shape");
  int64_t A = 1, B = 1;  // the axes before / after `axis`, as one loop each
  for (int64_t a = 0; a < axis; ++a) A *= dims[a];
  for (int64_t a = axis + 1; a < r; ++a) B *= dims[a];
  const int64_t n = dims[axis];
  if (A * n * B == 0) return ffi::Error::Success();
  auto* in = reinterpret_cast<fftwf_complex*>(const_cast<void*>(static_cast<const void*>(x.typed_data())));
  auto* out = reinterpret_cast<fftwf_complex*>(y->typed_data());
  const bool al = is_aligned(in) && is_aligned(out);
  const fftwf_iodim dim{int(n), int(B), int(B)};
  std::vector<fftwf_iodim> loops;
  if (A > 1) loops.push_back({int(A), int(n * B), int(n * B)});
  if (B > 1) loops.push_back({int(B), 1, 1});
  const size_t floats = size_t(2 * A * n * B);
  fftwf_plan p = axes_plan({kAxesC2C, sign, A, n, B, int64_t(al)}, floats, floats,
                           [&](float* a, float* b) {
                             return fftwf_plan_guru_dft(
                                 1, &dim, int(loops.size()), loops.data(),
                                 reinterpret_cast<fftwf_complex*>(a),
                                 reinterpret_cast<fftwf_complex*>(b), int(sign), axes_flags(al));
                           });
  if (p == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  fftwf_execute_dft(p, in, out);
  if (scale != 1.f) scale_floats(reinterpret_cast<float*>(out), scale, floats,
                                 reinterpret_cast<float*>(out));
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------------------
// The slab FFT's first forward and last inverse transforms with the transpose's reordering
// done plane by plane in cache (sonotile/parallel/pencil.py): the spectrum leaves / enters in
// pieces, piece p the part of every plane with index [p L, p L + L) along spectrum axis q, the
// pieces outermost (what an all-to-all sends / receives as contiguous chunks):
//
//   sonotile_fftw_rfft_split: float32 (lead..., n_1..n_k) -> complex64 (P, lead..., s_1..L..s_k)
//     with s the half spectrum's dims (s_k = n_k / 2 + 1) and L at axis q: numpy's rfftn over
//     the k trailing axes, cut into the P pieces (zeros where p L + i >= s_q).
//     With `keep` >= 0 (an all-to-all that keeps its own piece where it lies: the MPI transport's
//     sonotile_mpi_transpose), only piece `keep` goes into the (P, ...) output and the other
//     P - 1 pieces, in order, into a second output (P - 1, ...): the first output's other
//     pieces are left for the exchange to fill.
//   sonotile_fftw_irfft_join: the inverse: pieces (P, lead..., s_1..L..s_k) joined along q
//     (entries at p L + i >= s_q ignored), C2R to float32 (lead..., n_1..n_k), times `scale`
//     and, with `vaxis` >= 0, times a complex vector (one more argument, length s_vaxis) along
//     spectrum axis `vaxis` (0 .. k-1; e.g. a derivative's shift vector applied while the
//     pieces are gathered, no pass over the spectrum of its own).
//
// Work items are groups of G planes (a group's spectrum fits in cache), on 1-thread plans;
// 2-D planes with rows of even length are single planes transformed by halves (PairPlans).

struct Split {
  Trailing t;
  int q = 0;                          // the split spectrum axis (0 .. k-1)
  int64_t P = 1, L = 1;               // pieces, their length along q
  int64_t pre = 1, sq = 1, post = 1;  // a spectrum plane as (pre, s_q, post)
  int64_t G = 1, items = 1;           // planes per item, items
  int64_t keep = -1;                  // to pieces: the piece kept in `pieces` (-1: all) ...
  float* rest = nullptr;              // ... the others, in order, here
};

// Where piece p of `pieces` lies (`per_piece` floats per plane): in `pieces`, or in `s.rest`
// when another piece is kept (`s.keep`).
float* piece_at(const Split& s, float* pieces, int64_t p, int64_t per_piece) {
  if (s.keep < 0 || p == s.keep) return pieces + p * s.t.batch * per_piece;
  return s.rest + (p - (p > s.keep ? 1 : 0)) * s.t.batch * per_piece;
}

// The split of real dims `real` and pieces dims `pieces` (q: a transformed axis, from 0).
bool split_of(ffi::Span<const int64_t> real, ffi::Span<const int64_t> pieces, int64_t naxes,
              int64_t q, Split* s) {
  if (!trailing_of(real, naxes, &s->t) || q < 0 || q >= naxes) return false;
  const int64_t r = int64_t(real.size());
  if (int64_t(pieces.size()) != r + 1 || pieces[0] < 1) return false;
  s->q = int(q);
  s->P = pieces[0];
  const int64_t lead = r - naxes;
  for (int64_t a = 0; a < r; ++a) {
    const int64_t i = a - lead;  // spectrum axis index (negative: a batch axis)
    const int64_t want = i < 0 ? real[a] : (i + 1 < naxes ? real[a] : real[a] / 2 + 1);
    if (i == q) {
      s->sq = want;
      s->L = pieces[a + 1];
      if (s->L * s->P < want) return false;
    } else if (pieces[a + 1] != want) {
      return false;
    }
    if (i >= 0 && i < q) s->pre *= want;
    if (i > q) s->post *= want;
  }
  s->G = group_size(s->t);
  s->items = (s->t.batch + s->G - 1) / s->G;
  return true;
}

// The 1-thread plan of `g` planes (r2c: real -> buffer; c2r: buffer -> real, destroying it).
fftwf_plan split_plan(const Split& s, bool r2c, int64_t g, bool aligned) {
  return group_plan(s.t, r2c, g, aligned);
}

// Plane b's spectrum `plane` (pre, s_q, post) to / from its P pieces in `pieces` (complex as
// float pairs); from the pieces times `scale`.
void plane_pieces(const Split& s, int64_t b, float* plane, float* pieces, bool to_pieces,
                  float scale) {
  const int64_t chunk = 2 * s.L * s.post, per_piece = s.pre * chunk;
  for (int64_t p = 0; p < s.P; ++p) {
    const int64_t lo = p * s.L, len = std::max<int64_t>(0, std::min(s.L, s.sq - lo));
    float* piece = piece_at(s, pieces, p, per_piece) + b * per_piece;
    for (int64_t r = 0; r < s.pre; ++r) {
      float* c = piece + r * chunk;
      float* v = plane + 2 * (r * s.sq + lo) * s.post;
      const int64_t n = 2 * len * s.post;
      if (to_pieces) {
        if (n > 0) std::memcpy(c, v, sizeof(float) * n);
        if (chunk > n) std::memset(c + n, 0, sizeof(float) * (chunk - n));
      } else {
        for (int64_t i = 0; i < n; ++i) v[i] = c[i] * scale;
      }
    }
  }
}

// rfft_split with the planes by halves (by_halves): each plane into the worker's plane buffer,
// then to its pieces.
ffi::Error rfft_split_planes(const Split& s, const float* in, float* out) {
  const bool real_al = is_aligned(in) && is_aligned(in + s.t.real);
  const PlanePlans* P = get_plane_plans(2, s.t.n[0], s.t.n[1], real_al, true);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const size_t pp = pad16(size_t(2 * s.t.half));
  const bool ok = parallel_items(s.t.batch, g_threads, pp + plane_extra(P),
                                 [&](float* buf, int64_t b) {
    plane_r2c(P, in + b * s.t.real, buf, buf + pp);
    plane_pieces(s, b, buf, out, true, 1.f);
  });
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

ffi::Error RfftSplitImpl(ffi::ThreadPool pool, int64_t naxes, int64_t q, int64_t keep,
                         ffi::Buffer<ffi::F32> x, ffi::RemainingRets rets) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  if (rets.size() != (keep >= 0 ? 2 : 1)) return bad("rfft_split: one output, two with keep");
  auto y = rets.get<ffi::Buffer<ffi::C64>>(0);
  if (y.has_error()) return bad("rfft_split: output");
  Split s;
  if (!split_of(x.dimensions(), (*y)->dimensions(), naxes, q, &s)) return bad("rfft_split: shapes");
  if (keep >= 0) {
    auto r = rets.get<ffi::Buffer<ffi::C64>>(1);
    if (keep >= s.P || r.has_error() ||
        (*r)->element_count() != (*y)->element_count() / s.P * (s.P - 1))
      return bad("rfft_split: the kept piece and the others' output");
    s.keep = keep;
    s.rest = reinterpret_cast<float*>((*r)->typed_data());
  }
  if (s.t.batch * s.t.real == 0) return ffi::Error::Success();
  const float* in = x.typed_data();
  float* out = reinterpret_cast<float*>((*y)->typed_data());
  if (s.t.k == 2 && by_halves(2, s.t.n[1])) return rfft_split_planes(s, in, out);
  const bool al = is_aligned(in) && (s.t.real % 16 == 0);  // every group's start aligned
  const int64_t rem = s.t.batch % s.G;
  fftwf_plan full = split_plan(s, true, s.G, al);
  fftwf_plan last = rem ? split_plan(s, true, rem, al) : full;
  if (full == nullptr || last == nullptr)
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const bool ok = parallel_items(s.items, g_threads, size_t(2 * s.G * s.t.half),
                                 [&](float* buf, int64_t i) {
    const int64_t b0 = i * s.G, g = std::min(s.G, s.t.batch - b0);
    fftwf_execute_dft_r2c(g == s.G ? full : last, const_cast<float*>(in) + b0 * s.t.real,
                          reinterpret_cast<fftwf_complex*>(buf));
    for (int64_t j = 0; j < g; ++j)
      plane_pieces(s, b0 + j, buf + 2 * j * s.t.half, out, true, 1.f);
  });
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

// Plane b's spectrum from its pieces times `w` (a whole plane spectrum of complex weights).
void plane_from_pieces_w(const Split& s, int64_t b, float* plane, const float* pieces,
                         const float* w) {
  const int64_t chunk = 2 * s.L * s.post, per_piece = s.pre * chunk;
  for (int64_t p = 0; p < s.P; ++p) {
    const int64_t lo = p * s.L, len = std::max<int64_t>(0, std::min(s.L, s.sq - lo));
    const float* piece = pieces + (p * s.t.batch + b) * per_piece;
    for (int64_t r = 0; r < s.pre; ++r) {
      const float* c = piece + r * chunk;
      const int64_t off = 2 * (r * s.sq + lo) * s.post;
      float* v = plane + off;
      const float* wv = w + off;
      for (int64_t i = 0; i < 2 * len * s.post; i += 2) {
        const float re = c[i], im = c[i + 1];
        v[i] = re * wv[i] - im * wv[i + 1];
        v[i + 1] = re * wv[i + 1] + im * wv[i];
      }
    }
  }
}

// The weights of irfft_join's vector: `scale * vec[index along spectrum axis a]` over a plane
// spectrum of dims `dims` (k axes); false if the vector's length is not dims[a].
bool join_weights(const int64_t* dims, int k, int64_t a, const float* vec, int64_t len,
                  float scale, std::vector<float>* w) {
  if (a < 0 || a >= k || len != dims[a]) return false;
  int64_t inner = 1, total = 1;
  for (int i = 0; i < k; ++i) total *= dims[i];
  for (int i = int(a) + 1; i < k; ++i) inner *= dims[i];
  w->resize(size_t(2 * total));
  for (int64_t e = 0; e < total; ++e) {
    const int64_t j = (e / inner) % dims[a];
    (*w)[2 * e] = vec[2 * j] * scale;
    (*w)[2 * e + 1] = vec[2 * j + 1] * scale;
  }
  return true;
}

// irfft_join with the planes by halves (by_halves): each plane gathered from its pieces (times
// the weights `w`, else `scale`) into the worker's plane buffer, then transformed.
ffi::Error irfft_join_planes(const Split& s, float* in, const std::vector<float>& w, float scale,
                             float* out) {
  const bool real_al = is_aligned(out) && is_aligned(out + s.t.real);
  const PlanePlans* P = get_plane_plans(2, s.t.n[0], s.t.n[1], real_al, true);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const size_t pp = pad16(size_t(2 * s.t.half));
  const bool ok = parallel_items(s.t.batch, g_threads, pp + plane_extra(P),
                                 [&](float* buf, int64_t b) {
    if (w.empty()) plane_pieces(s, b, buf, in, false, scale);
    else plane_from_pieces_w(s, b, buf, in, w.data());
    plane_c2r(P, buf, out + b * s.t.real, buf + pp);
  });
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

ffi::Error IrfftJoinImpl(ffi::ThreadPool pool, int64_t naxes, int64_t q, float scale,
                         int64_t vaxis, ffi::Buffer<ffi::C64> x, ffi::RemainingArgs args,
                         ffi::Result<ffi::Buffer<ffi::F32>> y) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  Split s;
  if (!split_of(y->dimensions(), x.dimensions(), naxes, q, &s))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "irfft_join: shapes");
  if (s.t.batch * s.t.real == 0) return ffi::Error::Success();
  std::vector<float> w;  // the vector's weights over a plane spectrum (times scale)
  if (vaxis >= 0) {
    if (args.size() != 1)
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "irfft_join: one vector");
    auto v = args.get<ffi::Buffer<ffi::C64>>(0);
    int64_t dims[3];
    for (int i = 0; i < s.t.k; ++i) dims[i] = i + 1 < s.t.k ? s.t.n[i] : s.t.n[i] / 2 + 1;
    if (v.has_error() ||
        !join_weights(dims, s.t.k, vaxis, reinterpret_cast<const float*>(v->typed_data()),
                      int64_t(v->element_count()), scale, &w))
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "irfft_join: vector");
  } else if (args.size() != 0) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "irfft_join: a vector needs its axis");
  }
  float* in = reinterpret_cast<float*>(const_cast<void*>(static_cast<const void*>(x.typed_data())));
  float* out = y->typed_data();
  if (s.t.k == 2 && by_halves(2, s.t.n[1])) return irfft_join_planes(s, in, w, scale, out);
  const bool al = is_aligned(out) && (s.t.real % 16 == 0);
  const int64_t rem = s.t.batch % s.G;
  fftwf_plan full = split_plan(s, false, s.G, al);
  fftwf_plan last = rem ? split_plan(s, false, rem, al) : full;
  if (full == nullptr || last == nullptr)
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const bool ok = parallel_items(s.items, g_threads, size_t(2 * s.G * s.t.half),
                                 [&](float* buf, int64_t i) {
    const int64_t b0 = i * s.G, g = std::min(s.G, s.t.batch - b0);
    for (int64_t j = 0; j < g; ++j) {
      if (w.empty()) plane_pieces(s, b0 + j, buf + 2 * j * s.t.half, in, false, scale);
      else plane_from_pieces_w(s, b0 + j, buf + 2 * j * s.t.half, in, w.data());
    }
    fftwf_execute_dft_c2r(g == s.G ? full : last, reinterpret_cast<fftwf_complex*>(buf),
                          out + b0 * s.t.real);
  });
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

// Identity on buffers aliased to their outputs: XLA materialises the values here and cannot
// fuse across the call (the step uses it to stop fusions re-reading and copying fields); with
// several buffers, nothing that reads an output runs before every input is computed (LFB
// blocks use that to meet their neighbours once for several fields).
ffi::Error KeepImpl(ffi::RemainingArgs args, ffi::RemainingRets rets) {
  if (args.size() != rets.size())
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "keep: as many outputs as inputs");
  for (size_t i = 0; i < args.size(); ++i) {
    auto x = args.get<ffi::AnyBuffer>(i);
    auto y = rets.get<ffi::AnyBuffer>(i);
    if (x.has_error() || y.has_error() || x->size_bytes() != (*y)->size_bytes())
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "keep: outputs like the inputs");
    if (x->untyped_data() != (*y)->untyped_data())
      std::memcpy((*y)->untyped_data(), x->untyped_data(), x->size_bytes());
  }
  return ffi::Error::Success();
}

}  // namespace

extern "C" int sonotile_fftw_configure(int threads, int effort, const char* wisdom) {
  std::lock_guard<std::mutex> g(plan_mu);
  static bool init = false;
  if (!init) {
    g_threads_ok = fftwf_init_threads() != 0;
    init = true;
  }
  // FFTW's loops on XLA's pool: with FFTW's own threads, XLA's idle (spinning) workers and
  // FFTW's threads compete for the cores (a 128^3 step on 2 threads ~20 % slower)
  g_use_pool = fftwf_threads_set_callback != nullptr;
  if (g_use_pool) fftwf_threads_set_callback(fftw_loop, nullptr);
  g_threads = threads > 0 ? threads : 1;
  g_effort = effort == 0 ? kEstimate : effort == 2 ? kPatient : kMeasure;
  std::string w = wisdom != nullptr ? wisdom : "";
  if (!w.empty() && w != g_wisdom) fftwf_import_wisdom_from_filename(w.c_str());
  g_wisdom = w;
  return g_threads_ok ? 1 : 0;
}

// Make the aligned plans of one shape now (those of sonotile_fftw_conv if the rank is 2-3, else
// the R2C and C2R ones), with the configured threads (1 on success). Called when the operators
// are built, before the run's state exists: planning allocates two grid-sized arrays, which
// would otherwise add to the run's peak memory.
extern "C" int sonotile_fftw_prepare(int rank, const int64_t* dims) {
  if (rank < 1 || rank > 3) return 0;
  int64_t d[3] = {1, 1, 1};
  for (int a = 0; a < rank; ++a) d[3 - rank + a] = dims[a];
  Grid g;
  if (grid_from(rank, dims, &g)) return get_conv_plans(g, true) != nullptr ? 1 : 0;
  fftwf_plan r2c = get_plan(rank, d, true, g_threads, true);
  fftwf_plan c2r = get_plan(rank, d, false, g_threads, true);
  return r2c != nullptr && c2r != nullptr ? 1 : 0;
}

extern "C" int sonotile_fftw_threads() { return g_threads; }

// 1 when batched n-point column transforms run on the vector kernel (vector_columns), else 0.
extern "C" int sonotile_fftw_vector_columns(int64_t n) { return vector_columns(n) ? 1 : 0; }

// Floats per vector of the pass along x's own kernel in this build (vector_fft.h), 0 if none.
extern "C" int sonotile_fftw_vector_width() {
#ifdef SONOTILE_VFFT
  return vfft::kVW;
#else
  return 0;
#endif
}
extern "C" int sonotile_fftw_uses_pool() { return g_use_pool ? 1 : 0; }

// `fail` != 0: every FFTW-aligned allocation fails from now on (tests of the error paths).
extern "C" void sonotile_fftw_fail_allocations(int fail) { g_fail_alloc = fail != 0; }

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwR2C, R2CImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::C64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwR2ROp, R2ROpImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("kind")
                                  .Attr<float>("scale")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwC2R, C2RImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("has_op")
                                  .Attr<int64_t>("has_vec")
                                  .Attr<int64_t>("axis")
                                  .Arg<ffi::Buffer<ffi::C64>>()
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwConv, ConvImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("has_op")
                                  .Attr<ffi::Span<const int64_t>>("src")
                                  .Attr<ffi::Span<const int64_t>>("axis")
                                  .Attr<ffi::Span<const int64_t>>("epi")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwConvSum, ConvSumImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("has_op")
                                  .Attr<ffi::Span<const int64_t>>("axis")
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwXPass, XPassImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<ffi::Span<const int64_t>>("dims")
                                  .Attr<int64_t>("has_op")
                                  .Attr<int64_t>("lo")
                                  .Attr<int64_t>("pad")
                                  .Attr<int64_t>("parts")
                                  .Attr<int64_t>("keep")
                                  .Attr<ffi::Span<const int64_t>>("src")
                                  .Attr<ffi::Span<const int64_t>>("axis")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwPlanesC2R, PlanesC2RImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("axis")
                                  .Attr<int64_t>("lo")
                                  .Attr<int64_t>("epi")
                                  .Attr<int64_t>("epi_axis")
                                  .Arg<ffi::Buffer<ffi::C64>>()
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwAxisDiff, AxisDiffImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<ffi::Span<const int64_t>>("src")
                                  .Attr<ffi::Span<const int64_t>>("axis")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwAxisUpdate, AxisUpdateImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("axis")
                                  .Attr<int64_t>("nsrc")
                                  .Attr<ffi::Span<const int64_t>>("has_old")
                                  .Attr<ffi::Span<const int64_t>>("has_m")
                                  .Attr<ffi::Span<const int64_t>>("ncoef")
                                  .Attr<ffi::Span<const int64_t>>("coef_src")
                                  .Attr<ffi::Span<const int64_t>>("coef_axis")
                                  .Attr<ffi::Span<const int64_t>>("has_post")
                                  .Attr<int64_t>("ndeps")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileKeep, KeepImpl,
                              ffi::Ffi::Bind().RemainingArgs().RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwRfftAxes, RfftAxesImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("naxes")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::C64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwIrfftAxes, IrfftAxesImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("naxes")
                                  .Attr<float>("scale")
                                  .Arg<ffi::Buffer<ffi::C64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwFftAxis, FftAxisImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("axis")
                                  .Attr<int64_t>("sign")
                                  .Attr<float>("scale")
                                  .Arg<ffi::Buffer<ffi::C64>>()
                                  .Ret<ffi::Buffer<ffi::C64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwRfftSplit, RfftSplitImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("naxes")
                                  .Attr<int64_t>("q")
                                  .Attr<int64_t>("keep")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwIrfftJoin, IrfftJoinImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("naxes")
                                  .Attr<int64_t>("q")
                                  .Attr<float>("scale")
                                  .Attr<int64_t>("vaxis")
                                  .Arg<ffi::Buffer<ffi::C64>>()
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>());
