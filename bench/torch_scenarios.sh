#!/usr/bin/env bash
# Predicted against delivered for the PyTorch scenario family (issue #25,
# docs/scenarios.md "PyTorch scenarios"): each scenario's torch CPU trainer
# (tests/torch_scenarios/train.py, Debian's python3-torch) runs under
# `stallscope run --exit-after-window`, the report's first remedy is applied
# (its own `try` command; for cache_decoded the decoded samples cached) and
# the trainer's own step times over the report's steady steps give the gain
# it delivered. Per scenario with a remedy to apply, one RESULT line:
#   torch_scenario_<name>_delivered_vs_predicted  (delivered gain / predicted
#     gain; 1 = as predicted), target within 0.5 .. 2
# A scenario whose premise does not hold (idle or available CPUs) prints
# its SKIP line and no RESULT. The scenarios' own checks (verdict, first
# remedy, its value and line) are printed too; this script reports numbers.
# Usage: bench/torch_scenarios.sh [BUILD_DIR] [SCENARIO...]
set -uo pipefail
build=${1:-build}; shift || true
s=$(realpath "$build/bin/stallscope"); py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$s" ] || { echo "torch_scenarios: $s not built" >&2; exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "torch_scenarios: $py has no torch" >&2; exit 2; }
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(trainer_thread one_worker saturated worker_startup slow_samples storage handoff)
slowfs="$build/tests/tools/slowfs"  # the storage scenario's FUSE tool (it skips without)
for n in "${names[@]}"; do
  "$py" "$here/../tests/torch_scenarios/scenarios.py" "$s" "$n" --bench --slowfs "$(realpath -m "$slowfs")"
done
