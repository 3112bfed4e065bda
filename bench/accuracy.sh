#!/usr/bin/env bash
# The ground-truth harness (docs/accuracy.md, bench/accuracy.py): generated
# pipelines run under `stallscope run`, each report's top remedies applied
# and measured, and six RESULT lines — verdict accuracy, first-remedy
# accuracy, the median and the spread of predicted ÷ delivered gain,
# interval coverage and "healthy" errors. 20-30 s a case on two
# cores; run it on a quiet machine, once per torch (--python).
# Usage: bench/accuracy.sh [BUILD_DIR] [--python PY] [--seed N] [--count N]
#                          [--out DIR] [--json FILE] [--no-whatif] [--kinds python,native]
set -uo pipefail
build=build
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
s=$(realpath -m "$build/bin/stallscope")
[ -x "$s" ] || { echo "accuracy: $s not built" >&2; exit 2; }
exec /usr/bin/python3 "$here/accuracy.py" --stallscope "$s" \
  --slowfs "$(realpath -m "$build/tests/tools/slowfs")" \
  --native "$(realpath -m "$build/bench/accuracy_native_pipeline")" "$@"
