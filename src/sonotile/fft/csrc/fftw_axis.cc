// The single-axis kernels: sonotile_fftw_axis_diff and sonotile_fftw_axis_update.
// Part of the FFTW extension: compiled as one translation unit with the other parts, in the
// order of SOURCES in sonotile/fft/fftw_library.py, after fftw_common.h.

#include "fftw_common.h"

namespace {

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
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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

}  // namespace
