// The distributed FFT's local transforms: sonotile_fftw_rfft_axes, _irfft_axes, _fft_axis,
// _rfft_split and _irfft_join.
// Part of the FFTW extension: compiled as one translation unit with the other parts, in the
// order of SOURCES in sonotile/fft/fftw_library.py, after fftw_common.h.

#include "fftw_common.h"

namespace {

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
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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

}  // namespace
