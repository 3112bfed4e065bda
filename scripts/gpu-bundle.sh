#!/usr/bin/env bash
# Builds what scripts/gpu-check.sh runs on the lent GPU machine, here, and
# gathers it into gpu-bundle/ (ignored by git; carry it to the machine):
#
#   gpu-bundle/wheel/ the product as users get it: the repaired wheel of
#                     scripts/package.sh (the command, the shim, the CUDA
#                     library, the hooks, and the libraries they need);
#                     gpu-check.sh installs it into a venv there
#   gpu-bundle/bin/   the test programs: gpu_workload, test_gpu_cupti, trainer
#                     (the sample trainer, --device cuda) and gen_dataset
#   gpu-bundle/lib/   the libraries of the test programs: libstallscope_*.so
#                     and every Debian library they need (apt-get download +
#                     dpkg -x), found through RPATH $ORIGIN/../lib; the
#                     machine's own CUDA, CUPTI, NCCL and driver libraries are
#                     used, never shipped — except libcudart.so.13, which the
#                     loader and trainer link (a machine may carry only an
#                     older runtime)
#
# The GPU machine has nvcc, CMake and PyTorch but none of our Debian
# libraries, no package manager and no network. Built for Hopper
# (CMAKE_CUDA_ARCHITECTURES=90; the GPU test kernels are PTX, JIT-compiled by
# the driver). The bundle must stay under 64 MiB (what a device run carries).
#
# usage: scripts/gpu-bundle.sh [BUILD_DIR]   (default build-gpubundle)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${1:-build-gpubundle}
OUT=$ROOT/gpu-bundle
LIMIT_MIB=64

say() { echo "gpu-bundle: $*"; }
die() { echo "gpu-bundle: error: $*" >&2; exit 1; }

[ -d /usr/local/cuda/include ] || die "no CUDA toolkit at /usr/local/cuda: the GPU side cannot be built"
command -v patchelf >/dev/null || die "patchelf is missing (apt-get install patchelf)"

say "configuring $BUILD (Release, CUDA architectures 90)"
mkdir -p "$BUILD"
nice cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DSTALLSCOPE_BUILD_BENCH=OFF -DSTALLSCOPE_BUILD_TESTS=ON \
  '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib;$ORIGIN' >"$BUILD/bundle-configure.log" 2>&1 ||
  { tail -20 "$BUILD/bundle-configure.log"; die "configure failed (log: $BUILD/bundle-configure.log)"; }
grep -q "CUDA ON (CUPTI ON" "$BUILD/bundle-configure.log" || die "CMake did not find CUDA with CUPTI"

TARGETS="gpu_workload test_gpu_cupti trainer gen_dataset"
say "building $TARGETS"
nice cmake --build "$BUILD" --target $TARGETS -j"${JOBS:-2}" >"$BUILD/bundle-build.log" 2>&1 ||
  { tail -30 "$BUILD/bundle-build.log"; die "build failed (log: $BUILD/bundle-build.log)"; }

say "building the wheel (scripts/package.sh wheel)"
scripts/package.sh wheel >"$BUILD/bundle-wheel.log" 2>&1 ||
  { tail -30 "$BUILD/bundle-wheel.log"; die "the wheel failed (log: $BUILD/bundle-wheel.log)"; }
wheel=$(ls dist/wheelhouse/stallscope-*.whl)
/usr/bin/python3 -m zipfile -l "$wheel" | grep -q 'stallscope/_core/lib/libstallscope_cuda.so' ||
  die "$(basename "$wheel") has no libstallscope_cuda.so (built without the CUDA toolkit?)"

rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/wheel"
cp "$wheel" "$OUT/wheel/"
cp "$BUILD/bin/gpu_workload" "$OUT/bin/"
cp "$BUILD/tests/gpu/test_gpu_cupti" "$OUT/bin/"
cp "$BUILD/samples/trainer" "$BUILD/samples/gen_dataset" "$OUT/bin/"
for lib in $(find "$BUILD/loader" -maxdepth 1 -name 'libstallscope_loader.so*'); do
  cp -P "$lib" "$OUT/lib/"
done
cudart=$(find /usr/local/cuda/lib /usr/local/cuda/lib64 /usr/local/cuda/targets/*/lib \
  -maxdepth 1 -name 'libcudart.so.[0-9]*' 2>/dev/null | head -1)
[ -n "$cudart" ] || die "no libcudart.so.N under /usr/local/cuda (the trainer links it)"
cp -L "$cudart" "$OUT/lib/"
for lib in $(find "$BUILD/libtrace" -maxdepth 1 -name 'libstallscope_*.so*'); do
  cp -P "$lib" "$OUT/lib/"
done
strip --strip-unneeded "$OUT"/bin/* "$OUT"/lib/*.so* 2>/dev/null || true

# Libraries the GPU machine provides itself (glibc, CUDA, driver), or that
# are ours; everything else ldd names comes from its Debian package. The C++
# runtime is the machine's too: Debian 12's libstdc++ needs glibc 2.36,
# newer than a machine may have, while the binaries need only
# GLIBCXX_3.4.29 (GCC 11) and glibc 2.34.
provided='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so|libcudart|libcupti|libnccl|libnvidia-ml|libstallscope_)'
needed=$(for f in "$OUT"/bin/* "$OUT"/lib/*.so; do
  LD_LIBRARY_PATH="$OUT/lib" ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $1 " " $3}'
done | sort -u | grep -Ev "$provided" || true)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
declare -A fetched=()
while read -r soname path; do
  [ -n "$soname" ] || continue
  pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1) ||
    pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
  [ -n "$pkg" ] || die "no Debian package owns $path ($soname)"
  if [ -z "${fetched[$pkg]:-}" ]; then
    (cd "$work" && apt-get download "$pkg" >/dev/null 2>&1) || die "apt-get download $pkg failed"
    dpkg -x "$work/${pkg}"_*.deb "$work/root" || die "dpkg -x $pkg failed"
    fetched[$pkg]=1
  fi
  src=$(find "$work/root" -name "$soname" | head -1)
  [ -n "$src" ] || die "$pkg has no $soname"
  cp -L "$src" "$OUT/lib/$soname"
done <<<"$needed"
say "libraries from Debian packages: ${!fetched[*]}"

# One search path for everything: binaries look in ../lib, libraries next
# to themselves (a Debian library's own dependencies too: RUNPATH is not
# inherited), and no path of this build machine is left behind.
for f in "$OUT"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$OUT"/lib/*.so*; do [ -L "$f" ] || patchelf --set-rpath '$ORIGIN' "$f"; done

# Every binary must resolve everything but the machine's own libraries
# through the bundle alone.
missing=$(for f in "$OUT"/bin/* "$OUT"/lib/*.so*; do
  ldd "$f" 2>/dev/null | grep "not found" | grep -Ev "$provided" | sed "s|^|$(basename "$f"): |"
done || true)
[ -z "$missing" ] || die "unresolved in the bundle:\n$missing"

size_mib=$(( $(du -sk "$OUT" | cut -f1) / 1024 ))
say "gpu-bundle/ holds $(find "$OUT" -type f | wc -l) files, ${size_mib} MiB (limit ${LIMIT_MIB} MiB)"
[ "$size_mib" -le "$LIMIT_MIB" ] || die "the bundle is over ${LIMIT_MIB} MiB"
say "done; on the GPU machine: scripts/gpu-check.sh (carry gpu-bundle)"
