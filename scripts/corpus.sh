#!/usr/bin/env bash
# A corpus of recorded runs, and the same reports from two builds compared.
#
#   scripts/corpus.sh record  [--build DIR] [--corpus DIR] [--labels REGEX]
#       Runs the tests that record real runs (ctest labels scenarios, attach,
#       multirank by default) with STALLSCOPE_KEEP_TRACES set, so each test
#       copies its traces into the corpus (tests/keep_traces.hpp) before it
#       removes them; adds the PyTorch traces kept in tests/kineto/data.
#   scripts/corpus.sh old-cli [--ref REF] [--dir DIR]
#       Builds the `stallscope` CLI of commit REF (default: origin/main or
#       main) in a git worktree under DIR (default build-corpus-old/) and
#       prints the binary's path.
#   scripts/corpus.sh compare --old CLI --new CLI [--corpus DIR] [--out DIR]
#       Analyzes every run of the corpus with both CLIs (`report --json`) and
#       diffs the reports field by field (scripts/report_diff.py): numbers
#       agree within a relative 1e-6 (floating-point sums in another order),
#       everything else exactly; fields only the new build writes are listed
#       as additions. Prints one line per differing field and a summary;
#       exits 1 when any report differs.
#
# One run of the corpus is a directory that holds .sst files itself (all
# its files are one run, its ranks and workers), or one PyTorch trace file.
# The corpus is large and stays out of git (default build-corpus/).
#
# The stored corpus (tests/corpus/, its README says what each run is) is a
# small one in git: runs/NAME/ holds one run's .sst files compressed
# (.sst.zst), runs/NAME.json.gz one PyTorch trace, reports/NAME.json the
# report of the reference build. ctest's corpus_same_answers runs `check`.
#   scripts/corpus.sh add --run DIR --name NAME [--stored DIR]
#       Stores the .sst files under DIR (one run) as runs/NAME/*.sst.zst
#       (zstd -19), keeping their relative paths.
#   scripts/corpus.sh store --new CLI [--stored DIR]
#       Writes reports/ afresh: every stored run analyzed by CLI. Only for
#       a change of answers that is meant and justified.
#   scripts/corpus.sh check --new CLI [--stored DIR] [--out DIR] [--jobs N]
#       Analyzes every stored run with CLI (`report -j N`, default 1: the
#       reports must not depend on N) and diffs the reports against
#       reports/ (report_diff.py --ordered, exact numbers): one line per
#       differing field; then byte by byte. Exits 1 when any report differs,
#       2 on a usage or setup error. The new reports stay in --out (default: a temporary
#       directory, removed).
# Every run is analyzed as `CLI report --json -j N runs/NAME` from a
# directory holding runs/ (its decompressed copy), so the paths a report
# names (inputs, files) are the same on every machine.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "corpus.sh: $*" >&2; exit 2; }

cmd=${1:-}
[ -n "$cmd" ] || die "usage: corpus.sh record|old-cli|compare|add|store|check [options] (see the header)"
shift
build=build corpus=build-corpus labels='^(scenarios|attach|multirank)$'
ref='' wt=build-corpus-old old='' new='' out=''
stored=tests/corpus run='' name='' jobs=1
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --corpus) corpus=$2; shift 2 ;;
    --labels) labels=$2; shift 2 ;;
    --ref) ref=$2; shift 2 ;;
    --dir) wt=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --stored) stored=$2; shift 2 ;;
    --run) run=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) die "unknown option '$1'" ;;
  esac
done

# Each run of the corpus, one per line: a directory holding .sst files, or
# one PyTorch trace.
runs() {
  find "$corpus" -type f -name '*.sst' -printf '%h\n' | sort -u
  find "$corpus" -type f \( -name '*.pt.trace.json' -o -name '*.json.gz' \) | sort
}

# The stored corpus's runs, one per line, relative to runs/: a directory
# of .sst.zst files, or a PyTorch trace (NAME.json.gz).
stored_runs() {
  (cd "$stored/runs" && find . -mindepth 1 -maxdepth 1 \( -type d -o -name '*.json.gz' \) |
    sed 's|^\./||' | LC_ALL=C sort)
}

need_zstd() {
  command -v zstd >/dev/null 2>&1 || die "zstd is not installed (scripts/packages.txt lists it)"
}

# unpack_stored DIR: DIR/runs/ as the stored runs/, each .sst.zst decompressed.
unpack_stored() {
  local f
  mkdir -p "$1/runs"
  (cd "$stored/runs" && find . -type d) | while IFS= read -r f; do mkdir -p "$1/runs/$f"; done
  while IFS= read -r f; do
    case $f in
      *.sst.zst) zstd -q -d "$stored/runs/$f" -o "$1/runs/${f%.zst}" ;;
      *) cp "$stored/runs/$f" "$1/runs/$f" ;;
    esac
  done < <(cd "$stored/runs" && find . -type f | sed 's|^\./||')
}

case $cmd in
  record)
    [ -f "$build/CTestTestfile.cmake" ] || die "$build is no configured build directory"
    mkdir -p "$corpus"
    corpus=$(cd "$corpus" && pwd)
    echo "corpus.sh: recording into $corpus (ctest -L '$labels' in $build)"
    (cd "$build" && STALLSCOPE_KEEP_TRACES=$corpus ctest -L "$labels" --output-on-failure) ||
      echo "corpus.sh: some tests failed; their traces are kept all the same" >&2
    mkdir -p "$corpus/kineto"
    cp tests/kineto/data/*.json.gz "$corpus/kineto/"
    echo "corpus.sh: $(runs | wc -l) runs, $(du -sh "$corpus" | cut -f1)"
    ;;
  old-cli)
    if [ -z "$ref" ]; then
      ref=$(git rev-parse --verify -q origin/main || git rev-parse main)
    fi
    sha=$(git rev-parse --verify "$ref^{commit}") || die "no commit '$ref'"
    if [ -d "$wt/src" ]; then
      git -C "$wt/src" checkout -q --detach "$sha"
    else
      mkdir -p "$wt"
      git worktree add -q --detach "$wt/src" "$sha"
    fi
    cmake -S "$wt/src" -B "$wt/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$wt/build" -j "$(nproc)" --target stallscope >&2
    echo "$(cd "$wt/build/bin" && pwd)/stallscope"
    ;;
  compare)
    [ -x "$old" ] || die "--old CLI: '$old' is not an executable"
    [ -x "$new" ] || die "--new CLI: '$new' is not an executable"
    [ -d "$corpus" ] || die "no corpus at $corpus (run: corpus.sh record)"
    out=${out:-$corpus.reports}
    rm -rf "$out"
    mkdir -p "$out/old" "$out/new"
    n=0
    while IFS= read -r run; do
      n=$((n + 1))
      key=$(printf '%s' "${run#"$corpus"/}" | tr '/' '_')
      "$old" report --json -j 1 "$run" >"$out/old/$key.json" 2>"$out/old/$key.err" || true
      "$new" report --json -j 1 "$run" >"$out/new/$key.json" 2>"$out/new/$key.err" || true
    done < <(runs)
    echo "corpus.sh: $n runs analyzed by both builds"
    python3 scripts/report_diff.py --added-ok "$out/old" "$out/new"
    ;;
  add)
    [ -d "$run" ] || die "--run DIR: '$run' is not a directory"
    case $name in ''|*/*|.*) die "--name NAME: one path component, not '$name'" ;; esac
    need_zstd
    dest=$stored/runs/$name
    [ -e "$dest" ] && die "$dest exists already"
    n=0
    while IFS= read -r f; do
      mkdir -p "$dest/$(dirname "$f")"
      zstd -q -19 "$run/$f" -o "$dest/$f.zst"
      n=$((n + 1))
    done < <(cd "$run" && find . -type f -name '*.sst' | sed 's|^\./||' | sort)
    [ "$n" -gt 0 ] || die "no .sst files under $run"
    echo "corpus.sh: $dest: $n files, $(du -sh "$dest" | cut -f1)"
    ;;
  store|check)
    [ -x "$new" ] || die "--new CLI: '$new' is not an executable"
    [ -d "$stored/runs" ] || die "no stored corpus at $stored (no runs/ in it)"
    need_zstd
    new=$(cd "$(dirname "$new")" && pwd)/$(basename "$new")
    stored=$(cd "$stored" && pwd)
    work=$(mktemp -d "${TMPDIR:-/tmp}/stallscope-corpus-XXXXXX")
    trap 'rm -rf "$work"' EXIT
    unpack_stored "$work"
    if [ "$cmd" = store ]; then
      reports=$stored/reports
      rm -rf "$reports"
    else
      reports=${out:-$work/reports}
      rm -rf "$reports"
    fi
    mkdir -p "$reports"
    n=0 failed=0
    while IFS= read -r r; do
      n=$((n + 1))
      key=${r%.json.gz}
      # A failing analysis leaves an empty or partial report, which differs.
      if ! (cd "$work" && "$new" report --json -j "$jobs" "runs/$r") >"$reports/$key.json" \
        2>"$work/$key.err"; then
        echo "corpus.sh: $r: $new failed: $(head -c 300 "$work/$key.err")" >&2
        failed=$((failed + 1))
      fi
    done < <(stored_runs)
    [ "$n" -gt 0 ] || die "no runs in $stored/runs"
    if [ "$cmd" = store ]; then
      [ "$failed" -eq 0 ] || die "$failed of $n runs could not be analyzed; reports/ is incomplete"
      echo "corpus.sh: $n reports written to $reports"
      exit 0
    fi
    echo "corpus.sh: $n stored runs analyzed by $new"
    python3 scripts/report_diff.py --ordered --rel 0 --abs 0 "$stored/reports" "$reports"
    # Same values, other bytes: key order, indentation or number formatting.
    same=0
    for f in "$stored"/reports/*.json; do
      if ! cmp -s "$f" "$reports/$(basename "$f")"; then
        echo "corpus.sh: $(basename "$f" .json): same fields and values, other bytes" >&2
        same=$((same + 1))
      fi
    done
    [ "$same" -eq 0 ] || exit 1
    ;;
  *) die "unknown command '$cmd' (record, old-cli, compare, add, store or check)" ;;
esac
