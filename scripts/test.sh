#!/usr/bin/env bash
# shellcheck disable=SC2317  # the phase functions are called through run_phase
# Installs what is missing, builds stallscope and runs every test: what CI runs
# (.ci/run) and what a developer runs on a fresh Debian 12 machine.
#
# Phases, each timed, with the CI budget it must stay within (2 cores):
#   setup          scripts/setup.sh                                      4 min
#   boundaries     scripts/check_boundaries.sh: no component reaches into
#                  another's src/ (the built libraries' exports are checked
#                  by ctest's `boundaries` test)                         1 min
#   release-build  Release build in build/ (gcc)                         6 min
#   release-tests  ctest, all but the labels below   } together         10 min
#   asan-tests     ctest of the ASan+UBSan build     }
#   scenarios      ctest labels `scenarios` and `mpi`: the bottleneck
#                  scenarios and the multi-rank runs                      8 min
#   packages       tests/install/packages.sh: `pip install ./` into a fresh
#                  venv, the repaired wheel into another, the .deb through
#                  apt-get, each running a DataLoader trainer under
#                  `stallscope run` (one CMake build directory, build-pip/,
#                  for all three; ccache reuses release-build's objects)  6 min
#   asan-build     ASan+UBSan build of the core libraries in build-asan/ (clang)
#   tsan           TSan build of the recorder and the preload shim in
#                  build-tsan/ (clang), and the shim's thread-safety cases
#   fuzz           scripts/fuzz.sh 60: the reader fuzzer for 60 s
#                  asan-build, tsan's build and the fuzzer's own build
#                  together                                               6 min
#                  fuzzing itself                                         1 min
# A phase over its budget is reported as such; past twice its budget (three
# times for the two builds: compile speed, not a hang) it is stopped and
# fails (setup is never stopped, since killing apt-get can break dpkg).
# Later phases run after a failed one where they can, so one run shows
# everything; the exit status is non-zero if any phase failed.
#
# Usage: scripts/test.sh [--quick] [--no-setup]
#   --quick     skip the sanitizer builds, their tests and fuzzing
#   --no-setup  do not run scripts/setup.sh
# Environment:
#   STALLSCOPE_BUILD_DIR       Release build directory (default: build)
#   STALLSCOPE_ASAN_BUILD_DIR  sanitizer build directory (default: build-asan)
#   STALLSCOPE_TSAN_BUILD_DIR  TSan build directory (default: build-tsan)
#   STALLSCOPE_PACKAGE_BUILD_DIR  the packages' build directory (default: build-pip)
#   STALLSCOPE_BUDGET_SCALE    multiply every budget (integer, default 1), for
#                              machines slower than CI
# ccache is used when installed; it is not required.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1

quick=0
setup=1
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    --no-setup) setup=0 ;;
    -h|--help) sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

build_dir=${STALLSCOPE_BUILD_DIR:-build}
asan_dir=${STALLSCOPE_ASAN_BUILD_DIR:-build-asan}
tsan_dir=${STALLSCOPE_TSAN_BUILD_DIR:-build-tsan}
scale=${STALLSCOPE_BUDGET_SCALE:-1}
case "$scale" in
  ''|*[!0-9]*|0) echo "test.sh: STALLSCOPE_BUDGET_SCALE must be a positive integer" >&2; exit 2 ;;
esac
jobs=$(nproc)

# Budgets in seconds.
budget_setup=$((240 * scale))
budget_build=$((360 * scale))
budget_tests=$((600 * scale))       # release-tests + asan-tests
budget_scenarios=$((480 * scale))   # scenarios and multi-rank runs
budget_packages=$((360 * scale))    # the three install paths, their build included
budget_sanitizer=$((360 * scale))   # asan-build + the fuzzer's build
fuzz_seconds=60
fuzz_slack=$((30 * scale))          # fuzz.sh start-up and final report

# Plain test logs (Boost.Test colours its output even into a pipe).
export BOOST_TEST_COLOR_OUTPUT=${BOOST_TEST_COLOR_OUTPUT:-no}

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi

# ------------------------------------------------------------- phase runner --
names=() statuses=() durations=() notes=()
failure_logs=()   # ctest logs whose failures are shown after the summary
deadline=0

now() { date +%s; }

# within CMD...: runs CMD, stopped when the current phase's deadline passes.
within() {
  local left=$((deadline - $(now)))
  if [ "$left" -le 0 ]; then
    echo "test.sh: no time left in this phase's budget for: $*" >&2
    return 124
  fi
  timeout --kill-after=30 "$left" "$@"
}

# run_phase NAME LIMIT_S STOP(0|N) FUNCTION: times FUNCTION and records the result.
# A phase over its budget is reported ("over budget"); it is stopped, and
# fails, only past STOP times its budget (0: never), so a CI host slower
# than the budget assumes still completes while one that hangs cannot eat
# the 90 min. Tests and scenarios stop at twice their budget; the builds,
# whose time is the host's compile speed and which cannot hang on their
# own, at three times.
run_phase() {
  local name=$1 limit=$2 stop=$3 fn=$4 start rc elapsed status note=""
  printf '\n==== %s (budget %d s) ====\n' "$name" "$limit"
  start=$(now)
  if [ "$stop" -gt 0 ]; then deadline=$((start + stop * limit)); else deadline=$((start + 100000)); fi
  note_from_phase=""
  "$fn"
  rc=$?
  elapsed=$(($(now) - start))
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=FAILED note="stopped: over $stop times its $limit s budget"
  elif [ "$rc" -ne 0 ]; then
    status=FAILED note="exit $rc"
  elif [ "$elapsed" -gt "$limit" ]; then
    status="ok, over budget" note="took $elapsed s, over its $limit s budget"
  else
    status=ok
  fi
  [ -n "$note_from_phase" ] && note="${note:+$note; }$note_from_phase"
  record "$name" "$status" "$elapsed" "$note"
  printf -- '---- %s: %s in %d s%s\n' "$name" "$status" "$elapsed" "${note:+ ($note)}"
  [ "${status%%,*}" = ok ]
}

record() {
  names+=("$1") statuses+=("$2") durations+=("$3") notes+=("$4")
}

not_run() {
  record "$1" "not run" 0 "$2"
  printf '\n==== %s: not run (%s) ====\n' "$1" "$2"
}

# Sums up a ctest LOG for the summary: failures, and skips (exit 77), since a
# skip is not a pass; with DIR, also the Boost.Test cases that a precondition
# skipped inside tests that passed (tests/skip_visibly.hpp prints one line each,
# which ctest keeps in DIR/Testing/Temporary/LastTest.log), listed in LOG.
ctest_note() {
  local failed total skipped cases=0 last=${2:+$2/Testing/Temporary/LastTest.log}
  failed=$(sed -n 's/.* \([0-9]\+\) tests failed out of \([0-9]\+\)$/\1/p' "$1" | tail -n 1)
  total=$(sed -n 's/.* tests failed out of \([0-9]\+\)$/\1/p' "$1" | tail -n 1)
  skipped=$(grep -c -- '\*\*\*Skipped' "$1")
  [ -n "$total" ] || return 0
  note_from_phase="$total tests: $((total - failed - skipped)) passed, $failed failed, $skipped skipped"
  if [ -n "$last" ] && [ -f "$last" ]; then
    cases=$(grep -c '^stallscope-test: skipped ' "$last")
    if [ "$cases" -gt 0 ]; then
      note_from_phase="$note_from_phase; $cases case(s) in passing tests skipped by a precondition"
      { echo "Cases skipped by a precondition (not passes):"
        grep '^stallscope-test: skipped ' "$last" | sed 's/^stallscope-test: skipped /  /'; } | tee -a "$1"
    fi
  fi
}

# A build directory configured earlier with another generator cannot be
# reconfigured for Ninja: drop its cache (the build outputs stay).
reset_if_not_ninja() {
  local cache=$1/CMakeCache.txt
  if [ -f "$cache" ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$cache"; then
    echo "test.sh: $1 was configured with another generator; removing its CMake cache"
    rm -rf "$cache" "$1/CMakeFiles"
  fi
}

# ----------------------------------------------------------------- phases --
phase_setup() {
  scripts/setup.sh
}

phase_boundaries() {
  within scripts/check_boundaries.sh
}

phase_release_build() {
  reset_if_not_ninja "$build_dir"
  within cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" &&
    within cmake --build "$build_dir" -j "$jobs"
}

# The scenarios and multi-rank runs have a budget of their own.
scenario_labels='scenarios|mpi'

# A test that fails is run once more (ctest --rerun-failed), and one that
# then passes is named in the summary ("passed on rerun"), its first log
# kept above the rerun's in the phase's log. A second failure fails the
# phase. The scenarios measure an injected cause on a shared machine, and
# the live PyTorch runs among the release tests start real worker
# processes: either can lose to a busy host once; a bug fails twice.
# ctest_with_rerun PHASE LOG CTEST_ARGS...
ctest_with_rerun() {
  local phase=$1 log=$2 failed
  shift 2
  within ctest --test-dir "$build_dir" --output-on-failure --timeout 300 "$@" \
    --no-tests=error 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  ctest_note "$log" "$build_dir"
  [ "$rc" -eq 0 ] && return 0
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && return "$rc"
  failed=$(sed -n '/The following tests FAILED:/,$ s/^[[:space:]]*[0-9]\+ - \([^ ]*\) .*/\1/p' "$log" |
    tr '\n' ' ')
  [ -n "$failed" ] || return "$rc"
  local first_note=$note_from_phase
  printf '\n==== %s: running the failed ones again: %s====\n' "$phase" "$failed" | tee -a "$log"
  local rerun_log=$log.rerun again name passed=""
  within ctest --test-dir "$build_dir" --output-on-failure --timeout 300 --rerun-failed \
    2>&1 | tee "$rerun_log"
  rc=${PIPESTATUS[0]}
  cat "$rerun_log" >>"$log"
  again=$(sed -n '/The following tests FAILED:/,$ s/^[[:space:]]*[0-9]\+ - \([^ ]*\) .*/\1/p' \
    "$rerun_log" | tr '\n' ' ')
  rm -f "$rerun_log"
  for name in $failed; do
    case " $again " in *" $name "*) ;; *) passed+="$name " ;; esac
  done
  note_from_phase=$first_note
  [ -n "$passed" ] && note_from_phase+="; passed on rerun: ${passed% }"
  if [ "$rc" -ne 0 ]; then
    note_from_phase+="; failed again on rerun: ${again:-(see the log)}"
    note_from_phase=${note_from_phase% }
    failure_logs+=("$log")
  fi
  return "$rc"
}

# failure_excerpts LOG: the last lines of each test that failed in LOG's
# last ctest run (ctest --output-on-failure prints a test's output after
# its result line), so the end of test.sh's output names what broke and
# how, however long the phases after it printed.
failure_excerpts() {
  local log=$1 name
  for name in $(awk '/The following tests FAILED:/ { n = 0; on = 1; next }
      on && /^[[:space:]]*[0-9]+ - / { names[n++] = $3; next }
      { on = 0 }
      END { for (i = 0; i < n; i++) print names[i] }' "$log"); do
    printf -- '---- %s (the last 40 lines of its output; all of it in %s)\n' "$name" "$log"
    awk -v name="$name" '
      $0 ~ ("Test +#[0-9]+: " name " ") { on = 1; n = 0; delete buf }
      on && ($0 ~ /^ +Start +[0-9]+: / || $0 ~ /^[0-9]+% tests passed/) { on = 0; last = n; for (i = 0; i < n; i++) keep[i] = buf[i] }
      on { buf[n++] = $0 }
      END {
        if (on) { last = n; for (i = 0; i < n; i++) keep[i] = buf[i] }
        for (i = (last > 40 ? last - 40 : 0); i < last; i++) print keep[i]
      }' "$log"
  done
}

phase_release_tests() {
  ctest_with_rerun release-tests "$build_dir/test.sh-ctest.log" -j2 -LE "$scenario_labels"
}

phase_scenarios() {
  ctest_with_rerun scenarios "$build_dir/test.sh-scenarios.log" -L "$scenario_labels"
}

# The pip, wheel and Debian installs (docs/install.md), each used from
# outside the checkout; ccache (scripts/packages.txt) gives their build the
# objects release-build compiled.
phase_packages() {
  within tests/install/packages.sh all
}

phase_asan_build() {
  local compilers=()
  if command -v clang++ >/dev/null 2>&1; then
    # clang builds these about twice as fast as gcc with sanitizers on.
    compilers=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++)
  fi
  reset_if_not_ninja "$asan_dir"
  # RelWithDebInfo at -O1 and without NDEBUG: asserts stay on, stacks stay
  # readable, and it compiles faster than -O2.
  within cmake -S . -B "$asan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
    -DSTALLSCOPE_SANITIZE=address,undefined -DSTALLSCOPE_CORE_ONLY=ON \
    -DSTALLSCOPE_BUILD_BENCH=OFF "${compilers[@]}" "${launcher[@]}" &&
    within cmake --build "$asan_dir" -j "$jobs"
}

phase_asan_tests() {
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    within ctest --test-dir "$asan_dir" --output-on-failure -j2 --timeout 300 \
    --no-tests=error 2>&1 | tee "$asan_dir/test.sh-ctest.log"
  local rc=${PIPESTATUS[0]}
  ctest_note "$asan_dir/test.sh-ctest.log" "$asan_dir"
  [ "$rc" -eq 0 ] || failure_logs+=("$asan_dir/test.sh-ctest.log")
  return "$rc"
}

# The shim is loaded into programs stallscope did not build, so its
# first-call races (64 threads at once, descriptors reused and closed under
# it) are checked under TSan; only the shim, the recorder and that suite
# are built.
tsan_cases='sixty_four_threads_first_calls_at_once,reused_descriptor_never_keeps_a_stale_path'
tsan_cases+=',closing_every_descriptor_keeps_tracing_sound,underscore_exit_completes_the_file'
tsan_cases+=',exec_completes_the_file_first_and_follows_the_child'

phase_tsan() {
  if ! command -v clang++ >/dev/null 2>&1; then
    note_from_phase="clang++ is missing (scripts/packages.txt installs it)"
    return 1
  fi
  reset_if_not_ninja "$tsan_dir"
  within cmake -S . -B "$tsan_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g" \
    -DSTALLSCOPE_SANITIZE=thread -DSTALLSCOPE_BUILD_BENCH=OFF \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" &&
    within cmake --build "$tsan_dir" -j "$jobs" \
      --target stallscope_preload preload_lifecycle test_preload_process || return 1
  # symbolize=0: llvm-symbolizer would inherit LD_PRELOAD and fail to load
  # the TSan-built shim.
  TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:symbolize=0} \
    within "$tsan_dir/tests/preload/test_preload_process" \
    "--run_test=preload_process/$tsan_cases"
}

phase_fuzz() {
  if [ ! -e scripts/fuzz.sh ]; then
    note_from_phase="scripts/fuzz.sh is missing"
    echo "test.sh: scripts/fuzz.sh does not exist: the reader fuzzer cannot run" >&2
    return 1
  fi
  if [ ! -x scripts/fuzz.sh ]; then
    note_from_phase="scripts/fuzz.sh is not executable"
    echo "test.sh: scripts/fuzz.sh is not executable (chmod +x it)" >&2
    return 1
  fi
  within scripts/fuzz.sh "$fuzz_seconds"
}

# ------------------------------------------------------------------- main --
t0=$(now)
if [ "$setup" -eq 1 ]; then
  run_phase setup "$budget_setup" 0 phase_setup
else
  record setup skipped 0 "--no-setup"
fi

run_phase boundaries "$((60 * scale))" 2 phase_boundaries

tests_start_left=$budget_tests
if run_phase release-build "$budget_build" 3 phase_release_build; then
  t=$(now)
  run_phase release-tests "$budget_tests" 2 phase_release_tests
  tests_start_left=$((budget_tests - ($(now) - t)))
  run_phase scenarios "$budget_scenarios" 2 phase_scenarios
else
  not_run release-tests "release-build failed"
  not_run scenarios "release-build failed"
fi
# Its own build (build-pip/): runs even when release-build failed.
run_phase packages "$budget_packages" 2 phase_packages

if [ "$quick" -eq 1 ]; then
  record asan-build skipped 0 "--quick"
  record asan-tests skipped 0 "--quick"
  record tsan skipped 0 "--quick"
  record fuzz skipped 0 "--quick"
else
  t=$(now)
  run_phase asan-build "$budget_sanitizer" 3 phase_asan_build
  asan_build_ok=$?
  build_left=$((budget_sanitizer - ($(now) - t)))
  [ "$build_left" -gt 0 ] || build_left=0
  if [ "$asan_build_ok" -eq 0 ]; then
    if [ "$tests_start_left" -gt 0 ]; then
      run_phase asan-tests "$tests_start_left" 2 phase_asan_tests
    else
      record asan-tests FAILED 0 "no time left of the $budget_tests s test budget"
    fi
  else
    not_run asan-tests "asan-build failed"
  fi
  # TSan's build and the fuzzer's share the rest of the sanitizer-build
  # budget; the shim's TSan cases get 60 s of their own.
  # At least 2 min to build, so a slow ASan build does not starve it (the
  # phase is then reported over budget rather than stopped half-built).
  tsan_build=$build_left
  [ "$tsan_build" -ge $((120 * scale)) ] || tsan_build=$((120 * scale))
  t=$(now)
  run_phase tsan "$((tsan_build + 60 * scale))" 2 phase_tsan
  build_left=$((build_left - ($(now) - t) + 60 * scale))
  [ "$build_left" -gt 0 ] || build_left=0
  # The fuzzer's build shares the sanitizer-build budget; fuzzing has 60 s.
  echo
  echo "fuzz budget: ${fuzz_seconds} s fuzzing + ${fuzz_slack} s start-up + ${build_left} s" \
    "left of the sanitizer-build budget for building the fuzzer"
  run_phase fuzz "$((fuzz_seconds + fuzz_slack + build_left))" 2 phase_fuzz
fi

# ---------------------------------------------------------------- summary --
total=$(($(now) - t0))
printf '\n==== summary ====\n'
bad=()
for i in "${!names[@]}"; do
  printf '  %-14s %-8s %5d s  %s\n' "${names[$i]}" "${statuses[$i]}" "${durations[$i]}" "${notes[$i]}"
  case "${statuses[$i]}" in ok|"ok, over budget"|skipped) ;; *) bad+=("${names[$i]}") ;; esac
done
if [ "${#bad[@]}" -eq 0 ]; then
  extra=""
  [ "$quick" -eq 1 ] && extra=" (--quick: no sanitizer build, no fuzzing)"
  echo "test.sh: PASS in $total s$extra"
  exit 0
fi
if [ "${#failure_logs[@]}" -gt 0 ]; then
  printf '\n==== failed tests ====\n'
  for log in "${failure_logs[@]}"; do failure_excerpts "$log"; done
fi
echo "test.sh: FAIL in $total s: ${bad[*]}"
exit 1
