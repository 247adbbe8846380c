// FFTW (single precision) as XLA FFI custom calls for sonotile's spectral operators (CPU).
//
// Built by sonotile/fftw.py with the C++ compiler against jaxlib's FFI headers and a
// libfftw3f shared library (Debian's libfftw3-dev or the copy inside the pyFFTW wheel). The
// FFTW prototypes are declared here, so no fftw3.h is needed.
//
// Two handlers, each doing k transforms of one real shape (rank 1-3) in one call:
//
//   sonotile_fftw_r2c: k real fields -> k half spectra (the last axis halved).
//   sonotile_fftw_c2r: n_spec spectra (1 or k), an optional real operator on the half spectrum
//     (kappa, |k|^(y-2), ...) and optionally k 1-D complex vectors (vector i along grid axis
//     axis + i, e.g. i k exp(i k dx/2)) -> k real fields
//       out_i = C2R(spec_i * op * vec_i[k_i]) / N.
//     The multiplications and 1/N are done while copying the spectrum into a scratch buffer
//     (FFTW's multi-dimensional C2R destroys its input, and XLA's buffers must stay intact),
//     so XLA never materialises the products.
//
// Threads: `concurrent` = 0 runs the k transforms one after the other, each on a plan with
// all threads; `concurrent` = 1 runs up to `threads` transforms at once on 1-thread plans (the
// remainder on all threads). Plans are made once per (shape, direction, threads, alignment),
// with wisdom imported from / exported to a file.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "xla/ffi/api/ffi.h"

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
void fftwf_execute_dft_r2c(const fftwf_plan p, float* in, fftwf_complex* out);
void fftwf_execute_dft_c2r(const fftwf_plan p, fftwf_complex* in, float* out);
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

using Key = std::tuple<int, int64_t, int64_t, int64_t, int, int, int>;
std::map<Key, fftwf_plan> plans;

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
  float* r = static_cast<float*>(fftwf_malloc(sizeof(float) * nr));
  fftwf_complex* c = static_cast<fftwf_complex*>(fftwf_malloc(sizeof(fftwf_complex) * nc));
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
    if (!g_wisdom.empty() && g_effort != kEstimate) {
      std::string tmp = g_wisdom + ".tmp" + std::to_string(long(getpid()));
      if (fftwf_export_wisdom_to_filename(tmp.c_str())) std::rename(tmp.c_str(), g_wisdom.c_str());
    }
  }
  return p;
}

// Scratch buffers for C2R inputs, reused across calls and threads.
std::mutex scratch_mu;
std::vector<std::pair<size_t, float*>> scratch_free;

float* take_scratch(size_t floats) {
  {
    std::lock_guard<std::mutex> g(scratch_mu);
    for (size_t i = 0; i < scratch_free.size(); ++i) {
      if (scratch_free[i].first >= floats) {
        float* p = scratch_free[i].second;
        scratch_free.erase(scratch_free.begin() + i);
        return p;
      }
    }
  }
  return static_cast<float*>(fftwf_malloc(sizeof(float) * floats));
}

void give_scratch(float* p, size_t floats) {
  std::lock_guard<std::mutex> g(scratch_mu);
  scratch_free.emplace_back(floats, p);
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

// The k transforms of one call: with `concurrent`, T at a time on 1-thread plans (the rest
// one after another), otherwise one after another on T-thread plans. run(i, threads).
template <typename F>
void run_transforms(int k, int T, bool concurrent, F run) {
  int done = 0;
  if (concurrent && T > 1 && k > 1) {
    const int batch = (k / T) * T;
    for (int b = 0; b < batch; b += T) parallel_for(T, T, [&](int j) { run(b + j, 1); });
    done = batch;
  }
  for (int i = done; i < k; ++i) run(i, T);
}

void fftw_loop(void* (*work)(char*), char* jobdata, size_t elsize, int njobs, void*) {
  run_jobs(njobs, njobs, [=](int i) { work(jobdata + elsize * size_t(i)); });
}

struct PoolScope {  // makes the call's thread pool current for FFTW's loops on this thread
  ffi::ThreadPool* prev;
  explicit PoolScope(ffi::ThreadPool* p) : prev(tl_pool) { tl_pool = p; }
  ~PoolScope() { tl_pool = prev; }
};

ffi::Error R2CImpl(ffi::ThreadPool pool, int64_t concurrent, ffi::RemainingArgs args,
                   ffi::RemainingRets rets) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  const int k = int(args.size());
  if (k == 0 || int(rets.size()) != k)
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2c: k inputs, k outputs");
  std::vector<const float*> in(k);
  std::vector<float*> out(k);
  Shape s{};
  for (int i = 0; i < k; ++i) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(i);
    auto y = rets.get<ffi::Buffer<ffi::C64>>(i);
    if (x.has_error() || y.has_error())
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2c: float32 in, complex64 out");
    if (i == 0 && !shape_of(x->dimensions(), &s))
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2c: rank 1-3 only");
    if (x->element_count() != s.nr || (*y)->element_count() != s.nc)
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "r2c: shapes differ");
    in[i] = x->typed_data();
    out[i] = reinterpret_cast<float*>((*y)->typed_data());
  }
  const int T = g_threads;
  auto run = [&](int i, int threads) {
    const bool al = is_aligned(in[i]) && is_aligned(out[i]);
    fftwf_plan p = get_plan(s.rank, s.d, true, threads, al);
    fftwf_execute_dft_r2c(p, const_cast<float*>(in[i]), reinterpret_cast<fftwf_complex*>(out[i]));
  };
  run_transforms(k, T, concurrent != 0, run);
  return ffi::Error::Success();
}

ffi::Error C2RImpl(ffi::ThreadPool pool, int64_t n_spec, int64_t has_op, int64_t has_vec,
                   int64_t axis, int64_t concurrent, ffi::RemainingArgs args,
                   ffi::RemainingRets rets) {
  PoolScope scope(g_use_pool ? &pool : nullptr);
  const int k = int(rets.size());
  if (k == 0 || (n_spec != 1 && n_spec != k) ||
      int(args.size()) != n_spec + (has_op ? 1 : 0) + (has_vec ? k : 0))
    return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: argument count");
  std::vector<const float*> spec(n_spec);
  std::vector<float*> out(k);
  std::vector<const float*> vec(k, nullptr);
  const float* op = nullptr;
  Shape s{};
  for (int i = 0; i < k; ++i) {
    auto y = rets.get<ffi::Buffer<ffi::F32>>(i);
    if (y.has_error()) return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: float32 out");
    if (i == 0 && !shape_of((*y)->dimensions(), &s))
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: rank 1-3 only");
    if ((*y)->element_count() != s.nr)
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: output shapes differ");
    out[i] = (*y)->typed_data();
  }
  int a = 0;
  for (int i = 0; i < n_spec; ++i, ++a) {
    auto x = args.get<ffi::Buffer<ffi::C64>>(a);
    if (x.has_error() || x->element_count() != s.nc)
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: spectrum shape");
    spec[i] = reinterpret_cast<const float*>(x->typed_data());
  }
  if (has_op) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (x.has_error() || x->element_count() != s.nc)
      return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: operator shape");
    op = x->typed_data();
  }
  if (has_vec) {
    for (int i = 0; i < k; ++i, ++a) {
      auto x = args.get<ffi::Buffer<ffi::C64>>(a);
      const int ax = 3 - s.rank + int(axis) + i;
      if (x.has_error() || axis + i >= s.rank || axis < 0 ||
          int64_t(x->element_count()) != (ax == 2 ? s.c2 : s.d[ax]))
        return ffi::Error(ffi::ErrorCode::kInvalidArgument, "c2r: vector i along axis+i");
      vec[i] = reinterpret_cast<const float*>(x->typed_data());
    }
  }
  const float scale = float(1.0 / double(s.nr));
  const int T = g_threads;
  const int64_t rows = s.d[0] * s.d[1];
  auto run = [&](int i, int threads) {
    float* scr = take_scratch(2 * s.nc);
    const float* src = spec[n_spec == 1 ? 0 : i];
    const int ax = 3 - s.rank + int(axis) + i;
    if (threads > 1 && rows >= threads) {
      parallel_for(threads, threads, [&](int t) {
        scaled_copy(s, src, op, vec[i], ax, scale, scr, rows * t / threads,
                    rows * (t + 1) / threads);
      });
    } else {
      scaled_copy(s, src, op, vec[i], ax, scale, scr, 0, rows);
    }
    const bool al = is_aligned(out[i]);  // scratch is FFTW-aligned
    fftwf_plan p = get_plan(s.rank, s.d, false, threads, al);
    fftwf_execute_dft_c2r(p, reinterpret_cast<fftwf_complex*>(scr), out[i]);
    give_scratch(scr, 2 * s.nc);
  };
  run_transforms(k, T, concurrent != 0, run);
  return ffi::Error::Success();
}

// Identity on a buffer aliased to its output: XLA materialises the value here and cannot
// fuse across the call (the step uses it to stop fusions re-reading and copying fields).
ffi::Error KeepImpl(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
  if (x.untyped_data() != y->untyped_data())
    std::memcpy(y->untyped_data(), x.untyped_data(), x.size_bytes());
  return ffi::Error::Success();
}

}  // namespace

extern "C" int sonotile_fftw_configure(int threads, int effort, const char* wisdom,
                                       int use_pool) {
  std::lock_guard<std::mutex> g(plan_mu);
  static bool init = false;
  if (!init) {
    g_threads_ok = fftwf_init_threads() != 0;
    init = true;
  }
  g_use_pool = use_pool != 0 && fftwf_threads_set_callback != nullptr;
  if (fftwf_threads_set_callback != nullptr)
    fftwf_threads_set_callback(g_use_pool ? fftw_loop : nullptr, nullptr);
  g_threads = threads > 0 ? threads : 1;
  g_effort = effort == 0 ? kEstimate : effort == 2 ? kPatient : kMeasure;
  std::string w = wisdom != nullptr ? wisdom : "";
  if (!w.empty() && w != g_wisdom) fftwf_import_wisdom_from_filename(w.c_str());
  g_wisdom = w;
  return g_threads_ok ? 1 : 0;
}

// Make the aligned R2C and C2R plans of one shape now, with the configured threads (1 on
// success). Called when the operators are built, before the run's state exists: planning
// allocates two grid-sized arrays, which would otherwise add to the run's peak memory.
extern "C" int sonotile_fftw_prepare(int rank, const int64_t* dims) {
  if (rank < 1 || rank > 3) return 0;
  int64_t d[3] = {1, 1, 1};
  for (int a = 0; a < rank; ++a) d[3 - rank + a] = dims[a];
  fftwf_plan r2c = get_plan(rank, d, true, g_threads, true);
  fftwf_plan c2r = get_plan(rank, d, false, g_threads, true);
  return r2c != nullptr && c2r != nullptr ? 1 : 0;
}

extern "C" int sonotile_fftw_threads() { return g_threads; }
extern "C" int sonotile_fftw_uses_pool() { return g_use_pool ? 1 : 0; }

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwR2C, R2CImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("concurrent")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwC2R, C2RImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("n_spec")
                                  .Attr<int64_t>("has_op")
                                  .Attr<int64_t>("has_vec")
                                  .Attr<int64_t>("axis")
                                  .Attr<int64_t>("concurrent")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileKeep, KeepImpl,
                              ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>());
