// The FFTW extension's exported functions (settings, planning, tests) and its XLA FFI handlers.
// Part of the FFTW extension: compiled as one translation unit with the other parts, in the
// order of SOURCES in sonotile/fft/fftw_library.py, after fftw_common.h.

#include "fftw_common.h"

namespace {

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
  if (fftwf_threads_set_callback != nullptr) fftwf_threads_set_callback(fftw_loop, nullptr);
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

// `fail` != 0: every FFTW-aligned allocation fails from now on (tests of the error paths).
extern "C" void sonotile_fftw_fail_allocations(int fail) { g_fail_alloc = fail != 0; }

// FFTW-aligned allocations made so far (tests: the calls of a warm loop make none).
extern "C" int64_t sonotile_fftw_allocations() { return g_allocs.load(); }

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
                                  .Attr<ffi::Span<const int64_t>>("apart")
                                  .RemainingArgs()
                                  .RemainingRets());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwConvSum, ConvSumImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("has_op")
                                  .Attr<ffi::Span<const int64_t>>("axis")
                                  .RemainingArgs()
                                  .Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwDivDensity, DivDensityImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<int64_t>("has_op")
                                  .Attr<int64_t>("coef")
                                  .Attr<int64_t>("rho0_field")
                                  .Attr<int64_t>("has_src")
                                  .RemainingArgs()
                                  .RemainingRets());

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

XLA_FFI_DEFINE_HANDLER_SYMBOL(SonotileFftwPlaneSource, PlaneSourceImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Attr<float>("scale")
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
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
