// The plans and plane kernels of the fused operators (fftw_conv.cc) and of the single-axis
// kernels (fftw_axis.cc): planes by halves, the pass along x (FFTW or vector_fft.h's kernel),
// per-worker scratch.
// Part of the FFTW extension: compiled as one translation unit with the other parts, in the
// order of SOURCES in sonotile/fft/fftw_library.py, after fftw_common.h.

#include "fftw_common.h"

namespace {

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

// FFTW-aligned, zeroed scratch for one worker, from the kept blocks of take_scratch (a block
// freed after each call would be trimmed from glibc's heap and faulted in again by the next:
// ~14 trims, ~300 page faults and as many TLB flushes of the other cores per 128^3 absorbing
// step).
struct FBuf {
  float* p = nullptr;
  size_t floats = 0;
  explicit FBuf(size_t n) : floats(n) {
    if (n == 0 || g_fail_alloc) return;  // (the tests' failing allocations: no scratch)
    p = take_scratch(n);
    if (p != nullptr) std::memset(p, 0, sizeof(float) * n);
  }
  ~FBuf() { give_scratch(p, floats); }
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

}  // namespace
