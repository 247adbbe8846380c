// Batched complex FFTs down the columns of a block, on the CPU's vector registers: sonotile's
// own kernel for the column transforms of fftw_ffi.cc (the pass along x, a plane's columns;
// fftw_ffi.cc includes this file, which sonotile/fft/fftw.py splices in).
//
// A block is n rows of complex64 (interleaved re, im), rows `rs` floats apart; one call
// transforms every column of it (for each bin j the n values block[i][j], i = 0 .. n-1): in
// the pass along x rows are planes x and columns the plane bins of one block, in a plane rows
// are its rows y. A column of kVW floats (kVW / 2 bins) at a time goes through Stockham's
// self-sorting stages of radix 4, 2, 3, 5, 7, 11, 13, 17 and 19 (every butterfly a vector of
// kVW / 2 independent transforms, the twiddle after it a scalar: the same for every bin): the
// first stage reads the block, the last writes it back, the stages between run on two
// contiguous scratch
// columns of n vectors (in L1). n must factor into those primes (vfft::make says false
// otherwise). Unnormalised, sign -1 forward and +1 backward, as FFTW's plans. The primes above
// 7 are direct DFTs (about p^2 / 2 multiply-adds per point): FFTW has no codelets for 17 and
// 19 and runs a scalar loop over such a factor, 6x slower on a 17-point column than this, 19x
// on a 102-point one (2 x 3 x 17).
//
// Why: FFTW's plans for this layout (n points, howmany = the block's bins, stride = howmany)
// copy the block to and from buffers of their own on every call. On the 2-core Zen 4 EPYC
// (AVX-512; Debian's FFTW 3.3.10, whose codelets are SSE2 / AVX; PATIENT plans), forward +
// backward of one block of 128 bins in cache: n = 128 28 against 16 us, n = 160 36 against
// 21 us; a plane's 128-point columns over 65 bins 24 against 15 us. With 256-bit vectors
// (-mno-avx512f) 1.45-1.5x faster than FFTW; with 128-bit ones slower (the vector loop did not
// pay), so the kernel is built only for AVX-512 or AVX2 with FMA. Lengths below 8 are slower than FFTW's codelets (sub-microsecond).

#if defined(__AVX512F__)
#define SONOTILE_VFFT 16
#elif defined(__AVX2__) && defined(__FMA__)
#define SONOTILE_VFFT 8
#endif

#ifdef SONOTILE_VFFT
namespace vfft {

constexpr int kVW = SONOTILE_VFFT;  // floats per vector
typedef float V __attribute__((vector_size(4 * kVW)));

inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }

// (re, im) -> (im, re) in every pair
inline V swap_ri(V a) {
  V r;
  for (int i = 0; i < kVW; i += 2) {
    r[i] = a[i + 1];
    r[i + 1] = a[i];
  }
  return r;
}

// (-1, 1, -1, 1, ...): swap_ri(a) * pm = i a
inline V minus_plus() {
  V s;
  for (int i = 0; i < kVW; ++i) s[i] = i % 2 ? 1.f : -1.f;
  return s;
}

// The primes the stages take (radix 4 for pairs of 2s first), smallest first; 11 and 13 have
// FFTW codelets and run about as fast there.
constexpr int kRadices[] = {2, 3, 5, 7, 11, 13, 17, 19};

// cos(2 pi j k / R) then sin(2 pi j k / R) for j, k = 1 .. (R - 1) / 2, row j - 1, column k - 1:
// the rotations of the direct R-point DFT (odd R).
template <int R>
const float* odd_rotations() {
  constexpr int H = (R - 1) / 2;
  static const std::vector<float> t = [] {
    std::vector<float> v(2 * H * H);
    for (int j = 1; j <= H; ++j)
      for (int k = 1; k <= H; ++k) {
        const double a = 2.0 * M_PI * double((j * k) % R) / double(R);
        v[size_t((j - 1) * H + k - 1)] = float(std::cos(a));
        v[size_t(H * H + (j - 1) * H + k - 1)] = float(std::sin(a));
      }
    return v;
  }();
  return t.data();
}

struct Stage {
  int r = 0;
  std::vector<float> tw;  // tw[2 ((r - 1) p + j - 1)], +1: w^(j p), w = exp(sign 2 pi i / len)
};

struct Plan {
  int n = 0;
  float sign = -1.f;
  std::vector<Stage> st;  // applied in order; stage t has len = n / (r_0 ... r_{t-1})
};

// The stages of an n-point transform of sign `sign`; false when n < 2 or has a prime factor
// other than those of kRadices.
inline bool make(int n, int sign, Plan* P) {
  P->n = n;
  P->sign = float(sign);
  P->st.clear();
  if (n < 2) return false;
  for (int len = n; len > 1;) {
    int r = len % 4 == 0 ? 4 : 0;
    for (int f : kRadices)
      if (r == 0 && len % f == 0) r = f;
    if (r == 0) return false;
    const int m = len / r;
    Stage s;
    s.r = r;
    s.tw.resize(2 * size_t(m) * size_t(r - 1));
    for (int p = 0; p < m; ++p)
      for (int j = 1; j < r; ++j) {
        const double a = sign * 2.0 * M_PI * double(j) * double(p) / double(len);
        s.tw[2 * (size_t(p) * (r - 1) + j - 1)] = float(std::cos(a));
        s.tw[2 * (size_t(p) * (r - 1) + j - 1) + 1] = float(std::sin(a));
      }
    P->st.push_back(std::move(s));
    len = m;
  }
  return true;
}

// The r-point DFT of a[0 .. r-1] (sign `sg`: i sg = exp(sg i pi / 2)) into b.
template <int R>
inline void butterfly(const V* a, V* b, float sg, V pm) {
  if constexpr (R == 2) {
    b[0] = a[0] + a[1];
    b[1] = a[0] - a[1];
  } else if constexpr (R == 3) {
    const float h = float(0.86602540378443864676) * sg;  // sg sin(2 pi / 3)
    const V s = a[1] + a[2], d = swap_ri(a[1] - a[2]) * (pm * h);
    const V t = a[0] - 0.5f * s;
    b[0] = a[0] + s;
    b[1] = t + d;
    b[2] = t - d;
  } else if constexpr (R == 4) {
    const V t0 = a[0] + a[2], t1 = a[0] - a[2], t2 = a[1] + a[3];
    const V t3 = swap_ri(a[1] - a[3]) * (pm * sg);
    b[0] = t0 + t2;
    b[1] = t1 + t3;
    b[2] = t0 - t2;
    b[3] = t1 - t3;
  } else if constexpr (R == 7) {
    // c_n = cos(2 pi n / 7), s_n = sg sin(2 pi n / 7); b[j] and b[7 - j] from the sums and
    // differences of a[k] and a[7 - k]
    const float c1 = float(0.62348980185873353053), c2 = float(-0.22252093395631440429),
                c3 = float(-0.90096886790241912624);
    const float s1 = float(0.78183148246802980871) * sg, s2 = float(0.97492791218182360702) * sg,
                s3 = float(0.43388373911755812048) * sg;
    const V p1 = a[1] + a[6], m1 = a[1] - a[6], p2 = a[2] + a[5], m2 = a[2] - a[5];
    const V p3 = a[3] + a[4], m3 = a[3] - a[4];
    const V r1 = a[0] + c1 * p1 + c2 * p2 + c3 * p3, r2 = a[0] + c2 * p1 + c3 * p2 + c1 * p3;
    const V r3 = a[0] + c3 * p1 + c1 * p2 + c2 * p3;
    const V i1 = swap_ri(s1 * m1 + s2 * m2 + s3 * m3) * pm;
    const V i2 = swap_ri(s2 * m1 - s3 * m2 - s1 * m3) * pm;
    const V i3 = swap_ri(s3 * m1 - s1 * m2 + s2 * m3) * pm;
    b[0] = a[0] + p1 + p2 + p3;
    b[1] = r1 + i1;
    b[2] = r2 + i2;
    b[3] = r3 + i3;
    b[4] = r3 - i3;
    b[5] = r2 - i2;
    b[6] = r1 - i1;
  } else if constexpr (R > 7) {
    // a prime R, directly: b[j] and b[R - j] from the sums p_k = a[k] + a[R - k] and the
    // differences m_k = a[k] - a[R - k], k = 1 .. (R - 1) / 2 (about R^2 / 2 multiply-adds per
    // point of a vector, against FFTW's scalar loop of its general plans for such a factor)
    constexpr int H = (R - 1) / 2;
    const float* c = odd_rotations<R>();
    const float* s = c + H * H;
    V p[H], m[H];
    V b0 = a[0];
    for (int k = 0; k < H; ++k) {
      p[k] = a[k + 1] + a[R - 1 - k];
      m[k] = a[k + 1] - a[R - 1 - k];
      b0 += p[k];
    }
    const V ps = pm * sg;
    b[0] = b0;
    for (int j = 0; j < H; ++j) {
      V re = a[0], im = m[0] * s[j * H];
      for (int k = 0; k < H; ++k) re += p[k] * c[j * H + k];
      for (int k = 1; k < H; ++k) im += m[k] * s[j * H + k];
      im = swap_ri(im) * ps;
      b[j + 1] = re + im;
      b[R - 1 - j] = re - im;
    }
  } else {  // R == 5
    const float c1 = float(0.30901699437494742410), c2 = float(-0.80901699437494742410);
    const float s1 = float(0.95105651629515357212) * sg, s2 = float(0.58778525229247312917) * sg;
    const V p1 = a[1] + a[4], m1 = a[1] - a[4], p2 = a[2] + a[3], m2 = a[2] - a[3];
    const V r1 = a[0] + c1 * p1 + c2 * p2, r2 = a[0] + c2 * p1 + c1 * p2;
    const V i1 = swap_ri(s1 * m1 + s2 * m2) * pm, i2 = swap_ri(s2 * m1 - s1 * m2) * pm;
    b[0] = a[0] + p1 + p2;
    b[1] = r1 + i1;
    b[2] = r2 + i2;
    b[3] = r2 - i2;
    b[4] = r1 - i1;
  }
}

// One Stockham stage of radix R on a column of `len` x `s` vectors, vector i at in + i is
// (floats), to out + i os: in[q + s (p + k m)] -> out[q + s (R p + j)], m = len / R, twiddled
// by w^(j p) after the butterfly. In place (in == out) only for a single stage (len = R).
// Not inlined: every stage inlined into `block` made the 160-point transform 1.3x slower.
template <int R>
__attribute__((noinline)) void stage(const Stage& S, int len, int s, const float* in, int64_t is, float* out,
                  int64_t os, float sg, V pm) {
  const int m = len / R;
  const int64_t ik = int64_t(s) * m * is, oj = int64_t(s) * os;  // steps of k and of j
  for (int p = 0; p < m; ++p) {
    const float* ip = in + int64_t(s) * p * is;
    float* op = out + int64_t(s) * R * p * os;
    float wr[R], wi[R];
    for (int j = 1; j < R; ++j) {
      wr[j] = S.tw[2 * (size_t(R - 1) * size_t(p) + j - 1)];
      wi[j] = S.tw[2 * (size_t(R - 1) * size_t(p) + j - 1) + 1];
    }
    for (int q = 0; q < s; ++q, ip += is, op += os) {
      V a[R], b[R];
      for (int k = 0; k < R; ++k) a[k] = load(ip + k * ik);
      butterfly<R>(a, b, sg, pm);
      store(op, b[0]);
      if (p == 0) {
        for (int j = 1; j < R; ++j) store(op + j * oj, b[j]);
      } else {
        for (int j = 1; j < R; ++j) store(op + j * oj, b[j] * wr[j] + swap_ri(b[j]) * (pm * wi[j]));
      }
    }
  }
}

// Every column of the block, in place: n = P.n rows `rs` floats apart, the first `width`
// floats of each row (rounded up to whole vectors, which must fit in the row's rs floats).
// The first stage reads the block, the last writes it, the others run between two contiguous
// columns of `scratch` (2 n vectors). A row stride of a whole number of cache lines plus one
// vector keeps the rows of a column in different L1 sets (1 KB rows: 2x slower without).
inline void block(const Plan& P, float* base, int64_t rs, int64_t width, V* scratch) {
  const int n = P.n, last = int(P.st.size()) - 1;
  const V pm = minus_plus();
  float* c[2] = {reinterpret_cast<float*>(scratch), reinterpret_cast<float*>(scratch + n)};
  for (int64_t col = 0; col < width; col += kVW) {
    float* b = base + col;
    const float* in = b;
    int64_t is = rs;
    int len = n, s = 1;
    for (int t = 0; t <= last; ++t) {
      const Stage& S = P.st[size_t(t)];
      float* out = t == last ? b : c[t % 2];
      const int64_t os = t == last ? rs : kVW;
      switch (S.r) {
        case 2: stage<2>(S, len, s, in, is, out, os, P.sign, pm); break;
        case 3: stage<3>(S, len, s, in, is, out, os, P.sign, pm); break;
        case 4: stage<4>(S, len, s, in, is, out, os, P.sign, pm); break;
        case 5: stage<5>(S, len, s, in, is, out, os, P.sign, pm); break;
        case 7: stage<7>(S, len, s, in, is, out, os, P.sign, pm); break;
        case 11: stage<11>(S, len, s, in, is, out, os, P.sign, pm); break;
        case 13: stage<13>(S, len, s, in, is, out, os, P.sign, pm); break;
        case 17: stage<17>(S, len, s, in, is, out, os, P.sign, pm); break;
        default: stage<19>(S, len, s, in, is, out, os, P.sign, pm); break;
      }
      in = out;
      is = os;
      len /= S.r;
      s *= S.r;
    }
  }
}

// A worker's scratch of at least `vectors` vectors (kept for the thread's life); nullptr when
// out of memory.
inline V* scratch(size_t vectors) {
  thread_local std::vector<V> buf;
  try {
    if (buf.size() < vectors) buf.resize(vectors);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  return buf.data();
}

}  // namespace vfft
#endif
