#!/usr/bin/env bash
# Remakes the screenshots of docs/report-guide.md ("The HTML pages") from a
# Release build: the demo's before/after runs (report and diff) and the
# synthetic cross-rank and scaling pages test_html_browser writes.
#   scripts/report_screens.sh [BUILD_DIR]     (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "report_screens: chromium is not installed" >&2; exit 1; }
[ -x "$build/bin/stallscope" ] || { echo "report_screens: $build/bin/stallscope not built" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/bin/stallscope" demo --dir "$work/demo" >/dev/null
"$build/bin/stallscope" diff --html "$work/diff.html" --applied pinned_memory \
  "$work/demo/run-before" "$work/demo/run-after" >/dev/null
STALLSCOPE_KEEP_PAGES="$work/pages" "$build/tests/analyzer/test_html_browser" >/dev/null 2>&1
shot() {  # page, png, height in CSS px
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=0.75 \
    --window-size=1000,"$3" --screenshot="$2" "file://$1" >/dev/null 2>&1
  echo "$2: $(stat -c %s "$2") bytes"
}
mkdir -p docs/img
shot "$work/demo/report-before.html" docs/img/html-report.png 1250
shot "$work/diff.html" docs/img/html-diff.png 420
shot "$work/pages/cross.html" docs/img/html-cross.png 880
shot "$work/pages/scaling.html" docs/img/html-scaling.png 560
