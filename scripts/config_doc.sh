#!/usr/bin/env bash
# Writes the reference table of docs/configuration.md from the
# configuration table (internal/include/stallscope/internal/config.hpp),
# between its two marker lines. test_config_table fails while the page and
# the table differ; run this after changing the table.
#
#   scripts/config_doc.sh [BUILD_DIR]      # default: build
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
gen=$build/internal/stallscope_config_doc
[ -x "$gen" ] || ninja -C "$build" stallscope_config_doc
page=docs/configuration.md
begin='<!-- BEGIN generated: the configuration table (scripts/config_doc.sh) -->'
end='<!-- END generated -->'
grep -qxF "$begin" "$page" && grep -qxF "$end" "$page" ||
  { echo "config_doc.sh: $page lacks the marker lines" >&2; exit 1; }
table=$(mktemp)
trap 'rm -f "$table" "$page.new"' EXIT
"$gen" > "$table"
awk -v b="$begin" -v e="$end" -v t="$table" '
  $0 == b { print; while ((getline line < t) > 0) print line; skip = 1; next }
  $0 == e { skip = 0 }
  !skip' "$page" > "$page.new"
mv "$page.new" "$page"
echo "config_doc.sh: $page updated"
