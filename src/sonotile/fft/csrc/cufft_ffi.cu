// cuFFT as XLA FFI custom calls (platform CUDA): batched real-to-complex transforms and
// UNNORMALISED complex-to-real transforms over the last `rank` axes (2 or 3) of a buffer, the
// leading axes a batch (several fields in one call, stored as one buffer: no concatenation).
// float32 (R2C/C2R) and float64 (D2Z/Z2D). Plans are cached per device, type, rank, batch and
// shape; each call runs on XLA's stream with its work area from XLA's scratch allocator.
//
// cuFFT's multi-dimensional C2R overwrites its input, so the inverse takes the spectrum as an
// input aliased to its second output (the caller declares input_output_aliases {0: 1}): the
// transform then consumes a buffer XLA has handed over, and a spectrum still needed elsewhere
// is copied by XLA, not corrupted.
//
// Built by benchmarks/gpu/build_cufft.sh (nvcc -arch=sm_90, JAX's FFI headers); loaded and
// registered by sonotile/fft/cufft.py.

#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using Key = std::tuple<int, int, int, int64_t, int64_t, int64_t, int64_t>;

struct Plan {
  cufftHandle handle;
  size_t work_bytes;
};

std::mutex plans_mu;
std::map<Key, Plan> plans;

ffi::Error cufft_error(cufftResult r, const char* what) {
  return ffi::Error(ffi::ErrorCode::kInternal,
                    std::string("sonotile cuFFT: ") + what + " failed with cufftResult " +
                        std::to_string(static_cast<int>(r)));
}

// The real grid's extents (n) and the batch from a real buffer's dimensions.
ffi::Error grid_of(ffi::Span<const int64_t> dims, int32_t rank, long long n[3],
                   long long* batch) {
  if (rank < 1 || rank > 3 || dims.size() < static_cast<size_t>(rank)) {
    return ffi::Error::InvalidArgument("sonotile cuFFT: rank must be 1-3 and at most the "
                                       "buffer's number of dimensions");
  }
  size_t lead = dims.size() - rank;
  *batch = 1;
  for (size_t i = 0; i < lead; ++i) *batch *= dims[i];
  for (int i = 0; i < rank; ++i) n[i] = dims[lead + i];
  return ffi::Error::Success();
}

// The half spectrum's dimensions must be the real grid's with the last axis n/2+1.
bool half_of(ffi::Span<const int64_t> real, ffi::Span<const int64_t> half) {
  if (real.size() != half.size() || real.size() == 0) return false;
  for (size_t i = 0; i + 1 < real.size(); ++i)
    if (real[i] != half[i]) return false;
  return half[half.size() - 1] == real[real.size() - 1] / 2 + 1;
}

// Called with plans_mu held.
ffi::ErrorOr<Plan> plan_for(cufftType type, int32_t rank, long long n[3], long long batch) {
  int device = 0;
  cudaGetDevice(&device);
  Key key{device, static_cast<int>(type), rank, batch, n[0], rank > 1 ? n[1] : 0,
          rank > 2 ? n[2] : 0};
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  Plan p{};
  cufftResult r = cufftCreate(&p.handle);
  if (r != CUFFT_SUCCESS) return ffi::Unexpected(cufft_error(r, "cufftCreate"));
  r = cufftSetAutoAllocation(p.handle, 0);
  if (r == CUFFT_SUCCESS) {
    r = cufftMakePlanMany64(p.handle, rank, n, nullptr, 1, 0, nullptr, 1, 0, type, batch,
                            &p.work_bytes);
  }
  if (r != CUFFT_SUCCESS) {
    cufftDestroy(p.handle);
    return ffi::Unexpected(cufft_error(r, "cufftMakePlanMany64"));
  }
  plans.emplace(key, p);
  return p;
}

// Binds the plan to XLA's stream and a work area from XLA's allocator (plans_mu held).
ffi::Error bind(const Plan& p, cudaStream_t stream, ffi::ScratchAllocator& scratch) {
  cufftResult r = cufftSetStream(p.handle, stream);
  if (r != CUFFT_SUCCESS) return cufft_error(r, "cufftSetStream");
  if (p.work_bytes > 0) {
    auto work = scratch.Allocate(p.work_bytes, 256);
    if (!work.has_value()) {
      return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                        "sonotile cuFFT: no memory for the plan's work area (" +
                            std::to_string(p.work_bytes) + " bytes)");
    }
    r = cufftSetWorkArea(p.handle, *work);
    if (r != CUFFT_SUCCESS) return cufft_error(r, "cufftSetWorkArea");
  }
  return ffi::Error::Success();
}

ffi::Error Forward(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t rank,
                   ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> y) {
  bool f32 = x.element_type() == ffi::F32 && y->element_type() == ffi::C64;
  bool f64 = x.element_type() == ffi::F64 && y->element_type() == ffi::C128;
  if (!f32 && !f64) {
    return ffi::Error::InvalidArgument("sonotile cuFFT forward: float32 -> complex64 or "
                                       "float64 -> complex128 expected");
  }
  if (!half_of(x.dimensions(), y->dimensions())) {
    return ffi::Error::InvalidArgument("sonotile cuFFT forward: the output is not the "
                                       "input's half spectrum");
  }
  long long n[3], batch;
  if (auto e = grid_of(x.dimensions(), rank, n, &batch); e.failure()) return e;
  std::lock_guard<std::mutex> lock(plans_mu);
  auto plan = plan_for(f32 ? CUFFT_R2C : CUFFT_D2Z, rank, n, batch);
  if (!plan.has_value()) return plan.error();
  if (auto e = bind(*plan, stream, scratch); e.failure()) return e;
  cufftResult r =
      f32 ? cufftExecR2C(plan->handle, static_cast<cufftReal*>(x.untyped_data()),
                         static_cast<cufftComplex*>(y->untyped_data()))
          : cufftExecD2Z(plan->handle, static_cast<cufftDoubleReal*>(x.untyped_data()),
                         static_cast<cufftDoubleComplex*>(y->untyped_data()));
  return r == CUFFT_SUCCESS ? ffi::Error::Success() : cufft_error(r, "forward transform");
}

// spec: the half spectrum (consumed); y: the real fields, unnormalised (N times the inverse);
// spent: spec's buffer after cuFFT overwrote it (aliased to spec by the caller).
ffi::Error Inverse(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t rank,
                   ffi::AnyBuffer spec, ffi::Result<ffi::AnyBuffer> y,
                   ffi::Result<ffi::AnyBuffer> spent) {
  bool f32 = spec.element_type() == ffi::C64 && y->element_type() == ffi::F32;
  bool f64 = spec.element_type() == ffi::C128 && y->element_type() == ffi::F64;
  if (!f32 && !f64) {
    return ffi::Error::InvalidArgument("sonotile cuFFT inverse: complex64 -> float32 or "
                                       "complex128 -> float64 expected");
  }
  if (!half_of(y->dimensions(), spec.dimensions())) {
    return ffi::Error::InvalidArgument("sonotile cuFFT inverse: the input is not the "
                                       "output's half spectrum");
  }
  long long n[3], batch;
  if (auto e = grid_of(y->dimensions(), rank, n, &batch); e.failure()) return e;
  void* in = spent->untyped_data();
  if (in != spec.untyped_data()) {  // not aliased: work on a copy, the input stays intact
    cudaError_t c = cudaMemcpyAsync(in, spec.untyped_data(), spec.size_bytes(),
                                    cudaMemcpyDeviceToDevice, stream);
    if (c != cudaSuccess) {
      return ffi::Error(ffi::ErrorCode::kInternal,
                        std::string("sonotile cuFFT inverse: copy failed: ") +
                            cudaGetErrorString(c));
    }
  }
  std::lock_guard<std::mutex> lock(plans_mu);
  auto plan = plan_for(f32 ? CUFFT_C2R : CUFFT_Z2D, rank, n, batch);
  if (!plan.has_value()) return plan.error();
  if (auto e = bind(*plan, stream, scratch); e.failure()) return e;
  cufftResult r =
      f32 ? cufftExecC2R(plan->handle, static_cast<cufftComplex*>(in),
                         static_cast<cufftReal*>(y->untyped_data()))
          : cufftExecZ2D(plan->handle, static_cast<cufftDoubleComplex*>(in),
                         static_cast<cufftDoubleReal*>(y->untyped_data()));
  return r == CUFFT_SUCCESS ? ffi::Error::Success() : cufft_error(r, "inverse transform");
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(sonotile_cufft_forward, Forward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Ctx<ffi::ScratchAllocator>()
                                  .Attr<int32_t>("rank")
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(sonotile_cufft_inverse, Inverse,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Ctx<ffi::ScratchAllocator>()
                                  .Attr<int32_t>("rank")
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>());

// The number of cached plans (for tests and the check's record).
extern "C" int sonotile_cufft_plans() {
  std::lock_guard<std::mutex> lock(plans_mu);
  return static_cast<int>(plans.size());
}
