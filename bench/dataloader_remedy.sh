#!/usr/bin/env bash
# Does the DataLoader remedy deliver the gain it predicts? A torchvision-
# style CPU trainer (bench/remedy_trainer.py, Debian's python3-torch) with
# one loader worker whose samples decode on the CPU runs under `stallscope
# run`; the report's first remedy carries the command that tries its setting
# (`try`: stallscope run --set 'dataloader[…].num_workers=N' -- …). That
# command runs as given (with its own --out), and the step the trainer
# itself timed is compared with the prediction. Rounds alternate the two
# runs. Prints each round and RESULT lines:
#   dataloader_remedy_delivered_vs_predicted  (predicted step / delivered
#     step; 1 = as predicted, > 1 the remedy did better), target 0.8 .. 1.25
#   dataloader_remedy_gain                    (baseline step / delivered step)
# Usage: bench/dataloader_remedy.sh [BUILD_DIR] [ROUNDS] [DECODE_MS] [STEP_MS]
set -euo pipefail
build=${1:-build}; rounds=${2:-3}; decode=${3:-3}; step=${4:-10}
s=$(realpath "$build/bin/stallscope"); py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$s" ] || { echo "dataloader_remedy: $s not built" >&2; exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "dataloader_remedy: $py has no torch" >&2; exit 2; }
work=$(mktemp -d /tmp/stallscope-dl-remedy-XXXXXX); trap 'rm -rf "$work"' EXIT
steps=120
base=() pred=() got=()
for i in $(seq "$rounds"); do
  rm -rf "$work/base" "$work/after"
  "$s" run --out "$work/base" --start-step 10 --steps 100 -- "$py" "$here/remedy_trainer.py" 1 \
    "$decode" "$step" "$steps" >"$work/base.log" 2>&1
  b=$(grep -h '"p50_ms"' "$work/base.log" | tail -1 | "$py" -c 'import json,sys; print(json.loads(sys.stdin.read())["p50_ms"])')
  read -r predicted cmd < <("$py" - "$work/base/report.json" <<'PY'
import json, shlex, sys
rank = json.load(open(sys.argv[1]))["ranks"][0]
tried = [r for r in rank["remedies"] if r.get("try")]
if not tried:
    print("0 none"); sys.exit()
r = tried[0]
print(r["predicted_step_ms"], shlex.join(shlex.split(r["try"])))
PY
)
  if [ "$cmd" = none ]; then
    echo "round $i: the report has no remedy with a setting to try:" >&2
    sed -n '/^remedies/,/^outliers/p' "$work/base/report.txt" >&2; exit 1
  fi
  # The command as the report gives it, with this bench's run directory.
  eval "set -- $cmd"
  [ "$1" = stallscope ] && shift
  [ "$1" = run ] && shift
  "$s" run --out "$work/after" "$@" >"$work/after.log" 2>&1
  a=$(grep -h '"p50_ms"' "$work/after.log" | tail -1 | "$py" -c 'import json,sys; print(json.loads(sys.stdin.read())["p50_ms"])')
  base+=("$b"); pred+=("$predicted"); got+=("$a")
  printf 'round %d: step %.2f ms; remedy %s predicts %.2f ms, delivered %.2f ms\n' "$i" "$b" \
    "$(grep -o "set '[^']*'" <<<"$cmd" | head -1)" "$predicted" "$a"
done
"$py" - "${base[*]}" "${pred[*]}" "${got[*]}" <<'PY'
import statistics as st, sys
b, p, g = ([float(x) for x in a.split()] for a in sys.argv[1:4])
ratio = st.median([x / y for x, y in zip(p, g)])
gain = st.median([x / y for x, y in zip(b, g)])
ok = "PASS" if 0.8 <= ratio <= 1.25 else "MISS"
print(f"RESULT dataloader_remedy_delivered_vs_predicted {ratio:.3f} ratio target within 0.8..1.25 {ok}")
print(f"RESULT dataloader_remedy_gain {gain:.3f} ratio target >= 1.2 {'PASS' if gain >= 1.2 else 'MISS'}")
PY
