#!/usr/bin/env bash
# The ledger check: runs every headline benchmark of docs/performance.md and
# prints each RESULT line beside the figure last recorded for it in the
# ledger (docs/performance.md, section "Ledger") and the ratio new ÷ ledger.
# Not a CI gate (a shared machine moves these figures by 10-20 %): it is run
# before a stop that touched a hot path, and the ledger is updated by hand
# from what it printed. It edits nothing.
#
#   scripts/bench.sh [BUILD_DIR] [--old-cli PATH] [--no-fio] [--fio-args 'ARGS']
#                    [--only NAME[,NAME…]] [--ledger FILE] [--timeout S] [--keep-logs]
#                    [--rows] [--accuracy] [--accuracy-python PY]
#
# See usage() below. Each output line:
#
#   RESULT <name> <value> <unit> target <op> <value> PASS|MISS ledger <value> <date> <commit> new/ledger <ratio> [WORSE]
#
# "ledger - - - new/ledger -" when the ledger has no figure for it. WORSE:
# more than 15 % worse than the ledger in the target's direction (for a
# "<=" target, higher; for ">=", lower; none for "target >= 0", the
# benches' mark of a figure without a target); such a figure is fixed or
# explained in the note. A bench that is not built, exits on a signal, runs
# past --timeout, or prints no RESULT line is a FAILED line, and every
# ledger figure of a bench that ran but did not print it is a MISSING line;
# either makes the exit status 1. MISS lines do not.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

usage() {
  cat <<'EOF'
usage: scripts/bench.sh [BUILD_DIR] [options]

Runs the headline benchmarks of BUILD_DIR (default: build) and prints each
RESULT line beside the ledger's figure (docs/performance.md, "Ledger") and
the ratio new / ledger. Prints only; edits nothing. Exit status 1 when a
bench is missing or failed, or a ledger figure was not printed; MISS lines
do not change it.

Benches, in order (~2 min on 2 cores, ~14 min with loader_vs_fio at its
defaults, more with --old-cli):
  record_bench      the span's cost, steady state and first fill
  analyze_bench     the analyzer end to end (writes a 3.1 GB trace to /tmp)
  multirank_bench   merge + cross-rank analysis, 256 ranks
  compare_builds    analyzer and multi-rank CPU-time ratios against
                    --old-cli (bench/compare_builds.sh); skipped without it
  kineto_import     PyTorch profiler import speed and memory
  preload_overhead  the LD_PRELOAD shim's cost on 4 KiB page-cache preads
  pool_overhead     the loader's preprocessing pool against raw oneTBB
  loader_vs_fio     the loader's read path against fio (~10 min)
  accuracy          the ground-truth harness, bench/accuracy.sh --count 24
                    (~10 min a torch; only with --accuracy or --only accuracy): run
                    it before a stop that touched the model

Options:
  --old-cli PATH    a `stallscope` of an older build (scripts/corpus.sh old-cli)
                    for bench/compare_builds.sh
  --no-fio          skip loader_vs_fio (it is long)
  --fio-args ARGS   loader_vs_fio's arguments (default: its own defaults),
                    e.g. '2048 8 1 8 all 4k'; figures from other arguments
                    do not compare with the ledger's
  --only LIST       run only these benches (comma-separated names as above)
  --ledger FILE     the page holding the ledger (default docs/performance.md)
  --timeout S       per bench (default 1800)
  --keep-logs       keep each bench's full output (printed path); kept
                    anyway when something failed
  --accuracy        run the accuracy harness too (long: ~10 min a torch)
  --accuracy-python PY
                    a second Python (a torch 2.x venv) whose torch the
                    harness runs on too, after Debian's torch 1.13; the
                    figures are per torch (accuracy_*_torch1, _torch2;
                    without it the ledger's _torch2 figures are MISSING)
  --rows            after the run, print the ledger's rows for what it
                    measured (value, unit, date, commit, the load average at
                    the bench's start), to paste into the ledger by hand
  -h, --help        this text
EOF
}

die() { echo "bench.sh: $*" >&2; exit 2; }

build=build old_cli="" no_fio=0 fio_args="" only="" ledger=docs/performance.md
timeout_s=1800 keep=0 rows=0 accuracy=0 accuracy_py=/usr/bin/python3
while [ $# -gt 0 ]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --old-cli) [ $# -ge 2 ] || die "--old-cli needs a path"; old_cli=$2; shift 2 ;;
    --no-fio) no_fio=1; shift ;;
    --fio-args) [ $# -ge 2 ] || die "--fio-args needs its arguments"; fio_args=$2; shift 2 ;;
    --only) [ $# -ge 2 ] || die "--only needs a list of benches"; only=",$2,"; shift 2 ;;
    --ledger) [ $# -ge 2 ] || die "--ledger needs a file"; ledger=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || die "--timeout needs seconds"; timeout_s=$2; shift 2 ;;
    --keep-logs) keep=1; shift ;;
    --rows) rows=1; shift ;;
    --accuracy) accuracy=1; shift ;;
    --accuracy-python) [ $# -ge 2 ] || die "--accuracy-python needs a path"; accuracy_py=$2; shift 2 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) build=$1; shift ;;
  esac
done
all_benches="record_bench analyze_bench multirank_bench compare_builds kineto_import preload_overhead pool_overhead loader_vs_fio accuracy"
if [ -n "$only" ]; then
  for b in ${only//,/ }; do
    case " $all_benches " in *" $b "*) ;; *) die "--only: no bench named '$b' (benches: $all_benches)" ;; esac
  done
fi
if ! [[ $timeout_s =~ ^[0-9]+$ ]] || [ "$timeout_s" -eq 0 ]; then
  die "--timeout '$timeout_s' is not a number of seconds"
fi
[ -d "$build" ] || die "build directory '$build' does not exist (configure and build it first)"
[ -f "$ledger" ] || die "ledger page '$ledger' does not exist"
if [ -n "$old_cli" ] && [ ! -x "$old_cli" ]; then die "--old-cli '$old_cli' is not an executable"; fi

# The ledger: the table of the section "## Ledger", one row per figure:
# | figure | bench | value | unit | date | commit | note |
table=$(awk '
  /^## / { inside = ($0 ~ /^## Ledger/) ; next }
  inside && /^\|/ {
    n = split($0, f, "|")
    for (i = 2; i < n; i++) { gsub(/^[ \t`]+|[ \t`]+$/, "", f[i]) }
    if (f[2] == "figure" || f[2] ~ /^-+$/ || f[2] == "") next
    printf "%s\t%s\t%s\t%s\t%s\t%s\n", f[2], f[3], f[4], f[5], f[6], f[7]
  }' "$ledger")
grep -q '^## Ledger' "$ledger" || die "'$ledger' has no section '## Ledger' (a table '| figure | bench | value | unit | date | commit | note |')"
[ -n "$table" ] || echo "bench.sh: the ledger in '$ledger' has no rows: every figure is new" >&2

logs=$(mktemp -d /tmp/stallscope-bench-XXXXXX)
failed=0 figures=0 passes=0 misses=0 worse=0
head_rev=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)
echo "# scripts/bench.sh: build $build, commit $head_rev${dirty:+ (with uncommitted changes)}, $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"

# Prints the bench's RESULT lines, each with its ledger figure, and a
# MISSING line for each ledger figure of the bench it did not print.
annotate() {  # bench log [why its figures are missing]
  awk -v bench="$1" -v table="$table" -v why="${3:-$1 ran but did not print it}" '
    BEGIN {
      n = split(table, rows, "\n")
      for (i = 1; i <= n; i++) {
        split(rows[i], f, "\t")
        val[f[1]] = f[3]; date[f[1]] = f[5]; rev[f[1]] = f[6]; owner[f[1]] = f[2]
      }
    }
    /^RESULT / {
      name = $2; v = $3; op = ""; seen[name] = 1; figures++
      for (i = 4; i < NF; i++) if ($i == "target") { op = $(i + 1); tv = $(i + 2); break }
      if (op == ">=" && tv + 0 == 0) op = ""  # "target >= 0": a figure without a target
      if ($NF == "PASS") passes++; else misses++
      line = $0
      lv = (name in val) ? val[name] : ""
      if (lv ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ && v ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/) {
        r = (lv + 0 != 0) ? sprintf("%.3f", v / lv) : "-"
        flag = ""
        if (r != "-" && ((op == "<=" && v + 0 > 1.15 * lv) || (op == ">=" && v + 0 < lv / 1.15))) {
          flag = " WORSE"; worse++
        }
        printf "%s ledger %s %s %s new/ledger %s%s\n", line, lv, date[name], rev[name], r, flag
      } else {
        printf "%s ledger - - - new/ledger -\n", line
      }
    }
    END {
      for (k in owner)
        if (owner[k] == bench && !(k in seen)) {
          printf "RESULT %s - - target - - MISSING (%s) ledger %s %s %s new/ledger -\n", k, why, val[k], date[k], rev[k]
          missing++
        }
      printf "#counts %d %d %d %d %d\n", figures, passes, misses, worse, missing
    }' "$2"
}

# A bench that produced nothing usable: a FAILED line, then its ledger
# figures as MISSING.
fail_bench() {  # bench why
  echo "RESULT $1 - - target - - FAILED ($2)"
  : > "$logs/empty"
  annotate "$1" "$logs/empty" "$1 failed" | grep -v '^#counts'
  failed=$((failed + 1))
}

run_bench() {  # name cmd...
  local name=$1 log="$logs/$1.log" rc counts
  shift
  if [ -n "$only" ] && [[ $only != *",$name,"* ]]; then return; fi
  local load
  load=$(cut -d' ' -f1 /proc/loadavg)
  echo "# $name: $* (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  local start=$SECONDS
  timeout --kill-after=30 "$timeout_s" "$@" > "$log" 2>&1
  rc=$?
  local took=$((SECONDS - start))
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then fail_bench "$name" "ran past --timeout $timeout_s s; log $log"; return; fi
  if [ $rc -gt 128 ]; then fail_bench "$name" "killed by signal $((rc - 128)) after $took s; log $log"; return; fi
  if ! grep -q '^RESULT ' "$log"; then fail_bench "$name" "exit $rc after $took s, no RESULT line; log $log"; return; fi
  counts=$(annotate "$name" "$log" | tee "$logs/$name.annotated" | awk '/^#counts/ { print $2, $3, $4, $5, $6 }')
  grep -v '^#counts' "$logs/$name.annotated"
  # The ledger's row of each figure: | figure | bench | value | unit | date | commit | note |
  awk -v bench="$name" -v date="$(date -u +%Y-%m-%d)" -v rev="$head_rev" -v load="$load" '
    /^RESULT / {
      unit = ""
      for (i = 4; i <= NF && $i != "target"; i++) unit = unit (unit == "" ? "" : " ") $i
      printf "| %s | %s | %s | %s | %s | %s | load %s |\n", $2, bench, $3, unit, date, rev, load
    }' "$log" >> "$logs/rows"
  read -r f p m w x <<< "$counts"
  figures=$((figures + f)) passes=$((passes + p)) misses=$((misses + m)) worse=$((worse + w))
  if [ "$x" -gt 0 ]; then failed=$((failed + 1)); fi
  # A non-zero exit beside RESULT lines: some benches exit 1 on a MISS.
  echo "# $name: exit $rc, ${took} s"
}

need() {  # name path: false, with a FAILED line, when the binary is not built
  if [ -n "$only" ] && [[ $only != *",$1,"* ]]; then return 1; fi
  [ -x "$2" ] && return 0
  fail_bench "$1" "$2 is not built: cmake --build $build --target $1"
  return 1
}

b=$build/bench
need record_bench "$b/record_bench" && run_bench record_bench "$b/record_bench" --benchmark_color=false
need analyze_bench "$b/analyze_bench" && run_bench analyze_bench "$b/analyze_bench"
need multirank_bench "$b/multirank_bench" && run_bench multirank_bench "$b/multirank_bench"
if [ -n "$old_cli" ]; then
  run_bench compare_builds bench/compare_builds.sh "$old_cli" "$build"
elif [ -z "$only" ] || [[ $only == *",compare_builds,"* ]]; then
  echo "# compare_builds: skipped (no --old-cli; scripts/corpus.sh old-cli --ref REF builds one)"
fi
need kineto_import "$b/kineto_import" && run_bench kineto_import "$b/kineto_import"
need preload_overhead "$b/preload_overhead" && run_bench preload_overhead "$b/preload_overhead"
need pool_overhead "$b/pool_overhead" && run_bench pool_overhead "$b/pool_overhead"
if [ $no_fio -eq 1 ]; then
  echo "# loader_vs_fio: skipped (--no-fio)"
elif need loader_vs_fio "$b/loader_vs_fio"; then
  if ! command -v fio > /dev/null; then
    fail_bench loader_vs_fio "fio is not installed (scripts/packages.txt)"
  else
    # shellcheck disable=SC2086 # the arguments are words on purpose
    run_bench loader_vs_fio "$b/loader_vs_fio" $fio_args
  fi
fi

if [ $accuracy -eq 1 ] || [[ $only == *",accuracy,"* ]]; then
  # Debian's torch, and the --accuracy-python one too: figures per torch.
  acc_pys=/usr/bin/python3
  [ "$accuracy_py" = /usr/bin/python3 ] || acc_pys="$acc_pys $accuracy_py"
  # shellcheck disable=SC2016 # expanded by the inner shell
  # The cases as JSON beside the logs (kept with --keep-logs).
  run_bench accuracy bash -c 'n=0; for py in $2; do n=$((n + 1)); "$1/../bench/accuracy.sh" "$0" --count 24 --seed 1 --python "$py" --json "$3/accuracy-$n.json" || exit; done' \
    "$build" "$PWD/scripts" "$acc_pys" "$logs"
elif [ -z "$only" ]; then
  echo "# accuracy: skipped (long; --accuracy runs it)"
fi

echo "# bench.sh: $figures figures: $passes PASS, $misses MISS (not PASS), $worse more than 15 % worse than the ledger; $failed benches failed or left a ledger figure out; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
if [ $rows -eq 1 ] && [ -s "$logs/rows" ]; then
  echo "# the ledger's rows for these figures (docs/performance.md, \"Ledger\"):"
  cat "$logs/rows"
fi
if [ $failed -gt 0 ] || [ $keep -eq 1 ]; then
  echo "# logs kept in $logs"
else
  rm -rf "$logs"
fi
[ $failed -eq 0 ]
