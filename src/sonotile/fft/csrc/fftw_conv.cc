// The fused operators: sonotile_fftw_conv, sonotile_fftw_conv_sum, sonotile_fftw_xpass,
// sonotile_fftw_planes_c2r (split-field updates applied as each plane is made) and
// sonotile_fftw_plane_source (the filtered grid of a source in one plane); their design is
// described in fftw_plans.cc.
// Part of the FFTW extension: compiled as one translation unit with the other parts, in the
// order of SOURCES in sonotile/fft/fftw_library.py, after fftw_common.h.

#include "fftw_common.h"

namespace {

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

// `apart[o]` 1: output o keeps the operator's result d and its epilogue's update goes to a
// result of its own, after the m outputs in output order. That result may be the update's old
// field (each value is read before it is written), which output o itself cannot be (it holds
// a spectrum between the passes): an update in place, so a time loop carrying the field needs
// no copy of it.
ffi::Error ConvImpl(ffi::ThreadPool pool, int64_t has_op, ffi::Span<const int64_t> src,
                    ffi::Span<const int64_t> axis, ffi::Span<const int64_t> epi,
                    ffi::Span<const int64_t> apart, ffi::RemainingArgs args,
                    ffi::RemainingRets rets) {
  PoolScope scope(&pool);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  const int m = int(src.size());
  if (m == 0 || int(axis.size()) != m) return bad("conv: src/axis per output");
  if (int(epi.size()) != m || int(apart.size()) != m) return bad("conv: epi/apart per output");
  int n_apart = 0;
  for (int o = 0; o < m; ++o) {
    if (apart[o] != 0 && (apart[o] != 1 || epi[o] == kEpiNone))
      return bad("conv: apart 0, or 1 for an output with an epilogue");
    n_apart += int(apart[o]);
  }
  if (int(rets.size()) != m + n_apart) return bad("conv: one result per output and update apart");
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
  std::vector<float*> upd(m);  // where output o's update goes: out[o] itself, or a result apart
  for (int o = 0, r = m; o < m; ++o) {
    ffi::Error e = epilogue_args(g, epi[o], int(axis[o]), args, &a, &epis[o]);
    if (e.failure()) return e;
    // the output holds a spectrum between the passes: its old field must be another buffer
    if (epis[o].old == out[o] || epis[o].G == out[o]) return bad("conv: epilogue aliases out");
    upd[o] = out[o];
    if (apart[o] == 0) continue;
    auto y = rets.get<ffi::Buffer<ffi::F32>>(r++);
    if (y.has_error() || (*y)->element_count() != g.nr) return bad("conv: update shape");
    upd[o] = (*y)->typed_data();
    if (epis[o].G == upd[o]) return bad("conv: epilogue field aliases its update");
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
            apply_epilogue(g, epis[o], x, out[o] + x * g.pr, upd[o] + x * g.pr);
          continue;
        }
        if (shared_users.empty()) continue;  // returned as a spectrum only
        store[q].get(x, 0, 2 * g.pc, keep_shared ? sp : pb);
        for (int o : shared_users) {
          const float* v = axis[o] >= 1 ? vec[o] : nullptr;
          if (keep_shared || v != nullptr) plane_times(g, keep_shared ? sp : pb, v, int(axis[o]), pb);
          plane_c2r(P->plane, pb, out[o] + x * g.pr, ws);
          if (epis[o].mode != kEpiNone)
            apply_epilogue(g, epis[o], x, out[o] + x * g.pr, upd[o] + x * g.pr);
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
  PoolScope scope(&pool);
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

// The coefficient of div_density's update: s, s G (a field), or s (2 (rho_0 + rho_1 + rho_2)
// + rho0) from the old densities (the nonlinear factor, formed where they are read).
enum DensityCoef : int64_t { kCoefScalar = 0, kCoefField = 1, kCoefNonlinear = 2 };

// One row of n values of div_density's stage 3, in place over the densities y_a (plain loops
// per rank and kind of coefficient, so that the compiler vectorises them): the updates
// y_a = m_a (m_a y_a - coef d_a) (+ src: a pressure source's grid, HasSrc),
// div = rho0 ((d_0 + d_1) + d_2), sum = (y_0 + y_1) + y_2; rho0 along the row (HasRho0) or the
// value r0.
struct DensityRow {
  int64_t n;
  float s, r0;
  const float* G;
  const float* rho0;
  const float* src;  // added to every updated density (HasSrc)
  float* div;
  float* sum;
};

template <int64_t Coef, bool HasRho0, bool HasSrc>
void density_row3(const DensityRow& w, float mx, float my, const float* __restrict mz,
                  const float* __restrict d0, const float* __restrict d1,
                  const float* __restrict d2, float* __restrict y0, float* __restrict y1,
                  float* __restrict y2) {
  float* __restrict div = w.div;
  float* __restrict sum = w.sum;
  const float* __restrict G = w.G;
  const float* __restrict rho0 = w.rho0;
  const float* __restrict src = w.src;
  const float s = w.s;
  for (int64_t c = 0; c < w.n; ++c) {
    const float r = HasRho0 ? rho0[c] : w.r0;
    float coef = s;
    if (Coef == kCoefField) coef = s * G[c];
    if (Coef == kCoefNonlinear) coef = s * (2.f * ((y0[c] + y1[c]) + y2[c]) + r);
    float a = mx * (mx * y0[c] - coef * d0[c]);
    float b = my * (my * y1[c] - coef * d1[c]);
    float e = mz[c] * (mz[c] * y2[c] - coef * d2[c]);
    if (HasSrc) {
      a += src[c];
      b += src[c];
      e += src[c];
    }
    y0[c] = a;
    y1[c] = b;
    y2[c] = e;
    sum[c] = (a + b) + e;
    div[c] = r * ((d0[c] + d1[c]) + d2[c]);
  }
}

template <int64_t Coef, bool HasRho0, bool HasSrc>
void density_row2(const DensityRow& w, float mx, const float* __restrict mz,
                  const float* __restrict d0, const float* __restrict d1, float* __restrict y0,
                  float* __restrict y1) {
  float* __restrict div = w.div;
  float* __restrict sum = w.sum;
  const float* __restrict G = w.G;
  const float* __restrict rho0 = w.rho0;
  const float* __restrict src = w.src;
  const float s = w.s;
  for (int64_t c = 0; c < w.n; ++c) {
    const float r = HasRho0 ? rho0[c] : w.r0;
    float coef = s;
    if (Coef == kCoefField) coef = s * G[c];
    if (Coef == kCoefNonlinear) coef = s * (2.f * (y0[c] + y1[c]) + r);
    float a = mx * (mx * y0[c] - coef * d0[c]);
    float b = mz[c] * (mz[c] * y1[c] - coef * d1[c]);
    if (HasSrc) {
      a += src[c];
      b += src[c];
    }
    y0[c] = a;
    y1[c] = b;
    sum[c] = a + b;
    div[c] = r * (d0[c] + d1[c]);
  }
}

template <int64_t Coef, bool HasRho0, bool HasSrc>
void density_row(int R, const DensityRow& w, const float* const* m, int64_t x, int64_t r,
                 float* const* d, float* const* y) {
  if (R == 3)
    density_row3<Coef, HasRho0, HasSrc>(w, m[0][x], m[1][r], m[2], d[0], d[1], d[2], y[0], y[1],
                                        y[2]);
  else
    density_row2<Coef, HasRho0, HasSrc>(w, m[0][x], m[1], d[0], d[1], y[0], y[1]);
}

template <int64_t Coef>
void density_row(int R, const DensityRow& w, const float* const* m, int64_t x, int64_t r,
                 float* const* d, float* const* y) {
  const bool has_rho0 = w.rho0 != nullptr, has_src = w.src != nullptr;
  if (has_rho0 && has_src) density_row<Coef, true, true>(R, w, m, x, r, d, y);
  else if (has_rho0) density_row<Coef, true, false>(R, w, m, x, r, d, y);
  else if (has_src) density_row<Coef, false, true>(R, w, m, x, r, d, y);
  else density_row<Coef, false, false>(R, w, m, x, r, d, y);
}

// sonotile_fftw_div_density: the divergence and the split-field density update of the
// absorbing step in one call, for a grid of rank R (R inputs u_a):
//
//   d_a = C2R(op * vec_a * R2C(u_a)) / N,   rho_a = m_a (m_a rho_a - coef d_a)   (a = 0 .. R-1)
//   rho0_div_u = rho0 ((d_0 + d_1) + d_2),   rho_sum = (rho_0 + rho_1) + rho_2
//
// coef: DensityCoef; rho0 a field or one value; an optional grid `src` (a pressure source in
// additive mode) added to every updated density before the sum. Stages 1 and 2 are conv's, input by input, each
// spectrum waiting in an output of its own (rho0_div_u, rho_sum, then `spare`, a grid the
// caller drops); stage 3 makes every d_a of a plane in cache and writes the updates (over the
// old densities) and both sums from it. Against one conv per component, a pass for the
// nonlinear factor and two for the sums, no derivative or factor grid is written to memory and
// read back. The same arithmetic in the same order as sonotile/physics/acoustic/step.py.
ffi::Error DivDensityImpl(ffi::ThreadPool pool, int64_t has_op, int64_t coef, int64_t rho0_field,
                          int64_t has_src, ffi::RemainingArgs args, ffi::RemainingRets rets) {
  PoolScope scope(&pool);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  Grid g;
  auto u0 = args.get<ffi::Buffer<ffi::F32>>(0);
  if (u0.has_error() || !grid_of(u0->dimensions(), &g)) return bad("div_density: rank 2-3 only");
  const int R = g.rank;
  // u (R), [op], vec (R), old (R), m (R), s, [G], rho0
  if (coef < kCoefScalar || coef > kCoefNonlinear) return bad("div_density: coef 0-2");
  const int n_args = 4 * R + (has_op ? 1 : 0) + 1 + (coef == kCoefField ? 1 : 0) + 1 +
                     (has_src ? 1 : 0);
  if (int(args.size()) != n_args) return bad("div_density: argument count");
  if (int(rets.size()) != 2 + (R - 2) + R) return bad("div_density: result count");
  int a = 0;
  std::vector<const float*> in(R), vec(R), old(R), m(R);
  for (int j = 0; j < R; ++j, ++a) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a);
    if (x.has_error() || x->element_count() != g.nr) return bad("div_density: input shapes differ");
    in[j] = x->typed_data();
  }
  const float* op = nullptr;
  if (has_op) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (x.has_error() || x->element_count() != g.nc) return bad("div_density: operator shape");
    op = x->typed_data();
  }
  for (int j = 0; j < R; ++j, ++a) {
    auto x = args.get<ffi::Buffer<ffi::C64>>(a);
    const int64_t len = j == R - 1 ? g.cols : g.d[j];
    if (x.has_error() || int64_t(x->element_count()) != len) return bad("div_density: vector length");
    vec[j] = reinterpret_cast<const float*>(x->typed_data());
  }
  for (int j = 0; j < R; ++j, ++a) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a);
    if (x.has_error() || x->element_count() != g.nr) return bad("div_density: old density shape");
    old[j] = x->typed_data();
  }
  for (int j = 0; j < R; ++j, ++a) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a);
    if (x.has_error() || int64_t(x->element_count()) != g.d[j]) return bad("div_density: m length");
    m[j] = x->typed_data();
  }
  auto sb = args.get<ffi::Buffer<ffi::F32>>(a++);
  if (sb.has_error() || sb->element_count() != 1) return bad("div_density: one scale");
  const float s = sb->typed_data()[0];
  const float* G = nullptr;
  if (coef == kCoefField) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (x.has_error() || x->element_count() != g.nr) return bad("div_density: field shape");
    G = x->typed_data();
  }
  auto rb = args.get<ffi::Buffer<ffi::F32>>(a++);
  if (rb.has_error() || rb->element_count() != (rho0_field ? g.nr : 1))
    return bad("div_density: rho0 shape");
  const float* rho0 = rb->typed_data();
  const float* src = nullptr;
  if (has_src) {
    auto x = args.get<ffi::Buffer<ffi::F32>>(a++);
    if (x.has_error() || x->element_count() != g.nr) return bad("div_density: source shape");
    src = x->typed_data();
  }
  std::vector<float*> spec(R), upd(R);  // the spectra's storage; the updated densities
  for (int j = 0; j < R; ++j) {
    auto y = rets.get<ffi::Buffer<ffi::F32>>(j);
    if (y.has_error() || (*y)->element_count() != g.nr) return bad("div_density: output shape");
    spec[j] = (*y)->typed_data();
    auto r = rets.get<ffi::Buffer<ffi::F32>>(R + j);
    if (r.has_error() || (*r)->element_count() != g.nr) return bad("div_density: update shape");
    upd[j] = (*r)->typed_data();
  }
  for (int j = 0; j < R; ++j)
    for (int i = 0; i < R; ++i)
      if (spec[j] == old[i] || spec[j] == G || spec[j] == rho0 || spec[j] == in[i] ||
          spec[j] == src)
        return bad("div_density: an output aliases an operand");
  bool aligned = true;
  for (int j = 0; j < R; ++j)
    aligned = aligned && is_aligned(in[j]) && is_aligned(in[j] + g.pr) && is_aligned(spec[j]) &&
              is_aligned(spec[j] + g.pr);
  const ConvPlans* P = get_conv_plans(g, aligned);
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);

  const float scale = float(1.0 / double(g.nr));
  const int T = g_threads;
  const int64_t nblocks = (g.pc + g.blk - 1) / g.blk;
  const int64_t ov = 2 * g.pc - g.pr;
  const size_t plane = size_t(2 * g.pc), blk = P->x->floats(g.X);
  const int64_t rs = P->x->rs;
  const size_t pp = pad16(plane), rp = pad16(size_t(g.pr)), extra = plane_extra(P->plane);
  std::vector<float*> sides;
  std::vector<Store> store;
  bool ok = true;
  for (int j = 0; ok && j < R; ++j) {
    sides.push_back(take_scratch(size_t(g.X * ov)));
    ok = sides.back() != nullptr;
    store.push_back({spec[j], sides.back(), g.pr, ov});
  }
  // 1-2. conv's planes forward and pass along x, input by input (the x derivative's vector
  // along x applied in the pass, the others on the plane in stage 3)
  for (int j = 0; ok && j < R; ++j) {
    const Store& st = store[j];
    const float* x_in = in[j];
    const float* vx = j == 0 ? vec[0] : nullptr;
    ok = parallel_items(g.X, T, pp + extra, [&](float* pb, int64_t x) {
      plane_r2c(P->plane, x_in + x * g.pr, pb, pb + pp);
      st.put(x, 0, 2 * g.pc, pb);
    });
    std::atomic<bool> x_ok{true};
    ok = ok && parallel_items(nblocks, T, blk, [&](float* buf, int64_t i) {
      const int64_t c0 = i * g.blk, b = std::min(g.blk, g.pc - c0);
      for (int64_t x = 0; x < g.X; ++x) st.get(x, 2 * c0, 2 * b, buf + x * rs);
      if (!x_transform(P->x, true, buf, g.X, b)) x_ok = false;
      multiply_block(g, rs, buf, op, vx, scale, c0, b, buf);
      if (!x_transform(P->x, false, buf, g.X, b)) x_ok = false;
      for (int64_t x = 0; x < g.X; ++x) st.put(x, 2 * c0, 2 * b, buf + x * rs);
    });
    ok = ok && x_ok;
  }
  // 3. every derivative of plane x in cache, then the updates and the sums
  const int64_t n2 = g.d[R - 1], n1 = g.pr / n2;
  ok = ok && parallel_items(g.X, T, pp + R * rp + extra, [&](float* pb, int64_t x) {
    float* d[3] = {pb + pp, pb + pp + rp, pb + pp + 2 * rp};
    float* ws = pb + pp + R * rp;
    for (int j = 0; j < R; ++j) {
      store[j].get(x, 0, 2 * g.pc, pb);
      if (j > 0) plane_times(g, pb, vec[j], j, pb);
      plane_c2r(P->plane, pb, d[j], ws);
    }
    const int64_t off = x * g.pr;
    for (int j = 0; j < R; ++j)  // an update not over its old field (XLA kept the old one)
      if (upd[j] != old[j]) std::memcpy(upd[j] + off, old[j] + off, sizeof(float) * g.pr);
    for (int64_t r = 0; r < n1; ++r) {
      const int64_t i = r * n2, gi = off + i;
      const DensityRow w{n2, s, rho0[0], G != nullptr ? G + gi : nullptr,
                         rho0_field ? rho0 + gi : nullptr, src != nullptr ? src + gi : nullptr,
                         spec[0] + gi, spec[1] + gi};
      float* dr[3] = {d[0] + i, d[1] + i, d[2] + i};
      float* yr[3] = {upd[0] + gi, upd[1] + gi, R == 3 ? upd[2] + gi : nullptr};
      const float* const* mp = m.data();
      if (coef == kCoefField) density_row<kCoefField>(R, w, mp, x, r, dr, yr);
      else if (coef == kCoefNonlinear) density_row<kCoefNonlinear>(R, w, mp, x, r, dr, yr);
      else density_row<kCoefScalar>(R, w, mp, x, r, dr, yr);
    }
  });
  for (float* p : sides)
    if (p != nullptr) give_scratch(p, size_t(g.X * ov));
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
  PoolScope scope(&pool);
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
  PoolScope scope(&pool);
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

// sonotile_fftw_plane_source: the k-space filtered grid of a source that lies in one plane
// x = x0, without its 3-D transforms: rfftn(s) = exp(-i k_x x0) R2C(plane) along x, so
//
//   out[x] = scale * C2R(K[x] * R2C(plane)),   K[x] = ifft_x(op exp(-i k_x x0))[x],
//
// K real [X, plane bins] when op is even along x (cos(c_ref |k| dt / 2)), made once per run
// (sonotile.spectral.operators.FourierOps.plane_source_kernel). The plane's transform runs once;
// each output plane is then one plane C2R of a product made in cache: the pass along x and the
// planes forward of sonotile_fftw_conv left out.
ffi::Error PlaneSourceImpl(ffi::ThreadPool pool, float scale, ffi::Buffer<ffi::F32> kernel,
                           ffi::Buffer<ffi::F32> plane, ffi::Result<ffi::Buffer<ffi::F32>> out) {
  PoolScope scope(&pool);
  auto bad = [](const char* what) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, what); };
  Grid g;
  if (!grid_of(out->dimensions(), &g)) return bad("plane_source: rank 2-3 only");
  if (int64_t(kernel.element_count()) != g.X * g.pc) return bad("plane_source: kernel shape");
  if (int64_t(plane.element_count()) != g.pr) return bad("plane_source: plane shape");
  float* o = out->typed_data();
  const ConvPlans* P = get_conv_plans(g, is_aligned(o) && is_aligned(o + g.pr));
  if (P == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoPlan);
  const size_t pp = pad16(size_t(2 * g.pc)), extra = plane_extra(P->plane);
  FBuf spec(pp + pad16(size_t(g.pr)) + extra);  // the plane's spectrum, its copy, scratch
  if (spec.p == nullptr) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  float* S = spec.p;
  float* real = S + pp;
  std::memcpy(real, plane.typed_data(), sizeof(float) * size_t(g.pr));
  plane_r2c(P->plane, real, S, real + pad16(size_t(g.pr)));
  for (int64_t j = 0; j < 2 * g.pc; ++j) S[j] *= scale;
  const float* K = kernel.typed_data();
  const bool ok = parallel_items(g.X, g_threads, pp + extra, [&](float* pb, int64_t x) {
    const float* k = K + x * g.pc;
    for (int64_t j = 0; j < g.pc; ++j) {
      pb[2 * j] = S[2 * j] * k[j];
      pb[2 * j + 1] = S[2 * j + 1] * k[j];
    }
    plane_c2r(P->plane, pb, o + x * g.pr, pb + pp);
  });
  if (!ok) return ffi::Error(ffi::ErrorCode::kResourceExhausted, kNoMemory);
  return ffi::Error::Success();
}

}  // namespace
