#!/usr/bin/env bash
# The sample trainer with tracing on vs off, alternated in one run (so
# drifting machine load hits both alike). Prints each pair and a RESULT line
# with the step-time overhead and the run-to-run noise band (the spread of
# the untraced runs).
# Usage: bench/trace_overhead.sh [BUILD_DIR] [PAIRS]
set -euo pipefail
build=${1:-build}; pairs=${2:-5}
t=$build/samples/trainer; g=$build/samples/gen_dataset
work=$(mktemp -d /tmp/stallscope-trace-overhead-XXXXXX); trap 'rm -rf "$work"' EXIT
"$g" --quiet --out "$work/ds" --samples 1200 --size-kb 64
flags=(--data "$work/ds" --steps 80 --compute-ms 10 --decode-us 100 --quiet)
on=(); off=()
for i in $(seq "$pairs"); do
  STALLSCOPE_OUT=$work/on$i "$t" "${flags[@]}" --summary-json "$work/on$i.json" 2>/dev/null
  "$t" "${flags[@]}" --no-trace --summary-json "$work/off$i.json" 2>/dev/null
  on+=("$(jq .mean_ms "$work/on$i.json")"); off+=("$(jq .mean_ms "$work/off$i.json")")
  echo "pair $i: traced ${on[-1]} ms, untraced ${off[-1]} ms"
done
python3 - "${on[*]}" "${off[*]}" <<'PY'
import sys, statistics as st
on = [float(x) for x in sys.argv[1].split()]; off = [float(x) for x in sys.argv[2].split()]
m_on, m_off = st.median(on), st.median(off)
ovh = (m_on / m_off - 1) * 100
noise = (max(off) - min(off)) / m_off * 100
print(f"RESULT trace_overhead {ovh:.2f} % target <= 1 % noise_band {noise:.2f} % {'PASS' if ovh <= max(1.0, noise) else 'MISS'}")
PY
