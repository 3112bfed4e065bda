#!/usr/bin/env bash
# The recording hot paths of two builds side by side: record_bench's span
# (1 and 2 threads) and preload_overhead's 4 KiB page-cache pread with the
# shim, old and new interleaved in each round (old first in odd rounds, new
# first in even ones) so each pair sees the same moment of a noisy machine.
# The figure is the median over the rounds of old ÷ new (≥ 1: the new build
# is as fast or faster), with each side's best beside it.
#
#   bench/compare_hot_paths.sh OLD_DIR [NEW_BUILD_DIR] [--rounds 7]
#
# OLD_DIR holds bench/record_bench and bench/preload_overhead of the build to
# compare against (their libraries found through their RUNPATH). Ends with
# one RESULT line per figure, target ≥ 0.97 (never a test: a busy machine
# moves these by more than that).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: compare_hot_paths.sh OLD_DIR [NEW_BUILD_DIR] [--rounds N]}
shift
new=build
if [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; then new=$1; shift; fi
rounds=7
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    *) echo "compare_hot_paths.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for d in "$old" "$new"; do
  for b in record_bench preload_overhead; do
    [ -x "$d/bench/$b" ] || { echo "compare_hot_paths.sh: $d/bench/$b is not an executable" >&2; exit 2; }
  done
done
work=$(mktemp -d /tmp/stallscope-hot-XXXXXX)
trap 'rm -rf "$work"' EXIT

span() {  # DIR -> "<1 thread ns> <2 threads ns>"
  "$1/bench/record_bench" --benchmark_color=false 2>/dev/null |
    sed -n 's/^span 1 thread \([0-9.]*\) ns, 2 threads \([0-9.]*\) ns.*/\1 \2/p'
}
pread_ns() {  # DIR -> "<shim ns/read> <plain ns/read>"
  "$1/bench/preload_overhead" --rounds 3 --reads 200000 2>/dev/null |
    awk '/^RESULT preload_pread_ns_shim/ { s = $3 } /^RESULT preload_pread_ns_plain/ { p = $3 }
         END { print s, p }'
}

for ((i = 1; i <= rounds; i++)); do
  if ((i % 2)); then first=$old second=$new; else first=$new second=$old; fi
  a=$(span "$first"); b=$(span "$second")
  c=$(pread_ns "$first"); d=$(pread_ns "$second")
  if ((i % 2)); then so=$a sn=$b po=$c pn=$d; else so=$b sn=$a po=$d pn=$c; fi
  echo "INFO round $i: span old $so ns, new $sn ns; pread+shim (plain) old $po, new $pn ns"
  echo "$so $sn $po $pn" >> "$work/rounds"
done

# Columns: old1 old2 new1 new2 | old_shim old_plain new_shim new_plain.
awk '
  function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j > 0 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { n++
    r1[n] = $1 / $3; r2[n] = $2 / $4; r3[n] = $5 / $7
    o3 = $5 - $6; n3 = $7 - $8; r4[n] = (n3 > 0 && o3 > 0) ? o3 / n3 : 0
    if (n == 1 || $1 < b1o) b1o = $1; if (n == 1 || $3 < b1n) b1n = $3
    if (n == 1 || $5 < b3o) b3o = $5; if (n == 1 || $7 < b3n) b3n = $7 }
  END {
    m1 = median(r1, n); m2 = median(r2, n); m3 = median(r3, n); m4 = median(r4, n)
    printf "span 1 thread: best old %.2f ns, new %.2f ns\n", b1o, b1n
    printf "pread with shim: best old %.1f ns, new %.1f ns\n", b3o, b3n
    printf "RESULT span_1thread_old_over_new %.3f ratio target >= 0.97 %s\n", m1, (m1 >= 0.97 ? "PASS" : "MISS")
    printf "RESULT span_2threads_old_over_new %.3f ratio target >= 0.97 %s\n", m2, (m2 >= 0.97 ? "PASS" : "MISS")
    printf "RESULT pread_shim_old_over_new %.3f ratio target >= 0.97 %s\n", m3, (m3 >= 0.97 ? "PASS" : "MISS")
    printf "RESULT shim_cost_per_read_old_over_new %.3f ratio target >= 0.97 %s\n", m4, (m4 >= 0.97 ? "PASS" : "MISS")
  }' "$work/rounds"
