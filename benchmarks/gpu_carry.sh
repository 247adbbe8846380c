#!/usr/bin/env bash
# Prepare .gpu-carry/ (ignored by git) for a run on the GPU machine, which has no network:
#   .gpu-carry/hdf5/{include,lib}   HDF5 1.10 headers and static libraries (with szip/aec, zlib)
#                                   from Debian's packages, for linking k-Wave's CUDA solver
#   .gpu-carry/kwave-cuda-src/      kspaceFirstOrder-CUDA 1.3's public source (never committed)
#
#   bash benchmarks/gpu_carry.sh [KWAVE_CUDA_GIT_DIR]
#
# KWAVE_CUDA_GIT_DIR is a git directory holding k-Wave's CUDA source; the default is the snapshot
# of the public repository 123p10/kspaceFirstOrder-CUDA-linux-AMD, whose first commit is the
# unmodified kspaceFirstOrder-CUDA 1.3 release (docs/gpu.md). KWAVE_CUDA_COMMIT overrides the
# commit. Needs apt-get (Debian's package archive) and dpkg-deb. Fails if .gpu-carry/ grows
# past 40 MiB (the whole working tree that travels must stay under 64 MiB).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
carry="$here/.gpu-carry"
git_dir=${1:-/work/.mirror/123p10+kspaceFirstOrder-CUDA-linux-AMD/repo}
commit=${KWAVE_CUDA_COMMIT:-c01c9050d490feb55b61cfaf3274ff8ae8cda402}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rm -rf "$carry/hdf5" "$carry/kwave-cuda-src"
mkdir -p "$carry/hdf5/include" "$carry/hdf5/lib" "$carry/kwave-cuda-src"
(cd "$tmp" && apt-get download libhdf5-dev libaec-dev zlib1g-dev >/dev/null 2>&1) || {
  apt-get update >/dev/null && (cd "$tmp" && apt-get download libhdf5-dev libaec-dev zlib1g-dev)
}
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
lib="$tmp/root/usr/lib/x86_64-linux-gnu"
cp -r "$tmp/root/usr/include/hdf5/serial/." "$carry/hdf5/include/"
cp "$tmp/root/usr/include/"{zlib.h,zconf.h,szlib.h,libaec.h} "$carry/hdf5/include/"
cp -L "$lib/hdf5/serial/libhdf5.a" "$lib/hdf5/serial/libhdf5_hl.a" "$lib/libsz.a" "$lib/libaec.a" \
  "$lib/libz.a" "$carry/hdf5/lib/"
grep -h '^Version\|^Package' <(for d in "$tmp"/*.deb; do dpkg-deb -f "$d" Package Version; done) \
  > "$carry/hdf5/PACKAGES"

git --git-dir="$git_dir" archive "$commit" | tar -x -C "$carry/kwave-cuda-src" \
  --exclude='Data' --exclude='*.pdf' --exclude='*.png'
echo "$commit" > "$carry/kwave-cuda-src/COMMIT"
[ -f "$carry/kwave-cuda-src/KSpaceSolver/SolverCudaKernels.cu" ] || {
  echo "gpu_carry: $git_dir@$commit is not k-Wave's CUDA solver" >&2; exit 1; }

mib=$(du -sm "$carry" | cut -f1)
echo "gpu_carry: .gpu-carry is $mib MiB (hdf5 $(du -sm "$carry/hdf5" | cut -f1), source $(du -sm "$carry/kwave-cuda-src" | cut -f1))"
[ "$mib" -le 40 ] || { echo "gpu_carry: .gpu-carry over 40 MiB" >&2; exit 1; }
