#!/usr/bin/env bash
# Builds stallscope's packages from this checkout into dist/ (docs/install.md):
#
#   dist/stallscope-<v>-py3-none-linux_x86_64.whl   `pip wheel .` (scikit-build-core
#                         over the CMake build): the product, linked against
#                         this machine's libraries
#   dist/wheelhouse/stallscope-<v>-py3-none-manylinux_<glibc>_x86_64.whl
#                         the same after `auditwheel repair`: liburing, oneTBB,
#                         hwloc, zstd, ISA-L and the rest inside it; pip installs
#                         this one anywhere its glibc allows
#   dist/stallscope_<v>_amd64.deb   `cpack -G DEB` from the same build directory
#
# One CMake build directory serves all three (default build-pip/, or
# STALLSCOPE_PACKAGE_BUILD_DIR): `pip wheel` configures and builds it, and
# cpack installs from it, so nothing is compiled twice. ccache is used where
# installed. auditwheel comes from PyPI into a venv of its own
# (<build dir>/tools-venv). Prints the wheel's platform tag, the symbols
# that set it, and the sizes.
#
# usage: scripts/package.sh [wheel|deb|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
what=${1:-all}
case $what in wheel|deb|all) ;; -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
  *) echo "package.sh: unknown '$what' (wheel, deb or all)" >&2; exit 2 ;; esac
build=${STALLSCOPE_PACKAGE_BUILD_DIR:-$root/build-pip}
case $build in /*) ;; *) build=$root/$build ;; esac
dist=$root/dist
python=${STALLSCOPE_PYTHON:-/usr/bin/python3}

say() { echo "package.sh: $*"; }
die() { echo "package.sh: error: $*" >&2; exit 1; }

command -v "$python" >/dev/null || die "no $python (set STALLSCOPE_PYTHON)"
# The compilers CMake picks by itself, as scripts/test.sh's builds do (pip
# would give scikit-build-core Python's own, x86_64-linux-gnu-gcc): the same
# compiler command, so ccache serves this build from theirs.
export CC=${CC:-cc} CXX=${CXX:-c++}
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

tools=$build/tools-venv
tools_venv() {
  if ! "$tools/bin/auditwheel" --version 2>/dev/null | grep -q "auditwheel 6\.[1-7]\."; then
    say "installing auditwheel into $tools"
    "$python" -m venv "$tools" || die "cannot create a venv with $python (python3-venv)"
    # 6.8 needs patchelf >= 0.14.5 (it renames grafted libraries in a way
    # older patchelf gets wrong: pypa/auditwheel#722); Debian 12 has 0.14.3.
    "$tools/bin/pip" install -q "auditwheel>=6.1,<6.8" || die "pip install auditwheel failed"
  fi
}

# The newest version of each versioned library a wheel's ELF files ask for,
# with the symbols and files that ask for it: what sets the platform tag.
symbols_that_set_the_tag() {
  local dir=$1 f
  while IFS= read -r -d '' f; do
    readelf -h "$f" >/dev/null 2>&1 || continue  # not an ELF file
    readelf -W --dyn-syms "$f" 2>/dev/null |
      awk -v f="${f#"$dir"/}" '$7 == "UND" && $8 ~ /@(GLIBC|GLIBCXX|CXXABI)_/ {
        split($8, a, "@"); print a[2], a[1], f }'
  done < <(find "$dir" -type f -print0) |
    awk '{ split($1, v, "_"); lib = v[1]; n = split(v[2], p, ".");
           key = sprintf("%04d%04d%04d", p[1], p[2], p[3]);
           if (key > best[lib]) { best[lib] = key; ver[lib] = $1; who[lib] = "" }
           if (key == best[lib] && index(who[lib], $2 " (" $3 ")") == 0 && cnt[lib, key]++ < 6)
             who[lib] = who[lib] "  " $2 " (" $3 ")\n" }
         END { for (l in ver) printf "%s needed by:\n%s", ver[l], who[l] }'
}

build_wheel() {
  say "pip wheel . (build directory $build)"
  mkdir -p "$dist"
  rm -f "$dist"/stallscope-*.whl
  "$python" -m pip wheel --no-deps -w "$dist" --config-settings=build-dir="$build" . \
    >"$dist/pip-wheel.log" 2>&1 || { tail -40 "$dist/pip-wheel.log"; die "pip wheel failed (log: dist/pip-wheel.log)"; }
  wheel=$(ls "$dist"/stallscope-*.whl)
  say "built $(basename "$wheel")"
  tools_venv
  rm -rf "$dist/wheelhouse"
  "$tools/bin/auditwheel" repair -w "$dist/wheelhouse" "$wheel" >"$dist/auditwheel-repair.log" 2>&1 ||
    { cat "$dist/auditwheel-repair.log"; die "auditwheel repair failed"; }
  repaired=$(ls "$dist"/wheelhouse/stallscope-*.whl)
  "$tools/bin/auditwheel" show "$repaired" >"$dist/auditwheel-show.txt" 2>&1 ||
    { cat "$dist/auditwheel-show.txt"; die "auditwheel show failed"; }
  local tag
  tag=$(basename "$repaired" .whl)
  tag=${tag##*-}
  say "repaired: wheelhouse/$(basename "$repaired") ($(du -k "$repaired" | cut -f1) KiB; unrepaired $(du -k "$wheel" | cut -f1) KiB)"
  say "platform tag: ${tag:-?} (auditwheel show: dist/auditwheel-show.txt)"
  local unpacked
  unpacked=$(mktemp -d)
  "$python" -m zipfile -e "$repaired" "$unpacked"
  say "what sets it:"
  symbols_that_set_the_tag "$unpacked" | sed 's/^/  /'
  rm -rf "$unpacked"
}

build_deb() {
  [ -f "$build/CPackConfig.cmake" ] || die "$build is not configured: run scripts/package.sh wheel first"
  command -v dpkg-shlibdeps >/dev/null || die "dpkg-shlibdeps is missing (apt-get install dpkg-dev)"
  say "cpack -G DEB (from $build)"
  mkdir -p "$dist"
  rm -f "$dist"/stallscope_*.deb
  (cd "$build" && cpack -G DEB -B "$dist/cpack" >"$dist/cpack.log" 2>&1) ||
    { tail -30 "$dist/cpack.log"; die "cpack failed (log: dist/cpack.log)"; }
  mv "$dist"/cpack/stallscope_*.deb "$dist/"
  rm -rf "$dist/cpack"
  local deb
  deb=$(ls "$dist"/stallscope_*.deb)
  say "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"
  dpkg-deb -f "$deb" Depends | sed 's/^/  Depends: /'
}

case $what in
  wheel) build_wheel ;;
  deb) build_deb ;;
  all) build_wheel; build_deb ;;
esac
