#!/usr/bin/env bash
# The README's main job, in one command on a fresh Debian 12 machine:
# installs what is missing (scripts/setup.sh), builds Release in build/ (the
# directory scripts/test.sh uses, so a second run only rebuilds what
# changed), then runs `stallscope demo`: a sample training job with a
# mis-tuned data loader, its report, the top remedy applied, before → after.
#
# Usage: scripts/demo.sh [--no-setup] [demo options, e.g. --dir DIR --steps N]
#   STALLSCOPE_BUILD_DIR  build directory (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."

setup=1
args=()
for a in "$@"; do
  case $a in
    --no-setup) setup=0 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) args+=("$a") ;;
  esac
done

build_dir=${STALLSCOPE_BUILD_DIR:-build}
if [ "$setup" = 1 ]; then
  echo "demo.sh: checking packages (scripts/setup.sh) ..."
  scripts/setup.sh
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cache=$build_dir/CMakeCache.txt
if [ -f "$cache" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache"; then
  rm -rf "$cache" "$build_dir/CMakeFiles"   # configured with another generator earlier
fi
echo "demo.sh: building Release in $build_dir/ (only the demo's programs) ..."
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >"$build_dir/demo-configure.log" 2>&1 ||
  { cat "$build_dir/demo-configure.log"; exit 1; }
cmake --build "$build_dir" -j "$(nproc)" --target stallscope trainer gen_dataset

echo
exec "$build_dir/bin/stallscope" demo "${args[@]}"
