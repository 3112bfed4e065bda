#!/usr/bin/env bash
# Fuzzes the trace reader (TraceReader, the info summary and the Chrome
# exporter) with libFuzzer under ASan and UBSan (RELIABILITY.md 6).
#
# Usage: scripts/fuzz.sh [SECONDS]      (default 60)
#
# Builds tests/fuzz with clang in build-fuzz/ (only the fuzzer and its seed
# writer), seeds build-fuzz/corpus with the builder's files (fuzz_seeds) and
# the .sst files the test suite wrote into <build>/fuzz-seeds/, then fuzzes.
# Exits non-zero on a finding; the crashing input is kept in
# build-fuzz/findings/ (replay: build-fuzz/tests/fuzz/fuzz_reader FILE).
# Environment: STALLSCOPE_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-60}
case "$seconds" in
  ''|*[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number, not '$seconds'" >&2; exit 2 ;;
esac
build=${STALLSCOPE_FUZZ_BUILD_DIR:-build-fuzz}

cc=$(command -v clang || command -v clang-14 || true)
cxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$cxx" ] || [ -z "$cc" ]; then
  echo "fuzz.sh: clang is needed for libFuzzer (apt-get install clang)" >&2
  exit 1
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_C_COMPILER=$cc" "-DCMAKE_CXX_COMPILER=$cxx" \
  -DSTALLSCOPE_FUZZ=ON -DSTALLSCOPE_CORE_ONLY=ON -DSTALLSCOPE_BUILD_TESTS=OFF \
  -DSTALLSCOPE_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_reader fuzz_seeds

corpus=$build/corpus
findings=$build/findings
mkdir -p "$corpus" "$findings"
"$build/tests/fuzz/fuzz_seeds" "$corpus"
n_test_seeds=0
for dir in build*/fuzz-seeds; do
  [ -d "$dir" ] || continue
  for f in "$dir"/*.sst; do
    [ -f "$f" ] || continue
    cp "$f" "$corpus/$(echo "$dir" | tr '/' '_')_$(basename "$f")"
    n_test_seeds=$((n_test_seeds + 1))
  done
done
echo "fuzz.sh: corpus $corpus: $(find "$corpus" -type f | wc -l) inputs" \
  "($n_test_seeds seed files from the test suite's fuzz-seeds)"

# halt_on_error/abort: a sanitizer report is a finding, not a warning.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# Earlier findings first: one that still fails is a finding now; a fixed one
# joins the corpus as a regression seed.
for f in "$findings"/*; do
  [ -f "$f" ] || continue
  if ! "$build/tests/fuzz/fuzz_reader" "$f" >"$build/replay.log" 2>&1; then
    echo "fuzz.sh: FINDING: earlier input $f still fails:" >&2
    tail -n 30 "$build/replay.log" >&2
    exit 1
  fi
  echo "fuzz.sh: earlier finding $f is fixed; kept in the corpus"
  mv "$f" "$corpus/fixed-$(basename "$f")"
done
# libFuzzer's progress lines and dictionary go to a log: its start, its end
# and its final statistics are printed, and the whole tail on a finding.
log=$build/fuzz.log
echo "fuzz.sh: fuzzing for $seconds s (libFuzzer's output: $log)"
set +e
"$build/tests/fuzz/fuzz_reader" -max_total_time="$seconds" -max_len=16384 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" >"$log" 2>&1
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  tail -n 60 "$log" >&2
  echo "fuzz.sh: FINDING (exit $rc); inputs kept in $findings/:" >&2
  ls -l "$findings" >&2
  exit "$rc"
fi
grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^Done [0-9]+ runs|^stat::' "$log" || true
echo "fuzz.sh: no findings in $seconds s"
