// Whole grids of rank 1-3: sonotile_fftw_r2c, sonotile_fftw_c2r (an operator and a vector
// applied while copying the spectrum) and sonotile_fftw_r2r_op (a real operator between DCT-I /
// DST-I transforms).
// Part of the FFTW extension: compiled as one translation unit with the other parts, in the
// order of SOURCES in sonotile/fft/fftw_library.py, after fftw_common.h.

#include "fftw_common.h"

namespace {

ffi::Error R2CImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x,
                   ffi::ResultBuffer<ffi::C64> y) {
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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

}  // namespace
