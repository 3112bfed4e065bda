#!/usr/bin/env bash
# Installs the Debian 12 packages stallscope's build and tests need (listed in
# scripts/packages.txt), only those missing. Runs `apt-get update` only when
# something is missing and the package lists are absent or older than a day
# (or an install from the present lists fails). Works as root, or through sudo.
# Exits non-zero, naming the packages, when one cannot be installed.
#
# The CUDA toolkit is optional: its absence is reported, never an error.
#
# Usage: scripts/setup.sh [--list]   (--list: print the package list and exit)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
package_file="$here/packages.txt"
lists_max_age_s=$((24 * 3600))

say() { printf 'setup.sh: %s\n' "$*"; }
die() { printf 'setup.sh: ERROR: %s\n' "$*" >&2; exit 1; }

read_packages() {
  # Strip comments and blanks; one name per line.
  sed -e 's/#.*//' -e 's/[[:space:]]\+//g' "$package_file" | grep -v '^$'
}

is_installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

has_candidate() {
  local candidate
  candidate=$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')
  [ -n "$candidate" ] && [ "$candidate" != "(none)" ]
}

# Newest modification time of the package indexes, 0 when there are none.
lists_mtime() {
  local newest=0 f t
  for f in /var/lib/apt/lists/*_Packages*; do
    [ -e "$f" ] || continue
    t=$(stat -c %Y "$f")
    [ "$t" -gt "$newest" ] && newest=$t
  done
  echo "$newest"
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "not root and no sudo: cannot run '$*'"
  fi
}

apt_get() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -y -q \
    -o DPkg::Lock::Timeout=120 -o Dpkg::Use-Pty=0 "$@"
}

apt_update() {
  say "running apt-get update"
  apt_get update || die "apt-get update failed"
  updated=1
}

missing_of() {
  local p
  for p in "$@"; do
    is_installed "$p" || echo "$p"
  done
}

report_cuda() {
  local nvcc=""
  if command -v nvcc >/dev/null 2>&1; then
    nvcc=$(command -v nvcc)
  elif [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
    nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc
  fi
  if [ -n "$nvcc" ]; then
    local version
    version=$("$nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
    say "CUDA toolkit ${version:-?} found ($nvcc); optional, CMake detects it"
  else
    say "no CUDA toolkit (optional): the GPU parts are not built, everything else is"
  fi
}

main() {
  if [ "${1:-}" = "--list" ]; then
    read_packages
    exit 0
  fi
  [ -r "$package_file" ] || die "cannot read $package_file"
  command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script is for Debian 12"

  local -a wanted missing
  mapfile -t wanted < <(read_packages)
  mapfile -t missing < <(missing_of "${wanted[@]}")

  if [ "${#missing[@]}" -eq 0 ]; then
    say "all ${#wanted[@]} packages are installed"
    report_cuda
    return 0
  fi
  say "missing ${#missing[@]} of ${#wanted[@]} packages: ${missing[*]}"

  updated=0
  local age=$(( $(date +%s) - $(lists_mtime) ))
  if [ "$age" -gt "$lists_max_age_s" ]; then
    apt_update
  fi

  local p unknown=()
  for p in "${missing[@]}"; do
    has_candidate "$p" || unknown+=("$p")
  done
  if [ "${#unknown[@]}" -gt 0 ] && [ "$updated" -eq 0 ]; then
    apt_update
    unknown=()
    for p in "${missing[@]}"; do
      has_candidate "$p" || unknown+=("$p")
    done
  fi
  [ "${#unknown[@]}" -eq 0 ] || die "no installable version of: ${unknown[*]}"

  say "installing: ${missing[*]}"
  if ! apt_get install --no-install-recommends "${missing[@]}"; then
    if [ "$updated" -eq 0 ]; then
      # The lists may name versions the mirror no longer has.
      say "install failed; refreshing the package lists and retrying once"
      apt_update
      apt_get install --no-install-recommends "${missing[@]}" || true
    fi
  fi

  local still
  still=$(missing_of "${missing[@]}" | xargs)
  [ -z "$still" ] || die "failed to install: $still (see the apt-get output above)"
  say "installed: ${missing[*]}"
  report_cuda
}

main "$@"
