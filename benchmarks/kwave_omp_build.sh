#!/usr/bin/env bash
# Build k-Wave's C++ OMP solver (kspaceFirstOrder-OMP 1.3) from its public source with g++ alone,
# linking FFTW (float, OpenMP) and HDF5 statically from the folders benchmarks/gpu_carry.sh
# prepares, so the binary needs nothing on the machine but the C++ and OpenMP runtimes.
#
#   bash benchmarks/kwave_omp_build.sh [SRC] [HDF5] [FFTW] [BUILD]
#
# SRC    the 1.3 source tree (default .gpu-carry/kwave-omp-src)
# HDF5   a prefix with include/ and lib/ holding libhdf5.a, libhdf5_hl.a, libsz.a, libaec.a,
#        libz.a (default .gpu-carry/hdf5)
# FFTW   a prefix with include/fftw3.h and lib/libfftw3f.a, lib/libfftw3f_omp.a
#        (default .gpu-carry/fftw)
# BUILD  where objects and the binary go (default /tmp/kwave-omp-build); the binary is
#        BUILD/kspaceFirstOrder-OMP and its path is the last line printed.
#
# Flags as k-Wave's own Makefile for g++: -O3 -ffast-math -fassociative-math -march=native
# -fopenmp. Environment: CXX (default g++), JOBS (default nproc), MARCH (default native).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
SRC=$(realpath "${1:-$here/.gpu-carry/kwave-omp-src}")
HDF5=$(realpath "${2:-$here/.gpu-carry/hdf5}")
FFTW=$(realpath "${3:-$here/.gpu-carry/fftw}")
BUILD=${4:-/tmp/kwave-omp-build}
CXX=${CXX:-g++}
JOBS=${JOBS:-$(nproc)}
MARCH=${MARCH:-native}
[ -f "$SRC/main.cpp" ] || { echo "kwave_omp_build: no k-Wave OMP source in $SRC" >&2; exit 2; }
[ -f "$HDF5/lib/libhdf5.a" ] || { echo "kwave_omp_build: no libhdf5.a in $HDF5/lib" >&2; exit 2; }
[ -f "$FFTW/lib/libfftw3f_omp.a" ] || {
  echo "kwave_omp_build: no libfftw3f_omp.a in $FFTW/lib" >&2; exit 2; }
echo "kwave_omp_build: $("$CXX" --version | head -1), -march=$MARCH, $JOBS jobs"

rm -rf "$BUILD" && mkdir -p "$BUILD/src" "$BUILD/obj"
cp -r "$SRC"/. "$BUILD/src/"
cd "$BUILD/src"
# newer C++ libraries no longer bring <string> in through <map>
grep -q '#include <string>' Hdf5/Hdf5File.h || sed -i 's|^#include <map>|#include <map>\n#include <string>|' Hdf5/Hdf5File.h

flags=(-m64 -march="$MARCH" -O3 -ffast-math -fassociative-math -fopenmp -std=c++11 -w
       -I. -I"$HDF5/include" -I"$FFTW/include"
       "-D__KWAVE_GIT_HASH__=\"0ba023063e3f29685e1e346f56883378d961f9f1\"")
find . -name '*.cpp' | grep -v GetoptWin64 | sort > "$BUILD/sources"
export CXX BUILD
printf '%s\0' "${flags[@]}" > "$BUILD/flags"
xargs -P "$JOBS" -I{} bash -c '
  mapfile -d "" -t f < "$BUILD/flags"
  o="$BUILD/obj/$(echo "{}" | sed "s|^\./||; s|/|_|g").o"
  t0=$SECONDS
  "$CXX" "${f[@]}" -c "{}" -o "$o" || { echo "FAILED {}" >&2; exit 255; }
  echo "  built {} ($((SECONDS - t0)) s)"
' < "$BUILD/sources"

"$CXX" -march="$MARCH" -fopenmp -o "$BUILD/linking" "$BUILD"/obj/*.o \
  "$FFTW/lib/libfftw3f_omp.a" "$FFTW/lib/libfftw3f.a" \
  "$HDF5/lib/libhdf5_hl.a" "$HDF5/lib/libhdf5.a" "$HDF5/lib/libsz.a" "$HDF5/lib/libaec.a" \
  "$HDF5/lib/libz.a" -ldl -lm -lpthread
mv "$BUILD/linking" "$BUILD/kspaceFirstOrder-OMP"  # appears whole: a waiting reader never sees half
echo "$BUILD/kspaceFirstOrder-OMP"
