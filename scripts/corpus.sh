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
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "corpus.sh: $*" >&2; exit 2; }

cmd=${1:-}
[ -n "$cmd" ] || die "usage: corpus.sh record|old-cli|compare [options] (see the header)"
shift
build=build corpus=build-corpus labels='^(scenarios|attach|multirank)$'
ref='' wt=build-corpus-old old='' new='' out=''
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
    *) die "unknown option '$1'" ;;
  esac
done

# Each run of the corpus, one per line: a directory holding .sst files, or
# one PyTorch trace.
runs() {
  find "$corpus" -type f -name '*.sst' -printf '%h\n' | sort -u
  find "$corpus" -type f \( -name '*.pt.trace.json' -o -name '*.json.gz' \) | sort
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
  *) die "unknown command '$cmd' (record, old-cli or compare)" ;;
esac
