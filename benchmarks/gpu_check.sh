#!/usr/bin/env bash
# The one command for the GPU machine (docs/gpu.md):
#
#   bash benchmarks/gpu_check.sh "$OUT" [gpu_check.py options]
#
# builds k-Wave's CUDA solver and its OMP solver (for the cpu_scaling part) from .gpu-carry/
# (benchmarks/gpu_carry.sh) in the background when that folder travelled, and runs benchmarks/gpu_check.py from the working tree (PYTHONPATH=src,
# the image's python3 and JAX; nothing installed). Writes into OUT: gpu_check.json (the results,
# rewritten after every part), gpu_check.log, kwave_cuda_build.log, kwave_omp_build.log,
# nvidia-smi.txt.
set -uo pipefail
out=${1:?usage: gpu_check.sh OUT_DIR [gpu_check.py options]}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1
# sonotile's cuFFT custom calls for the parts step_compare and whole_step, which hand it to their
# workers as SONOTILE_CUFFT_LIB; the other parts run as a user without the library does
# (benchmarks/gpu/build_cufft.sh; its log: OUT/cufft_build.log)
lib=/tmp/sonotile-cufft/libsonotile_cufft.so
rm -rf "$(dirname "$lib")"
( PYTHON="$py" bash "$here/benchmarks/gpu/build_cufft.sh" "$lib" > "$out/cufft_build.log" 2>&1 \
    || { mkdir -p "$(dirname "$lib")"; touch "$lib.failed"; } ) &
export GPU_CHECK_CUFFT_LIB="$lib"
kw=()
build=/tmp/kwave-cuda-build
if [ -d "$here/.gpu-carry/kwave-cuda-src" ]; then
  rm -rf "$build"  # no binary or failure mark from an earlier run is taken for this one's
  ( bash "$here/benchmarks/kwave_cuda_build.sh" "" "" "$build" > "$out/kwave_cuda_build.log" 2>&1 \
      || { mkdir -p "$build"; touch "$build/kspaceFirstOrder-CUDA.failed"; } ) &
  kw=(--kwave-binary "$build/kspaceFirstOrder-CUDA" --kwave-wait-s 150
      --kwave-build-log "$out/kwave_cuda_build.log")
fi
omp=/tmp/kwave-omp-build
if [ -d "$here/.gpu-carry/kwave-omp-src" ]; then
  rm -rf "$omp"
  ( nice bash "$here/benchmarks/kwave_omp_build.sh" "" "" "" "$omp" > "$out/kwave_omp_build.log" 2>&1 \
      || { mkdir -p "$omp"; touch "$omp/kspaceFirstOrder-OMP.failed"; } ) &
  kw+=(--kwave-omp-binary "$omp/kspaceFirstOrder-OMP" --kwave-omp-wait-s 240
       --kwave-omp-build-log "$out/kwave_omp_build.log")
fi
"$py" "$here/benchmarks/gpu_check.py" "$out/gpu_check.json" "${kw[@]}" "$@" 2>&1 \
  | tee "$out/gpu_check.log"
status=${PIPESTATUS[0]}
wait
exit "$status"
