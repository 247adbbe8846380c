#!/usr/bin/env bash
# Build k-Wave's CUDA solver (kspaceFirstOrder-CUDA 1.3) from its public source with nvcc alone
# (no CMake needed), linking HDF5 statically from the folder benchmarks/gpu_carry.sh prepares.
#
#   bash benchmarks/kwave_cuda_build.sh [SRC] [HDF5] [BUILD]
#
# SRC    the unpacked 1.3 source (default .gpu-carry/kwave-cuda-src)
# HDF5   a prefix with include/ and lib/ holding libhdf5.a, libhdf5_hl.a, libsz.a, libaec.a,
#        libz.a (default .gpu-carry/hdf5)
# BUILD  where objects and the binary go (default /tmp/kwave-cuda-build); the binary is
#        BUILD/kspaceFirstOrder-CUDA and its path is the last line printed.
#
# Environment: NVCC (default: nvcc on PATH, then /usr/local/cuda/bin/nvcc), CUDA_ARCH (default:
# the first GPU's compute capability from nvidia-smi, else 90), JOBS (default: nproc),
# CUFFT_LIB (a libcufft.so to link, default: the toolkit's).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
SRC=$(realpath "${1:-$here/.gpu-carry/kwave-cuda-src}")
HDF5=$(realpath "${2:-$here/.gpu-carry/hdf5}")
BUILD=${3:-/tmp/kwave-cuda-build}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
JOBS=${JOBS:-$(nproc)}
[ -x "$NVCC" ] || { echo "kwave_cuda_build: no nvcc (set NVCC)" >&2; exit 2; }
[ -f "$SRC/main.cpp" ] || { echo "kwave_cuda_build: no k-Wave CUDA source in $SRC" >&2; exit 2; }
[ -f "$HDF5/lib/libhdf5.a" ] || { echo "kwave_cuda_build: no libhdf5.a in $HDF5/lib" >&2; exit 2; }
if [ -z "${CUDA_ARCH:-}" ]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')
  CUDA_ARCH=${cap:-90}
fi
cuda_root=$(dirname "$(dirname "$(realpath "$NVCC")")")
release=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\)\.\([0-9]*\).*/\1\2/p')
echo "kwave_cuda_build: nvcc $("$NVCC" --version | grep -o 'release [0-9.]*'), sm_$CUDA_ARCH, $JOBS jobs"

rm -rf "$BUILD" && mkdir -p "$BUILD/src" "$BUILD/obj"
cp -r "$SRC"/. "$BUILD/src/"
cd "$BUILD/src"
# newer C++ libraries no longer bring <string> in through <map>
grep -q '#include <string>' Hdf5/Hdf5File.h || sed -i 's|^#include <map>|#include <map>\n#include <string>|' Hdf5/Hdf5File.h
# cuFFT 13 removed three error codes that 1.3's error table names (deprecated since 12.9)
if [ "${release:-0}" -ge 130 ]; then
  sed -i '/CUFFT_INCOMPLETE_PARAMETER_LIST\|CUFFT_PARSE_ERROR\|CUFFT_LICENSE_ERROR/d' \
    MatrixClasses/CufftComplexMatrix.cpp
fi

flags=(-O3 -std=c++17 --restrict --device-c -arch="sm_$CUDA_ARCH" -I. -I"$HDF5/include"
       "-D__KWAVE_GIT_HASH__=\"468dc31c2842a7df5f2a07c3a13c16c9b0b2b770\""
       -Xcompiler=-fopenmp,-O3,-w -w)
find . -name '*.cpp' -o -name '*.cu' | grep -v GetoptWin64 | sort > "$BUILD/sources"
export NVCC BUILD
printf '%s\0' "${flags[@]}" > "$BUILD/flags"
xargs -P "$JOBS" -I{} bash -c '
  mapfile -d "" -t f < "$BUILD/flags"
  o="$BUILD/obj/$(echo "{}" | sed "s|^\./||; s|/|_|g").o"
  lang=c++; case "{}" in *.cu) lang=cu;; esac
  t0=$SECONDS
  "$NVCC" "${f[@]}" -x "$lang" -c "{}" -o "$o" || { echo "FAILED {}" >&2; exit 255; }
  echo "  built {} ($((SECONDS - t0)) s)"
' < "$BUILD/sources"

cufft=${CUFFT_LIB:-}
if [ -z "$cufft" ]; then
  for d in "$cuda_root/lib64" "$cuda_root/lib" "$cuda_root/targets/x86_64-linux/lib"; do
    for n in libcufft.so libcufft.so.12 libcufft.so.11; do
      [ -e "$d/$n" ] && { cufft="$d/$n"; break 2; }
    done
  done
fi
[ -n "$cufft" ] || cufft=$(find /usr/local /opt -name 'libcufft.so*' 2>/dev/null | grep -v cufftw | sort | head -1)
[ -n "$cufft" ] || { echo "kwave_cuda_build: no libcufft found under $cuda_root (set CUFFT_LIB)" >&2; exit 2; }
"$NVCC" -arch="sm_$CUDA_ARCH" -L"$cuda_root/lib64" -L"$cuda_root/lib" -Xcompiler=-fopenmp -o "$BUILD/linking" "$BUILD"/obj/*.o \
  "$HDF5/lib/libhdf5_hl.a" "$HDF5/lib/libhdf5.a" "$HDF5/lib/libsz.a" "$HDF5/lib/libaec.a" \
  "$HDF5/lib/libz.a" -Xlinker "$cufft" -Xlinker "-rpath,$(dirname "$cufft")" -ldl -lm -lpthread
mv "$BUILD/linking" "$BUILD/kspaceFirstOrder-CUDA"  # appears whole: a waiting reader never sees half
echo "$BUILD/kspaceFirstOrder-CUDA"
