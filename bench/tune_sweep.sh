#!/usr/bin/env bash
# `stallscope tune` against an exhaustive num_workers x prefetch_factor
# sweep on two PyTorch pipelines (bench/tune_sweep.py): slow storage through
# the FUSE tool (slowfs), where the best worker count is far above the
# cores, and CPU decode, where it is about the core count. RESULT lines per
# pipeline: tune_<p>_vs_sweep_best (target <= 1.10) and tune_<p>_trials
# (target <= 4). Minutes on two cores; run it on a quiet machine.
# Usage: bench/tune_sweep.sh [BUILD_DIR] [storage] [cpu]
set -uo pipefail
build=${1:-build}; shift || true
s=$(realpath "$build/bin/stallscope"); py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
[ -x "$s" ] || { echo "tune_sweep: $s not built" >&2; exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "tune_sweep: $py has no torch" >&2; exit 2; }
exec "$py" "$here/tune_sweep.py" "$s" "$(realpath -m "$build/tests/tools/slowfs")" "$@"
