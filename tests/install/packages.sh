#!/usr/bin/env bash
# The three install paths as a user meets them (docs/install.md), checked on
# this checkout; test.sh's `packages` phase.
#
#   pip     a fresh venv (--system-site-packages: Debian's torch), then
#           `pip install ./`
#   wheel   scripts/package.sh builds the wheel, repairs it (auditwheel) and
#           the .deb from the same build directory; the repaired wheel must
#           need nothing outside it but glibc, libstdc++ and libgcc, and
#           carry nothing of CUDA; it is installed into a second venv
#   deb     its Depends checked, `apt-get install ./stallscope_*.deb`, run
#           from /usr/bin, then `apt-get remove`
#
# Each install is then used from outside the checkout: `stallscope --version`
# is this checkout's version, `import stallscope` (the venvs) finds the
# recorder of the same install, and `stallscope run -- python
# tests/install/dataloader_trainer.py` runs the environment's interpreter,
# trains, and its report's verdict is input-bound. Any step that cannot run
# fails the script (exit 1) and is named; nothing is skipped.
#
# usage: tests/install/packages.sh [pip|wheel|deb|all]   (default all;
#        wheel and deb build with scripts/package.sh first)
#   STALLSCOPE_PACKAGE_BUILD_DIR  the CMake build directory (default build-pip)
set -uo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
what=${1:-all}
build=${STALLSCOPE_PACKAGE_BUILD_DIR:-$root/build-pip}
case $build in /*) ;; *) build=$root/$build ;; esac
export STALLSCOPE_PACKAGE_BUILD_DIR=$build
python=/usr/bin/python3
trainer=$root/tests/install/dataloader_trainer.py
version=$(sed -n 's/^project(stallscope VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-packages-XXXXXX")
# The venvs and logs go even when a timeout or ^C ends the run early.
trap 'rm -rf "$work"' EXIT
failures=()

say() { echo "packages.sh: $*"; }
fail() { echo "packages.sh: FAIL $1: $2"; failures+=("$1"); }
pass() { echo "packages.sh: ok   $1"; }

# The compilers CMake picks by itself, as scripts/test.sh's builds do (pip
# would give scikit-build-core Python's own, x86_64-linux-gnu-gcc): the same
# compiler command, so ccache serves this build from theirs.
export CC=${CC:-cc} CXX=${CXX:-c++}
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=${CMAKE_C_COMPILER_LAUNCHER:-ccache}
  export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
fi
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

# use_install NAME STALLSCOPE PYTHON [IMPORT]: the checks every install passes,
# run from $work (outside the checkout). PYTHON's folder goes first on PATH,
# as an activated environment's does, and `stallscope run` is given its name;
# IMPORT=1 also imports the module.
use_install() {
  local name=$1 cmd=$2 py=$3 import=${4:-1} dir=$work/$1 out prefix bindir
  bindir=$(dirname "$py")
  mkdir -p "$dir"
  (
    cd "$dir" || exit 1
    export PATH=$bindir:$PATH
    unset PYTHONPATH STALLSCOPE_LIB STALLSCOPE_PRELOAD_LIB STALLSCOPE_PYTHON_DIR
    out=$("$cmd" --version 2>&1)
    [ "$out" = "$version" ] || { echo "--version printed '$out', expected '$version'"; exit 1; }
    prefix=$("$py" -c 'import sys; print(sys.prefix)')
    if [ "$import" = 1 ]; then
      out=$("$py" -c 'import stallscope; l = stallscope.library(); print(l._name if l else "none")' 2>&1)
      case $out in "$prefix"/*/libstallscope_trace.so.1) ;;
        *) echo "import stallscope: recorder '$out', expected one under $prefix"; exit 1 ;; esac
    fi
    timeout 180 "$cmd" run --out "$dir/run" --start-step 3 --steps 20 --quiet -- \
      "$(basename "$py")" "$trainer" 40 >"$dir/run.log" 2>&1 || { tail -20 "$dir/run.log"; echo "stallscope run exited $?"; exit 1; }
    grep -q "trained 40 steps" "$dir/run.log" || { tail -20 "$dir/run.log"; echo "the trainer did not finish"; exit 1; }
    grep -q "trainer: python $prefix\$" "$dir/run.log" ||
      { grep "trainer: python" "$dir/run.log"; echo "not the environment's interpreter ($prefix)"; exit 1; }
    "$cmd" report --json "$dir/run" >"$dir/report.json" 2>"$dir/report.err" ||
      { cat "$dir/report.err"; echo "stallscope report failed"; exit 1; }
    "$py" - "$dir/report.json" <<'PY' || exit 1
import json, sys
rank = json.load(open(sys.argv[1]))["ranks"][0]
cause, steps = rank["cause"], rank["steps"]["total"]
print("verdict: %s (%d steps, from %s)" % (cause, steps, rank["step_source"]["kind"]))
ok = cause.startswith("input-bound") and steps >= 15 and rank["step_source"]["kind"] == "step_events"
sys.exit(0 if ok else "expected input-bound over >= 15 steps from the optimizer hook")
PY
  ) >"$work/$name.log" 2>&1
  local rc=$?
  sed 's/^/    /' "$work/$name.log"
  if [ $rc -eq 0 ]; then
    pass "$name: --version,$([ "$import" = 1 ] && echo " import stallscope,") stallscope run -- $(basename "$py"): input-bound"
  else fail "$name" "see above"; fi
}

new_venv() {
  rm -rf "$1"
  "$python" -m venv --system-site-packages "$1" >/dev/null || { fail venv "cannot create $1 (python3-venv)"; return 1; }
}

check_pip() {
  local venv=$work/venv-pip t0
  new_venv "$venv" || return
  say "pip install ./ into $venv (build directory $build)"
  t0=$(date +%s)
  if ! "$venv/bin/pip" install --config-settings=build-dir="$build" ./ >"$work/pip-install.log" 2>&1; then
    tail -40 "$work/pip-install.log"; fail pip "pip install ./ failed"; return
  fi
  say "pip install ./ took $(( $(date +%s) - t0 )) s"
  [ -x "$venv/bin/stallscope" ] || { fail pip "no stallscope in $venv/bin"; return; }
  use_install pip "$venv/bin/stallscope" "$venv/bin/python"
}

# The libraries a wheel may leave to the system: glibc's, libstdc++ and
# libgcc_s, and zlib, which every manylinux policy lists as present on the
# system (auditwheel leaves it out).
system='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|librt\.so\.1|libpthread\.so\.0|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libz\.so\.1)$'

# Every NEEDED of every ELF file in the unpacked wheel DIR is in the wheel or
# is one of $system; nothing of CUDA is inside.
wheel_needs_only_the_system() {
  local dir=$1 f lib bad=""
  while IFS= read -r -d '' f; do
    readelf -h "$f" >/dev/null 2>&1 || continue
    for lib in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ $lib =~ $system ]] && continue
      [ -n "$(find "$dir" -name "$lib" -print -quit)" ] || bad+=" ${f#"$dir"/} needs $lib;"
    done
  done < <(find "$dir" -type f -print0)
  local cuda
  cuda=$(find "$dir" -name 'libcu*' -o -name 'libnccl*' -o -name 'libnv*' | sed "s|^$dir/||" | tr '\n' ' ')
  [ -z "$cuda" ] || bad+=" carries CUDA: $cuda;"
  [ -z "$bad" ] || { echo "$bad"; return 1; }
}

check_wheel() {
  say "scripts/package.sh all"
  if ! scripts/package.sh all 2>&1 | tee "$work/package.log"; then fail package "scripts/package.sh failed"; return; fi
  local repaired unpacked tag
  repaired=$(ls dist/wheelhouse/stallscope-*.whl 2>/dev/null)
  [ -n "$repaired" ] || { fail wheel "no repaired wheel in dist/wheelhouse"; return; }
  # auditwheel show: 'is consistent with the following platform tag: "TAG"'
  tag=$(tr '\n' ' ' <dist/auditwheel-show.txt | sed -n 's/.*consistent with *the following platform tag: *"\([^"]*\)".*/\1/p')
  case $(basename "$repaired") in
    "stallscope-$version-py3-none-$tag"*.whl) pass "wheel: $(basename "$repaired") (py3-none, $tag)" ;;
    *) fail wheel "$(basename "$repaired") is not py3-none-$tag" ;;
  esac
  unpacked=$work/wheel-unpacked
  "$python" -m zipfile -e "$repaired" "$unpacked"
  # auditwheel's own account: the libraries it names are inside the wheel
  # (grafted, renamed) or the system's.
  local outside="" lib
  for lib in $(tr '\n' ' ' <dist/auditwheel-show.txt | grep -o "lib[A-Za-z0-9_+.-]*\.so[.0-9]*" | sort -u); do
    [[ $lib =~ $system ]] && continue
    [ -n "$(find "$unpacked" -name "$lib" -print -quit)" ] && continue
    outside+=" $lib"
  done
  [ -z "$outside" ] && pass "auditwheel show: nothing outside the wheel but glibc, libstdc++, libgcc_s, zlib" ||
    fail "auditwheel show" "names libraries neither in the wheel nor the system's:$outside"
  if wheel_needs_only_the_system "$unpacked" >"$work/needed.txt"; then
    pass "every NEEDED of the wheel's ELF files is inside it or glibc/libstdc++/libgcc_s/zlib; nothing of CUDA inside"
  else fail "wheel NEEDED" "$(cat "$work/needed.txt")"; fi
  local venv=$work/venv-wheel
  new_venv "$venv" || return
  if ! "$venv/bin/pip" install --no-index --no-deps "$repaired" >"$work/pip-wheel-install.log" 2>&1; then
    tail -20 "$work/pip-wheel-install.log"; fail wheel "pip install of the repaired wheel failed"; return
  fi
  use_install wheel "$venv/bin/stallscope" "$venv/bin/python"
}

check_deb() {
  local deb depends missing="" p
  deb=$(ls "$root"/dist/stallscope_"$version"_*.deb 2>/dev/null)
  [ -n "$deb" ] || { fail deb "no dist/stallscope_${version}_*.deb (scripts/package.sh deb)"; return; }
  depends=$(dpkg-deb -f "$deb" Depends)
  say "Depends: $depends"
  for p in libc6 libstdc++6 libgcc-s1 liburing2 libtbb12 libhwloc15; do
    [[ ", $depends," == *", $p "* || ", $depends," == *", $p,"* ]] || missing+=" $p"
  done
  [[ $depends == *cuda* ]] && missing+=" (names CUDA)"
  [ -z "$missing" ] && pass "deb Depends computed (libc6, libstdc++6, liburing2, libtbb12, libhwloc15, ...)" ||
    fail "deb Depends" "lacks:$missing"
  local contents f absent=""
  contents=$(dpkg-deb -c "$deb")
  for f in ./usr/bin/stallscope ./usr/lib/libstallscope_preload.so ./usr/lib/libstallscope_trace.so.1 \
           ./usr/lib/libstallscope_cuda.so ./usr/include/stallscope/trace.hpp \
           ./usr/lib/cmake/stallscope/stallscopeConfig.cmake \
           ./usr/share/stallscope/python/hooks/sitecustomize.py ./usr/share/man/man1/stallscope.1.gz; do
    grep -q " $f\$" <<<"$contents" || absent+=" $f"
  done
  [ -z "$absent" ] && pass "deb holds the command, libraries, headers, CMake config, hooks, man page" ||
    fail "deb contents" "missing:$absent"
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
       -o DPkg::Lock::Timeout=120 "$deb" >"$work/apt-install.log" 2>&1; then
    tail -20 "$work/apt-install.log"; fail deb "apt-get install ./$(basename "$deb") failed"; return
  fi
  pass "apt-get install ./$(basename "$deb")"
  use_install deb /usr/bin/stallscope /usr/bin/python3 0
  # find_package(stallscope) against /usr.
  mkdir -p "$work/consumer"
  printf 'cmake_minimum_required(VERSION 3.25)\nproject(c LANGUAGES CXX)\nfind_package(stallscope REQUIRED)\nget_target_property(l stallscope::trace LOCATION)\nmessage(STATUS "stallscope::trace ${l}")\n' \
    >"$work/consumer/CMakeLists.txt"
  if cmake -S "$work/consumer" -B "$work/consumer/build" >"$work/consumer.log" 2>&1 &&
     grep -q "stallscope::trace /usr/lib/libstallscope_trace.so" "$work/consumer.log"; then
    pass "find_package(stallscope) finds /usr/lib/libstallscope_trace.so"
  else tail -10 "$work/consumer.log"; fail "deb find_package" "see above"; fi
  if man -w stallscope 2>/dev/null | grep -q '^/usr/share/man/man1/stallscope.1.gz$'; then pass "man stallscope"
  else fail "deb man page" "man -w stallscope: $(man -w stallscope 2>&1)"; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get remove -y -q stallscope >"$work/apt-remove.log" 2>&1 ||
    fail deb "apt-get remove stallscope failed"
  [ ! -e /usr/bin/stallscope ] && pass "apt-get remove stallscope" || fail deb "/usr/bin/stallscope left after remove"
}

t0=$(date +%s)
case $what in
  pip) check_pip ;;
  wheel) check_wheel ;;
  deb) check_deb ;;
  all) check_pip; check_wheel; check_deb ;;
  *) echo "packages.sh: unknown '$what' (pip, wheel, deb or all)" >&2; exit 2 ;;
esac
rm -rf "$work"
if [ "${#failures[@]}" -eq 0 ]; then
  say "PASS ($what) in $(( $(date +%s) - t0 )) s"
  exit 0
fi
say "FAIL: ${failures[*]} (in $(( $(date +%s) - t0 )) s)"
exit 1
