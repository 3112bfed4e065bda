#!/usr/bin/env bash
# Does the producers remedy deliver the gain it predicts, on a pipeline
# stallscope did not build? A Python trainer fed by forked workers through a
# multiprocessing.Queue (tests/preload/mp_queue_trainer.py: each worker
# takes WORKER_MS per item, blocked as on a network read; the trainer trains
# TRAIN_MS per item) runs under `stallscope run` with 2 workers; the
# report's first remedy (more_workers: "N producer processes feeding the
# trainer") names N; the same program then runs with N workers. The step the
# program itself timed (mean time between its gets) is compared with the
# prediction. Rounds alternate the two runs. Prints each round and RESULT
# lines:
#   feed_remedy_delivered_vs_predicted  (predicted step / delivered step),
#     target 0.8 .. 1.25
#   feed_remedy_gain                    (baseline step / delivered step)
# Usage: bench/feed_remedy.sh [BUILD_DIR] [ROUNDS] [WORKER_MS] [TRAIN_MS]
set -euo pipefail
build=${1:-build}; rounds=${2:-3}; worker=${3:-60}; train=${4:-10}
s=$(realpath "$build/bin/stallscope"); py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
prog="$here/../tests/preload/mp_queue_trainer.py"
[ -x "$s" ] || { echo "feed_remedy: $s not built" >&2; exit 2; }
work=$(mktemp -d /tmp/stallscope-feed-remedy-XXXXXX); trap 'rm -rf "$work"' EXIT
items=40
base=() pred=() got=()
for i in $(seq "$rounds"); do
  rm -rf "$work/base" "$work/after"
  "$s" run --out "$work/base" -- "$py" "$prog" "$items" "$worker" "$train" 2 >"$work/base.log" 2>&1
  b=$(awk '/^STEP_MEAN_MS/ {print $2}' "$work/base.log")
  read -r predicted n < <("$py" - "$work/base/report.json" <<'PY'
import json, sys
rank = json.load(open(sys.argv[1]))["ranks"][0]
r = [m for m in rank["remedies"] if m["id"] == "more_workers"]
if not r:
    print("0 0"); sys.exit()
print(r[0]["predicted_step_ms"], int(r[0]["inputs"]["suggested_producers"]["value"]))
PY
)
  if [ "$n" = 0 ]; then
    echo "round $i: the report proposes no more producers:" >&2
    sed -n '/^producers/,/^outliers/p' "$work/base/report.txt" >&2; exit 1
  fi
  "$s" run --out "$work/after" -- "$py" "$prog" "$((items * 2 / n))" "$worker" "$train" "$n" \
    >"$work/after.log" 2>&1
  a=$(awk '/^STEP_MEAN_MS/ {print $2}' "$work/after.log")
  base+=("$b"); pred+=("$predicted"); got+=("$a")
  printf 'round %d: step %.2f ms with 2 workers; %d workers predicted %.2f ms, delivered %.2f ms\n' \
    "$i" "$b" "$n" "$predicted" "$a"
done
"$py" - "${base[*]}" "${pred[*]}" "${got[*]}" <<'PY'
import statistics as st, sys
b, p, g = ([float(x) for x in a.split()] for a in sys.argv[1:4])
ratio = st.median([x / y for x, y in zip(p, g)])
gain = st.median([x / y for x, y in zip(b, g)])
ok = "PASS" if 0.8 <= ratio <= 1.25 else "MISS"
print(f"RESULT feed_remedy_delivered_vs_predicted {ratio:.3f} ratio target within 0.8..1.25 {ok}")
print(f"RESULT feed_remedy_gain {gain:.3f} ratio target >= 1.5 {'PASS' if gain >= 1.5 else 'MISS'}")
PY
