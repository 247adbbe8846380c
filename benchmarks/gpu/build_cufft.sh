#!/usr/bin/env bash
# Build sonotile's cuFFT custom calls (src/sonotile/fft/csrc/cufft_ffi.cu) into a shared library:
#
#   bash benchmarks/gpu/build_cufft.sh [OUT.so]      (default /tmp/sonotile-cufft/libsonotile_cufft.so)
#
# Needs nvcc (NVCC, else nvcc on PATH, else /usr/local/cuda/bin/nvcc), cufft.h and libcufft
# (CUFFT_ROOT with include/ and lib/, else the toolkit's, else the nvidia-cufft wheel's) and a
# python with JAX for the FFI headers (PYTHON, default python3). CUDA_ARCH defaults to 90
# (H100/H200). No GPU is needed to build. sonotile loads the library from SONOTILE_CUFFT_LIB.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-/tmp/sonotile-cufft/libsonotile_cufft.so}
py=${PYTHON:-python3}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "build_cufft: no nvcc (set NVCC)" >&2; exit 2; }
arch=${CUDA_ARCH:-90}
ffi_inc=$("$py" -c "import jax.ffi; print(jax.ffi.include_dir())")
[ -f "$ffi_inc/xla/ffi/api/ffi.h" ] || { echo "build_cufft: no xla/ffi/api/ffi.h under $ffi_inc" >&2; exit 2; }
cuda_root=$(dirname "$(dirname "$(realpath "$NVCC")")")
cufft_root=${CUFFT_ROOT:-}
if [ -z "$cufft_root" ]; then
  for d in "$cuda_root" "$cuda_root/targets/x86_64-linux" \
           $("$py" -c "import nvidia, os; print(' '.join(os.path.join(p, s) for p in nvidia.__path__ for s in ('cu13', 'cufft')))" 2>/dev/null); do
    if [ -f "$d/include/cufft.h" ] && ls "$d"/lib*/libcufft.so* > /dev/null 2>&1; then cufft_root=$d; break; fi
  done
fi
[ -n "$cufft_root" ] || { echo "build_cufft: no cufft.h with libcufft found (set CUFFT_ROOT)" >&2; exit 2; }
lib=$(ls "$cufft_root"/lib*/libcufft.so* | head -1)
mkdir -p "$(dirname "$out")"
echo "build_cufft: $("$NVCC" --version | grep -o 'release [0-9.]*'), sm_$arch, cuFFT $lib"
# linked by soname (libcufft.so.N): in a JAX process the cuFFT JAX already loaded serves it
"$NVCC" -O3 -std=c++17 -arch="sm_$arch" -shared -Xcompiler -fPIC -diag-suppress 2473,940 -Xcompiler -Wno-return-type \
  -L"$cuda_root/lib64" -L"$cuda_root/lib" \
  -I"$ffi_inc" -I"$cufft_root/include" \
  -o "$out.tmp" "$here/src/sonotile/fft/csrc/cufft_ffi.cu" \
  -Xlinker "$lib" -Xlinker -rpath -Xlinker "$(dirname "$lib")"
mv "$out.tmp" "$out"
echo "build_cufft: built $out"
